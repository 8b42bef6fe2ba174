// The AF_IB command set on a RoCE device, as Linux 6.1 answers it: the
// wildcard bind librdmacm probes with succeeds (its port space from the
// service ID), a bind to a GID is ENODEV, address resolution finds the
// source GID, route resolution is ENODEV; QUERY GID and PATH answer every id.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <endian.h>

#include <cerrno>
#include <cstring>

#include "ucma/path_record.h"
#include "ucma_driver.h"

namespace uroce::ucma::test {
namespace {

constexpr sa_family_t kAfIb = 27;
constexpr std::uint64_t kPsTcpSid = 0x0000000001060000ULL;  // RDMA_IB_IP_PS_TCP
constexpr std::uint64_t kPsUdpSid = 0x0000000001110000ULL;  // RDMA_IB_IP_PS_UDP
constexpr std::uint64_t kPsMask = 0xFFFFFFFFFFFF0000ULL;    // RDMA_IB_IP_PS_MASK
constexpr std::uint32_t kAddrResolved = 0;

struct SockaddrIb {
    std::uint16_t family;
    std::uint16_t pkey;
    std::uint32_t flowinfo;
    std::uint8_t addr[16];
    std::uint64_t sid;
    std::uint64_t sid_mask;
    std::uint64_t scope_id;
};
static_assert(sizeof(SockaddrIb) == 48);

SockaddrIb sib(const char* gid, std::uint64_t sid, std::uint64_t mask, std::uint16_t pkey = 0xFFFF) {
    SockaddrIb s{};
    s.family = kAfIb;
    s.pkey = htons(pkey);
    inet_pton(AF_INET6, gid, s.addr);
    s.sid = htobe64(sid);
    s.sid_mask = htobe64(mask);
    return s;
}

int bind_ib(UcmaDriver& d, const Channel& c, std::uint32_t h, const SockaddrIb& a) {
    rdma_ucm_bind cmd{};
    cmd.id = h;
    cmd.addr_size = sizeof a;
    std::memcpy(&cmd.addr, &a, sizeof a);
    return d.command(c, RDMA_USER_CM_CMD_BIND, cmd, 0).error;
}

int resolve_ib(UcmaDriver& d, const Channel& c, std::uint32_t h, const SockaddrIb& dst) {
    rdma_ucm_resolve_addr cmd{};
    cmd.id = h;
    cmd.timeout_ms = 2000;
    cmd.dst_size = sizeof dst;
    std::memcpy(&cmd.dst_addr, &dst, sizeof dst);
    return d.command(c, RDMA_USER_CM_CMD_RESOLVE_ADDR, cmd, 0).error;
}

CommandResult query(UcmaDriver& d, const Channel& c, std::uint32_t h, std::uint32_t option, std::uint16_t out) {
    rdma_ucm_query cmd{};
    cmd.id = h;
    cmd.option = option;
    return d.command(c, RDMA_USER_CM_CMD_QUERY, cmd, out);
}

rdma_ucm_query_addr_resp addr_resp(const CommandResult& r) {
    rdma_ucm_query_addr_resp resp{};
    std::memcpy(&resp, r.bytes.data(), std::min(r.length, sizeof resp));
    return resp;
}

SockaddrIb as_sib(const __kernel_sockaddr_storage& s) {
    SockaddrIb out{};
    std::memcpy(&out, &s, sizeof out);
    return out;
}

TEST(UcmaAfIb, LibrdmacmsProbeBindSucceedsInThePortSpaceOfItsServiceId) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_IB, h), 0);
    // cma.c ucma_init: CREATE_ID(PS_IB), BIND(AF_IB wildcard, TCP service ID).
    ASSERT_EQ(bind_ib(d, c, h, sib("::", kPsTcpSid, kPsMask)), 0);
    const auto a = query(d, c, h, RDMA_USER_CM_QUERY_ADDR, sizeof(rdma_ucm_query_addr_resp));
    ASSERT_EQ(a.error, 0);
    const auto resp = addr_resp(a);
    EXPECT_EQ(resp.node_guid, 0u);  // no device for a wildcard
    EXPECT_EQ(resp.src_size, 48);
    EXPECT_EQ(resp.dst_size, 48);
    const SockaddrIb src = as_sib(resp.src_addr);
    EXPECT_EQ(src.family, kAfIb);
    const std::uint64_t sid = be64toh(src.sid);
    EXPECT_EQ(sid & kPsMask, kPsTcpSid);  // the TCP port space, an ephemeral port
    EXPECT_GE(sid & 0xFFFF, 32768u);
    EXPECT_EQ(be64toh(src.sid_mask), ~0ULL);
    const auto g = query(d, c, h, RDMA_USER_CM_QUERY_GID, sizeof(rdma_ucm_query_addr_resp));
    ASSERT_EQ(g.error, 0);
    EXPECT_EQ(addr_resp(g).src_size, 48);
    std::uint32_t reported = 0;
    EXPECT_EQ(d.destroy_id(c, h, reported), 0);
}

TEST(UcmaAfIb, BindRefusesWhatTheKernelRefusesOnRoce) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t tcp = 0, udp = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, tcp), 0);
    ASSERT_EQ(d.create_id(c, 2, RDMA_PS_UDP, udp), 0);
    // The device's own GID as an IB address: no IB port (cma_validate_port).
    EXPECT_EQ(bind_ib(d, c, tcp, sib("::ffff:192.0.2.1", kPsTcpSid | 7174, ~0ULL)), ENODEV);
    // A UDP service ID on a TCP id: no port space (cma_select_ib_ps).
    EXPECT_EQ(bind_ib(d, c, tcp, sib("::", kPsUdpSid, kPsMask)), EPROTONOSUPPORT);
    EXPECT_EQ(bind_ib(d, c, udp, sib("::", kPsUdpSid | 7174, ~0ULL)), 0);
    EXPECT_EQ(bind_ib(d, c, udp, sib("::", kPsUdpSid | 7175, ~0ULL)), EINVAL);  // bound already
}

TEST(UcmaAfIb, ResolveFindsTheSourceGidAndRouteResolutionIsEnodev) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0, far = 0, badkey = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
    // A peer on the subnet of the device's IPv4-mapped GIDs (prefix 0).
    ASSERT_EQ(resolve_ib(d, c, h, sib("::ffff:192.0.2.9", kPsTcpSid | 7174, ~0ULL)), 0);
    const auto e = d.next_event(c);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kAddrResolved);
    EXPECT_EQ(e->status, 0);
    const auto g = query(d, c, h, RDMA_USER_CM_QUERY_GID, sizeof(rdma_ucm_query_addr_resp));
    ASSERT_EQ(g.error, 0);
    const auto resp = addr_resp(g);
    EXPECT_NE(resp.node_guid, 0u);
    EXPECT_EQ(ntohs(resp.pkey), 0xFFFF);
    char text[INET6_ADDRSTRLEN];
    const SockaddrIb src = as_sib(resp.src_addr);
    inet_ntop(AF_INET6, src.addr, text, sizeof text);
    EXPECT_STREQ(text, "::ffff:192.0.2.1");
    EXPECT_EQ(be64toh(as_sib(resp.dst_addr).sid), kPsTcpSid | 7174);
    EXPECT_EQ(d.resolve_route(c, h), ENODEV);  // an AF_IB id has no netdev on RoCE
    EXPECT_EQ(d.resolve_route(c, h), ENODEV);  // still ADDR_RESOLVED
    // No GID of the device shares 2001:db8::/64: no port reaches it.
    ASSERT_EQ(d.create_id(c, 2, RDMA_PS_TCP, far), 0);
    EXPECT_EQ(resolve_ib(d, c, far, sib("2001:db8::5", kPsTcpSid | 7174, ~0ULL)), ENODEV);
    // A P_Key the port does not hold.
    ASSERT_EQ(d.create_id(c, 3, RDMA_PS_TCP, badkey), 0);
    EXPECT_EQ(resolve_ib(d, c, badkey, sib("::ffff:192.0.2.9", kPsTcpSid | 7174, ~0ULL, 0x1234)), ENODEV);
}

TEST(UcmaAfIb, QueryGidAndPathAnswerIpIds) {
    UcmaDriver d;
    const Channel c = d.open_channel();
    std::uint32_t h = 0;
    ASSERT_EQ(d.create_id(c, 1, RDMA_PS_TCP, h), 0);
    ASSERT_EQ(d.resolve_ip(c, h, "192.0.2.1", 7174), 0);
    ASSERT_TRUE(d.next_event(c).has_value());

    const std::uint16_t path_out = 8 + 6 * 72;  // what librdmacm asks
    auto p = query(d, c, h, RDMA_USER_CM_QUERY_PATH, path_out);
    ASSERT_EQ(p.error, 0);
    EXPECT_EQ(p.length, 8u);  // no route yet: num_paths 0
    std::uint32_t num_paths = 99;
    std::memcpy(&num_paths, p.bytes.data(), 4);
    EXPECT_EQ(num_paths, 0u);

    const auto g = query(d, c, h, RDMA_USER_CM_QUERY_GID, sizeof(rdma_ucm_query_addr_resp));
    ASSERT_EQ(g.error, 0);
    const auto resp = addr_resp(g);
    const SockaddrIb dst = as_sib(resp.dst_addr);
    EXPECT_EQ(dst.family, kAfIb);
    EXPECT_EQ(be64toh(dst.sid), (std::uint64_t{RDMA_PS_TCP} << 16) + 7174);  // rdma_get_service_id
    EXPECT_EQ(dst.addr[10], 0xFF);
    EXPECT_EQ(dst.addr[15], 1);  // ::ffff:192.0.2.1
    EXPECT_EQ(query(d, c, h, RDMA_USER_CM_QUERY_GID, 8).error, ENOSPC);

    ASSERT_EQ(d.resolve_route(c, h), 0);
    ASSERT_TRUE(d.next_event(c).has_value());
    p = query(d, c, h, RDMA_USER_CM_QUERY_PATH, path_out);
    ASSERT_EQ(p.error, 0);
    ASSERT_EQ(p.length, 8u + 72u);
    std::memcpy(&num_paths, p.bytes.data(), 4);
    EXPECT_EQ(num_paths, 1u);
    ib_path_rec_data entry{};
    std::memcpy(&entry, p.bytes.data() + 8, sizeof entry);
    EXPECT_EQ(entry.flags, 0x2Bu);  // GMP | PRIMARY | BIDIRECTIONAL
    const PackedPathRecord rec = [&] {
        PackedPathRecord r{};
        std::memcpy(r.data(), entry.path_rec, r.size());
        return r;
    }();
    const PathInfo path = unpack_path_record(rec);
    EXPECT_EQ(path.hop_limit, 64);
    EXPECT_EQ(path.packet_life_time, 18);
    EXPECT_EQ(path.dgid[15], 1);
    EXPECT_EQ(query(d, c, h, RDMA_USER_CM_QUERY_PATH, 8 + 72).length, 8u);  // room must exceed one record
    EXPECT_EQ(query(d, c, h, RDMA_USER_CM_QUERY_PATH, 7).error, ENOSPC);
    EXPECT_EQ(query(d, c, h, 9, 8).error, ENOSYS);
}

}  // namespace
}  // namespace uroce::ucma::test
