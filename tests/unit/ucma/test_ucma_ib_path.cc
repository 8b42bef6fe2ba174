// SET_OPTION(RDMA_OPTION_IB, RDMA_OPTION_IB_PATH): the program's path record
// ends route resolution (ucma.c ucma_set_ib_path, cma.c rdma_set_ib_path).
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "ucma/path_record.h"
#include "ucma_driver.h"

namespace uroce::ucma::test {
namespace {

constexpr std::uint32_t kRouteResolved = 2, kConnectRequest = 4;

wire::Gid mapped(const char* ipv4) {
    wire::Gid g{};
    g[10] = 0xFF;
    g[11] = 0xFF;
    inet_pton(AF_INET, ipv4, &g[12]);
    return g;
}

PathInfo given_path() {
    PathInfo p;
    p.sgid = mapped("192.0.2.1");
    p.dgid = mapped("192.0.2.1");
    p.flow_label = 0x12345;
    p.hop_limit = 7;
    p.traffic_class = 0x20;
    p.sl = 3;
    p.mtu = 2;  // IBV_MTU_512
    p.packet_life_time = 10;
    return p;
}

// `entries` ib_path_rec_data with these flags, every one carrying `path`.
std::vector<std::uint8_t> path_data(std::initializer_list<std::uint32_t> flags, const PathInfo& path) {
    std::vector<std::uint8_t> out;
    for (const std::uint32_t f : flags) {
        ib_path_rec_data d{};
        d.flags = f;
        const PackedPathRecord rec = pack_path_record(path);
        std::memcpy(d.path_rec, rec.data(), rec.size());
        const auto* b = reinterpret_cast<const std::uint8_t*>(&d);
        out.insert(out.end(), b, b + sizeof d);
    }
    return out;
}

int set_ib_path(UcmaDriver& d, const Channel& c, std::uint32_t h, std::vector<std::uint8_t> value,
                std::uint32_t optname = RDMA_OPTION_IB_PATH) {
    rdma_ucm_set_option opt{};
    opt.id = h;
    opt.level = RDMA_OPTION_IB;
    opt.optname = optname;
    opt.optlen = static_cast<std::uint32_t>(value.size());
    return d.command(c, RDMA_USER_CM_CMD_SET_OPTION, opt, 0, std::move(value)).error;
}

TEST(UcmaIbPath, PathRecordRoundTrips) {
    const PathInfo p = given_path();
    const PackedPathRecord rec = pack_path_record(p);
    EXPECT_EQ(rec[49], 0x80);                 // reversible
    EXPECT_EQ(rec[50], 0xFF);                 // P_Key 0xFFFF
    EXPECT_EQ(rec[54], (2 << 6) | 2);         // MTU "exactly" 512
    EXPECT_EQ(rec[56], (2 << 6) | 10);        // packet lifetime "exactly" 10
    EXPECT_EQ(rec[44], 0x01);                 // flow label 0x12345, hop limit 7
    EXPECT_EQ(rec[47], 7);
    const PathInfo back = unpack_path_record(rec);
    EXPECT_EQ(back.sgid, p.sgid);
    EXPECT_EQ(back.flow_label, p.flow_label);
    EXPECT_EQ(back.hop_limit, p.hop_limit);
    EXPECT_EQ(back.traffic_class, p.traffic_class);
    EXPECT_EQ(back.sl, p.sl);
    EXPECT_EQ(back.mtu, p.mtu);
    EXPECT_EQ(back.packet_life_time, p.packet_life_time);
}

TEST(UcmaIbPath, GivenPathResolvesTheRouteAndIsUsed) {
    UcmaDriver d;
    const Channel server = d.open_channel();
    const Channel client = d.open_channel();
    std::uint32_t listener = 0, active = 0;
    ASSERT_EQ(d.create_id(server, 0x5e, RDMA_PS_TCP, listener), 0);
    ASSERT_EQ(d.bind_ip(server, listener, "0.0.0.0", 7174), 0);
    ASSERT_EQ(d.listen(server, listener, 3), 0);
    ASSERT_EQ(d.create_id(client, 0xc1, RDMA_PS_TCP, active), 0);
    ASSERT_EQ(set_ib_path(d, client, active, path_data({kPrimaryPathFlags}, given_path())), EINVAL);  // no address yet
    ASSERT_EQ(d.resolve_ip(client, active, "192.0.2.1", 7174), 0);
    ASSERT_TRUE(d.next_event(client).has_value());

    // The kernel takes the first GMP | PRIMARY | BIDIRECTIONAL entry.
    const std::uint32_t gmp_primary_outbound = IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_OUTBOUND;
    PathInfo other = given_path();
    other.hop_limit = 99;
    auto value = path_data({gmp_primary_outbound}, other);
    const auto primary = path_data({kPrimaryPathFlags}, given_path());
    value.insert(value.end(), primary.begin(), primary.end());
    // The preload sends only the entry it picked; here the device gets both
    // forms: a value without any such entry is EINVAL.
    EXPECT_EQ(set_ib_path(d, client, active, path_data({gmp_primary_outbound}, other)), EINVAL);
    EXPECT_EQ(set_ib_path(d, client, active, {}), EINVAL);
    EXPECT_EQ(set_ib_path(d, client, active, primary, 2), ENOSYS);  // another IB option
    ASSERT_EQ(set_ib_path(d, client, active, value), 0);
    const auto e = d.next_event(client);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->event, kRouteResolved);
    EXPECT_EQ(e->status, 0);
    EXPECT_EQ(d.resolve_route(client, active), EINVAL);  // the route is already resolved
    EXPECT_EQ(set_ib_path(d, client, active, primary), EINVAL);

    rdma_ucm_query_route_resp route{};
    ASSERT_EQ(d.query_route(client, active, route), 0);
    EXPECT_EQ(route.num_paths, 1);
    EXPECT_EQ(route.ib_route[0].hop_limit, 7);
    EXPECT_EQ(route.ib_route[0].traffic_class, 0x20);
    EXPECT_EQ(ntohl(route.ib_route[0].flow_label), 0x12345u);
    EXPECT_EQ(route.ib_route[0].mtu, 2);
    EXPECT_EQ(route.ib_route[0].packet_life_time, 10);

    // The connection runs on that path: the active side's RTR and RTS.
    ASSERT_EQ(d.connect(client, active, 0x11), 0);
    const auto req = d.next_event(server);
    ASSERT_TRUE(req.has_value());
    ASSERT_EQ(req->event, kConnectRequest);
    ASSERT_EQ(d.accept(server, req->id, 0xacc, 0x22), 0);
    ASSERT_TRUE(d.next_event(client).has_value());
    ib_uverbs_qp_attr rtr{}, rts{};
    ASSERT_EQ(d.init_qp_attr(client, active, 2, rtr), 0);
    EXPECT_EQ(rtr.path_mtu, 2);
    EXPECT_EQ(rtr.ah_attr.grh.hop_limit, 7);
    EXPECT_EQ(rtr.ah_attr.grh.traffic_class, 0x20);
    EXPECT_EQ(rtr.ah_attr.grh.flow_label, 0x12345u);
    EXPECT_EQ(rtr.ah_attr.sl, 3);
    ASSERT_EQ(d.init_qp_attr(client, active, 3, rts), 0);
    EXPECT_EQ(rts.timeout, 11);  // packet lifetime + 1
}

}  // namespace
}  // namespace uroce::ucma::test
