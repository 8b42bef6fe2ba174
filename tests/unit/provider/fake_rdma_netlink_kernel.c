/*
 * A stand-in for a kernel with RDMA loaded (ib_core: rdma_rxe, a NIC's
 * driver), for test_rdma_netlink_preload.cc. The build machine has no RDMA
 * module, so its kernel refuses NETLINK_RDMA sockets on its own and a test
 * run against it could not tell the preload's refusal from the kernel's.
 * Linked after liburoce-preload.so, this library's socket() is the one the
 * preload reaches with dlsym(RTLD_NEXT): it accepts a raw or datagram
 * NETLINK_RDMA socket as such a kernel does (handing out a NETLINK_ROUTE
 * socket, the netlink family every kernel has, in its place) and passes
 * every other call to libc. It counts the calls it sees, so a test knows
 * whether the preload let one through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <sys/socket.h>

#include "fake_rdma_netlink_kernel.h"

typedef int socket_fn(int, int, int);

static int g_calls;

static int libc_socket(int domain, int type, int protocol) {
    socket_fn *f;
    *(void **)&f = dlsym(RTLD_NEXT, "socket");
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return f(domain, type, protocol);
}

int fake_kernel_socket(int domain, int type, int protocol) {
    const int kind = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (domain == AF_NETLINK && protocol == NETLINK_RDMA && (kind == SOCK_RAW || kind == SOCK_DGRAM)) {
        return libc_socket(AF_NETLINK, type, NETLINK_ROUTE);
    }
    return libc_socket(domain, type, protocol);
}

int fake_kernel_socket_calls(void) { return __atomic_load_n(&g_calls, __ATOMIC_ACQUIRE); }

int socket(int domain, int type, int protocol) {
    __atomic_add_fetch(&g_calls, 1, __ATOMIC_ACQ_REL);
    return fake_kernel_socket(domain, type, protocol);
}
