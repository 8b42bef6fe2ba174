#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "wire/build.h"
#include "wire/describe.h"
#include "wire/parse.h"

namespace uroce::wire {
namespace {

testing::AssertionResult has(const std::string& s, const std::string& part) {
    if (s.find(part) != std::string::npos) {
        return testing::AssertionSuccess();
    }
    return testing::AssertionFailure() << "\"" << s << "\" does not contain \"" << part << "\"";
}

TEST(Describe, MacAddress) {
    EXPECT_EQ(to_string(MacAddr{0xf2, 0xa6, 0x22, 0x89, 0xbb, 0x84}), "f2:a6:22:89:bb:84");
    EXPECT_EQ(to_string(MacAddr{0, 1, 2, 0x0a, 0x0b, 0xff}), "00:01:02:0a:0b:ff");
}

TEST(Describe, Ipv4MappedGid) {
    EXPECT_EQ(ip_to_string(ipv4_mapped({10, 77, 0, 1})), "10.77.0.1");
    EXPECT_EQ(ip_to_string(ipv4_mapped({255, 255, 255, 255})), "255.255.255.255");
    EXPECT_EQ(ip_to_string(ipv4_mapped({0, 0, 0, 0})), "0.0.0.0");
}

TEST(Describe, Ipv6Gid) {
    EXPECT_EQ(ip_to_string(Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xf0, 0x25, 0x3f, 0xff, 0xfe, 0xed, 0x07, 0x1b}),
              "fe80::f025:3fff:feed:71b");
    EXPECT_EQ(ip_to_string(Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}), "::1");
    EXPECT_EQ(ip_to_string(Gid{}), "::");
    EXPECT_EQ(ip_to_string(Gid{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1}), "2001:db8::1:0:0:1");
    EXPECT_EQ(ip_to_string(Gid{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}), "2001:db8:0:1::1");
}

TEST(Describe, SyndromeAck) {
    EXPECT_EQ(describe_syndrome(0x1F), "ack(credits=31)");
    EXPECT_EQ(describe_syndrome(0x00), "ack(credits=0)");
}

TEST(Describe, SyndromeRnrNak) {
    EXPECT_EQ(describe_syndrome(0x20), "rnr_nak(timer=0)");
    EXPECT_EQ(describe_syndrome(make_syndrome(AckKind::RnrNak, 14)), "rnr_nak(timer=14)");
}

TEST(Describe, SyndromeNakCodes) {
    EXPECT_EQ(describe_syndrome(0x60), "nak(psn_sequence_error)");
    EXPECT_EQ(describe_syndrome(0x61), "nak(invalid_request)");
    EXPECT_EQ(describe_syndrome(0x62), "nak(remote_access_error)");
    EXPECT_EQ(describe_syndrome(0x63), "nak(remote_operational_error)");
    EXPECT_EQ(describe_syndrome(0x64), "nak(invalid_rd_request)");
    EXPECT_EQ(describe_syndrome(0x65), "nak(reserved_5)");
    EXPECT_EQ(describe_syndrome(0x7F), "nak(reserved_31)");
    std::set<std::string> texts;
    for (std::uint8_t code = 0; code < 32; ++code) {
        const std::string s = describe_syndrome(make_syndrome(AckKind::Nak, code));
        EXPECT_TRUE(s.starts_with("nak(")) << s;
        EXPECT_TRUE(texts.insert(s).second) << s;
    }
}

TEST(Describe, SyndromeReservedKind) {
    EXPECT_EQ(describe_syndrome(0x40), "reserved(0x40)");
    EXPECT_EQ(describe_syndrome(0x5F), "reserved(0x5f)");
}

struct Built {
    std::vector<std::uint8_t> payload;
    std::vector<std::uint8_t> frame;
};

Built build(PacketFields f, std::size_t payload_len) {
    Built b;
    b.payload.assign(payload_len, 0x42);
    f.payload = b.payload;
    b.frame.resize(frame_length(f));
    EXPECT_EQ(build_frame(f, b.frame).status, BuildStatus::Ok);
    return b;
}

TEST(Describe, TransportOfRdmaWriteFirst) {
    PacketFields f;
    f.bth.opcode = 0x06;
    f.bth.dest_qp = 0xABCDE;
    f.bth.psn = Psn(4242);
    f.bth.ack_req = true;
    f.ext.reth = {0x7fafc33c6000, 0x254d, 65536};
    const Built b = build(f, 1024);
    const ParseResult r = parse_frame(b.frame);
    ASSERT_TRUE(r.ok());
    const std::string s = describe_transport(r.packet);
    EXPECT_TRUE(s.starts_with("RC_RDMA_WRITE_FIRST")) << s;
    EXPECT_TRUE(has(s, "qp=0x0abcde"));
    EXPECT_TRUE(has(s, "psn=4242"));
    EXPECT_TRUE(has(s, "ackreq"));
    EXPECT_FALSE(has(s, " se"));
    EXPECT_TRUE(has(s, "reth(va=0x7fafc33c6000 rkey=0x0000254d len=65536)"));
    EXPECT_FALSE(has(s, "aeth"));
}

TEST(Describe, TransportOfAtomicAcknowledge) {
    PacketFields f;
    f.bth.opcode = 0x12;
    f.bth.dest_qp = 0x38;
    f.bth.psn = Psn(11083501);
    f.ext.aeth = {make_syndrome(AckKind::Nak, 2), 7};
    f.ext.atomic_ack_original = 0x02510a98ffd6996b;
    const Built b = build(f, 0);
    const ParseResult r = parse_frame(b.frame);
    ASSERT_TRUE(r.ok());
    const std::string s = describe_transport(r.packet);
    EXPECT_TRUE(s.starts_with("RC_ATOMIC_ACKNOWLEDGE")) << s;
    EXPECT_TRUE(has(s, "qp=0x000038"));
    EXPECT_TRUE(has(s, "psn=11083501"));
    EXPECT_TRUE(has(s, "aeth(syndrome=0x62 nak(remote_access_error) msn=7)"));
    EXPECT_TRUE(has(s, "atomicacketh(orig=0x2510a98ffd6996b)"));
    EXPECT_LT(s.find("aeth("), s.find("atomicacketh("));
}

TEST(Describe, TransportOfUdSendWithImmediate) {
    PacketFields f;
    f.bth.opcode = 0x65;
    f.bth.solicited = true;
    f.bth.dest_qp = 0x3a;
    f.bth.psn = Psn(3495278);
    f.ext.deth = {0x11111111, 0x3a};
    f.ext.immediate = 0xdeadbeef;
    const Built b = build(f, 64);
    const ParseResult r = parse_frame(b.frame);
    ASSERT_TRUE(r.ok());
    const std::string s = describe_transport(r.packet);
    EXPECT_TRUE(s.starts_with("UD_SEND_ONLY_WITH_IMMEDIATE")) << s;
    EXPECT_TRUE(has(s, " se"));
    EXPECT_TRUE(has(s, "deth(qkey=0x11111111 src_qp=0x00003a)"));
    EXPECT_TRUE(has(s, "immdt(0xdeadbeef)"));
    EXPECT_LT(s.find("deth("), s.find("immdt("));
}

TEST(Describe, TransportOfCompareSwapAndInvalidate) {
    PacketFields f;
    f.bth.opcode = 0x13;
    f.ext.atomic_eth = {0x5584eada2000, 0x29c1, 0x10, 0x20};
    Built b = build(f, 0);
    ParseResult r = parse_frame(b.frame);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(has(describe_transport(r.packet),
                    "atomiceth(va=0x5584eada2000 rkey=0x000029c1 swap_add=0x10 compare=0x20)"));

    f = PacketFields{};
    f.bth.opcode = 0x17;
    f.ext.invalidate_rkey = 0x1234;
    b = build(f, 8);
    r = parse_frame(b.frame);
    ASSERT_TRUE(r.ok());
    const std::string s = describe_transport(r.packet);
    EXPECT_TRUE(s.starts_with("RC_SEND_ONLY_WITH_INVALIDATE")) << s;
    EXPECT_TRUE(has(s, "ieth(rkey=0x00001234)"));
}

TEST(Describe, BthFields) {
    Bth h{};
    h.opcode = 0x0A;
    h.flags = 0xB0;
    h.pkey.set(0xFFFF);
    h.dest_qp.set(0x12);
    h.ack_req_resv7 = 0x80;
    h.psn.set(99);
    const std::string s = to_string(h);
    EXPECT_TRUE(has(s, "opcode=0x0a"));
    EXPECT_TRUE(has(s, "se=1"));
    EXPECT_TRUE(has(s, "m=0"));
    EXPECT_TRUE(has(s, "pad=3"));
    EXPECT_TRUE(has(s, "pkey=0xffff"));
    EXPECT_TRUE(has(s, "qp=0x000012"));
    EXPECT_TRUE(has(s, "a=1"));
    EXPECT_TRUE(has(s, "psn=99"));
}

}  // namespace
}  // namespace uroce::wire
