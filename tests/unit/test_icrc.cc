#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "capture_reader.h"
#include "random_packet.h"
#include "reference.h"
#include "wire/build.h"
#include "wire/icrc.h"
#include "wire/parse.h"

namespace uroce::wire {
namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::uint32_t load_le32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

TEST(Crc32, StandardCheckValue) {
    EXPECT_EQ(crc32_ieee(0, bytes_of("123456789")), 0xCBF43926u);
    EXPECT_EQ(test::crc32_ref(0, bytes_of("123456789")), 0xCBF43926u);
    EXPECT_EQ(crc32_ieee(0, {}), 0u);
    EXPECT_EQ(crc32_ieee(0, bytes_of("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
}

TEST(Crc32, MatchesBitwiseReferenceOnRandomData) {
    test::Rng rng(0x1C4C);
    std::vector<std::uint8_t> data(5000);
    for (auto& b : data) {
        b = static_cast<std::uint8_t>(rng());
    }
    for (std::size_t len = 0; len <= 300; ++len) {
        const auto s = std::span(data).subspan(rng() % (data.size() - len), len);
        EXPECT_EQ(crc32_ieee(0, s), test::crc32_ref(0, s)) << "length " << len;
    }
    EXPECT_EQ(crc32_ieee(0, data), test::crc32_ref(0, data));
    for (std::size_t split : {0u, 1u, 7u, 64u, 1023u, 4999u, 5000u}) {
        const auto head = std::span(data).first(split);
        const auto tail = std::span(data).subspan(split);
        EXPECT_EQ(crc32_ieee(crc32_ieee(0, head), tail), test::crc32_ref(0, data)) << "split " << split;
    }
}

TEST(Icrc, LoadAndStoreAreLittleEndian) {
    std::array<std::uint8_t, 6> buf{0xEE, 0, 0, 0, 0, 0xEE};
    icrc_store(buf.data() + 1, 0x11223344);
    EXPECT_EQ(buf, (std::array<std::uint8_t, 6>{0xEE, 0x44, 0x33, 0x22, 0x11, 0xEE}));
    EXPECT_EQ(icrc_load(buf.data() + 1), 0x11223344u);
    const std::array<std::uint8_t, 4> wire_bytes = {0x27, 0xA1, 0xF2, 0xC9};
    EXPECT_EQ(icrc_load(wire_bytes.data()), 0xC9F2A127u);
}

TEST(Icrc, EveryCapturedFrameVerifies) {
    std::size_t frames = 0;
    for (const auto& capture : test::rxe_captures()) {
        for (std::size_t i = 0; i < capture.frames.size(); ++i) {
            SCOPED_TRACE(testing::Message() << capture.name << " frame " << i + 1);
            const auto& f = capture.frames[i];
            ASSERT_EQ(test::get16(f, 12), 0x0800);
            const std::size_t l3 = test::kEthLen;
            const std::size_t l3_end = l3 + test::get16(f, l3 + 2);
            ASSERT_LE(l3_end, f.size());
            const auto covered = std::span(f).subspan(l3, l3_end - test::kIcrcLen - l3);
            const std::uint32_t carried = load_le32(f.data() + l3_end - test::kIcrcLen);
            EXPECT_EQ(icrc_compute(IpVersion::V4, covered), carried);
            EXPECT_EQ(test::icrc_ref(false, covered), carried);
            ++frames;
        }
    }
    EXPECT_GT(frames, 0u);
}

struct Built {
    std::vector<std::uint8_t> frame;
    std::vector<std::uint8_t> payload;
    std::size_t l3 = 0;
};

Built build_random(test::Rng& rng, std::uint8_t opcode, IpVersion ip, bool vlan) {
    Built b;
    PacketFields f = test::random_fields(rng, {opcode, ip, vlan, 80}, b.payload);
    f.ip.traffic_class |= 0x05;
    f.ip.ttl |= 0x81;
    f.ip.flow_label |= 0x10001;
    f.bth.resv8a |= 0x40;
    f.udp.checksum |= 0x0101;
    b.frame.resize(frame_length(f));
    const BuildResult r = build_frame(f, b.frame);
    EXPECT_EQ(r.status, BuildStatus::Ok);
    b.l3 = test::kEthLen + (vlan ? test::kVlanLen : 0);
    return b;
}

TEST(Icrc, MatchesReferenceOnBuiltFrames) {
    test::Rng rng(0xB17D);
    for (std::uint8_t opcode : test::buildable_opcodes()) {
        for (IpVersion ip : {IpVersion::V4, IpVersion::V6}) {
            for (bool vlan : {false, true}) {
                for (int round = 0; round < 4; ++round) {
                    SCOPED_TRACE(testing::Message() << "opcode " << int(opcode) << " ipv6 " << (ip == IpVersion::V6)
                                                    << " vlan " << vlan << " round " << round);
                    const Built b = build_random(rng, opcode, ip, vlan);
                    const auto covered =
                        std::span(b.frame).subspan(b.l3, b.frame.size() - test::kIcrcLen - b.l3);
                    const std::uint32_t ref = test::icrc_ref(ip == IpVersion::V6, covered);
                    EXPECT_EQ(icrc_compute(ip, covered), ref);
                    EXPECT_EQ(load_le32(b.frame.data() + b.frame.size() - test::kIcrcLen), ref);
                }
            }
        }
    }
}

// Icrc::LeaveOut writes a zero ICRC and nothing else differs; seal_icrc
// then makes the frame the one Icrc::Compute builds.
TEST(Icrc, LeftOutThenSealedIsTheComputedFrame) {
    test::Rng rng(0x5EA1);
    for (std::uint8_t opcode : test::buildable_opcodes()) {
        for (IpVersion ip : {IpVersion::V4, IpVersion::V6}) {
            SCOPED_TRACE(testing::Message() << "opcode " << int(opcode) << " ipv6 " << (ip == IpVersion::V6));
            std::vector<std::uint8_t> payload;
            const PacketFields f = test::random_fields(rng, {opcode, ip, false, 80}, payload);
            std::vector<std::uint8_t> computed(frame_length(f)), left_out(frame_length(f), 0xEE);
            ASSERT_EQ(build_frame(f, computed).status, BuildStatus::Ok);
            ASSERT_EQ(build_frame(f, left_out, Icrc::LeaveOut).status, BuildStatus::Ok);
            EXPECT_EQ(load_le32(left_out.data() + left_out.size() - test::kIcrcLen), 0u);
            EXPECT_TRUE(std::equal(computed.begin(), computed.end() - test::kIcrcLen, left_out.begin()));
            ASSERT_TRUE(seal_icrc(left_out));
            EXPECT_EQ(left_out, computed);
        }
    }
    std::vector<std::uint8_t> not_roce(64, 0);
    EXPECT_FALSE(seal_icrc(not_roce));
    EXPECT_EQ(not_roce, std::vector<std::uint8_t>(64, 0)) << "a frame that does not parse is left alone";
}

void check_masking(IpVersion ip) {
    test::Rng rng(ip == IpVersion::V4 ? 0x4A : 0x6A);
    const Built b = build_random(rng, 0x0B, ip, false);
    const bool v6 = ip == IpVersion::V6;
    const std::size_t covered_len = b.frame.size() - test::kIcrcLen - b.l3;
    std::vector<std::uint8_t> covered(b.frame.begin() + static_cast<std::ptrdiff_t>(b.l3),
                                      b.frame.begin() + static_cast<std::ptrdiff_t>(b.l3 + covered_len));
    const std::uint32_t base = icrc_compute(ip, covered);
    ASSERT_EQ(base, test::icrc_ref(v6, covered));
    std::size_t masked_bits = 0;
    for (std::size_t i = 0; i < covered.size(); ++i) {
        const std::uint8_t mask = test::icrc_mask_bits(v6, i);
        for (int bit = 0; bit < 8; ++bit) {
            const auto flip = static_cast<std::uint8_t>(1u << bit);
            covered[i] ^= flip;
            if ((mask & flip) != 0) {
                EXPECT_EQ(icrc_compute(ip, covered), base) << "masked byte " << i << " bit " << bit;
                ++masked_bits;
            } else {
                EXPECT_NE(icrc_compute(ip, covered), base) << "covered byte " << i << " bit " << bit;
            }
            covered[i] ^= flip;
        }
    }
    EXPECT_EQ(masked_bits, v6 ? 4u + 24u + 8u + 16u + 8u : 8u + 8u + 16u + 16u + 8u);
}

TEST(Icrc, Ipv4MaskedFieldsOnlyAreIgnored) { check_masking(IpVersion::V4); }

TEST(Icrc, Ipv6MaskedFieldsOnlyAreIgnored) { check_masking(IpVersion::V6); }

TEST(Icrc, MaskedFieldsWithArbitraryValues) {
    test::Rng rng(0x3A5);
    for (IpVersion ip : {IpVersion::V4, IpVersion::V6}) {
        const bool v6 = ip == IpVersion::V6;
        const Built b = build_random(rng, 0x64, ip, false);
        std::vector<std::uint8_t> covered(b.frame.begin() + static_cast<std::ptrdiff_t>(b.l3),
                                          b.frame.end() - static_cast<std::ptrdiff_t>(test::kIcrcLen));
        const std::uint32_t base = icrc_compute(ip, covered);
        for (int round = 0; round < 200; ++round) {
            for (std::size_t i = 0; i < covered.size(); ++i) {
                const std::uint8_t mask = test::icrc_mask_bits(v6, i);
                covered[i] = static_cast<std::uint8_t>((covered[i] & ~mask) | (rng() & mask));
            }
            ASSERT_EQ(icrc_compute(ip, covered), base) << "ipv6 " << v6 << " round " << round;
        }
    }
}

}  // namespace
}  // namespace uroce::wire
