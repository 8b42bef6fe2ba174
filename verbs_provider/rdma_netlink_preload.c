/*
 * liburoce-preload.so, part three: no RDMA netlink under `uroce exec`.
 *
 * Stock libibverbs (rdma-core 44, ibverbs_get_device_list) lists devices by
 * asking the kernel over RDMA netlink (a NETLINK_RDMA socket,
 * RDMA_NLDEV_CMD_GET) and reads the sysfs tree at $SYSFS_PATH, where uroced
 * publishes its devices, only when it cannot open that socket. Stock
 * librdmacm likewise asks netlink for the rdma_cm device's ABI version and
 * device number, and reads $SYSFS_PATH only without netlink (with netlink it
 * also insists that /dev/infiniband/rdma_cm has the kernel's device number,
 * which ucma_preload.c's emulated device does not).
 *
 * On a kernel without RDMA (no ib_core) the netlink family is not
 * registered and socket(AF_NETLINK, SOCK_RAW or SOCK_DGRAM, NETLINK_RDMA)
 * fails with EPROTONOSUPPORT (net/netlink/af_netlink.c, netlink_create); both
 * libraries then read uroce's tree. Where the kernel has RDMA devices (rdma_rxe,
 * a NIC's driver), netlink answers with those alone and uroce's are never
 * looked for. So for a program under `uroce exec` this socket fails exactly as
 * on a kernel without RDMA, whatever the kernel has loaded: the program sees
 * uroce's devices, and not the kernel's (docs/provider.md). Every other socket
 * goes to libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <sys/socket.h>

/* The socket types netlink_create accepts; any other type it refuses with
 * ESOCKTNOSUPPORT before looking at the protocol, so those calls go on to
 * the kernel and get that answer from it. */
static int is_netlink_socket_type(int type) {
    const int kind = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
    return kind == SOCK_RAW || kind == SOCK_DGRAM;
}

typedef int socket_fn(int, int, int);

/* libc's socket (or the next preloaded library's). */
static socket_fn *next_socket(void) {
    static socket_fn *next;
    socket_fn *f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        *(void **)&f = dlsym(RTLD_NEXT, "socket"); /* POSIX's way to take a function from dlsym */
        __atomic_store_n(&next, f, __ATOMIC_RELEASE);
    }
    return f;
}

__attribute__((visibility("default"))) int socket(int domain, int type, int protocol) {
    if (domain == AF_NETLINK && protocol == NETLINK_RDMA && is_netlink_socket_type(type)) {
        errno = EPROTONOSUPPORT;
        return -1;
    }
    socket_fn *f = next_socket();
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return f(domain, type, protocol);
}
