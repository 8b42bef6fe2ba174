// Multicast joins on the emulated ucma device: the answers and events of
// ucma.c ucma_process_join / ucma_leave_multicast and cma.c
// cma_iboe_join_multicast for RoCE v2, and the counting librdmacm's
// rdma_leave_multicast and rdma_destroy_id wait on.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "device/gid_table.h"
#include "ucma_driver.h"

namespace uroce::ucma::test {
namespace {

constexpr int kKernelEnotsupp = 524;

rdma_ucm_join_ip_mcast join_ip(std::uint32_t id, std::uint64_t uid, const char* group) {
    rdma_ucm_join_ip_mcast cmd{};
    cmd.id = id;
    cmd.uid = uid;
    if (std::strchr(group, ':') == nullptr) {
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        inet_pton(AF_INET, group, &sin.sin_addr);
        std::memcpy(&cmd.addr, &sin, sizeof sin);
    } else {
        cmd.addr.sin6_family = AF_INET6;
        inet_pton(AF_INET6, group, &cmd.addr.sin6_addr);
    }
    return cmd;
}

rdma_ucm_join_mcast join_af_ib_set(std::uint32_t id, std::uint64_t uid, const char* group, std::uint16_t flags) {
    rdma_ucm_join_mcast cmd{};
    cmd.id = id;
    cmd.uid = uid;
    cmd.join_flags = flags;
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    inet_pton(AF_INET, group, &sin.sin_addr);
    std::memcpy(&cmd.addr, &sin, sizeof sin);
    cmd.addr_size = sizeof sin;
    return cmd;
}

// A UDP id bound to the device's address, as mckey makes it.
std::uint32_t bound_udp_id(UcmaDriver& d, const Channel& c) {
    std::uint32_t h = 0;
    EXPECT_EQ(d.create_id(c, 0x1D, RDMA_PS_UDP, h), 0);
    EXPECT_EQ(d.bind_ip(c, h, "192.0.2.1", 0), 0);
    return h;
}

std::uint32_t join_handle(const CommandResult& r) {
    rdma_ucm_create_id_resp resp{};
    std::memcpy(&resp, r.bytes.data(), sizeof resp);
    return resp.id;
}

std::uint32_t leave(UcmaDriver& d, const Channel& c, std::uint32_t mc, int& error) {
    rdma_ucm_destroy_id cmd{};
    cmd.id = mc;
    const CommandResult r = d.command(c, RDMA_USER_CM_CMD_LEAVE_MCAST, cmd, 4);
    error = r.error;
    rdma_ucm_destroy_id_resp resp{};
    std::memcpy(&resp, r.bytes.data(), sizeof resp);
    return resp.events_reported;
}

int own_gid_index() {
    const auto gids = *device::build_gid_table({0x02, 0, 0, 0, 0, 0x01}, {*device::parse_ip("192.0.2.1")});
    const wire::Gid own = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
    for (std::size_t i = 0; i < gids.size(); ++i) {
        if (gids[i].type == device::GidType::RoceV2 && gids[i].gid == own) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

TEST(UcmaMulticast, JoinQueuesMulticastJoinWithTheGroupsAddressVector) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    const std::uint32_t id = bound_udp_id(d, c);
    const CommandResult r = d.command(c, RDMA_USER_CM_CMD_JOIN_IP_MCAST, join_ip(id, 0xABC, "239.1.1.1"), 4);
    ASSERT_EQ(r.error, 0);
    EXPECT_EQ(r.length, sizeof(rdma_ucm_create_id_resp));
    EXPECT_EQ(join_handle(r), 0u);  // the joins' own table
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, RDMA_CM_EVENT_MULTICAST_JOIN);
    EXPECT_EQ(e->status, 0);
    EXPECT_EQ(e->uid, 0xABCu);  // the join's uid and handle, not the id's
    EXPECT_EQ(e->id, join_handle(r));
    const rdma_ucm_ud_param& ud = e->param.ud;
    EXPECT_EQ(ud.qp_num, 0xFFFFFFu);
    EXPECT_EQ(ud.qkey, 0x01234567u);
    EXPECT_EQ(ud.private_data_len, 0);
    const std::uint8_t group[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 1, 1, 1};
    EXPECT_EQ(std::memcmp(ud.ah_attr.grh.dgid, group, 16), 0);
    EXPECT_EQ(ud.ah_attr.grh.hop_limit, 64);
    EXPECT_EQ(ud.ah_attr.grh.sgid_index, own_gid_index());
    EXPECT_EQ(ud.ah_attr.grh.flow_label, 0u);
    EXPECT_EQ(ud.ah_attr.grh.traffic_class, 0);
    EXPECT_EQ(ud.ah_attr.is_global, 1);
    EXPECT_EQ(ud.ah_attr.dlid, 0);
    EXPECT_EQ(ud.ah_attr.port_num, 1);
    // The event counts on the join and on the id.
    int err = -1;
    EXPECT_EQ(leave(d, c, join_handle(r), err), 1u);
    EXPECT_EQ(err, 0);
    std::uint32_t reported = 0;
    ASSERT_EQ(d.destroy_id(c, id, reported), 0);
    EXPECT_EQ(reported, 1u);
}

TEST(UcmaMulticast, LeaveDropsUndeliveredEventsAndAnswersTheCount) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    const std::uint32_t id = bound_udp_id(d, c);
    const auto first = d.command(c, RDMA_USER_CM_CMD_JOIN_IP_MCAST, join_ip(id, 1, "239.1.1.1"), 4);
    const auto second = d.command(c, RDMA_USER_CM_CMD_JOIN_MCAST, join_af_ib_set(id, 2, "239.1.1.2", 1), 4);
    ASSERT_EQ(first.error, 0);
    ASSERT_EQ(second.error, 0);  // a send-only join (join_flags 1)
    EXPECT_EQ(join_handle(second), 1u);
    int err = -1;
    EXPECT_EQ(leave(d, c, join_handle(first), err), 0u);  // its event was never handed out
    EXPECT_EQ(err, 0);
    const auto e = d.next_event(c);  // the first doorbell finds the second join's event
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->uid, 2u);
    EXPECT_FALSE(d.next_event(c).has_value());  // the purged event's doorbell finds nothing
    EXPECT_EQ(leave(d, c, join_handle(first), err), 0u);
    EXPECT_EQ(err, ENOENT);  // left already
    std::uint32_t reported = 0;
    ASSERT_EQ(d.destroy_id(c, id, reported), 0);
    EXPECT_EQ(reported, 1u);
    EXPECT_EQ(leave(d, c, join_handle(second), err), 0u);
    EXPECT_EQ(err, ENOENT);  // DESTROY_ID took the id's joins
}

TEST(UcmaMulticast, JoinRefusesWhatTheKernelRefuses) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    const Channel other = d.open_channel();
    const std::uint32_t id = bound_udp_id(d, c);
    const auto join = [&](const Channel& ch, auto cmd, std::uint32_t cmd_no, std::uint16_t out = 4) {
        return d.command(ch, cmd_no, cmd, out).error;
    };
    EXPECT_EQ(join(c, join_ip(id, 1, "239.1.1.1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST, 2), ENOSPC);
    EXPECT_EQ(join(c, join_ip(id, 1, "0.0.0.0"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), EINVAL);
    EXPECT_EQ(join(c, join_ip(id, 1, "ff0e::1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), kKernelEnotsupp);
    EXPECT_EQ(join(other, join_ip(id, 1, "239.1.1.1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), EINVAL);
    EXPECT_EQ(join(c, join_ip(77, 1, "239.1.1.1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), ENOENT);
    EXPECT_EQ(join(c, join_af_ib_set(id, 1, "239.1.1.1", 2), RDMA_USER_CM_CMD_JOIN_MCAST), EINVAL);
    auto wrong_size = join_af_ib_set(id, 1, "239.1.1.1", 0);
    wrong_size.addr_size = 28;
    EXPECT_EQ(join(c, wrong_size, RDMA_USER_CM_CMD_JOIN_MCAST), EINVAL);
    std::uint32_t tcp = 0;
    ASSERT_EQ(d.create_id(c, 2, RDMA_PS_TCP, tcp), 0);
    ASSERT_EQ(d.bind_ip(c, tcp, "192.0.2.1", 0), 0);
    EXPECT_EQ(join(c, join_ip(tcp, 1, "239.1.1.1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), EINVAL);  // not UD
    std::uint32_t unbound = 0;
    ASSERT_EQ(d.create_id(c, 3, RDMA_PS_UDP, unbound), 0);
    EXPECT_EQ(join(c, join_ip(unbound, 1, "239.1.1.1"), RDMA_USER_CM_CMD_JOIN_IP_MCAST), EINVAL);  // no device
    EXPECT_EQ(d.doorbells(c), 0);  // nothing was queued
    int err = -1;
    leave(d, c, 0, err);
    EXPECT_EQ(err, ENOENT);
}

TEST(UcmaMulticast, LeaveFromAnotherChannelIsEinval) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    const Channel other = d.open_channel();
    const std::uint32_t id = bound_udp_id(d, c);
    const auto r = d.command(c, RDMA_USER_CM_CMD_JOIN_IP_MCAST, join_ip(id, 1, "224.0.0.251"), 4);
    ASSERT_EQ(r.error, 0);
    int err = -1;
    leave(d, other, join_handle(r), err);
    EXPECT_EQ(err, EINVAL);
    rdma_ucm_destroy_id cmd{};
    cmd.id = join_handle(r);
    EXPECT_EQ(d.command(c, RDMA_USER_CM_CMD_LEAVE_MCAST, cmd, 2).error, ENOSPC);
}

}  // namespace
}  // namespace uroce::ucma::test
