// The client side of the control protocol (control.h): one connection to a
// uroced, request/reply with file descriptors. Used by the provider and by
// the uroce CLI. Not thread-safe: callers serialise requests.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "control.h"

namespace uroce::abi {

class ControlClient {
public:
    ControlClient() = default;
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    // 0, or an errno (ENOENT: no daemon at that path; ECONNREFUSED: stale socket).
    int connect(const std::string& socket_path);
    [[nodiscard]] bool connected() const { return fd_ >= 0; }
    // The connected socket (-1 when not connected), e.g. for SO_PEERCRED.
    [[nodiscard]] int fd() const { return fd_; }
    void close();

    // Sends `req` (its header's magic, version, length and seq are filled in)
    // with `send_fd` attached when >= 0, waits for the reply into `reply`
    // (exactly `reply_size` bytes expected) and returns the reply's status,
    // or an errno for transport failures (EPIPE: the daemon went away;
    // EPROTO: a malformed reply). A received fd lands in `recv_fd`.
    int call(void* req, std::size_t req_size, void* reply, std::size_t reply_size, int send_fd = -1,
             int* recv_fd = nullptr);

    // The same with several fds attached (HELLO's process files).
    int call_with_fds(void* req, std::size_t req_size, void* reply, std::size_t reply_size,
                      std::span<const int> send_fds, int* recv_fd = nullptr);

    // Convenience: a request that is only a header.
    int call_simple(std::uint16_t op, void* reply, std::size_t reply_size);

    // Whether the last call() failed in transport (no reply, a malformed
    // one, a timeout) rather than with a status from the daemon. After such
    // a failure the connection is closed: a late reply must never be taken
    // for the answer to a later request.
    [[nodiscard]] bool transport_failed() const { return transport_failed_; }

    // Bounds how long call() waits for the daemon (0: forever, the default).
    // 0 or an errno.
    int set_timeout_ms(unsigned ms);

private:
    int exchange(void* req, std::size_t req_size, void* reply, std::size_t reply_size, std::span<const int> send_fds,
                 int* recv_fd);

    int fd_ = -1;
    std::uint32_t seq_ = 0;
    bool transport_failed_ = false;
};

}  // namespace uroce::abi
