// ucma commands one at a time: the errno Linux's ucma.c/cma.c give bad
// ones, handles, addresses and the answers librdmacm reads.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "ucma_driver.h"

namespace uroce::ucma::test {
namespace {

TEST(UcmaCommands, HeaderChecksAreTheKernels) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    EXPECT_EQ(d.raw(c, {1, 2, 3}).error, EINVAL);  // shorter than a header
    rdma_ucm_cmd_hdr h{23, 0, 0};                   // past JOIN_MCAST
    std::vector<std::uint8_t> bytes(sizeof h);
    std::memcpy(bytes.data(), &h, sizeof h);
    EXPECT_EQ(d.raw(c, bytes).error, EINVAL);
    h = {RDMA_USER_CM_CMD_CREATE_ID, 24, 4};  // `in` beyond what was written
    std::memcpy(bytes.data(), &h, sizeof h);
    EXPECT_EQ(d.raw(c, bytes).error, EINVAL);
    h = {RDMA_USER_CM_CMD_GET_OPTION, 0, 0};  // no handler in ucma.c
    std::memcpy(bytes.data(), &h, sizeof h);
    EXPECT_EQ(d.raw(c, bytes).error, ENOSYS);
}

TEST(UcmaCommands, CreateIdChecksPortSpaceAndAnswerSize) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t handle = 99;
    EXPECT_EQ(d.create_id(c, 1, 0x1234, handle), EINVAL);
    rdma_ucm_create_id cmd{};
    cmd.ps = RDMA_PS_TCP;
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_CREATE_ID, cmd, 2).error, ENOSPC);
    EXPECT_EQ(d.device().id_count(), 0u);
}

TEST(UcmaCommands, HandlesAreLowestFreeAndBelongToTheirChannel) {
    UcmaDriver d;
    const Channel a = d.open_channel();
    const Channel b = d.open_channel();
    std::uint32_t h0 = 0, h1 = 0, h2 = 0, reported = 0;
    ASSERT_EQ(d.create_id(a, 1, RDMA_PS_TCP, h0), 0);
    ASSERT_EQ(d.create_id(b, 2, RDMA_PS_TCP, h1), 0);
    EXPECT_EQ(h0, 0u);
    EXPECT_EQ(h1, 1u);
    EXPECT_EQ(d.destroy_id(b, h0, reported), EINVAL);  // another channel's
    EXPECT_EQ(d.destroy_id(a, 7, reported), ENOENT);   // nobody's
    ASSERT_EQ(d.destroy_id(a, h0, reported), 0);
    EXPECT_EQ(reported, 0u);
    ASSERT_EQ(d.create_id(a, 3, RDMA_PS_UDP, h2), 0);
    EXPECT_EQ(h2, 0u);  // reused
}

TEST(UcmaCommands, BindRefusesForeignAddressesAndAfIb) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
    EXPECT_EQ(d.bind_ip(c, h, "198.51.100.7", 7174), EADDRNOTAVAIL);
    rdma_ucm_bind ib{};
    ib.id = h;
    ib.addr_size = 48;
    ib.addr.ss_family = 27;  // AF_IB with this device's GID: no IB port on a RoCE device
    const std::uint8_t own_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
    std::memcpy(reinterpret_cast<std::uint8_t*>(&ib.addr) + 8, own_gid, 16);
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_BIND, ib, 0).error, ENODEV);
    EXPECT_EQ(d.bind_ip(c, h, "192.0.2.1", 7174), 0);
    EXPECT_EQ(d.bind_ip(c, h, "192.0.2.1", 7175), EINVAL);  // already bound
    std::uint32_t other = 0;
    ASSERT_EQ(d.create_id(c, 2, RDMA_PS_TCP, other), 0);
    EXPECT_EQ(d.bind_ip(c, other, "0.0.0.0", 7174), EADDRINUSE);
    EXPECT_EQ(d.bind_ip(c, other, "0.0.0.0", 0), 0);  // an ephemeral port
    rdma_ucm_query_route_resp route{};
    ASSERT_EQ(d.query_route(c, other, route), 0);
    EXPECT_EQ(route.node_guid, 0u);  // a wildcard bind names no device
    sockaddr_in sin{};
    std::memcpy(&sin, &route.src_addr, sizeof sin);
    EXPECT_GE(ntohs(sin.sin_port), 32768);
}

TEST(UcmaCommands, ResolveQueuesEventsAndRouteNeedsAnAddress) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 0x55, RDMA_PS_TCP, h), 0);
    EXPECT_EQ(d.resolve_route(c, h), EINVAL);  // not resolved yet
    ASSERT_EQ(d.resolve_ip(c, h, "127.0.0.1", 7174), 0);
    auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, 0u);  // ADDR_RESOLVED
    EXPECT_EQ(e->uid, 0x55u);
    EXPECT_EQ(e->id, h);
    ASSERT_EQ(d.resolve_route(c, h), 0);
    e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, 2u);  // ROUTE_RESOLVED
    rdma_ucm_query_route_resp route{};
    ASSERT_EQ(d.query_route(c, h, route), 0);
    EXPECT_EQ(route.node_guid, htobe64(0x0200'00ff'fe00'0001ull));
    EXPECT_EQ(route.num_paths, 1u);
    EXPECT_EQ(route.port_num, 1);
    // 127.0.0.1 stands for the device's own address.
    const std::uint8_t own[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
    EXPECT_EQ(std::memcmp(route.ib_route[0].dgid, own, 16), 0);
    EXPECT_EQ(std::memcmp(route.ib_route[0].sgid, own, 16), 0);
    EXPECT_EQ(route.ib_route[0].pkey, htons(0xffff));
    EXPECT_EQ(route.ib_route[0].packet_life_time, 18);
    std::uint32_t reported = 0;
    ASSERT_EQ(d.destroy_id(c, h, reported), 0);
    EXPECT_EQ(reported, 2u);
}

TEST(UcmaCommands, InitQpAttrBeforeConnectIsInitOnly) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
    ib_uverbs_qp_attr a{};
    EXPECT_EQ(d.init_qp_attr(c, h, 1, a), EINVAL);  // no device yet
    ASSERT_EQ(d.resolve_ip(c, h, "192.0.2.1", 1), 0);
    ASSERT_EQ(d.init_qp_attr(c, h, 1, a), 0);
    EXPECT_EQ(a.qp_attr_mask, 0x39u);
    EXPECT_EQ(a.qp_access_flags, 0u);
    EXPECT_EQ(a.port_num, 1);
    EXPECT_EQ(d.init_qp_attr(c, h, 2, a), EINVAL);  // RTR needs the peer
    EXPECT_EQ(d.init_qp_attr(c, h, 9, a), EINVAL);  // no such state
}

TEST(UcmaCommands, SetOptionChecksSizes) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
    rdma_ucm_set_option opt{};
    opt.id = h;
    opt.level = RDMA_OPTION_ID;
    opt.optname = RDMA_OPTION_ID_REUSEADDR;
    opt.optlen = 4;
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_SET_OPTION, opt, 0, {1, 0, 0, 0}).error, 0);
    opt.optlen = 2;
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_SET_OPTION, opt, 0, {1, 0}).error, EINVAL);
    opt.optname = 77;
    opt.optlen = 4;
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_SET_OPTION, opt, 0, {1, 0, 0, 0}).error, ENOSYS);
}

TEST(UcmaCommands, DoorbellsAFullSocketRefusedAreRungLater) {
    // A default SOCK_SEQPACKET pair holds a few hundred unread datagrams;
    // queue more events than that, then read them the way the preload does.
    UcmaDriver d;
    const Channel c = d.open_channel();
    constexpr int kEvents = 1000;
    for (int i = 0; i < kEvents; ++i) {
        std::uint32_t h = 0;
        ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
        ASSERT_EQ(d.resolve_ip(c, h, "192.0.2.1", 1), 0);
    }
    int received = 0;
    for (int rounds = 0; rounds < 100 && received < kEvents; ++rounds) {
        while (d.next_event(c).has_value()) {  // one doorbell, one event
            ++received;
        }
        d.device().flush_doorbells();  // what the daemon does on every wake-up
    }
    EXPECT_EQ(received, kEvents);
}

}  // namespace
}  // namespace uroce::ucma::test
