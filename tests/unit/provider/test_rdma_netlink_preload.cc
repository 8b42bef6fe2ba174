// The preload's RDMA netlink refusal (verbs_provider/rdma_netlink_preload.c):
// under `uroce exec` a NETLINK_RDMA socket fails with EPROTONOSUPPORT, as on
// a kernel without RDMA, even where the kernel would open it, so libibverbs
// and librdmacm read the sysfs tree uroced publishes; every other socket is
// the kernel's. The kernel below the preload is fake_rdma_netlink_kernel.c,
// which does open NETLINK_RDMA sockets (this machine's kernel has no RDMA
// and would refuse them itself); its call count shows which calls the
// preload let through.
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>

#include "fake_rdma_netlink_kernel.h"

namespace {

// A socket() result: the fd (closed here) or the errno.
struct Opened {
    bool ok;
    int error;
};

Opened open_socket(int domain, int type, int protocol) {
    errno = 0;
    const int fd = ::socket(domain, type, protocol);
    const int error = errno;
    if (fd >= 0) {
        ::close(fd);
    }
    return {fd >= 0, error};
}

TEST(RdmaNetlinkPreload, TheKernelBelowWouldOpenRdmaNetlink) {
    // Otherwise the refusals below could be the kernel's, not the preload's.
    const int fd = fake_kernel_socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
    ASSERT_GE(fd, 0) << "errno " << errno;
    ::close(fd);
}

TEST(RdmaNetlinkPreload, RdmaNetlinkFailsAsWithoutRdma) {
    // libnl's nl_connect (libibverbs, librdmacm) asks for SOCK_RAW | SOCK_CLOEXEC;
    // netlink also takes SOCK_DGRAM, with or without the flags.
    const int types[] = {SOCK_RAW | SOCK_CLOEXEC, SOCK_RAW, SOCK_DGRAM, SOCK_DGRAM | SOCK_NONBLOCK};
    for (const int type : types) {
        const int calls = fake_kernel_socket_calls();
        const Opened r = open_socket(AF_NETLINK, type, NETLINK_RDMA);
        EXPECT_FALSE(r.ok) << "type " << type;
        EXPECT_EQ(r.error, EPROTONOSUPPORT) << "type " << type;
        EXPECT_EQ(fake_kernel_socket_calls(), calls) << "type " << type << " reached the kernel";
    }
}

TEST(RdmaNetlinkPreload, OtherNetlinkFamiliesReachTheKernel) {
    // NETLINK_ROUTE: what libibverbs resolves RoCE neighbours with.
    for (const int protocol : {NETLINK_ROUTE, NETLINK_GENERIC}) {
        const int calls = fake_kernel_socket_calls();
        const Opened r = open_socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
        EXPECT_TRUE(r.ok) << "protocol " << protocol << ": errno " << r.error;
        EXPECT_EQ(fake_kernel_socket_calls(), calls + 1) << "protocol " << protocol;
    }
}

TEST(RdmaNetlinkPreload, OtherDomainsAndTypesReachTheKernel) {
    int calls = fake_kernel_socket_calls();
    Opened r = open_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    EXPECT_TRUE(r.ok) << "errno " << r.error;
    EXPECT_EQ(fake_kernel_socket_calls(), ++calls);
    r = open_socket(AF_INET, SOCK_DGRAM, 0);
    EXPECT_TRUE(r.ok) << "errno " << r.error;
    EXPECT_EQ(fake_kernel_socket_calls(), ++calls);
    // Netlink refuses a stream socket before it looks at the protocol: that
    // answer is the kernel's, not a refusal of RDMA netlink.
    r = open_socket(AF_NETLINK, SOCK_STREAM, NETLINK_RDMA);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, ESOCKTNOSUPPORT);
    EXPECT_EQ(fake_kernel_socket_calls(), ++calls);
}

}  // namespace
