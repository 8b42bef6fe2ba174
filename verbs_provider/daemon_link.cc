// The provider's connection to uroced: one Unix SEQPACKET socket per context
// (abi/control.h), requests serialised by a mutex. A daemon that has gone
// (closed socket) or stopped answering (no reply within kReplyTimeoutMs)
// turns every later request into EIO at once: verbs fail, never hang. An
// empty CQ asks hung_up() now and then (device_loss.cc).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"
#include "memory_sharing.h"
#include "provider.h"

namespace uroce::provider {
namespace {

// Control requests are answered in microseconds; a daemon that takes this
// long is stuck (stopped, or swapping hard): fail rather than hang the
// application.
constexpr unsigned kReplyTimeoutMs = 30000;

}  // namespace

int DaemonLink::open(const char* socket_path, int& async_fd) {
    std::lock_guard lock(mutex_);
    async_fd = -1;
    int err = client_.connect(socket_path);
    if (err != 0) {
        // No daemon there (ENOENT, ECONNREFUSED): the device is not present.
        return err == EACCES ? EACCES : ENODEV;
    }
    client_.set_timeout_ms(kReplyTimeoutMs);
    // The daemon reaches our memory (where it is not shared) only through
    // these two files of ours, which reach nothing once we exec or exit.
    int process_files[2] = {-1, -1};
    if (err = open_process_files(process_files[0], process_files[1]); err != 0) {
        client_.close();
        return err;
    }
    auto hello = request<uroce_ctrl_hello>(UROCE_CTRL_HELLO);
    hello.abi_version = UROCE_CTRL_VERSION;
    const UniqueFd mem_file(process_files[0]);
    const UniqueFd maps_file(process_files[1]);
    uroce_ctrl_hello_reply reply{};
    int received = -1;
    err = client_.call_with_fds(&hello, sizeof hello, &reply, sizeof reply, process_files, &received);
    UniqueFd async_pipe(received);
    if (err == 0 && !async_pipe.valid()) {
        err = EPROTO;  // HELLO must pass the async-event pipe
    }
    if (err != 0) {
        client_.close();
        return client_.transport_failed() ? ENODEV : err;
    }
    async_fd = async_pipe.release();
    return 0;
}

int DaemonLink::call(void* req, std::size_t req_size, void* reply, std::size_t reply_size, int send_fd,
                     int* recv_fd) {
    std::lock_guard lock(mutex_);
    if (!client_.connected() || gone()) {
        if (recv_fd != nullptr) {
            *recv_fd = -1;
        }
        return EIO;
    }
    const int err = client_.call(req, req_size, reply, reply_size, send_fd, recv_fd);
    if (client_.transport_failed()) {
        state_.store(State::Gone, std::memory_order_release);
        return EIO;
    }
    return err;
}

int DaemonLink::call_handle(std::uint16_t op, std::uint32_t handle) {
    auto req = request<uroce_ctrl_handle>(op);
    req.handle = handle;
    uroce_ctrl_hdr reply{};
    return call(&req, sizeof req, &reply, sizeof reply);
}

bool DaemonLink::hung_up() {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        return gone();
    }
    if (!client_.connected()) {
        state_.store(State::Gone, std::memory_order_release);
        return true;
    }
    // A SEQPACKET peer that closed (exited, was killed) reads as POLLHUP and POLLRDHUP.
    pollfd p{client_.fd(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) {
        state_.store(State::Gone, std::memory_order_release);
    }
    return gone();
}

int DaemonLink::dup_socket() {
    std::lock_guard lock(mutex_);
    if (!client_.connected()) {
        errno = EIO;
        return -1;
    }
    return ::fcntl(client_.fd(), F_DUPFD_CLOEXEC, 0);
}

}  // namespace uroce::provider
