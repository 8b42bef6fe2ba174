// The CM state machine under loss and duplication: retransmission timers
// and counts, duplicate REQ/REP handling, MRA, stale connections.
#include <gtest/gtest.h>

#include "cm_pair.h"

namespace uroce::cm {
namespace {

using namespace test;

TEST(CmLoss, LostReqIsResentAfter6144Ms) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    int reqs = 0;
    p.lose = [&reqs](const MadBytes& m, bool) { return attr(m) == AttrId::Req && ++reqs == 1; };
    p.connect();
    p.pump();
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 0u);
    EXPECT_EQ(p.a.next_deadline(), CmTime(1000 + 6144));
    p.advance(Millis(6143));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 1u);
    p.advance(Millis(1));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 2u);
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 1u);
    EXPECT_EQ(p.a.counters().retransmits, 1u);
    // The retransmission is the same MAD, TID included.
    EXPECT_EQ(p.a_out.log[0], p.a_out.log[1]);
}

TEST(CmLoss, ReqRetriesRunOutAfter15ThenReqError) {
    CmPair p;
    p.lose = [](const MadBytes&, bool from_a) { return from_a; };
    const CommId ida = p.connect();
    p.pump();
    for (int i = 0; i < 15; ++i) {
        p.advance(Millis(6144));
    }
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 16u);  // first + 15 retries
    EXPECT_EQ(p.a_ev.count(CmEventType::ReqError), 0u);
    p.advance(Millis(6144));
    EXPECT_EQ(p.a_ev.count(CmEventType::ReqError), 1u);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 16u);
    EXPECT_FALSE(p.a.next_deadline().has_value());
    EXPECT_EQ(p.a.counters().timeouts, 1u);
}

TEST(CmLoss, DuplicateReqBeforeTheAnswerDrawsTheLazyMra) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    const CommId ida = p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    EXPECT_EQ(p.b.state(idb), CmState::MraReqSent);
    p.advance(Millis(6144));  // the program has not answered: REQ resent
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 1u);  // not a second connection
    ASSERT_EQ(count_attr(p.b_out.log, AttrId::Mra), 1u);
    const auto mra = message_of<MraMsg>(p.b_out.log.back());
    EXPECT_EQ(mra.message_mraed, MsgRef::Req);
    EXPECT_EQ(mra.service_timeout, 24);
    EXPECT_EQ(mra.local_comm_id, idb);
    EXPECT_EQ(mra.remote_comm_id, ida);
    EXPECT_EQ(parse_mad(p.b_out.log.back()).mad.header.tid, make_tid(2, ida));
    // The active side now waits the MRA's service time plus a packet lifetime.
    EXPECT_EQ(p.a.state(ida), CmState::MraReqRcvd);
    EXPECT_EQ(p.a.next_deadline(), p.clock.t + iba_time_to_ms(24) + iba_time_to_ms(18));
    p.advance(Millis(6144));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 2u);
    // Accepting still works from MRA_REQ_SENT, and ends the wait.
    ASSERT_EQ(p.b.accept(idb, CmPair::accept_params()), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::MraRepSent);
    EXPECT_FALSE(p.a.next_deadline().has_value());
}

TEST(CmLoss, NoMraWhenDisabled) {
    CmPair p;
    CmConfig c = config(kGuidB, 2);
    c.lazy_mra_service_timeout.reset();
    ConnectionManager b2(c, p.clock, p.b_out, p.b_ev);
    b2.listen(kSid, 1);
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, p.connect_params());
    ASSERT_EQ(p.a_out.queue.size(), 1u);
    const Sent s = p.a_out.queue.front();
    b2.receive(PeerAddress{kIpB, kIpA}, s.mad);
    EXPECT_EQ(b2.state(p.b_ev.last(CmEventType::ReqReceived)->id), CmState::ReqRcvd);
    b2.receive(PeerAddress{kIpB, kIpA}, s.mad);
    EXPECT_TRUE(p.b_out.log.empty());
    EXPECT_EQ(b2.counters().duplicates, 1u);
}

TEST(CmLoss, LostRepIsResentEvery4096MsAndDuplicateReqIsDropped) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    int reps = 0;
    p.lose = [&reps](const MadBytes& m, bool) { return attr(m) == AttrId::Rep && ++reps == 1; };
    const CommId ida = p.connect();
    p.pump();
    p.b.accept(p.passive_id(), CmPair::accept_params());
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::ReqSent);
    p.advance(Millis(4096));  // REP timeout = 2^(REQ local CM response timeout 20 - 8)
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Rep), 2u);
    EXPECT_EQ(p.a.state(ida), CmState::MraRepSent);
    p.advance(Millis(2048));  // the REQ timer was cancelled by the REP
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 1u);
}

TEST(CmLoss, DuplicateReqWhileRepSentIsDropped) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.lose = [](const MadBytes& m, bool) { return attr(m) == AttrId::Rep; };
    p.connect();
    p.pump();
    p.b.accept(p.passive_id(), CmPair::accept_params());
    p.pump();
    p.advance(Millis(4096));  // REP resent (lost again)
    p.advance(Millis(2048));  // REQ resent at 6144
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Req), 2u);
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 1u);
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Mra), 0u);
    EXPECT_EQ(p.b.counters().duplicates, 1u);
}

TEST(CmLoss, DuplicateRepAfterRtuDrawsTheRtuAgain) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    int rtus = 0;
    p.lose = [&rtus](const MadBytes& m, bool) { return attr(m) == AttrId::Rtu && ++rtus == 1; };
    const CommId ida = p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    p.b.accept(idb, CmPair::accept_params());
    p.pump();
    p.a.confirm(ida);
    p.pump();
    EXPECT_EQ(p.b.state(idb), CmState::RepSent);
    p.advance(Millis(4096));
    EXPECT_EQ(count_attr(p.a_out.log, AttrId::Rtu), 2u);
    EXPECT_EQ(p.a_out.log[1], p.a_out.log[2]);
    EXPECT_EQ(p.b.state(idb), CmState::Established);
    EXPECT_EQ(p.a_ev.count(CmEventType::RepReceived), 1u);
}

TEST(CmLoss, DuplicateRepBeforeConfirmDrawsMra) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    const CommId ida = p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    p.b.accept(idb, CmPair::accept_params());
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::MraRepSent);
    p.advance(Millis(4096));  // the active program is slow: REP resent
    ASSERT_EQ(count_attr(p.a_out.log, AttrId::Mra), 1u);
    EXPECT_EQ(message_of<MraMsg>(p.a_out.log.back()).message_mraed, MsgRef::Rep);
    EXPECT_EQ(p.b.state(idb), CmState::MraRepRcvd);
    ASSERT_EQ(p.a.confirm(ida), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.b.state(idb), CmState::Established);
}

TEST(CmLoss, RepRetriesRunOutThenRepError) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.lose = [](const MadBytes& m, bool) { return attr(m) == AttrId::Rep || attr(m) == AttrId::Req; };
    // The REQ must arrive once: deliver it by hand.
    (void)p.a.connect(PeerAddress{kIpA, kIpB}, p.connect_params());
    const Sent s = p.a_out.queue.front();
    p.a_out.queue.clear();
    p.b.receive(PeerAddress{kIpB, kIpA}, s.mad);
    const CommId idb = p.passive_id();
    p.b.accept(idb, CmPair::accept_params());
    for (int i = 0; i < 16; ++i) {
        p.advance(Millis(4096));
    }
    EXPECT_EQ(count_attr(p.b_out.log, AttrId::Rep), 16u);
    EXPECT_EQ(p.b_ev.count(CmEventType::RepError), 1u);
    EXPECT_EQ(p.b.state(idb), CmState::Idle);
}

TEST(CmLoss, ReqReusingALiveQpnIsStale) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    // The active host restarts (its CM state is gone) and reuses QPN 0x11.
    Link out;
    Recorder ev;
    ConnectionManager a2(config(kGuidA, 99), p.clock, out, ev);
    (void)a2.connect(PeerAddress{kIpA, kIpB}, p.connect_params(kQpnA));
    p.b.receive(PeerAddress{kIpB, kIpA}, out.queue.front().mad);
    ASSERT_EQ(p.b_out.queue.size(), 2u);
    const auto rej = message_of<RejMsg>(p.b_out.queue[0].mad);
    EXPECT_EQ(rej.reason, 10);
    EXPECT_EQ(rej.remote_comm_id, message_of<ReqMsg>(out.queue.front().mad).local_comm_id);
    // ...and the old connection is torn down with a DREQ.
    EXPECT_EQ(attr(p.b_out.queue[1].mad), AttrId::Dreq);
    EXPECT_EQ(p.b.state(idb), CmState::DreqSent);
    // The restarted host knows no such connection: it answers DREP, and the
    // old connection reports the disconnection and waits out timewait.
    a2.receive(PeerAddress{kIpA, kIpB}, p.b_out.queue[1].mad);
    p.b.receive(PeerAddress{kIpB, kIpA}, out.queue.back().mad);
    EXPECT_EQ(p.b_ev.count(CmEventType::DrepReceived), 1u);
    EXPECT_EQ(p.b.state(idb), CmState::Timewait);
    EXPECT_EQ(p.b.counters().stale, 1u);
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 1u);
    (void)ida;
}

TEST(CmLoss, DuplicateReqInTimewaitDrawsRejStale) {
    CmPair p;
    const auto [ida, idb] = p.establish();
    const MadBytes old_req = p.a_out.log.front();
    p.a.disconnect(ida);
    p.pump();
    p.b.disconnect(idb);
    p.pump();
    ASSERT_EQ(p.b.state(idb), CmState::Timewait);
    p.b.receive(PeerAddress{kIpB, kIpA}, old_req);
    ASSERT_FALSE(p.b_out.queue.empty());
    const auto rej = message_of<RejMsg>(p.b_out.queue.back().mad);
    EXPECT_EQ(rej.reason, 10);
    EXPECT_EQ(rej.remote_comm_id, ida);
}

TEST(CmLoss, DestroyWhileReqOutstandingSendsRejTimeoutNamingOurGuid) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    const CommId ida = p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    p.a.destroy(ida);
    EXPECT_EQ(p.a.connection_count(), 0u);
    EXPECT_FALSE(p.a.next_deadline().has_value());
    ASSERT_EQ(p.a_out.queue.size(), 1u);
    const auto rej = message_of<RejMsg>(p.a_out.queue.front().mad);
    EXPECT_EQ(rej.reason, 4);
    EXPECT_EQ(rej.remote_comm_id, 0u);  // the REP never came
    EXPECT_EQ(rej.reject_info_length, 8);
    EXPECT_EQ(rej.ari[0], 0xAA);
    p.pump();
    // Found through (comm ID, GUID in the ARI).
    EXPECT_EQ(p.b_ev.count(CmEventType::RejReceived), 1u);
    EXPECT_EQ(p.b.state(idb), CmState::Idle);
}

TEST(CmLoss, MalformedMadsAreCountedAndIgnored) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    MadBytes junk{};
    EXPECT_EQ(p.b.receive(PeerAddress{kIpB, kIpA}, junk), CmParseStatus::BadBaseVersion);
    EXPECT_EQ(p.b.receive(PeerAddress{kIpB, kIpA}, std::span(junk).first(10)), CmParseStatus::BadMadLength);
    EXPECT_EQ(p.b.counters().rx_status[static_cast<std::size_t>(CmParseStatus::BadBaseVersion)], 1u);
    EXPECT_EQ(p.b.counters().rx_status[static_cast<std::size_t>(CmParseStatus::BadMadLength)], 1u);
    EXPECT_TRUE(p.b_out.log.empty());
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmLoss, MessagesForUnknownConnectionsAreDropped) {
    CmPair p;
    for (const Message& m : std::initializer_list<Message>{RepMsg{}, RtuMsg{}, DrepMsg{}, RejMsg{}, MraMsg{},
                                                           SidrRepMsg{}}) {
        p.b.receive(PeerAddress{kIpB, kIpA}, build_mad(Mad{cm_header(1), m}));
    }
    EXPECT_EQ(p.b.counters().unmatched, 6u);
    EXPECT_TRUE(p.b_out.log.empty());
    // A DREQ nobody owns is answered with a DREP, as Linux does.
    p.b.receive(PeerAddress{kIpB, kIpA}, build_mad(Mad{cm_header(7), DreqMsg{5, 6, 7, {}}}));
    ASSERT_EQ(p.b_out.log.size(), 1u);
    const auto drep = message_of<DrepMsg>(p.b_out.log[0]);
    EXPECT_EQ(drep.local_comm_id, 6u);
    EXPECT_EQ(drep.remote_comm_id, 5u);
}

}  // namespace
}  // namespace uroce::cm
