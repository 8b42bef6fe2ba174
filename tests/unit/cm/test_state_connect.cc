// The CM state machine: connection establishment, rejection and listeners.
#include <gtest/gtest.h>

#include <set>

#include "cm_pair.h"

namespace uroce::cm {
namespace {

using namespace test;

TEST(CmConnect, ReqRepRtuEstablishBothSides) {
    CmPair p;
    ASSERT_TRUE(p.b.listen(kSid, kListenerContext));
    const CommId ida = p.connect();
    EXPECT_EQ(p.a.state(ida), CmState::ReqSent);
    p.pump();

    const CmEvent* req = p.b_ev.last(CmEventType::ReqReceived);
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(req->listener_context, kListenerContext);
    EXPECT_EQ(req->peer.remote, kIpA);
    EXPECT_EQ(req->peer.local, kIpB);
    const auto& rm = std::get<ReqMsg>(*req->message);
    EXPECT_EQ(rm.local_comm_id, ida);
    EXPECT_EQ(rm.local_qpn, kQpnA);
    EXPECT_EQ(rm.starting_psn, 0x1000u);
    const CommId idb = req->id;
    EXPECT_NE(idb, ida);
    // rdma_cm's lazy MRA: armed, not sent.
    EXPECT_EQ(p.b.state(idb), CmState::MraReqSent);
    EXPECT_TRUE(p.b_out.log.empty());

    ASSERT_EQ(p.b.accept(idb, CmPair::accept_params()), CallStatus::Ok);
    EXPECT_EQ(p.b.state(idb), CmState::RepSent);
    p.pump();
    const CmEvent* rep = p.a_ev.last(CmEventType::RepReceived);
    ASSERT_NE(rep, nullptr);
    const auto& pm = std::get<RepMsg>(*rep->message);
    EXPECT_EQ(pm.local_comm_id, idb);
    EXPECT_EQ(pm.remote_comm_id, ida);
    EXPECT_EQ(pm.local_qpn, kQpnB);
    EXPECT_EQ(pm.starting_psn, 0x2000u);
    EXPECT_EQ(p.a.state(ida), CmState::MraRepSent);

    ASSERT_EQ(p.a.confirm(ida), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::Established);
    EXPECT_EQ(p.b.state(idb), CmState::Established);
    EXPECT_EQ(p.b_ev.count(CmEventType::RtuReceived), 1u);

    // TIDs: the active side's (agent high half, its comm ID); REP and RTU reuse it.
    ASSERT_EQ(p.a_out.log.size(), 2u);
    ASSERT_EQ(p.b_out.log.size(), 1u);
    const std::uint64_t tid = parse_mad(p.a_out.log[0]).mad.header.tid;
    EXPECT_EQ(tid, make_tid(2, ida));
    EXPECT_EQ(parse_mad(p.b_out.log[0]).mad.header.tid, tid);
    EXPECT_EQ(parse_mad(p.a_out.log[1]).mad.header.tid, tid);
    EXPECT_EQ(attr(p.a_out.log[1]), AttrId::Rtu);

    const auto va = p.a.view(ida);
    ASSERT_TRUE(va.has_value());
    EXPECT_EQ(va->remote_id, idb);
    EXPECT_EQ(va->remote_qpn, kQpnB);
    EXPECT_EQ(va->remote_ca_guid, kGuidB);
    EXPECT_FALSE(p.a.next_deadline().has_value());
    EXPECT_FALSE(p.b.next_deadline().has_value());
}

TEST(CmConnect, AcceptFromInsideTheUpcall) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.b_ev.reply = [&p](const CmEvent& e) {
        if (e.type == CmEventType::ReqReceived) {
            EXPECT_EQ(p.b.accept(e.id, CmPair::accept_params()), CallStatus::Ok);
        }
        return Verdict::keep();
    };
    p.a_ev.reply = [&p](const CmEvent& e) {
        if (e.type == CmEventType::RepReceived) {
            EXPECT_EQ(p.a.confirm(e.id), CallStatus::Ok);
        }
        return Verdict::keep();
    };
    const CommId ida = p.connect();
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::Established);
    EXPECT_EQ(p.b.state(p.passive_id()), CmState::Established);
}

TEST(CmConnect, NoListenerDrawsRej8) {
    CmPair p;
    const CommId ida = p.connect();
    p.pump();
    const CmEvent* rej = p.a_ev.last(CmEventType::RejReceived);
    ASSERT_NE(rej, nullptr);
    const auto& m = std::get<RejMsg>(*rej->message);
    EXPECT_EQ(m.reason, 8);
    EXPECT_EQ(m.remote_comm_id, ida);
    EXPECT_EQ(m.message_rejected, MsgRef::Req);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
    EXPECT_EQ(p.b.connection_count(), 0u);
    EXPECT_EQ(p.b.counters().no_listener, 1u);
    EXPECT_FALSE(p.a.next_deadline().has_value());  // REQ no longer resent
}

// The rdma_cm device owns its listeners (wildcard addresses): every REQ goes
// up with the catch-all context, an exact listener still wins, and the
// layer above refusing answers REJ 8 from this side's manager.
TEST(CmConnect, EveryServiceListenerTakesWhatNoExactOneDoes) {
    CmPair p;
    p.b.listen_to_every_service(9);
    ASSERT_TRUE(p.b.listen(kSid, kListenerContext));
    p.connect();
    p.pump();
    ASSERT_NE(p.b_ev.last(CmEventType::ReqReceived), nullptr);
    EXPECT_EQ(p.b_ev.last(CmEventType::ReqReceived)->listener_context, kListenerContext);

    CmPair q;  // (a second REQ from the same QP would be stale: a fresh pair)
    q.b.listen_to_every_service(9);
    ASSERT_TRUE(q.b.listen(kSid + 1, kListenerContext));
    q.connect();
    q.pump();
    ASSERT_NE(q.b_ev.last(CmEventType::ReqReceived), nullptr);
    EXPECT_EQ(q.b_ev.last(CmEventType::ReqReceived)->listener_context, 9u);
    EXPECT_EQ(q.b.counters().no_listener, 0u);

}

TEST(CmConnect, EveryServiceListenerRefusedDrawsRej8) {
    CmPair p;
    p.b.listen_to_every_service(9);
    p.b_ev.reply = [](const CmEvent&) { return Verdict::reject(RejReason::InvalidServiceId); };
    const CommId refused = p.connect();
    p.pump();
    EXPECT_EQ(p.b_ev.count(CmEventType::ReqReceived), 1u);
    EXPECT_EQ(p.b.connection_count(), 0u);
    const CmEvent* rej = p.a_ev.last(CmEventType::RejReceived);
    ASSERT_NE(rej, nullptr);
    EXPECT_EQ(std::get<RejMsg>(*rej->message).reason, 8);
    EXPECT_EQ(std::get<RejMsg>(*rej->message).remote_comm_id, refused);
}

TEST(CmConnect, ListenerStoppedOrOnAnotherServiceIdDoesNotMatch) {
    CmPair p;
    ASSERT_TRUE(p.b.listen(kSid + 1, 1));
    EXPECT_FALSE(p.b.listen(kSid + 1, 2));  // already listened on
    p.connect();
    p.pump();
    EXPECT_EQ(p.a_ev.count(CmEventType::RejReceived), 1u);
    p.b.listen(kSid, 5);
    p.b.stop_listening(kSid);
    p.connect();
    p.pump();
    EXPECT_EQ(p.a_ev.count(CmEventType::RejReceived), 2u);
}

TEST(CmConnect, PassiveRejectSendsRej28WithPrivateData) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    const CommId ida = p.connect();
    p.pump();
    const std::array<std::uint8_t, 3> pd{9, 8, 7};
    ASSERT_EQ(p.b.reject(p.passive_id(), RejReason::ConsumerDefined, {}, pd), CallStatus::Ok);
    EXPECT_EQ(p.b.state(p.passive_id()), CmState::Idle);
    p.pump();
    const CmEvent* rej = p.a_ev.last(CmEventType::RejReceived);
    ASSERT_NE(rej, nullptr);
    const auto& m = std::get<RejMsg>(*rej->message);
    EXPECT_EQ(m.reason, 28);
    EXPECT_EQ(m.private_data[0], 9);
    EXPECT_EQ(m.private_data[2], 7);
    EXPECT_EQ(p.a.state(ida), CmState::Idle);
}

TEST(CmConnect, RejectVerdictFromTheUpcall) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.b_ev.reply = [](const CmEvent&) { return Verdict::reject(RejReason::ConsumerDefined); };
    p.connect();
    p.pump();
    EXPECT_EQ(std::get<RejMsg>(*p.a_ev.last(CmEventType::RejReceived)->message).reason, 28);
    EXPECT_EQ(p.b.connection_count(), 0u);
}

TEST(CmConnect, DropVerdictIsSilentAndTheRetransmittedReqGetsThrough) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    int seen = 0;
    p.b_ev.reply = [&seen](const CmEvent&) { return ++seen == 1 ? Verdict::drop() : Verdict::keep(); };
    const CommId ida = p.connect();
    p.pump();
    EXPECT_TRUE(p.b_out.log.empty());  // a full backlog answers nothing
    EXPECT_EQ(p.b.connection_count(), 0u);
    p.advance(Millis(6144));  // REQ resent (2 x 2^(18-8) + 2^(20-8) ms)
    EXPECT_EQ(seen, 2);
    EXPECT_EQ(p.b.accept(p.passive_id(), CmPair::accept_params()), CallStatus::Ok);
    p.pump();
    EXPECT_EQ(p.a.state(ida), CmState::MraRepSent);
}

TEST(CmConnect, WrongStateAndUnknownIdCallsAreRefused) {
    CmPair p;
    EXPECT_EQ(p.a.accept(12345, CmPair::accept_params()), CallStatus::NoSuchId);
    const CommId ida = p.connect();
    EXPECT_EQ(p.a.accept(ida, CmPair::accept_params()), CallStatus::WrongState);
    EXPECT_EQ(p.a.confirm(ida), CallStatus::WrongState);
    EXPECT_EQ(p.a.disconnect(ida), CallStatus::WrongState);
    EXPECT_EQ(p.a.establish(ida), CallStatus::WrongState);
    EXPECT_EQ(p.a.sidr_reply(ida, {}), CallStatus::WrongState);
}

TEST(CmConnect, CommIdsAreUniqueAndNeverZero) {
    CmPair p;
    std::set<CommId> ids;
    for (int i = 0; i < 2000; ++i) {
        const CommId id = p.connect(static_cast<std::uint32_t>(100 + i));
        EXPECT_NE(id, 0u);
        EXPECT_TRUE(ids.insert(id).second);
    }
    // Consecutive IDs do not look sequential on the wire (XOR operand).
    EXPECT_EQ(p.a.connection_count(), 2000u);
}

TEST(CmConnect, CommEstablishedBeforeTheRtu) {
    CmPair p;
    p.b.listen(kSid, kListenerContext);
    p.lose = [](const MadBytes& m, bool) { return attr(m) == AttrId::Rtu; };
    const CommId ida = p.connect();
    p.pump();
    const CommId idb = p.passive_id();
    p.b.accept(idb, CmPair::accept_params());
    p.pump();
    p.a.confirm(ida);
    p.pump();
    EXPECT_EQ(p.b.state(idb), CmState::RepSent);
    ASSERT_EQ(p.b.establish(idb), CallStatus::Ok);  // the QP saw the first SEND
    EXPECT_EQ(p.b.state(idb), CmState::Established);
    EXPECT_EQ(p.b_ev.count(CmEventType::UserEstablished), 1u);
    EXPECT_FALSE(p.b.next_deadline().has_value());  // REP no longer resent
}

// One manager is both ends (a loopback device): its own REQ reaches its own
// listener.
TEST(CmConnect, LoopbackThroughOneManager) {
    FakeClock clock;
    Link link;
    Recorder ev;
    ConnectionManager m(config(kGuidA, 9), clock, link, ev);
    m.listen(kSid, 1);
    auto pump = [&] {
        while (!link.queue.empty()) {
            const Sent s = link.queue.front();
            link.queue.pop_front();
            m.receive(PeerAddress{s.to.remote, s.to.local}, s.mad);
        }
    };
    CmPair shape;
    ConnectParams cp = shape.connect_params();
    cp.path.remote_gid = kIpA;
    const auto active = m.connect(PeerAddress{kIpA, kIpA}, cp);
    ASSERT_TRUE(active);
    pump();
    const CommId passive = ev.last(CmEventType::ReqReceived)->id;
    AcceptParams ap = CmPair::accept_params();
    ap.local_ca_guid = kGuidA;
    ASSERT_EQ(m.accept(passive, ap), CallStatus::Ok);
    pump();
    ASSERT_EQ(m.confirm(*active), CallStatus::Ok);
    pump();
    EXPECT_EQ(m.state(*active), CmState::Established);
    EXPECT_EQ(m.state(passive), CmState::Established);
    ASSERT_EQ(m.disconnect(*active), CallStatus::Ok);
    pump();
    ASSERT_EQ(m.disconnect(passive), CallStatus::Ok);
    pump();
    EXPECT_EQ(m.state(*active), CmState::Timewait);
    EXPECT_EQ(m.state(passive), CmState::Timewait);
}

}  // namespace
}  // namespace uroce::cm
