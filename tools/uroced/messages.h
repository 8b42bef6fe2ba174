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

// The exact size of a request of `op` for the queue-object operations
// (CQ, QP, SRQ, AH; handlers_queues.cc), 0 for any other op.
std::size_t queue_request_size(std::uint16_t op);

// The exact size of a request of ops 110-119 (ODP advice, XRC;
// handlers_verbs_ext.cc), 0 for any other op.
std::size_t verbs_ext_request_size(std::uint16_t op);

// The exact size of a request of ops 120-129 (XRC; handlers_xrc.cc), 0 for any other op.
std::size_t xrc_request_size(std::uint16_t op);

// The exact size of a request of an rdma_cm op (handlers_cm.cc), 0 for any other op.
std::size_t cm_request_size(std::uint16_t op);
// The size of a capture request (handlers_capture.cc), or 0 for other ops.
std::size_t capture_request_size(std::uint16_t op);

// The exact size of a request of a fault op (handlers_fault.cc), 0 for any other op.
std::size_t fault_request_size(std::uint16_t op);

}  // namespace uroce::daemon
