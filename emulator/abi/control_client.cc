#include "control_client.h"

#include "fd_passing.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uroce::abi {

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

int ControlClient::connect(const std::string& socket_path) {
    close();
    sockaddr_un addr{};
    if (socket_path.size() >= sizeof(addr.sun_path)) {
        return ENAMETOOLONG;
    }
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
    }
    fd_ = fd;
    return 0;
}

int ControlClient::set_timeout_ms(unsigned ms) {
    if (fd_ < 0) {
        return ENOTCONN;
    }
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
        return errno;
    }
    return 0;
}

int ControlClient::call(void* req, std::size_t req_size, void* reply, std::size_t reply_size, int send_fd,
                        int* recv_fd) {
    return send_fd >= 0 ? call_with_fds(req, req_size, reply, reply_size, std::span<const int>(&send_fd, 1), recv_fd)
                        : call_with_fds(req, req_size, reply, reply_size, {}, recv_fd);
}

int ControlClient::call_with_fds(void* req, std::size_t req_size, void* reply, std::size_t reply_size,
                                 std::span<const int> send_fds, int* recv_fd) {
    transport_failed_ = false;
    if (recv_fd != nullptr) {
        *recv_fd = -1;
    }
    const int err = exchange(req, req_size, reply, reply_size, send_fds, recv_fd);
    if (transport_failed_) {
        close();
        if (recv_fd != nullptr && *recv_fd >= 0) {
            ::close(*recv_fd);
            *recv_fd = -1;
        }
    }
    return err;
}

int ControlClient::exchange(void* req, std::size_t req_size, void* reply, std::size_t reply_size,
                            std::span<const int> send_fds, int* recv_fd) {
    if (fd_ < 0) {
        transport_failed_ = true;
        return ENOTCONN;
    }
    auto* h = static_cast<uroce_ctrl_hdr*>(req);
    h->magic = UROCE_CTRL_MAGIC;
    h->version = UROCE_CTRL_VERSION;
    h->length = static_cast<std::uint32_t>(req_size);
    h->seq = ++seq_;
    h->status = 0;

    if (send_with_fds(fd_, req, req_size, send_fds, MSG_NOSIGNAL) != static_cast<ssize_t>(req_size)) {
        transport_failed_ = true;
        return errno == 0 ? EPIPE : errno;
    }

    alignas(cmsghdr) char rcontrol[CMSG_SPACE(sizeof(int))];
    iovec riov{reply, reply_size};
    msghdr rmh{};
    rmh.msg_iov = &riov;
    rmh.msg_iovlen = 1;
    rmh.msg_control = rcontrol;
    rmh.msg_controllen = sizeof(rcontrol);
    ssize_t n;
    do {
        n = ::recvmsg(fd_, &rmh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        transport_failed_ = true;
        return n == 0 ? EPIPE : errno;
    }
    int got_fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&rmh); c != nullptr; c = CMSG_NXTHDR(&rmh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            std::memcpy(&got_fd, CMSG_DATA(c), sizeof(int));
        }
    }
    if (recv_fd != nullptr) {
        *recv_fd = got_fd;
    } else if (got_fd >= 0) {
        ::close(got_fd);
    }
    const auto* rh = static_cast<const uroce_ctrl_hdr*>(reply);
    if (static_cast<std::size_t>(n) < sizeof(uroce_ctrl_hdr) || rh->magic != UROCE_CTRL_MAGIC || rh->seq != seq_) {
        transport_failed_ = true;
        return EPROTO;
    }
    if (rh->status != 0) {
        return rh->status;
    }
    if (static_cast<std::size_t>(n) != reply_size || rh->length != reply_size) {
        transport_failed_ = true;
        return EPROTO;
    }
    return 0;
}

int ControlClient::call_simple(std::uint16_t op, void* reply, std::size_t reply_size) {
    uroce_ctrl_hdr h{};
    h.op = op;
    return call(&h, sizeof(h), reply, reply_size);
}

}  // namespace uroce::abi
