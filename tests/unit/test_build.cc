#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "capture_reader.h"
#include "printers.h"
#include "random_packet.h"
#include "reference.h"
#include "wire/build.h"
#include "wire/fields.h"
#include "wire/parse.h"

namespace uroce::wire {
namespace {

using test::get16;
using test::kBthLen;
using test::kEthLen;
using test::kIcrcLen;
using test::kIpv4Len;
using test::kIpv6Len;
using test::kUdpLen;
using test::kVlanLen;

using Bytes = std::vector<std::uint8_t>;

void expect_same_fields(const PacketFields& a, const PacketFields& b) {
    EXPECT_EQ(a.eth.dst, b.eth.dst);
    EXPECT_EQ(a.eth.src, b.eth.src);
    EXPECT_EQ(a.eth.vlan_tci, b.eth.vlan_tci);
    EXPECT_EQ(a.ip.version, b.ip.version);
    EXPECT_EQ(a.ip.src, b.ip.src);
    EXPECT_EQ(a.ip.dst, b.ip.dst);
    EXPECT_EQ(a.ip.traffic_class, b.ip.traffic_class);
    EXPECT_EQ(a.ip.ttl, b.ip.ttl);
    EXPECT_EQ(a.ip.ipv4_id, b.ip.ipv4_id);
    EXPECT_EQ(a.ip.dont_fragment, b.ip.dont_fragment);
    EXPECT_EQ(a.ip.flow_label, b.ip.flow_label);
    EXPECT_EQ(a.udp.src_port, b.udp.src_port);
    EXPECT_EQ(a.udp.checksum, b.udp.checksum);
    EXPECT_EQ(a.bth.opcode, b.bth.opcode);
    EXPECT_EQ(a.bth.solicited, b.bth.solicited);
    EXPECT_EQ(a.bth.mig_req, b.bth.mig_req);
    EXPECT_EQ(a.bth.tver, b.bth.tver);
    EXPECT_EQ(a.bth.pkey, b.bth.pkey);
    EXPECT_EQ(a.bth.resv8a, b.bth.resv8a);
    EXPECT_EQ(a.bth.dest_qp, b.bth.dest_qp);
    EXPECT_EQ(a.bth.ack_req, b.bth.ack_req);
    EXPECT_EQ(a.bth.resv7, b.bth.resv7);
    EXPECT_EQ(a.bth.psn.value(), b.bth.psn.value());
    EXPECT_EQ(a.ext.reth.va, b.ext.reth.va);
    EXPECT_EQ(a.ext.reth.rkey, b.ext.reth.rkey);
    EXPECT_EQ(a.ext.reth.dma_length, b.ext.reth.dma_length);
    EXPECT_EQ(a.ext.atomic_eth.va, b.ext.atomic_eth.va);
    EXPECT_EQ(a.ext.atomic_eth.rkey, b.ext.atomic_eth.rkey);
    EXPECT_EQ(a.ext.atomic_eth.swap_add, b.ext.atomic_eth.swap_add);
    EXPECT_EQ(a.ext.atomic_eth.compare, b.ext.atomic_eth.compare);
    EXPECT_EQ(a.ext.aeth.syndrome, b.ext.aeth.syndrome);
    EXPECT_EQ(a.ext.aeth.msn, b.ext.aeth.msn);
    EXPECT_EQ(a.ext.atomic_ack_original, b.ext.atomic_ack_original);
    EXPECT_EQ(a.ext.immediate, b.ext.immediate);
    EXPECT_EQ(a.ext.invalidate_rkey, b.ext.invalidate_rkey);
    EXPECT_EQ(a.ext.deth.qkey, b.ext.deth.qkey);
    EXPECT_EQ(a.ext.deth.src_qp, b.ext.deth.src_qp);
    EXPECT_TRUE(std::equal(a.payload.begin(), a.payload.end(), b.payload.begin(), b.payload.end()));
}

Bytes build(const PacketFields& f) {
    Bytes out(frame_length(f));
    const BuildResult r = build_frame(f, out);
    EXPECT_EQ(r.status, BuildStatus::Ok);
    EXPECT_EQ(r.length, out.size());
    return out;
}

std::size_t first_difference(const Bytes& a, const Bytes& b) {
    const auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(m.first - a.begin());
}

TEST(Build, CapturedFramesRebuildByteForByte) {
    std::size_t frames = 0;
    for (const auto& capture : test::rxe_captures()) {
        for (std::size_t i = 0; i < capture.frames.size(); ++i) {
            SCOPED_TRACE(testing::Message() << capture.name << " frame " << i + 1);
            const auto& orig = capture.frames[i];
            const ParseResult r = parse_frame(orig);
            ASSERT_TRUE(r.ok());
            const PacketFields f = fields_of(r.packet);
            ASSERT_EQ(frame_length(f), orig.size());
            Bytes out(orig.size());
            const BuildResult b = build_frame(f, out);
            ASSERT_EQ(b.status, BuildStatus::Ok);
            EXPECT_EQ(b.length, orig.size());
            ASSERT_EQ(out, orig) << "first difference at byte " << first_difference(out, orig);
            ++frames;
        }
    }
    EXPECT_GT(frames, 0u);
}

TEST(Build, CapturesUseTheBuilderDefaults) {
    const IpFields ip_defaults;
    const UdpFields udp_defaults;
    const BthFields bth_defaults;
    for (const auto& capture : test::rxe_captures()) {
        for (const auto& orig : capture.frames) {
            const ParseResult r = parse_frame(orig);
            ASSERT_TRUE(r.ok());
            const PacketFields f = fields_of(r.packet);
            EXPECT_EQ(f.ip.ttl, ip_defaults.ttl) << capture.name;
            EXPECT_EQ(f.ip.traffic_class, ip_defaults.traffic_class) << capture.name;
            EXPECT_EQ(f.ip.dont_fragment, ip_defaults.dont_fragment) << capture.name;
            EXPECT_EQ(f.udp.checksum, udp_defaults.checksum) << capture.name;
            EXPECT_EQ(f.bth.pkey, bth_defaults.pkey) << capture.name;
            EXPECT_GE(f.udp.src_port, 0xC000) << capture.name;
        }
    }
}

// Fields the IBA leaves to the sender, by offset from the IP header (IPv4):
// identification and UDP source port, plus the IPv4 header checksum and the
// ICRC, which cover them.
struct FreeField {
    const char* name;
    std::size_t offset;
    std::size_t size;
};
constexpr FreeField kIpv4Identification{"IPv4 identification", 4, 2};
constexpr FreeField kIpv4Checksum{"IPv4 header checksum", 10, 2};
constexpr FreeField kUdpSourcePort{"UDP source port", kIpv4Len, 2};

bool same_bytes(const Bytes& a, const Bytes& b, std::size_t off, std::size_t n) {
    return std::equal(a.begin() + static_cast<std::ptrdiff_t>(off), a.begin() + static_cast<std::ptrdiff_t>(off + n),
                      b.begin() + static_cast<std::ptrdiff_t>(off));
}

TEST(Build, DefaultsDifferOnlyInTheFreeFields) {
    std::size_t id_changed = 0;
    std::size_t port_changed = 0;
    for (const auto& capture : test::rxe_captures()) {
        for (std::size_t i = 0; i < capture.frames.size(); ++i) {
            SCOPED_TRACE(testing::Message() << capture.name << " frame " << i + 1);
            const Bytes& orig = capture.frames[i];
            const ParseResult r = parse_frame(orig);
            ASSERT_TRUE(r.ok());
            PacketFields f = fields_of(r.packet);
            f.ip.ipv4_id = IpFields{}.ipv4_id;
            f.udp.src_port = UdpFields{}.src_port;
            const Bytes rebuilt = build(f);
            ASSERT_EQ(rebuilt.size(), orig.size());

            const std::size_t l3 = kEthLen;
            const std::size_t icrc = orig.size() - kIcrcLen;
            std::set<std::size_t> allowed;
            for (const FreeField& ff : {kIpv4Identification, kIpv4Checksum, kUdpSourcePort}) {
                for (std::size_t k = 0; k < ff.size; ++k) {
                    allowed.insert(l3 + ff.offset + k);
                }
            }
            for (std::size_t k = 0; k < kIcrcLen; ++k) {
                allowed.insert(icrc + k);
            }
            for (std::size_t k = 0; k < orig.size(); ++k) {
                if (!allowed.contains(k)) {
                    ASSERT_EQ(rebuilt[k], orig[k]) << "byte " << k << " outside the free fields";
                }
            }

            const bool id_differs = get16(orig, l3 + kIpv4Identification.offset) != IpFields{}.ipv4_id;
            const bool port_differs = get16(orig, l3 + kUdpSourcePort.offset) != UdpFields{}.src_port;
            EXPECT_EQ(get16(rebuilt, l3 + kIpv4Identification.offset), IpFields{}.ipv4_id);
            EXPECT_EQ(get16(rebuilt, l3 + kUdpSourcePort.offset), UdpFields{}.src_port);
            EXPECT_EQ(!same_bytes(orig, rebuilt, l3 + kIpv4Checksum.offset, kIpv4Checksum.size), id_differs)
                << kIpv4Checksum.name;
            EXPECT_EQ(!same_bytes(orig, rebuilt, icrc, kIcrcLen), id_differs || port_differs) << "ICRC";
            EXPECT_EQ(test::ones_complement_sum(std::span(rebuilt).subspan(l3, kIpv4Len)), 0xFFFF);
            EXPECT_EQ(parse_and_verify(rebuilt).status, ParseStatus::Ok);
            id_changed += id_differs;
            port_changed += port_differs;
        }
    }
    EXPECT_GT(id_changed, 0u);
    EXPECT_GT(port_changed, 0u);
}

TEST(Build, RandomFramesParseBackToTheSameFields) {
    test::Rng rng(0xF1E1D);
    for (std::uint8_t opcode : test::buildable_opcodes()) {
        for (IpVersion ip : {IpVersion::V4, IpVersion::V6}) {
            for (bool vlan : {false, true}) {
                for (int round = 0; round < 3; ++round) {
                    SCOPED_TRACE(testing::Message() << "opcode " << int(opcode) << " ipv6 " << (ip == IpVersion::V6)
                                                    << " vlan " << vlan << " round " << round);
                    Bytes payload;
                    const PacketFields f = test::random_fields(rng, {opcode, ip, vlan, 200}, payload);
                    const Bytes frame = build(f);
                    const ParseResult r = parse_and_verify(frame);
                    ASSERT_EQ(r.status, ParseStatus::Ok);
                    const PacketFields back = fields_of(r.packet);
                    expect_same_fields(back, f);
                    EXPECT_EQ(build(back), frame);
                }
            }
        }
    }
}

std::size_t expected_pad(std::size_t n) {
    std::size_t p = 0;
    while ((n + p) % 4 != 0) {
        ++p;
    }
    return p;
}

TEST(Build, PadForPayloadSizes) {
    for (std::uint8_t opcode : {std::uint8_t{0x04}, std::uint8_t{0x64}}) {
        const std::size_t headers = opcode == 0x04 ? kBthLen : kBthLen + 8;
        for (std::size_t n = 0; n < 8; ++n) {
            SCOPED_TRACE(testing::Message() << "opcode " << int(opcode) << " payload " << n);
            const Bytes payload(n, 0xAB);
            PacketFields f;
            f.bth.opcode = opcode;
            f.payload = payload;
            const std::size_t pad = expected_pad(n);
            const std::size_t bth = kEthLen + kIpv4Len + kUdpLen;
            EXPECT_EQ(frame_length(f), bth + headers + n + pad + kIcrcLen);
            const Bytes frame = build(f);
            ASSERT_EQ(frame.size(), bth + headers + n + pad + kIcrcLen);
            EXPECT_EQ((frame[bth + 1] >> 4) & 3, static_cast<int>(pad));
            for (std::size_t k = 0; k < n; ++k) {
                EXPECT_EQ(frame[bth + headers + k], 0xAB);
            }
            for (std::size_t k = 0; k < pad; ++k) {
                EXPECT_EQ(frame[bth + headers + n + k], 0) << "pad byte " << k;
            }
            const ParseResult r = parse_and_verify(frame);
            ASSERT_EQ(r.status, ParseStatus::Ok);
            EXPECT_EQ(r.packet.payload().size(), n);
            EXPECT_EQ(r.packet.pad(), pad);
        }
    }
}

TEST(Build, FrameLengthEqualsBytesWritten) {
    test::Rng rng(0x1E57);
    for (std::uint8_t opcode : test::buildable_opcodes()) {
        for (IpVersion ip : {IpVersion::V4, IpVersion::V6}) {
            for (bool vlan : {false, true}) {
                SCOPED_TRACE(testing::Message() << "opcode " << int(opcode) << " ipv6 " << (ip == IpVersion::V6)
                                                << " vlan " << vlan);
                Bytes payload;
                const PacketFields f = test::random_fields(rng, {opcode, ip, vlan, 50}, payload);
                const std::size_t expected = kEthLen + (vlan ? kVlanLen : 0) +
                                             (ip == IpVersion::V4 ? kIpv4Len : kIpv6Len) + kUdpLen +
                                             opcode_info(opcode).header_length + payload.size() +
                                             expected_pad(payload.size()) + kIcrcLen;
                EXPECT_EQ(frame_length(f), expected);
                Bytes out(expected + 16, 0xEE);
                const BuildResult r = build_frame(f, out);
                ASSERT_EQ(r.status, BuildStatus::Ok);
                EXPECT_EQ(r.length, expected);
                EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(expected), out.end(),
                                        [](std::uint8_t b) { return b == 0xEE; }));
                if (ip == IpVersion::V4) {
                    const std::size_t l3 = kEthLen + (vlan ? kVlanLen : 0);
                    EXPECT_EQ(test::ones_complement_sum(std::span(out).subspan(l3, kIpv4Len)), 0xFFFF);
                }
            }
        }
    }
}

TEST(Build, Ipv4HeaderChecksumVerifies) {
    test::Rng rng(0xC5);
    for (int round = 0; round < 500; ++round) {
        Bytes payload;
        const PacketFields f = test::random_fields(rng, {0x0A, IpVersion::V4, (round & 1) != 0, 40}, payload);
        const Bytes frame = build(f);
        const std::size_t l3 = kEthLen + (f.eth.vlan_tci ? kVlanLen : 0);
        ASSERT_EQ(test::ones_complement_sum(std::span(frame).subspan(l3, kIpv4Len)), 0xFFFF) << "round " << round;
    }
}

void append16(Bytes& b, std::uint16_t v) {
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
}

void append_icrc(Bytes& b, std::size_t l3, bool ipv6) {
    const std::uint32_t icrc = test::icrc_ref(ipv6, std::span(b).subspan(l3));
    for (int k = 0; k < 4; ++k) {
        b.push_back(static_cast<std::uint8_t>(icrc >> (8 * k)));
    }
}

TEST(Build, HandLaidVlanIpv4WriteOnlyWithImmediate) {
    const Bytes payload = {'h', 'e', 'l', 'l', 'o'};
    PacketFields f;
    f.eth.dst = {0x02, 0, 0, 0, 0, 0x0B};
    f.eth.src = {0x02, 0, 0, 0, 0, 0x0A};
    f.eth.vlan_tci = 0x6005;
    f.ip.src = ipv4_mapped({10, 0, 0, 1});
    f.ip.dst = ipv4_mapped({10, 0, 0, 2});
    f.ip.traffic_class = 0x02;
    f.ip.ipv4_id = 0x1234;
    f.udp.src_port = 0xC001;
    f.bth.opcode = 0x0B;
    f.bth.solicited = true;
    f.bth.dest_qp = 0x11;
    f.bth.ack_req = true;
    f.bth.psn = Psn(0x102);
    f.ext.reth = {0x0000123456789ABC, 0xDEADBEEF, 5};
    f.ext.immediate = 0xCAFEF00D;
    f.payload = payload;

    Bytes e = {0x02, 0, 0, 0, 0, 0x0B, 0x02, 0, 0, 0, 0, 0x0A, 0x81, 0x00, 0x60, 0x05, 0x08, 0x00};
    const std::size_t l3 = e.size();
    e.insert(e.end(), {0x45, 0x02, 0x00, 72, 0x12, 0x34, 0x40, 0x00, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2});
    test::put16(e, l3 + 10, static_cast<std::uint16_t>(~test::ones_complement_sum(std::span(e).subspan(l3))));
    e.insert(e.end(), {0xC0, 0x01, 0x12, 0xB7, 0x00, 52, 0x00, 0x00});
    e.insert(e.end(), {0x0B, 0xB0, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x02});
    e.insert(e.end(), {0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 5});
    e.insert(e.end(), {0xCA, 0xFE, 0xF0, 0x0D});
    e.insert(e.end(), payload.begin(), payload.end());
    e.insert(e.end(), {0, 0, 0});
    append_icrc(e, l3, false);
    ASSERT_EQ(e.size(), 18u + 72u);

    const Bytes built = build(f);
    EXPECT_EQ(built, e) << "first difference at byte " << first_difference(built, e);
}

TEST(Build, HandLaidIpv6UdSendOnlyWithImmediate) {
    const Bytes payload = {1, 2, 3, 4, 5, 6, 7, 8};
    PacketFields f;
    f.eth.dst = {0x02, 0, 0, 0, 0, 0x0B};
    f.eth.src = {0x02, 0, 0, 0, 0, 0x0A};
    f.ip.version = IpVersion::V6;
    f.ip.src = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    f.ip.dst = {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    f.ip.traffic_class = 0xA4;
    f.ip.flow_label = 0x12345;
    f.ip.ttl = 0x20;
    f.udp.src_port = 0xD00D;
    f.udp.checksum = 0x7777;
    f.bth.opcode = 0x65;
    f.bth.mig_req = true;
    f.bth.pkey = 0x8001;
    f.bth.resv8a = 0x40;
    f.bth.dest_qp = 0xABCDEF;
    f.bth.psn = Psn(0xFFFFFF);
    f.ext.deth = {0x11111111, 0x000003};
    f.ext.immediate = 0x01020304;
    f.payload = payload;

    Bytes e = {0x02, 0, 0, 0, 0, 0x0B, 0x02, 0, 0, 0, 0, 0x0A, 0x86, 0xDD};
    const std::size_t l3 = e.size();
    const std::uint16_t udp_len = 8 + 12 + 8 + 4 + 8 + 4;
    e.insert(e.end(), {0x6A, 0x41, 0x23, 0x45});
    append16(e, udp_len);
    e.insert(e.end(), {17, 0x20});
    e.insert(e.end(), f.ip.src.begin(), f.ip.src.end());
    e.insert(e.end(), f.ip.dst.begin(), f.ip.dst.end());
    e.insert(e.end(), {0xD0, 0x0D, 0x12, 0xB7});
    append16(e, udp_len);
    e.insert(e.end(), {0x77, 0x77});
    e.insert(e.end(), {0x65, 0x40, 0x80, 0x01, 0x40, 0xAB, 0xCD, 0xEF, 0x00, 0xFF, 0xFF, 0xFF});
    e.insert(e.end(), {0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x03});
    e.insert(e.end(), {0x01, 0x02, 0x03, 0x04});
    e.insert(e.end(), payload.begin(), payload.end());
    append_icrc(e, l3, true);

    const Bytes built = build(f);
    EXPECT_EQ(built, e) << "first difference at byte " << first_difference(built, e);
}

TEST(Build, UnsupportedOpcodes) {
    Bytes out(4096);
    for (std::uint8_t opcode : {std::uint8_t{0x15}, std::uint8_t{0x18}, std::uint8_t{0x2C}, std::uint8_t{0x40},
                                std::uint8_t{0x4C}, std::uint8_t{0x66}, std::uint8_t{0xB5}, std::uint8_t{0xFF}}) {
        PacketFields f;
        f.bth.opcode = opcode;
        const BuildResult r = build_frame(f, out);
        EXPECT_EQ(r.status, BuildStatus::UnsupportedOpcode) << int(opcode);
        EXPECT_EQ(r.length, 0u);
    }
}

TEST(Build, PayloadNotAllowed) {
    const Bytes payload(4, 1);
    Bytes out(4096);
    for (std::uint8_t opcode : {std::uint8_t{0x0C}, std::uint8_t{0x11}, std::uint8_t{0x12}, std::uint8_t{0x13},
                                std::uint8_t{0x14}, std::uint8_t{0x81}}) {
        PacketFields f;
        f.bth.opcode = opcode;
        f.payload = payload;
        EXPECT_EQ(build_frame(f, out).status, BuildStatus::PayloadNotAllowed) << int(opcode);
        f.payload = {};
        EXPECT_EQ(build_frame(f, out).status, BuildStatus::Ok) << int(opcode);
    }
}

TEST(Build, BufferTooSmall) {
    const Bytes payload(100, 7);
    PacketFields f;
    f.bth.opcode = 0x04;
    f.payload = payload;
    const std::size_t n = frame_length(f);
    Bytes out(n - 1);
    const BuildResult r = build_frame(f, out);
    EXPECT_EQ(r.status, BuildStatus::BufferTooSmall);
    EXPECT_EQ(r.length, 0u);
    EXPECT_EQ(build_frame(f, std::span<std::uint8_t>{}).status, BuildStatus::BufferTooSmall);
    out.resize(n);
    EXPECT_EQ(build_frame(f, out).status, BuildStatus::Ok);
}

TEST(Build, TooLargeAtTheSixteenBitLimits) {
    // IPv4 total length = 20 + 8 + 12 + payload + pad + 4 must fit 16 bits;
    // IPv6 payload length = 8 + 12 + payload + pad + 4 likewise.
    Bytes big(70000, 0x5A);
    Bytes out(70100);
    struct Limit {
        IpVersion ip;
        std::size_t largest_ok;
    };
    for (const Limit& lim : {Limit{IpVersion::V4, 65488}, Limit{IpVersion::V6, 65508}}) {
        SCOPED_TRACE(lim.ip == IpVersion::V4 ? "ipv4" : "ipv6");
        PacketFields f;
        f.ip.version = lim.ip;
        f.bth.opcode = 0x04;
        f.payload = std::span(big).first(lim.largest_ok);
        const BuildResult ok = build_frame(f, out);
        ASSERT_EQ(ok.status, BuildStatus::Ok);
        EXPECT_EQ(parse_and_verify(std::span(out).first(ok.length)).status, ParseStatus::Ok);
        for (std::size_t extra = 1; extra <= 4; ++extra) {
            f.payload = std::span(big).first(lim.largest_ok + extra);
            EXPECT_EQ(build_frame(f, out).status, BuildStatus::TooLarge) << "payload " << lim.largest_ok + extra;
        }
        Bytes tiny(10);
        f.payload = std::span(big).first(lim.largest_ok + 4);
        EXPECT_EQ(build_frame(f, tiny).status, BuildStatus::TooLarge);
    }
}

}  // namespace
}  // namespace uroce::wire
