// CM_LIST_IDS (abi/control.h op 150, ucma/id_listing.h): the ids' entries as
// `uroce cm` prints them, in the kernel's terms (cma.c's state, nldev's
// addresses), and the paging of a long list.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <cstring>

#include "ucma/id_listing.h"
#include "ucma/id_names.h"
#include "connected_pair.h"

namespace uroce::ucma::test {
namespace {

constexpr std::array<std::uint8_t, 4> kDeviceIp = {192, 0, 2, 1};  // the driver's device address

ChannelOwner owner(std::uint32_t pid, const char* comm) {
    ChannelOwner o;
    o.pid = pid;
    std::strncpy(o.comm.data(), comm, o.comm.size() - 1);
    return o;
}

// Every channel visible, owned by pid 100 + its number, "prog".
ChannelOwnerLookup everyone() {
    return [](ChannelId ch) -> std::optional<ChannelOwner> { return owner(100 + ch, "prog"); };
}

const uroce_ctrl_cm_id_entry* entry_of(const uroce_ctrl_cm_list_ids_reply& r, std::uint32_t handle) {
    for (std::uint32_t i = 0; i < r.count; ++i) {
        if (r.entries[i].handle == handle) {
            return &r.entries[i];
        }
    }
    return nullptr;
}

bool is_device_ip(const std::uint8_t (&addr)[16]) {
    return std::memcmp(addr, kDeviceIp.data(), kDeviceIp.size()) == 0;
}

TEST(UcmaIdListing, ListenerIsListenOnTheWildcardWithItsPort) {
    UcmaDriver d;
    const Channel ch = d.open_channel();
    std::uint32_t id = 0;
    ASSERT_EQ(d.create_id(ch, 1, RDMA_PS_TCP, id), 0);
    auto r = list_ids_page(d.device().ids(), 0, everyone());
    ASSERT_EQ(r.count, 1u);
    EXPECT_EQ(r.entries[0].state, UROCE_CM_STATE_IDLE);
    EXPECT_EQ(r.entries[0].src_family, 0);  // no address yet: nldev puts none
    EXPECT_EQ(r.entries[0].dst_family, 0);
    ASSERT_EQ(d.bind_ip(ch, id, "0.0.0.0", 7174), 0);
    EXPECT_EQ(list_ids_page(d.device().ids(), 0, everyone()).entries[0].state, UROCE_CM_STATE_ADDR_BOUND);
    ASSERT_EQ(d.listen(ch, id, 8), 0);

    r = list_ids_page(d.device().ids(), 0, everyone());
    ASSERT_EQ(r.count, 1u);
    EXPECT_EQ(r.more, 0u);
    const uroce_ctrl_cm_id_entry& e = r.entries[0];
    EXPECT_EQ(e.handle, id);
    EXPECT_EQ(cm_state_name(e.state), "LISTEN");
    EXPECT_EQ(port_space_name(e.port_space), "TCP");
    EXPECT_EQ(e.lqpn, 0u);
    EXPECT_EQ(e.port, 0);  // a wildcard listener is bound to no port
    EXPECT_EQ(e.src_family, AF_INET);
    EXPECT_EQ(e.src_port, 7174);
    EXPECT_EQ(e.src_addr[0] | e.src_addr[1] | e.src_addr[2] | e.src_addr[3], 0);  // 0.0.0.0
    EXPECT_EQ(e.dst_family, AF_INET);  // rdma_bind_addr's family: 0.0.0.0:0
    EXPECT_EQ(e.dst_port, 0);
    EXPECT_EQ(e.pid, 100 + ch.id);
    EXPECT_STREQ(e.comm, "prog");
}

TEST(UcmaIdListing, ConnectedPairShowsBothAddressesCrossed) {
    ConnectedPair p;
    p.connect();
    const auto r = list_ids_page(p.d.device().ids(), 0, everyone());
    ASSERT_EQ(r.count, 3u);
    const auto* active = entry_of(r, p.active);
    const auto* passive = entry_of(r, p.passive);
    ASSERT_NE(active, nullptr);
    ASSERT_NE(passive, nullptr);
    for (const auto* e : {active, passive}) {
        EXPECT_EQ(cm_state_name(e->state), "CONNECT");  // cma.c has no state of its own for "established"
        EXPECT_EQ(qp_type_name(e->qp_type), "RC");
        EXPECT_EQ(e->port, 1);
        EXPECT_EQ(e->src_family, AF_INET);
        EXPECT_EQ(e->dst_family, AF_INET);
        EXPECT_TRUE(is_device_ip(e->src_addr));
        EXPECT_TRUE(is_device_ip(e->dst_addr));
    }
    EXPECT_EQ(active->lqpn, 0x11u);
    EXPECT_EQ(passive->lqpn, 0x22u);
    EXPECT_EQ(active->dst_port, 7174);
    EXPECT_EQ(passive->src_port, 7174);
    EXPECT_NE(active->src_port, 0);
    EXPECT_EQ(passive->dst_port, active->src_port);
    EXPECT_EQ(active->pid, 100 + p.client.id);
    EXPECT_EQ(passive->pid, 100 + p.server.id);  // the listener's channel
}

TEST(UcmaIdListing, DisconnectedAfterTheEventRejectedStaysConnect) {
    ConnectedPair p;
    p.connect();
    ASSERT_EQ(p.d.disconnect(p.client, p.active), 0);
    p.d.device().poll();
    const auto dreq = p.d.next_event(p.server);
    ASSERT_TRUE(dreq.has_value());
    ASSERT_EQ(dreq->event, kDisconnected);
    const auto r = list_ids_page(p.d.device().ids(), 0, everyone());
    EXPECT_EQ(cm_state_name(entry_of(r, p.passive)->state), "DISCONNECT");

    // A REQ nobody listens for: REJECTED, and the id stays in CONNECT (cma.c).
    UcmaDriver d;
    const Channel ch = d.open_channel();
    std::uint32_t id = 0;
    ASSERT_EQ(d.create_id(ch, 1, RDMA_PS_TCP, id), 0);
    ASSERT_EQ(d.resolve_ip(ch, id, "192.0.2.1", 9999), 0);
    ASSERT_TRUE(d.next_event(ch).has_value());
    ASSERT_EQ(d.resolve_route(ch, id), 0);
    ASSERT_TRUE(d.next_event(ch).has_value());
    ASSERT_EQ(d.connect(ch, id, 0x33), 0);
    d.device().poll();
    ASSERT_TRUE(d.next_event(ch).has_value());
    EXPECT_EQ(cm_state_name(list_ids_page(d.device().ids(), 0, everyone()).entries[0].state), "CONNECT");
}

TEST(UcmaIdListing, LongListIsPagedInHandleOrder) {
    UcmaDriver d;
    const Channel ch = d.open_channel();
    constexpr std::uint32_t kIds = 2 * UROCE_CM_LIST_IDS_PER_REPLY + 1;
    for (std::uint32_t i = 0; i < kIds; ++i) {
        std::uint32_t id = 0;
        ASSERT_EQ(d.create_id(ch, i, RDMA_PS_UDP, id), 0);
    }
    std::vector<std::uint32_t> seen;
    std::uint32_t first = 0;
    for (int page = 0; page < 10; ++page) {
        const auto r = list_ids_page(d.device().ids(), first, everyone());
        ASSERT_LE(r.count, UROCE_CM_LIST_IDS_PER_REPLY);
        for (std::uint32_t i = 0; i < r.count; ++i) {
            seen.push_back(r.entries[i].handle);
            EXPECT_EQ(port_space_name(r.entries[i].port_space), "UDP");
        }
        if (r.more == 0) {
            break;
        }
        EXPECT_EQ(r.count, UROCE_CM_LIST_IDS_PER_REPLY);
        EXPECT_GT(r.next_handle, first);
        first = r.next_handle;
    }
    ASSERT_EQ(seen.size(), kIds);
    for (std::uint32_t i = 0; i < kIds; ++i) {
        EXPECT_EQ(seen[i], i);  // lowest free handles, each once, in order
    }
}

TEST(UcmaIdListing, HiddenChannelsAreLeftOutWithoutEndingThePage) {
    UcmaDriver d;
    const Channel mine = d.open_channel();
    const Channel theirs = d.open_channel();
    std::uint32_t id = 0;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(d.create_id(theirs, 1, RDMA_PS_TCP, id), 0);
        ASSERT_EQ(d.create_id(mine, 1, RDMA_PS_TCP, id), 0);
    }
    const ChannelOwnerLookup only_mine = [&](ChannelId ch) -> std::optional<ChannelOwner> {
        if (ch != mine.id) {
            return std::nullopt;
        }
        return owner(7, "mine");
    };
    const auto r = list_ids_page(d.device().ids(), 0, only_mine);
    EXPECT_EQ(r.count, 3u);
    EXPECT_EQ(r.more, 0u);
    for (std::uint32_t i = 0; i < r.count; ++i) {
        EXPECT_EQ(r.entries[i].pid, 7u);
        EXPECT_EQ(r.entries[i].handle % 2, 1u);  // theirs took the even handles
    }
}

TEST(UcmaIdListing, NamesAreTheKernels) {
    EXPECT_EQ(cm_state_name(UROCE_CM_STATE_ADDR_RESOLVED), "ADDR_RESOLVED");
    EXPECT_EQ(cm_state_name(UROCE_CM_STATE_ROUTE_RESOLVED), "ROUTE_RESOLVED");
    EXPECT_EQ(cm_state_name(200), "UNKNOWN");
    EXPECT_EQ(port_space_name(0x013F), "IB");
    EXPECT_EQ(port_space_name(0x0002), "IPoIB");
    EXPECT_EQ(port_space_name(0x1234), "---");
    EXPECT_EQ(qp_type_name(4), "UD");
}

}  // namespace
}  // namespace uroce::ucma::test
