// Reading requests and writing replies of the control protocol
// (abi/control.h), shared by the control server's handlers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "abi/control.h"

namespace uroce::daemon {

template <typename T>
T read_as(const std::uint8_t* msg) {
    T v;
    std::memcpy(&v, msg, sizeof(T));
    return v;
}

// Writes `body` with the request's header (op, seq echoed), its own length
// and `status`; returns the reply length.
template <typename T>
std::size_t write_reply(std::uint8_t* out, const uroce_ctrl_hdr& req, int status, T body) {
    body.hdr = req;
    body.hdr.length = sizeof(T);
    body.hdr.status = status;
    std::memcpy(out, &body, sizeof(T));
    return sizeof(T);
}

inline std::size_t status_only(std::uint8_t* out, const uroce_ctrl_hdr& req, int status) {
    uroce_ctrl_hdr h = req;
    h.length = sizeof(h);
    h.status = status;
    std::memcpy(out, &h, sizeof(h));
    return sizeof(h);
}

// What a queue of `asked` entries is granted: its ring's entries, or
// `asked` for QueueObjects to judge (handlers_queues.cc).
std::uint32_t granted_entries(std::uint32_t asked, std::uint32_t limit);

}  // namespace uroce::daemon
