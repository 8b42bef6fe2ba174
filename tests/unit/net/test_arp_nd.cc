// ARP and ND frames: what we build is byte for byte what the Linux kernel
// sends for the same addresses (frames captured from a veth between two
// namespaces: 02:00:00:00:00:0a with 192.0.2.1 and 2001:db8::1 resolving
// 02:00:00:00:00:0b with 192.0.2.2 and 2001:db8::2); what the kernel sends
// parses; every truncation and every broken field is rejected without
// reading past the frame.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "net/arp.h"
#include "net/nd.h"

namespace uroce::net {
namespace {

constexpr wire::MacAddr kMacA = {0x02, 0, 0, 0, 0, 0x0A};
constexpr wire::MacAddr kMacB = {0x02, 0, 0, 0, 0, 0x0B};
constexpr wire::Gid kIp6A = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
constexpr wire::Gid kIp6B = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};

// Kernel NS from 2001:db8::1 for 2001:db8::2, with its source link-layer option.
const std::vector<std::uint8_t> kKernelNs = {
    0x33, 0x33, 0xff, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0xff, 0x00, 0x00, 0x02, 0x87, 0x00, 0x1c, 0x1e, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01,
    0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x01,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,
};

// The kernel's solicited, overriding NA in answer.
const std::vector<std::uint8_t> kKernelNa = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x00, 0x8a, 0x68, 0x60, 0x00, 0x00, 0x00, 0x20, 0x01,
    0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0b,
};

// A kernel's duplicate address detection NS for its link-local address:
// source ::, no link-layer option, a nonce option (type 14, RFC 7527).
const std::vector<std::uint8_t> kKernelDadNs = {
    0x33, 0x33, 0xff, 0xb0, 0xa2, 0xd6, 0x2e, 0x5a, 0x20, 0xb0, 0xa2, 0xd6, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0xff, 0xb0, 0xa2, 0xd6, 0x87, 0x00, 0xc2, 0xb6, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x5a, 0x20, 0xff, 0xfe, 0xb0, 0xa2, 0xd6, 0x0e, 0x01,
    0x2d, 0xc4, 0x56, 0x41, 0x94, 0xfa,
};

// Kernel ARP request (who has 192.0.2.2, tell 192.0.2.1) and reply; a veth
// does not pad, so they are 42 bytes.
const std::vector<std::uint8_t> kKernelArpRequest = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x06, 0x00, 0x01,
    0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xc0, 0x00, 0x02, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x02, 0x02,
};
const std::vector<std::uint8_t> kKernelArpReply = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x08, 0x06, 0x00, 0x01,
    0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0xc0, 0x00, 0x02, 0x02,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xc0, 0x00, 0x02, 0x01,
};

std::vector<std::uint8_t> build(const NdMessage& m) {
    std::vector<std::uint8_t> out(kNdFrameSize);
    out.resize(build_nd(out, m));
    return out;
}

std::vector<std::uint8_t> build(const ArpMessage& m) {
    std::vector<std::uint8_t> out(kArpFrameSize);
    out.resize(build_arp(out, m));
    return out;
}

// Recomputes the ICMPv6 checksum of an NS/NA frame after a field was edited.
void fix_checksum(std::vector<std::uint8_t>& f) {
    constexpr std::size_t icmp = 14 + 40;
    f[icmp + 2] = 0;
    f[icmp + 3] = 0;
    wire::Gid src{};
    wire::Gid dst{};
    std::copy_n(f.begin() + 22, 16, src.begin());
    std::copy_n(f.begin() + 38, 16, dst.begin());
    const std::size_t length = static_cast<std::size_t>(f[18] << 8 | f[19]);
    const std::uint16_t c = icmpv6_checksum(src, dst, std::span(f).subspan(icmp, length));
    f[icmp + 2] = static_cast<std::uint8_t>(c >> 8);
    f[icmp + 3] = static_cast<std::uint8_t>(c);
}

TEST(Nd, BuildsTheKernelsSolicitation) {
    const NdMessage ns{
        .type = NdType::NeighborSolicitation,
        .eth_dst = ipv6_multicast_mac(solicited_node_multicast(kIp6B)),
        .eth_src = kMacA,
        .ip_src = kIp6A,
        .ip_dst = solicited_node_multicast(kIp6B),
        .target = kIp6B,
        .link_addr = kMacA,
    };
    EXPECT_EQ(build(ns), kKernelNs);
}

TEST(Nd, BuildsTheKernelsAdvertisement) {
    const NdMessage na{
        .type = NdType::NeighborAdvertisement,
        .eth_dst = kMacA,
        .eth_src = kMacB,
        .ip_src = kIp6B,
        .ip_dst = kIp6A,
        .target = kIp6B,
        .link_addr = kMacB,
        .solicited = true,
        .override_entry = true,
    };
    EXPECT_EQ(build(na), kKernelNa);
}

TEST(Nd, ParsesKernelFrames) {
    const NdParseResult ns = parse_nd(kKernelNs);
    ASSERT_EQ(ns.status, NdParseStatus::Ok);
    EXPECT_EQ(ns.message.type, NdType::NeighborSolicitation);
    EXPECT_EQ(ns.message.target, kIp6B);
    EXPECT_EQ(ns.message.ip_src, kIp6A);
    EXPECT_EQ(ns.message.link_addr, kMacA);

    const NdParseResult na = parse_nd(kKernelNa);
    ASSERT_EQ(na.status, NdParseStatus::Ok);
    EXPECT_EQ(na.message.type, NdType::NeighborAdvertisement);
    EXPECT_EQ(na.message.target, kIp6B);
    EXPECT_EQ(na.message.link_addr, kMacB);
    EXPECT_TRUE(na.message.solicited);
    EXPECT_TRUE(na.message.override_entry);
    EXPECT_FALSE(na.message.router);

    const NdParseResult dad = parse_nd(kKernelDadNs);
    ASSERT_EQ(dad.status, NdParseStatus::Ok) << "the nonce option is skipped";
    EXPECT_TRUE(is_unspecified(dad.message.ip_src));
    EXPECT_FALSE(dad.message.link_addr.has_value());
}

TEST(Nd, ChecksumOfAReceivedMessageVerifiesToZero) {
    wire::Gid src{};
    wire::Gid dst{};
    std::copy_n(kKernelNa.begin() + 22, 16, src.begin());
    std::copy_n(kKernelNa.begin() + 38, 16, dst.begin());
    EXPECT_EQ(icmpv6_checksum(src, dst, std::span(kKernelNa).subspan(54)), 0);
    auto corrupt = kKernelNa;
    corrupt[70] ^= 0x01;
    EXPECT_NE(icmpv6_checksum(src, dst, std::span(corrupt).subspan(54)), 0);
}

TEST(Nd, MulticastAddresses) {
    EXPECT_EQ(solicited_node_multicast(kIp6B),
              (wire::Gid{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF, 0, 0, 0x02}));
    EXPECT_EQ(ipv6_multicast_mac(kAllNodesMulticast), (wire::MacAddr{0x33, 0x33, 0, 0, 0, 0x01}));
}

TEST(Nd, OtherFramesAreNotNd) {
    EXPECT_EQ(parse_nd(kKernelArpRequest).status, NdParseStatus::NotNd);
    auto echo = kKernelNs;
    echo[54] = 128;  // ICMPv6 echo request
    EXPECT_EQ(parse_nd(echo).status, NdParseStatus::NotNd);
    auto udp = kKernelNs;
    udp[20] = 17;
    EXPECT_EQ(parse_nd(udp).status, NdParseStatus::NotNd);
}

// Every prefix of a valid frame, each in a buffer of exactly its size so
// AddressSanitizer sees any read past the end.
template <typename Parse>
void for_every_truncation(const std::vector<std::uint8_t>& frame, Parse parse) {
    for (std::size_t n = 0; n < frame.size(); ++n) {
        const std::vector<std::uint8_t> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
        SCOPED_TRACE(n);
        parse(std::span<const std::uint8_t>(prefix));
    }
}

TEST(Nd, TruncatedFramesAreRejected) {
    for (const auto* frame : {&kKernelNs, &kKernelNa, &kKernelDadNs}) {
        for_every_truncation(*frame, [](std::span<const std::uint8_t> f) {
            EXPECT_NE(parse_nd(f).status, NdParseStatus::Ok);
        });
    }
}

TEST(Nd, InvalidFieldsAreMalformed) {
    struct Case {
        const char* what;
        std::vector<std::uint8_t> base;
        void (*edit)(std::vector<std::uint8_t>&);
        bool refix_checksum;
    };
    const Case cases[] = {
        {"hop limit 254 (forwarded)", kKernelNs, [](auto& f) { f[21] = 254; }, false},
        {"bad checksum", kKernelNs, [](auto& f) { f[57] ^= 0x01; }, false},
        {"code 1", kKernelNs, [](auto& f) { f[55] = 1; }, true},
        {"multicast target", kKernelNs, [](auto& f) { f[62] = 0xFF; }, true},
        {"option length 0", kKernelNs, [](auto& f) { f[79] = 0; }, true},
        {"option runs past the message", kKernelNs, [](auto& f) { f[79] = 2; }, true},
        {"payload length past the frame", kKernelNs, [](auto& f) { f[19] = 0x28; }, false},
        {"payload length shorter than NS", kKernelNs, [](auto& f) { f[19] = 0x10; }, false},
        {"DAD with a source link-layer option",
         kKernelDadNs,
         [](auto& f) {
             f[78] = 1;  // the nonce option becomes an SLLA
         },
         true},
        {"DAD not to a solicited-node group",
         kKernelDadNs,
         [](auto& f) {
             f[49] = 0x02;  // ff02::2:ffb0:a2d6
         },
         true},
        {"solicited NA to a multicast address",
         kKernelNa,
         [](auto& f) {
             f[38] = 0xFF;
             f[39] = 0x02;
         },
         true},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        auto f = c.base;
        ASSERT_EQ(parse_nd(f).status, NdParseStatus::Ok);
        c.edit(f);
        if (c.refix_checksum) {
            fix_checksum(f);
        }
        EXPECT_EQ(parse_nd(f).status, NdParseStatus::Malformed);
    }
}

TEST(Arp, BuildsTheKernelsRequestAndReplyPadded) {
    const ArpMessage request{
        .eth_dst = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
        .eth_src = kMacA,
        .op = ArpOp::Request,
        .sender_mac = kMacA,
        .sender_ip = {192, 0, 2, 1},
        .target_mac = {},
        .target_ip = {192, 0, 2, 2},
    };
    const ArpMessage reply{
        .eth_dst = kMacA,
        .eth_src = kMacB,
        .op = ArpOp::Reply,
        .sender_mac = kMacB,
        .sender_ip = {192, 0, 2, 2},
        .target_mac = kMacA,
        .target_ip = {192, 0, 2, 1},
    };
    for (const auto& [m, kernel] : {std::pair{request, kKernelArpRequest}, std::pair{reply, kKernelArpReply}}) {
        auto expected = kernel;
        expected.resize(kArpFrameSize, 0);
        EXPECT_EQ(build(m), expected);
    }
}

TEST(Arp, ParsesKernelFrames) {
    const auto request = parse_arp(kKernelArpRequest);
    ASSERT_TRUE(request.has_value());
    EXPECT_EQ(request->op, ArpOp::Request);
    EXPECT_EQ(request->sender_mac, kMacA);
    EXPECT_EQ(request->sender_ip, (Ipv4Addr{192, 0, 2, 1}));
    EXPECT_EQ(request->target_ip, (Ipv4Addr{192, 0, 2, 2}));
    const auto reply = parse_arp(kKernelArpReply);
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->op, ArpOp::Reply);
    EXPECT_EQ(reply->eth_dst, kMacA);
    EXPECT_EQ(reply->sender_mac, kMacB);
}

TEST(Arp, TruncatedAndForeignFramesAreRejected) {
    for_every_truncation(kKernelArpRequest, [](std::span<const std::uint8_t> f) {
        EXPECT_FALSE(parse_arp(f).has_value());
    });
    const std::pair<std::size_t, std::uint8_t> edits[] = {
        {15, 6},     // hardware type 6 (IEEE 802)
        {17, 0xDD},  // protocol type 0x86DD
        {18, 8},     // hardware length 8
        {19, 16},    // protocol length 16
        {21, 3},     // RARP request
        {13, 0x35},  // EtherType 0x8035 (RARP)
    };
    for (const auto& [at, value] : edits) {
        auto f = kKernelArpRequest;
        f[at] = value;
        EXPECT_FALSE(parse_arp(f).has_value()) << "byte " << at << " = " << int{value};
    }
}

}  // namespace
}  // namespace uroce::net
