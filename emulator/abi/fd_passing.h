// One datagram on a Unix socket, with file descriptors attached as
// SCM_RIGHTS: how both ends of the control protocol send.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>

namespace uroce::abi {

// sendmsg() of `len` bytes from `buf`, with `fd` attached when >= 0. Returns
// what sendmsg returns (-1 with errno on failure).
ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags);
// The same with every fd of `fds` attached (at most kMaxSentFds; EINVAL
// beyond).
constexpr std::size_t kMaxSentFds = 4;
ssize_t send_with_fds(int sock, const void* buf, std::size_t len, std::span<const int> fds, int flags);

}  // namespace uroce::abi
