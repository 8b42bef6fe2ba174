#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "capture_reader.h"
#include "reference.h"
#include "wire/headers.h"
#include "wire/ip_checksum.h"

namespace uroce::wire {
namespace {

template <typename H, std::size_t N>
H from_bytes(const std::array<std::uint8_t, N>& bytes) {
    static_assert(sizeof(H) == N);
    return std::bit_cast<H>(bytes);
}

TEST(Headers, EthernetAndVlanOffsets) {
    EXPECT_EQ(offsetof(EthHdr, dst), 0u);
    EXPECT_EQ(offsetof(EthHdr, src), 6u);
    EXPECT_EQ(offsetof(EthHdr, ether_type), 12u);
    EXPECT_EQ(sizeof(EthHdr), 14u);
    EXPECT_EQ(offsetof(VlanTag, tci), 0u);
    EXPECT_EQ(offsetof(VlanTag, ether_type), 2u);
    EXPECT_EQ(sizeof(VlanTag), 4u);
}

TEST(Headers, Ipv4Offsets) {
    EXPECT_EQ(offsetof(Ipv4Hdr, version_ihl), 0u);
    EXPECT_EQ(offsetof(Ipv4Hdr, tos), 1u);
    EXPECT_EQ(offsetof(Ipv4Hdr, total_length), 2u);
    EXPECT_EQ(offsetof(Ipv4Hdr, id), 4u);
    EXPECT_EQ(offsetof(Ipv4Hdr, flags_frag), 6u);
    EXPECT_EQ(offsetof(Ipv4Hdr, ttl), 8u);
    EXPECT_EQ(offsetof(Ipv4Hdr, protocol), 9u);
    EXPECT_EQ(offsetof(Ipv4Hdr, checksum), 10u);
    EXPECT_EQ(offsetof(Ipv4Hdr, src), 12u);
    EXPECT_EQ(offsetof(Ipv4Hdr, dst), 16u);
    EXPECT_EQ(sizeof(Ipv4Hdr), 20u);
}

TEST(Headers, Ipv6Offsets) {
    EXPECT_EQ(offsetof(Ipv6Hdr, vtc_flow), 0u);
    EXPECT_EQ(offsetof(Ipv6Hdr, payload_length), 4u);
    EXPECT_EQ(offsetof(Ipv6Hdr, next_header), 6u);
    EXPECT_EQ(offsetof(Ipv6Hdr, hop_limit), 7u);
    EXPECT_EQ(offsetof(Ipv6Hdr, src), 8u);
    EXPECT_EQ(offsetof(Ipv6Hdr, dst), 24u);
    EXPECT_EQ(sizeof(Ipv6Hdr), 40u);
}

TEST(Headers, UdpOffsets) {
    EXPECT_EQ(offsetof(UdpHdr, src_port), 0u);
    EXPECT_EQ(offsetof(UdpHdr, dst_port), 2u);
    EXPECT_EQ(offsetof(UdpHdr, length), 4u);
    EXPECT_EQ(offsetof(UdpHdr, checksum), 6u);
    EXPECT_EQ(sizeof(UdpHdr), 8u);
}

TEST(Headers, BthOffsets) {
    EXPECT_EQ(offsetof(Bth, opcode), 0u);
    EXPECT_EQ(offsetof(Bth, flags), 1u);
    EXPECT_EQ(offsetof(Bth, pkey), 2u);
    EXPECT_EQ(offsetof(Bth, resv8a), 4u);
    EXPECT_EQ(offsetof(Bth, dest_qp), 5u);
    EXPECT_EQ(offsetof(Bth, ack_req_resv7), 8u);
    EXPECT_EQ(offsetof(Bth, psn), 9u);
    EXPECT_EQ(sizeof(Bth), 12u);
}

TEST(Headers, ExtensionHeaderOffsets) {
    EXPECT_EQ(offsetof(Rdeth, reserved), 0u);
    EXPECT_EQ(offsetof(Rdeth, ee_context), 1u);
    EXPECT_EQ(sizeof(Rdeth), 4u);
    EXPECT_EQ(offsetof(Deth, qkey), 0u);
    EXPECT_EQ(offsetof(Deth, reserved), 4u);
    EXPECT_EQ(offsetof(Deth, src_qp), 5u);
    EXPECT_EQ(sizeof(Deth), 8u);
    EXPECT_EQ(offsetof(XrcEth, reserved), 0u);
    EXPECT_EQ(offsetof(XrcEth, xrc_srq), 1u);
    EXPECT_EQ(sizeof(XrcEth), 4u);
    EXPECT_EQ(offsetof(Reth, va), 0u);
    EXPECT_EQ(offsetof(Reth, rkey), 8u);
    EXPECT_EQ(offsetof(Reth, dma_length), 12u);
    EXPECT_EQ(sizeof(Reth), 16u);
    EXPECT_EQ(offsetof(AtomicEth, va), 0u);
    EXPECT_EQ(offsetof(AtomicEth, rkey), 8u);
    EXPECT_EQ(offsetof(AtomicEth, swap_add), 12u);
    EXPECT_EQ(offsetof(AtomicEth, compare), 20u);
    EXPECT_EQ(sizeof(AtomicEth), 28u);
    EXPECT_EQ(offsetof(Aeth, syndrome), 0u);
    EXPECT_EQ(offsetof(Aeth, msn), 1u);
    EXPECT_EQ(sizeof(Aeth), 4u);
    EXPECT_EQ(offsetof(AtomicAckEth, original), 0u);
    EXPECT_EQ(sizeof(AtomicAckEth), 8u);
    EXPECT_EQ(offsetof(ImmDt, data), 0u);
    EXPECT_EQ(sizeof(ImmDt), 4u);
    EXPECT_EQ(offsetof(Ieth, rkey), 0u);
    EXPECT_EQ(sizeof(Ieth), 4u);
    EXPECT_EQ(sizeof(CnpReserved), 16u);
}

TEST(Headers, AllHeadersHaveAlignmentOne) {
    EXPECT_EQ(alignof(EthHdr), 1u);
    EXPECT_EQ(alignof(VlanTag), 1u);
    EXPECT_EQ(alignof(Ipv4Hdr), 1u);
    EXPECT_EQ(alignof(Ipv6Hdr), 1u);
    EXPECT_EQ(alignof(UdpHdr), 1u);
    EXPECT_EQ(alignof(Bth), 1u);
    EXPECT_EQ(alignof(Deth), 1u);
    EXPECT_EQ(alignof(Reth), 1u);
    EXPECT_EQ(alignof(AtomicEth), 1u);
    EXPECT_EQ(alignof(Aeth), 1u);
    EXPECT_EQ(alignof(AtomicAckEth), 1u);
}

TEST(Headers, BthAccessors) {
    // Opcode 0x0A, SE=1 M=0 PadCnt=3 TVer=5, P_Key 0x8001, resv8a 0xC0,
    // QP 0x123456, AckReq=1, PSN 0xABCDEF.
    const auto h = from_bytes<Bth>(std::array<std::uint8_t, 12>{0x0A, 0xB5, 0x80, 0x01, 0xC0, 0x12, 0x34, 0x56,
                                                                0x80, 0xAB, 0xCD, 0xEF});
    EXPECT_EQ(h.opcode, 0x0A);
    EXPECT_TRUE(h.solicited());
    EXPECT_FALSE(h.mig_req());
    EXPECT_EQ(h.pad_count(), 3u);
    EXPECT_EQ(h.tver(), 5u);
    EXPECT_EQ(h.pkey.get(), 0x8001u);
    EXPECT_EQ(h.resv8a, 0xC0);
    EXPECT_EQ(h.dest_qp.get(), 0x123456u);
    EXPECT_TRUE(h.ack_req());
    EXPECT_EQ(h.resv7(), 0u);
    EXPECT_EQ(h.psn.get(), 0xABCDEFu);

    // SE=0 M=1 PadCnt=1 TVer=0; AckReq=0 with every reserved bit set.
    const auto g = from_bytes<Bth>(std::array<std::uint8_t, 12>{0x04, 0x50, 0xFF, 0xFF, 0, 0, 0, 1, 0x7F, 0, 0, 0});
    EXPECT_FALSE(g.solicited());
    EXPECT_TRUE(g.mig_req());
    EXPECT_EQ(g.pad_count(), 1u);
    EXPECT_EQ(g.tver(), 0u);
    EXPECT_FALSE(g.ack_req());
    EXPECT_EQ(g.resv7(), 0x7Fu);
    EXPECT_EQ(g.dest_qp.get(), 1u);
}

TEST(Headers, BthFlagConstantsMatchIba) {
    EXPECT_EQ(Bth::kSolicitedBit, 0x80);
    EXPECT_EQ(Bth::kMigReqBit, 0x40);
    EXPECT_EQ(Bth::kPadMask, 0x30);
    EXPECT_EQ(Bth::kPadShift, 4);
    EXPECT_EQ(Bth::kTverMask, 0x0F);
    EXPECT_EQ(Bth::kAckReqBit, 0x80);
}

TEST(Headers, Ipv4Accessors) {
    auto h = from_bytes<Ipv4Hdr>(std::array<std::uint8_t, 20>{0x45, 0xB8, 0x02, 0x34, 0x40, 0xB7, 0x40, 0x00, 64, 17,
                                                              0, 0, 10, 77, 0, 1, 10, 77, 0, 2});
    EXPECT_EQ(h.version(), 4u);
    EXPECT_EQ(h.header_length(), 20u);
    EXPECT_EQ(h.tos, 0xB8);
    EXPECT_EQ(h.total_length.get(), 564u);
    EXPECT_EQ(h.id.get(), 0x40B7u);
    EXPECT_EQ(h.flags_frag.get(), Ipv4Hdr::kDontFragment);
    EXPECT_EQ(h.protocol, kIpProtoUdp);
    EXPECT_EQ(h.src, (std::array<std::uint8_t, 4>{10, 77, 0, 1}));
    EXPECT_EQ(h.dst, (std::array<std::uint8_t, 4>{10, 77, 0, 2}));
    h.version_ihl = 0x4F;
    EXPECT_EQ(h.header_length(), 60u);
    h.version_ihl = 0x65;
    EXPECT_EQ(h.version(), 6u);
    EXPECT_EQ(Ipv4Hdr::kMoreFragments, 0x2000);
    EXPECT_EQ(Ipv4Hdr::kFragOffsetMask, 0x1FFF);
}

TEST(Headers, Ipv6Accessors) {
    std::array<std::uint8_t, 40> bytes{};
    bytes[0] = 0x6A;
    bytes[1] = 0xBC;
    bytes[2] = 0xDE;
    bytes[3] = 0xF1;
    bytes[4] = 0x01;
    bytes[5] = 0x02;
    bytes[6] = 17;
    bytes[7] = 63;
    bytes[8] = 0xFE;
    bytes[39] = 0x02;
    const auto h = from_bytes<Ipv6Hdr>(bytes);
    EXPECT_EQ(h.version(), 6u);
    EXPECT_EQ(h.traffic_class(), 0xAB);
    EXPECT_EQ(h.flow_label(), 0xCDEF1u);
    EXPECT_EQ(h.payload_length.get(), 0x0102u);
    EXPECT_EQ(h.next_header, 17);
    EXPECT_EQ(h.hop_limit, 63);
    EXPECT_EQ(h.src[0], 0xFE);
    EXPECT_EQ(h.dst[15], 0x02);
}

TEST(Headers, AethSyndromeKinds) {
    EXPECT_EQ(ack_kind(0x00), AckKind::Ack);
    EXPECT_EQ(ack_kind(0x1F), AckKind::Ack);
    EXPECT_EQ(ack_kind(0x20), AckKind::RnrNak);
    EXPECT_EQ(ack_kind(0x3F), AckKind::RnrNak);
    EXPECT_EQ(ack_kind(0x40), AckKind::Reserved);
    EXPECT_EQ(ack_kind(0x60), AckKind::Nak);
    EXPECT_EQ(ack_kind(0xE3), AckKind::Nak);
    EXPECT_EQ(ack_kind(0x80), AckKind::Ack);
    EXPECT_EQ(syndrome_value(0x7F), 0x1F);
    EXPECT_EQ(syndrome_value(0x2C), 0x0C);
    EXPECT_EQ(syndrome_value(0x60), 0x00);
}

TEST(Headers, AethSyndromeRoundTrip) {
    for (auto kind : {AckKind::Ack, AckKind::RnrNak, AckKind::Reserved, AckKind::Nak}) {
        for (std::uint8_t v = 0; v < 32; ++v) {
            const std::uint8_t s = make_syndrome(kind, v);
            EXPECT_EQ(s & 0x80, 0);
            EXPECT_EQ(ack_kind(s), kind);
            EXPECT_EQ(syndrome_value(s), v);
        }
    }
    EXPECT_EQ(make_syndrome(AckKind::Nak, 0x25), 0x65);
}

TEST(Headers, AethSyndromeValuesFromIba) {
    EXPECT_EQ(make_syndrome(AckKind::Ack, 0x1F), 0x1F);
    EXPECT_EQ(make_syndrome(AckKind::RnrNak, 0x0E), 0x2E);
    EXPECT_EQ(make_syndrome(AckKind::Nak, static_cast<std::uint8_t>(NakCode::PsnSequenceError)), 0x60);
    EXPECT_EQ(make_syndrome(AckKind::Nak, static_cast<std::uint8_t>(NakCode::InvalidRequest)), 0x61);
    EXPECT_EQ(make_syndrome(AckKind::Nak, static_cast<std::uint8_t>(NakCode::RemoteAccessError)), 0x62);
    EXPECT_EQ(make_syndrome(AckKind::Nak, static_cast<std::uint8_t>(NakCode::RemoteOperationalError)), 0x63);
    EXPECT_EQ(make_syndrome(AckKind::Nak, static_cast<std::uint8_t>(NakCode::InvalidRdRequest)), 0x64);
}

TEST(Headers, Ipv4MappedGids) {
    const Gid g = ipv4_mapped({192, 168, 1, 200});
    const Gid expected = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 168, 1, 200};
    EXPECT_EQ(g, expected);
    EXPECT_TRUE(is_ipv4_mapped(g));
    EXPECT_EQ(ipv4_of(g), (std::array<std::uint8_t, 4>{192, 168, 1, 200}));
    EXPECT_TRUE(is_ipv4_mapped(ipv4_mapped({0, 0, 0, 0})));

    Gid loopback{};
    loopback[15] = 1;
    EXPECT_FALSE(is_ipv4_mapped(loopback));
    Gid link_local{};
    link_local[0] = 0xFE;
    link_local[1] = 0x80;
    link_local[10] = 0xFF;
    link_local[11] = 0xFF;
    EXPECT_FALSE(is_ipv4_mapped(link_local));
    for (std::size_t i = 0; i < 12; ++i) {
        Gid bad = g;
        bad[i] ^= 0x01;
        EXPECT_FALSE(is_ipv4_mapped(bad)) << "byte " << i;
    }
}

constexpr std::array<std::uint8_t, 20> kRfcExampleHeader = {
    0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
    0xB8, 0x61, 0xC0, 0xA8, 0x00, 0x01, 0xC0, 0xA8, 0x00, 0xC7,
};

TEST(Headers, Ipv4ChecksumKnownHeader) {
    auto h = from_bytes<Ipv4Hdr>(kRfcExampleHeader);
    EXPECT_EQ(ipv4_header_checksum(h), 0xB861);
    h.checksum.set(0);
    EXPECT_EQ(ipv4_header_checksum(h), 0xB861);
    h.checksum.set(0x1234);
    EXPECT_EQ(ipv4_header_checksum(h), 0xB861);
    h.ttl = 0x3F;
    EXPECT_EQ(ipv4_header_checksum(h), 0xB961);
}

TEST(Headers, Ipv4ChecksumOfEveryCapturedHeader) {
    std::size_t checked = 0;
    for (const auto& capture : test::rxe_captures()) {
        for (std::size_t i = 0; i < capture.frames.size(); ++i) {
            const auto& f = capture.frames[i];
            ASSERT_GE(f.size(), test::kEthLen + test::kIpv4Len);
            ASSERT_EQ(test::get16(f, 12), kEtherTypeIpv4) << capture.name << " frame " << i + 1;
            const std::span<const std::uint8_t> ip(f.data() + test::kEthLen, test::kIpv4Len);
            ASSERT_EQ(test::ones_complement_sum(ip), 0xFFFF) << capture.name << " frame " << i + 1;
            Ipv4Hdr h;
            std::memcpy(&h, ip.data(), sizeof(h));
            EXPECT_EQ(ipv4_header_checksum(h), test::get16(ip, 10)) << capture.name << " frame " << i + 1;
            ++checked;
        }
    }
    EXPECT_GT(checked, 0u);
}

// RFC 1624: a computed checksum of 0x0000 may travel as 0xFFFF (both are
// ones'-complement zero), and Linux accepts either; so must the parser.
TEST(Ipv4Checksum, AcceptsBothRepresentationsOfZero) {
    Ipv4Hdr h{};
    h.version_ihl = 0x45;
    h.total_length.set(60);
    h.ttl = 64;
    h.protocol = kIpProtoUdp;
    // Choose the identification so the other nine words sum to 0xFFFF,
    // which makes the computed checksum 0x0000.
    const std::uint32_t others = 0x4500 + 60 + (64u << 8 | kIpProtoUdp);
    h.id.set(static_cast<std::uint16_t>(0xFFFF - others));
    ASSERT_EQ(ipv4_header_checksum(h), 0x0000);
    h.checksum.set(0x0000);
    EXPECT_TRUE(ipv4_checksum_ok(h));
    h.checksum.set(0xFFFF);
    EXPECT_TRUE(ipv4_checksum_ok(h));
    h.checksum.set(0x0001);
    EXPECT_FALSE(ipv4_checksum_ok(h));
}

}  // namespace
}  // namespace uroce::wire
