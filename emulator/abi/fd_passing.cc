#include "fd_passing.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace uroce::abi {

ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags) {
    return fd >= 0 ? send_with_fds(sock, buf, len, std::span<const int>(&fd, 1), flags)
                   : send_with_fds(sock, buf, len, {}, flags);
}

ssize_t send_with_fds(int sock, const void* buf, std::size_t len, std::span<const int> fds, int flags) {
    if (fds.size() > kMaxSentFds) {
        errno = EINVAL;
        return -1;
    }
    iovec iov{const_cast<void*>(buf), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxSentFds)];
    if (!fds.empty()) {
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(sock, &mh, flags);
}

}  // namespace uroce::abi
