// SIDR: service ID resolution for UD (rdma_cm's udaddy), through the same
// manager: request, reply, no listener, retries, duplicates.
#include <gtest/gtest.h>

#include "cm/service_id.h"
#include "cm_pair.h"

namespace uroce::cm {
namespace {

using namespace test;

constexpr std::uint64_t kUdpSid = 0x0000000001111c06ULL;

SidrRequestParams sidr_params() {
    SidrRequestParams s;
    s.service_id = kUdpSid;
    s.private_data[1] = 0x40;
    return s;
}

TEST(CmSidr, RequestAndReply) {
    CmPair p;
    p.b.listen(kUdpSid, 5);
    const auto ida = p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    ASSERT_TRUE(ida);
    EXPECT_EQ(p.a.state(*ida), CmState::SidrReqSent);
    p.pump();
    const CmEvent* req = p.b_ev.last(CmEventType::SidrReqReceived);
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(req->listener_context, 5u);
    const auto& rm = std::get<SidrReqMsg>(*req->message);
    EXPECT_EQ(rm.request_id, *ida);
    EXPECT_EQ(rm.partition_key, 0xFFFF);
    EXPECT_EQ(rm.private_data[1], 0x40);
    EXPECT_EQ(p.b.state(req->id), CmState::SidrReqRcvd);

    SidrReplyParams r;
    r.qpn = 0x123;
    r.qkey = 0x01234567;  // rdma_cm's UDP Q_Key
    ASSERT_EQ(p.b.sidr_reply(req->id, r), CallStatus::Ok);
    p.pump();
    const CmEvent* rep = p.a_ev.last(CmEventType::SidrRepReceived);
    ASSERT_NE(rep, nullptr);
    const auto& pm = std::get<SidrRepMsg>(*rep->message);
    EXPECT_EQ(pm.status, 0);
    EXPECT_EQ(pm.qpn, 0x123u);
    EXPECT_EQ(pm.qkey, 0x01234567u);
    EXPECT_EQ(pm.service_id, kUdpSid);
    EXPECT_EQ(pm.request_id, *ida);
    EXPECT_EQ(parse_mad(p.b_out.log.back()).mad.header.tid, make_tid(2, *ida));
    EXPECT_EQ(p.a.state(*ida), CmState::Idle);
    EXPECT_FALSE(p.a.next_deadline().has_value());
}

TEST(CmSidr, NoListenerAnswersUnsupported) {
    CmPair p;
    const auto ida = p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    p.pump();
    EXPECT_EQ(std::get<SidrRepMsg>(*p.a_ev.last(CmEventType::SidrRepReceived)->message).status,
              static_cast<std::uint8_t>(SidrStatus::Unsupported));
    EXPECT_EQ(p.a.state(*ida), CmState::Idle);
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmSidr, RetriesEvery4096MsThenError) {
    CmPair p;
    p.lose = [](const MadBytes&, bool) { return true; };
    const auto ida = p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    for (int i = 0; i < 16; ++i) {
        p.advance(Millis(4096));
    }
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::SidrReq), 16u);
    EXPECT_EQ(p.a_ev.count(CmEventType::SidrReqError), 1u);
    EXPECT_EQ(p.a.state(*ida), CmState::Idle);
}

TEST(CmSidr, DuplicateRequestIsDroppedAndDestroyRejects) {
    CmPair p;
    p.b.listen(kUdpSid, 5);
    (void)p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    const MadBytes req = p.a_out.queue.front().mad;
    p.pump();
    p.b.receive(PeerAddress{kIpB, kIpA}, req);
    EXPECT_EQ(p.b_ev.count(CmEventType::SidrReqReceived), 1u);
    EXPECT_EQ(p.b.counters().duplicates, 1u);
    p.b.destroy(p.b_ev.last(CmEventType::SidrReqReceived)->id);
    p.pump();
    EXPECT_EQ(std::get<SidrRepMsg>(*p.a_ev.last(CmEventType::SidrRepReceived)->message).status,
              static_cast<std::uint8_t>(SidrStatus::Reject));
    // Once answered, the same request ID from the same sender is new again.
    p.b.receive(PeerAddress{kIpB, kIpA}, req);
    EXPECT_EQ(p.b_ev.count(CmEventType::SidrReqReceived), 2u);
}

TEST(CmSidr, RejectVerdictAnswersReject) {
    CmPair p;
    p.b.listen(kUdpSid, 5);
    p.b_ev.reply = [](const CmEvent&) { return Verdict::reject(RejReason::ConsumerDefined); };
    (void)p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    p.pump();
    EXPECT_EQ(std::get<SidrRepMsg>(*p.a_ev.last(CmEventType::SidrRepReceived)->message).status,
              static_cast<std::uint8_t>(SidrStatus::Reject));
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmSidr, NoListenerVerdictAnswersUnsupported) {
    // The manager listens to every service and its user refuses a request
    // nobody listens for with REJ reason 8: over SIDR that is status 1, as
    // for a service with no listener in the manager itself, not a reject.
    CmPair p;
    p.b.listen_to_every_service(5);
    p.b_ev.reply = [](const CmEvent&) { return Verdict::reject(RejReason::InvalidServiceId); };
    (void)p.a.sidr_request(PeerAddress{kIpA, kIpB}, sidr_params());
    p.pump();
    EXPECT_EQ(std::get<SidrRepMsg>(*p.a_ev.last(CmEventType::SidrRepReceived)->message).status,
              static_cast<std::uint8_t>(SidrStatus::Unsupported));
    EXPECT_EQ(p.b.connection_count(), 0u);
}

}  // namespace
}  // namespace uroce::cm
