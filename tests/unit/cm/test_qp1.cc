// CM MADs on QP1: the frames carry them as Linux does, and every way a frame
// can fail to be a CM MAD has its own status.
#include <gtest/gtest.h>

#include <vector>

#include "cm/describe.h"
#include "cm/qp1.h"
#include "wire/icrc.h"
#include "wire/parse.h"

namespace uroce::cm {
namespace {

CmFrameAddress v4_address() {
    CmFrameAddress a;
    a.eth.src = {0x52, 0x54, 0, 0x12, 0x34, 0x56};
    a.eth.dst = {0x52, 0x54, 0, 0x65, 0x43, 0x21};
    a.ip.version = wire::IpVersion::V4;
    a.ip.src = wire::ipv4_mapped({10, 0, 0, 1});
    a.ip.dst = wire::ipv4_mapped({10, 0, 0, 2});
    a.udp_src_port = 0xC123;
    a.psn = 7;
    return a;
}

MadBytes sample_req_mad() {
    ReqMsg req{};
    req.local_comm_id = 0x01020304;
    req.service_id = 0x0000000001061c06ULL;
    req.local_qpn = 0x11;
    req.starting_psn = 0x5e7b1;
    req.path_mtu = 3;
    return build_mad(Mad{cm_header(make_tid(2, 0x01020304)), req});
}

std::vector<std::uint8_t> frame_for(const CmFrameAddress& a, const MadBytes& mad) {
    std::vector<std::uint8_t> f(cm_frame_length(a));
    const wire::BuildResult r = build_cm_frame(a, mad, f);
    EXPECT_EQ(r.status, wire::BuildStatus::Ok);
    f.resize(r.length);
    return f;
}

TEST(Qp1, FrameIsAUdSendOnlyToQp1AsLinuxSendsIt) {
    const auto f = frame_for(v4_address(), sample_req_mad());
    const wire::ParseResult p = wire::parse_and_verify(f);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p.packet.opcode(), 0x64);
    EXPECT_EQ(p.packet.dest_qp(), 1u);
    EXPECT_EQ(p.packet.bth().pkey.get(), 0xFFFF);
    EXPECT_TRUE(p.packet.bth().ack_req());
    EXPECT_EQ(p.packet.deth()->qkey.get(), 0x80010000u);
    EXPECT_EQ(p.packet.deth()->src_qp.get(), 1u);
    EXPECT_EQ(p.packet.payload().size(), 256u);
    EXPECT_EQ(p.packet.udp().length.get(), 8u + 280u);  // UDP payload 280: BTH, DETH, MAD, ICRC
    EXPECT_EQ(p.packet.ipv4()->ttl, 64);
}

TEST(Qp1, ParseGivesTheMadBack) {
    for (wire::IpVersion v : {wire::IpVersion::V4, wire::IpVersion::V6}) {
        CmFrameAddress a = v4_address();
        if (v == wire::IpVersion::V6) {
            a.ip.version = v;
            a.ip.src = wire::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
            a.ip.dst = wire::Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        }
        const auto f = frame_for(a, sample_req_mad());
        const CmFrameResult r = parse_cm_frame(f);
        ASSERT_EQ(r.status, CmParseStatus::Ok) << cm_parse_status_info(r.status).name;
        EXPECT_EQ(build_mad(r.mad), sample_req_mad());
        EXPECT_EQ(r.packet.src_gid(), a.ip.src);
        EXPECT_EQ(describe(summarize(r.mad)),
                  "CM REQ tid=0x0000000201020304 local_comm_id=0x01020304 service_id=0x0000000001061c06 qpn=0x11 "
                  "psn=0x5e7b1");
    }
}

// Rebuilds the sample frame with one field changed.
std::vector<std::uint8_t> altered(void (*change)(wire::PacketFields&)) {
    const MadBytes mad = sample_req_mad();
    wire::PacketFields f = cm_frame_fields(v4_address(), mad);
    change(f);
    std::vector<std::uint8_t> out(wire::frame_length(f) + 64);
    const auto r = wire::build_frame(f, out);
    EXPECT_EQ(r.status, wire::BuildStatus::Ok);
    out.resize(r.length);
    return out;
}

TEST(Qp1, EachEnvelopeCheckHasItsStatus) {
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.bth.opcode = 0x65; })).status,
              CmParseStatus::NotUdSendOnly);
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.bth.dest_qp = 2; })).status,
              CmParseStatus::NotQp1);
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.ext.deth.qkey = 0x80010001; })).status,
              CmParseStatus::BadQkey);
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.bth.pkey = 0x7FFF; })).status,
              CmParseStatus::BadPkey);
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.payload = f.payload.first(252); })).status,
              CmParseStatus::BadMadLength);
    EXPECT_EQ(parse_cm_frame(altered([](wire::PacketFields& f) { f.bth.opcode = 0x04; })).status,
              CmParseStatus::NotUdSendOnly);  // RC SEND ONLY

    auto bad_icrc = frame_for(v4_address(), sample_req_mad());
    bad_icrc.back() ^= 1;
    const CmFrameResult r = parse_cm_frame(bad_icrc);
    EXPECT_EQ(r.status, CmParseStatus::FrameMalformed);
    EXPECT_EQ(r.wire_status, wire::ParseStatus::BadIcrc);

    MadBytes mad = sample_req_mad();
    mad[1] = 0x04;  // not the CM class
    EXPECT_EQ(parse_cm_frame(frame_for(v4_address(), mad)).status, CmParseStatus::NotCmClass);
}

}  // namespace
}  // namespace uroce::cm
