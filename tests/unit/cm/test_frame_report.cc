// `uroce decode` names CM MADs: its frame report (tools/uroce/frame_report)
// over frames made by the CM frame builder.
#include <gtest/gtest.h>

#include <vector>

#include "cm/codec.h"
#include "cm/format.h"
#include "cm/qp1.h"
#include "cm/service_id.h"
#include "frame_report.h"

namespace uroce::cm {
namespace {

std::vector<std::uint8_t> frame_of(const Mad& mad) {
    CmFrameAddress a;
    a.ip.src = wire::ipv4_mapped({10, 0, 0, 1});
    a.ip.dst = wire::ipv4_mapped({10, 0, 0, 2});
    const MadBytes bytes = build_mad(mad);
    std::vector<std::uint8_t> f(cm_frame_length(a));
    EXPECT_EQ(build_cm_frame(a, bytes, f).status, wire::BuildStatus::Ok);
    return f;
}

TEST(DecodeReport, NamesAReqAndItsMainFields) {
    ConnectParams p;
    p.service_id = ip_service_id(PortSpace::Tcp, 7174);
    p.qpn = 0x11;
    p.starting_psn = 0x5e7b1;
    const auto f = frame_of(Mad{cm_header(make_tid(2, 0xcafe0001)), format_req(p, 0xcafe0001)});
    const tools::FrameReport r = tools::analyse_frame(1, f);
    ASSERT_TRUE(r.cm.has_value());
    const std::string text = tools::report_text(r);
    EXPECT_NE(text.find("UD_SEND_ONLY"), std::string::npos) << text;
    EXPECT_NE(text.find("CM REQ tid=0x00000002cafe0001 local_comm_id=0xcafe0001 service_id=0x0000000001061c06 "
                        "qpn=0x11 psn=0x5e7b1"),
              std::string::npos)
        << text;
    const auto j = tools::report_json(r);
    EXPECT_EQ(j["cm"]["status"], "ok");
    EXPECT_EQ(j["cm"]["message"], "REQ");
    EXPECT_EQ(j["cm"]["local_comm_id"], 0xcafe0001u);
    EXPECT_EQ(j["cm"]["service_id"], "0x0000000001061c06");
    EXPECT_EQ(j["cm"]["qpn"], 0x11);
    EXPECT_EQ(j["cm"]["starting_psn"], 0x5e7b1);
    EXPECT_FALSE(j["cm"].contains("remote_comm_id"));
}

TEST(DecodeReport, NamesRepRtuRejAndDreq) {
    RepMsg rep{};
    rep.local_comm_id = 2;
    rep.remote_comm_id = 1;
    rep.local_qpn = 0x12;
    rep.starting_psn = 0x100;
    // A FrameReport reads its frame when it is printed: each frame outlives its report.
    const auto rep_frame = frame_of(Mad{cm_header(1), rep});
    auto r = tools::analyse_frame(1, rep_frame);
    EXPECT_NE(tools::report_text(r).find("CM REP tid=0x0000000000000001 local_comm_id=0x00000002 "
                                         "remote_comm_id=0x00000001 qpn=0x12 psn=0x100"),
              std::string::npos);
    const auto rtu_frame = frame_of(Mad{cm_header(1), RtuMsg{1, 2, {}}});
    r = tools::analyse_frame(2, rtu_frame);
    EXPECT_EQ(tools::report_json(r)["cm"]["message"], "RTU");
    EXPECT_EQ(tools::report_json(r)["cm"]["remote_comm_id"], 2);
    RejMsg rej{};
    rej.reason = 8;
    const auto rej_frame = frame_of(Mad{cm_header(1), rej});
    r = tools::analyse_frame(3, rej_frame);
    EXPECT_NE(tools::report_text(r).find("CM REJ"), std::string::npos);
    EXPECT_EQ(tools::report_json(r)["cm"]["reject_reason"], 8);
    const auto dreq_frame = frame_of(Mad{cm_header(1), DreqMsg{1, 2, 0x33, {}}});
    r = tools::analyse_frame(4, dreq_frame);
    EXPECT_EQ(tools::report_json(r)["cm"]["qpn"], 0x33);
}

TEST(DecodeReport, AMalformedMadIsNamedToo) {
    MadBytes mad = build_mad(Mad{cm_header(1), RtuMsg{}});
    mad[2] = 1;  // class version 1
    CmFrameAddress a;
    std::vector<std::uint8_t> f(cm_frame_length(a));
    ASSERT_EQ(build_cm_frame(a, mad, f).status, wire::BuildStatus::Ok);
    const auto r = tools::analyse_frame(1, f);
    EXPECT_FALSE(r.cm.has_value());
    EXPECT_NE(tools::report_text(r).find("mad=bad_class_version"), std::string::npos);
    EXPECT_EQ(tools::report_json(r)["cm"]["status"], "bad_class_version");
}

}  // namespace
}  // namespace uroce::cm
