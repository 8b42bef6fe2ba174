// The sentences of explained-failure records: each names the check, the
// QPs, the peer, the address and what the failure became.
#include <gtest/gtest.h>

#include "engine/failure_event.h"
#include "wire/opcode.h"

namespace uroce::engine {
namespace {

uroce_explain_record refusal(FailureCheck check) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::RequestRefused);
    r.check = static_cast<std::uint32_t>(check);
    r.qpn = 0x12;
    r.remote_qpn = 0x11;
    const std::uint8_t peer[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
    std::copy(std::begin(peer), std::end(peer), r.peer_gid);
    r.opcode = wire::opcode::kRcRdmaWriteOnly;
    r.psn = 5;
    r.va = 0x1000;
    r.length = 16;
    r.rkey = 0x00000301;
    r.nak = 2;
    r.wc_status = 10;
    r.count = 1;
    return r;
}

TEST(FailureEvent, EveryCheckAndKindHasAName) {
    for (std::uint32_t c = 0; c < kFailureCheckCount; ++c) {
        EXPECT_FALSE(check_name(c).empty()) << c;
    }
    EXPECT_EQ(check_name(static_cast<std::uint32_t>(FailureCheck::OutOfRange)), "out_of_range");
    EXPECT_EQ(check_name(999), "unknown");
    EXPECT_EQ(kind_name(static_cast<std::uint32_t>(FailureKind::StaleAccess)), "stale_access");
}

TEST(FailureEvent, ARefusalSaysWhoWhatWhereAndTheNak) {
    const std::string s = describe(refusal(FailureCheck::KeyNotFound));
    EXPECT_NE(s.find("qp 0x000012 refused RC_RDMA_WRITE_ONLY psn 0x000005 from 192.0.2.1 qp 0x000011"),
              std::string::npos)
        << s;
    EXPECT_NE(s.find("16 bytes at 0x1000 rkey 0x00000301"), std::string::npos) << s;
    EXPECT_NE(s.find("key not found"), std::string::npos) << s;
    EXPECT_NE(s.find("NAK remote access error (code 2)"), std::string::npos) << s;
    EXPECT_NE(s.find("remote access error"), std::string::npos) << s;
}

TEST(FailureEvent, OutOfRangeSaysByHowMuchAndWhichEnd) {
    uroce_explain_record r = refusal(FailureCheck::OutOfRange);
    r.flags = UROCE_EXPLAIN_REGION_KNOWN;
    r.region_start = 0x1000;
    r.region_length = 8;
    r.overrun = 8;
    std::string s = describe(r);
    EXPECT_NE(s.find("out of range by 8 bytes: [0x1000, +16) ends past the region [0x1000, +8)"), std::string::npos)
        << s;
    r.flags |= UROCE_EXPLAIN_BEFORE_START;
    r.overrun = 1;
    s = describe(r);
    EXPECT_NE(s.find("out of range by 1 bytes: [0x1000, +16) starts before"), std::string::npos) << s;
}

TEST(FailureEvent, WrongPdAndMissingRightNameBothSides) {
    uroce_explain_record r = refusal(FailureCheck::PdMismatch);
    r.region_pd = 3;
    r.qp_pd = 2;
    EXPECT_NE(describe(r).find("wrong PD: the region is in PD 3, the QP in PD 2"), std::string::npos);
    r = refusal(FailureCheck::NoRemoteWrite);
    r.flags = UROCE_EXPLAIN_REGION_KNOWN;
    r.region_access = 1;
    EXPECT_NE(describe(r).find("no REMOTE_WRITE right"), std::string::npos) << describe(r);
}

TEST(FailureEvent, ARelaxedMrAfterDeregistrationCarriesItsHistory) {
    uroce_explain_record r = refusal(FailureCheck::RelaxedAfterDereg);
    r.flags = UROCE_EXPLAIN_REGION_KNOWN | UROCE_EXPLAIN_HISTORY;
    r.region_start = 0x7000;
    r.region_length = 4096;
    r.registered_ns = 100;
    r.deregistered_ns = 250;
    std::string s = describe(r);
    EXPECT_NE(s.find("relaxed MR used after deregistration (already invalidated)"), std::string::npos) << s;
    EXPECT_NE(s.find("registered at 100 ns, deregistered at 250 ns"), std::string::npos) << s;
    r.kind = static_cast<std::uint32_t>(FailureKind::StaleAccess);
    s = describe(r);
    EXPECT_NE(s.find("allowed"), std::string::npos) << s;
    EXPECT_NE(s.find("not yet invalidated"), std::string::npos) << s;
}

TEST(FailureEvent, UcRefusalsAreNotNaked) {
    uroce_explain_record r = refusal(FailureCheck::InvalidRequest);
    r.nak = UROCE_EXPLAIN_NO_NAK;
    EXPECT_NE(describe(r).find("not NAKed"), std::string::npos);
}

TEST(FailureEvent, AnErrorCompletionByNakSaysThePeerRefused) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::ErrorCompletion);
    r.check = static_cast<std::uint32_t>(FailureCheck::PeerNak);
    r.flags = UROCE_EXPLAIN_SEND_QUEUE;
    r.qpn = 0x11;
    r.remote_qpn = 0x12;
    r.opcode = 1;  // IBV_WC_RDMA_WRITE
    r.wr_id = 0xE1;
    r.wc_status = 10;
    r.nak = 2;
    r.psn = 7;
    r.va = 0x2000;
    r.length = 8;
    r.rkey = 0x401;
    const std::string s = describe(r);
    EXPECT_NE(s.find("send WQE wr_id 0xe1 (RDMA WRITE, 8 bytes at 0x2000 rkey 0x00000401)"), std::string::npos) << s;
    EXPECT_NE(s.find("completed with remote access error"), std::string::npos) << s;
    EXPECT_NE(s.find("peer refused: remote access error (NAK code 2, psn 0x000007)"), std::string::npos) << s;
}

TEST(FailureEvent, CoalescedFlushesSayHowMany) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::ErrorCompletion);
    r.check = static_cast<std::uint32_t>(FailureCheck::Flushed);
    r.opcode = 128;  // IBV_WC_RECV
    r.wc_status = 5;
    r.count = 12;
    const std::string s = describe(r);
    EXPECT_NE(s.find("receive WQE"), std::string::npos) << s;
    EXPECT_NE(s.find("12 work requests flushed"), std::string::npos) << s;
}

}  // namespace
}  // namespace uroce::engine
