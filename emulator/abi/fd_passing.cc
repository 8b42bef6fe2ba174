#include "fd_passing.h"

#include <sys/socket.h>

#include <cstring>

namespace uroce::abi {

ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags) {
    iovec iov{const_cast<void*>(buf), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
        mh.msg_control = control;
        mh.msg_controllen = sizeof(control);
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return ::sendmsg(sock, &mh, flags);
}

}  // namespace uroce::abi
