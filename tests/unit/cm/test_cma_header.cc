// The CMA private-data header and rdma_cm's service IDs.
#include <gtest/gtest.h>

#include "cm/cma_header.h"
#include "cm/format.h"
#include "cm/service_id.h"

namespace uroce::cm {
namespace {

wire::Gid v6(std::uint8_t last) {
    wire::Gid g{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last};
    return g;
}

TEST(CmaHeader, Ipv4LayoutAndRoundTrip) {
    const CmaHeader h{wire::IpVersion::V4, 0x8bd3, wire::ipv4_mapped({10, 0, 0, 1}), wire::ipv4_mapped({10, 0, 0, 2})};
    std::array<std::uint8_t, kCmaHeaderSize> b{};
    write_cma_header(h, b);
    const std::array<std::uint8_t, kCmaHeaderSize> expected = {
        0x00, 0x40, 0x8b, 0xd3,                                      // version, IPv4, port
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,             // source: last 4 bytes
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,             // destination
    };
    EXPECT_EQ(b, expected);
    const CmaParseResult r = parse_cma_header(b);
    ASSERT_EQ(r.status, CmaStatus::Ok);
    EXPECT_EQ(r.header, h);
}

TEST(CmaHeader, Ipv6RoundTrip) {
    const CmaHeader h{wire::IpVersion::V6, 39699, v6(1), v6(2)};
    std::array<std::uint8_t, 92> b{};
    write_cma_header(h, b);
    EXPECT_EQ(b[1], 0x60);
    EXPECT_EQ(b[4], 0xfd);
    EXPECT_EQ(b[35], 2);
    EXPECT_EQ(parse_cma_header(b).header, h);
}

TEST(CmaHeader, Refusals) {
    std::array<std::uint8_t, kCmaHeaderSize> b{};
    write_cma_header(CmaHeader{}, b);
    EXPECT_EQ(parse_cma_header(std::span(b).first(35)).status, CmaStatus::TooShort);
    b[0] = 1;
    EXPECT_EQ(parse_cma_header(b).status, CmaStatus::BadVersion);
    b[0] = 0;
    b[1] = 0x50;
    EXPECT_EQ(parse_cma_header(b).status, CmaStatus::BadIpVersion);
}

TEST(CmaHeader, PrivateDataKeepsTheProgramsBytesAfterTheHeader) {
    const std::array<std::uint8_t, 56> user{1, 2, 3};
    PrivateData<kReqPrivateData> pd{};
    ASSERT_TRUE(make_cma_private_data(CmaHeader{}, user, pd));
    EXPECT_EQ(pd[36], 1);
    EXPECT_EQ(pd[38], 3);
    EXPECT_EQ(pd[91], 0);
    const std::array<std::uint8_t, 57> too_long{};
    EXPECT_FALSE(make_cma_private_data(CmaHeader{}, too_long, pd));
    EXPECT_EQ(user_private_data_size(kReqPrivateData), 56u);
    EXPECT_EQ(user_private_data_size(kSidrReqPrivateData), 180u);
}

TEST(ServiceId, RdmaCmForm) {
    // rping's default port 7174 = 0x1c06 (values seen in Linux captures).
    EXPECT_EQ(ip_service_id(PortSpace::Tcp, 7174), 0x0000000001061c06ULL);
    EXPECT_EQ(ip_service_id(PortSpace::Udp, 7174), 0x0000000001111c06ULL);
    EXPECT_EQ(ip_service_id(PortSpace::Ib, 0), 0x00000000013F0000ULL);
    const auto s = parse_ip_service_id(0x0000000001061c06ULL);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->port_space, PortSpace::Tcp);
    EXPECT_EQ(s->port, 7174);
    EXPECT_FALSE(parse_ip_service_id(0x0000000002061c06ULL).has_value());  // not the IP prefix
    EXPECT_FALSE(parse_ip_service_id(0x0000000001991c06ULL).has_value());  // unknown port space
    EXPECT_FALSE(parse_ip_service_id(0x1000000001061c06ULL).has_value());
}

}  // namespace
}  // namespace uroce::cm
