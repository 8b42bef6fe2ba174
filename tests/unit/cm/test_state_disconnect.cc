// The CM state machine: disconnection from either side or both, DREQ loss
// and timeouts, timewait, and what destroy() sends in each state.
#include <gtest/gtest.h>

#include "cm_pair.h"

namespace uroce::cm {
namespace {

using namespace test;

TEST(CmDisconnect, ActiveSideDisconnectsThenTimewaitEnds) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    const std::array<std::uint8_t, 2> pd{0x55, 0x66};
    ASSERT_EQ(p.a.disconnect(ida, pd), CallStatus::Ok);
    EXPECT_EQ(p.a.state(ida), CmState::DreqSent);
    p.pump();
    const CmEvent* dreq = p.b_ev.last(CmEventType::DreqReceived);
    ASSERT_NE(dreq, nullptr);
    const auto& m = std::get<DreqMsg>(*dreq->message);
    EXPECT_EQ(m.remote_qpn, kQpnB);
    EXPECT_EQ(m.private_data[0], 0x55);
    EXPECT_EQ(p.b.state(idb), CmState::DreqRcvd);
    // A DREQ starts its own transaction; the DREP answers with it.
    const std::uint64_t dreq_tid = parse_mad(p.a_out.log.back()).mad.header.tid;
    EXPECT_EQ(dreq_tid, make_tid(2, ida));
    ASSERT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(parse_mad(p.b_out.log.back()).mad.header.tid, dreq_tid);
    EXPECT_EQ(p.a_ev.count(CmEventType::DrepReceived), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.b.state(idb), CmState::Timewait);

    p.advance(Millis(2047));
    EXPECT_EQ(p.a_ev.count(CmEventType::TimewaitExit), 0u);
    p.advance(Millis(1));  // timewait = 2^(18 + 1 - 8) ms
    EXPECT_EQ(p.a_ev.count(CmEventType::TimewaitExit), 1u);
    EXPECT_EQ(p.b_ev.count(CmEventType::TimewaitExit), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
    EXPECT_EQ(p.b.state(idb), CmState::Idle);
    p.a.destroy(ida);
    p.b.destroy(idb);
    EXPECT_EQ(p.a.connection_count(), 0u);
    EXPECT_EQ(p.b.connection_count(), 0u);
    EXPECT_FALSE(p.a.next_deadline().has_value());
}

TEST(CmDisconnect, TimewaitLastsThePathTimeoutTheRepRaised) {
    // A short packet lifetime (rdma_cm's ACK_TIMEOUT option 8: lifetime 7)
    // makes the REQ's local ACK timeout 15 (the CA's ACK delay); the passive
    // side's path timeout is that, and the active side's is raised to it by
    // the REP's target ACK delay (cm.c cm_rep_handler): both wait 2^(15-8) ms.
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    ConnectParams params = p.connect_params();
    params.path.packet_life_time = 7;
    const auto ida = p.a.connect(PeerAddress{kIpA, kIpB}, params);
    ASSERT_TRUE(ida.has_value());
    p.pump();
    const CommId idb = p.passive_id();
    ASSERT_EQ(p.b.accept(idb, CmPair::accept_params()), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.a.confirm(*ida), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.a.disconnect(*ida), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();
    ASSERT_EQ(p.a.state(*ida), CmState::Timewait);
    p.advance(Millis(127));
    EXPECT_EQ(p.a_ev.count(CmEventType::TimewaitExit), 0u);
    EXPECT_EQ(p.b_ev.count(CmEventType::TimewaitExit), 0u);
    p.advance(Millis(1));
    EXPECT_EQ(p.a_ev.count(CmEventType::TimewaitExit), 1u);
    EXPECT_EQ(p.b_ev.count(CmEventType::TimewaitExit), 1u);
}

TEST(CmDisconnect, PassiveSideDisconnects) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    ASSERT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::DreqRcvd);
    EXPECT_EQ(std::get<DreqMsg>(*p.a_ev.last(CmEventType::DreqReceived)->message).remote_qpn, kQpnA);
    p.a.disconnect(ida);
    p.pump();
    EXPECT_EQ(p.b_ev.count(CmEventType::DrepReceived), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.b.state(idb), CmState::Timewait);
}

TEST(CmDisconnect, BothSidesAtOnce) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    ASSERT_EQ(p.a.disconnect(ida), CallStatus::Ok);
    ASSERT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();  // the DREQs cross
    EXPECT_EQ(p.a.state(ida), CmState::DreqRcvd);
    EXPECT_EQ(p.b.state(idb), CmState::DreqRcvd);
    EXPECT_EQ(p.a.disconnect(ida), CallStatus::Ok);
    EXPECT_EQ(p.b.disconnect(idb), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.b.state(idb), CmState::Timewait);
    // No DREQ is left to resend.
    p.advance(Millis(2048));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Dreq), 1u);
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Dreq), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
}

TEST(CmDisconnect, DuplicateDreqInTimewaitDrawsTheDrepAgain) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    p.a.disconnect(ida);
    const MadBytes dreq = p.a_out.queue.front().mad;
    p.pump();
    p.b.disconnect(idb);
    p.pump();
    ASSERT_EQ(p.b.state(idb), CmState::Timewait);
    p.b.receive(PeerAddress{kIpB, kIpA}, dreq);
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Drep), 2u);
    EXPECT_EQ(p.b_out.log[p.b_out.log.size() - 1], p.b_out.log[p.b_out.log.size() - 2]);
    EXPECT_EQ(p.b_ev.count(CmEventType::DreqReceived), 1u);
}

// The DREQ is resent on the connection's timeout (6144 ms), after the
// peer's timewait (2048 ms) is over; the peer, whose program destroyed the
// ID, answers a DREQ nobody owns with a DREP.
TEST(CmDisconnect, LostDrepIsRecoveredByTheResentDreq) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    int dreps = 0;
    p.lose = [&dreps](const MadBytes& m, bool) { return attr(m) == AttrId::Drep && ++dreps == 1; };
    p.a.disconnect(ida);
    p.pump();
    p.b.disconnect(idb);
    p.b.destroy(idb);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::DreqSent);
    p.advance(Millis(6144));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Dreq), 2u);
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Drep), 2u);
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.b.connection_count(), 0u);
    EXPECT_EQ(p.b_ev.count(CmEventType::DreqReceived), 1u);
}

TEST(CmDisconnect, DreqRetriesRunOutThenDreqErrorAndTimewait) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    p.lose = [](const MadBytes&, bool from_a) { return from_a; };
    p.a.disconnect(ida);
    for (int i = 0; i < 16; ++i) {
        p.advance(Millis(6144));
    }
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Dreq), 16u);
    EXPECT_EQ(p.a_ev.count(CmEventType::DreqError), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.b.state(idb), CmState::Established);
}

TEST(CmDisconnect, DestroyEstablishedSendsDreqAndKeepsTheIdThroughTimewait) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    p.a.destroy(ida);
    EXPECT_FALSE(p.a.state(ida).has_value());  // gone for the caller
    EXPECT_EQ(p.a.connection_count(), 1u);     // but held until timewait ends
    p.pump();
    EXPECT_EQ(p.b.state(idb), CmState::DreqRcvd);
    p.b.destroy(idb);  // DREQ_RCVD: destroy answers the DREP
    EXPECT_EQ(attr(p.b_out.log.back()), AttrId::Drep);
    p.pump();
    p.advance(Millis(2048));
    EXPECT_EQ(p.a.connection_count(), 0u);
    EXPECT_EQ(p.b.connection_count(), 0u);
    EXPECT_EQ(p.a_ev.count(CmEventType::TimewaitExit), 0u);  // no event for a destroyed ID
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Dreq), 1u);   // sent once, never resent
}

TEST(CmDisconnect, DestroyBeforeAcceptRejectsWith28) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    const CommId ida = p.connect();
    p.pump();
    p.b.destroy(p.passive_id());
    p.pump();
    EXPECT_EQ(std::get<RejMsg>(*p.a_ev.last(CmEventType::RejReceived)->message).reason, 28);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmDisconnect, DestroyAfterRepSentRejectsAndEntersTimewait) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.lose = [](const MadBytes& m, bool) { return attr(m) == AttrId::Rep; };
    p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    p.b.accept(idb, CmPair::accept_params());
    p.b.destroy(idb);
    EXPECT_EQ(attr(p.b_out.log.back()), AttrId::Rej);
    EXPECT_EQ(p.b.connection_count(), 1u);
    p.advance(Millis(2048));
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmDisconnect, RejWhileEstablishedEntersTimewait) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    RejMsg rej{};
    rej.local_comm_id = idb;
    rej.remote_comm_id = ida;
    rej.reason = 28;
    p.a.receive(PeerAddress{kIpA, kIpB}, build_mad(Mad{cm_header(3), rej}));
    EXPECT_EQ(p.a.state(ida), CmState::Timewait);
    EXPECT_EQ(p.a_ev.count(CmEventType::RejReceived), 1u);
}

TEST(CmDisconnect, DreqNamingAnotherQpnIsIgnored) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    p.a.receive(PeerAddress{kIpA, kIpB}, build_mad(Mad{cm_header(3), DreqMsg{idb, ida, kQpnA + 1, {}}}));
    EXPECT_EQ(p.a.state(ida), CmState::Established);
    EXPECT_EQ(p.a.counters().unmatched, 1u);
    // A DREQ with the wrong sender comm ID is not ours: answered, state kept.
    p.a.receive(PeerAddress{kIpA, kIpB}, build_mad(Mad{cm_header(3), DreqMsg{idb + 1, ida, kQpnA, {}}}));
    EXPECT_EQ(p.a.state(ida), CmState::Established);
}

}  // namespace
}  // namespace uroce::cm
