// One datagram on a Unix socket, with at most one file descriptor attached
// as SCM_RIGHTS: how both ends of the control protocol send.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace uroce::abi {

// sendmsg() of `len` bytes from `buf`, with `fd` attached when >= 0. Returns
// what sendmsg returns (-1 with errno on failure).
ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags);

}  // namespace uroce::abi
