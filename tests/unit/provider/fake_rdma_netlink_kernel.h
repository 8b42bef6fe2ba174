// A stand-in for a kernel with RDMA netlink (fake_rdma_netlink_kernel.c).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// What the stand-in kernel answers socket(domain, type, protocol), without
// counting the call.
int fake_kernel_socket(int domain, int type, int protocol);
// How many socket() calls reached the stand-in kernel.
int fake_kernel_socket_calls(void);

#ifdef __cplusplus
}
#endif
