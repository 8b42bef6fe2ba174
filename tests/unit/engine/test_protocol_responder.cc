// The responder's rules (IBA 9.7.5.1), one packet at a time: what it answers
// to in-order, duplicate (past) and out-of-order (future) requests.
#include <algorithm>

#include "protocol_fixture.h"

namespace uroce::engine::test {
namespace {

using wire::AckKind;
using wire::NakCode;
using wire::Operation;
using wire::Segment;

constexpr std::uint8_t kSeqNak = static_cast<std::uint8_t>(NakCode::PsnSequenceError);

class Responder : public Protocol {
protected:
    void SetUp() override { open(qp::QpType::Rc); }
};

// IBA 9.7.5.1.2: one PSN-sequence NAK for a gap, then silence until the
// expected PSN arrives; the next gap gets its own NAK.
TEST_F(Responder, SequenceNakOnceThenSilence) {
    std::vector<std::uint8_t> buf(256);
    post_recv(1, buf);
    feed_send(Segment::Only, kStartPsn + 2, true);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_nak(out[0], kStartPsn, AckKind::Nak, kSeqNak);
    feed_send(Segment::Only, kStartPsn + 3, true);
    feed_send(Segment::Only, kStartPsn + 2, true);
    EXPECT_TRUE(poll_sent().empty());
    // The expected packet ends the gap: it is ACKed, and a new gap NAKed again.
    feed_send(Segment::Only, kStartPsn, true);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn, 1);
    feed_send(Segment::Only, kStartPsn + 5, true);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_nak(out[0], kStartPsn + 1, AckKind::Nak, kSeqNak);
    EXPECT_EQ(counters().seq_naks_sent, 2u);
    EXPECT_EQ(counters().naks_sent[static_cast<std::size_t>(NakReason::PsnSequenceError)], 2u);
    EXPECT_EQ(q_.poll().size(), 1u);  // only the in-order SEND completed
}

// IBA 9.7.5.1.2 (C9-104): a duplicate SEND is not delivered again; it is
// acknowledged with the PSN of the last request received (ePSN - 1).
TEST_F(Responder, DuplicateSendReAckedAtExpectedPsnMinusOne) {
    std::vector<std::uint8_t> a(256), b(256);
    post_recv(1, a);
    post_recv(2, b);
    feed_send(Segment::Only, kStartPsn, true, 16, 0x11);
    feed_send(Segment::Only, kStartPsn + 1, true, 16, 0x22);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);  // coalesced
    expect_ack(out[0], kStartPsn + 1, 2);
    ASSERT_EQ(q_.poll().size(), 2u);
    feed_send(Segment::Only, kStartPsn, true, 16, 0x33);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 1, 2);
    EXPECT_TRUE(q_.poll().empty());
    EXPECT_EQ(a[0], 0x11);  // not written again
    EXPECT_EQ(counters().duplicates, 1u);
}

// IBA 9.7.5.1.3: a duplicate READ is answered from the saved resource, with
// the packets its own PSN, address and length ask for.
TEST_F(Responder, DuplicateReadReplayedFromMidStream) {
    std::vector<std::uint8_t> mem(3 * kMtu);
    for (std::size_t i = 0; i < mem.size(); ++i) {
        mem[i] = static_cast<std::uint8_t>(i * 7 + (i >> 10));
    }
    const auto mr = dut_.reg(mem.data(), mem.size(), mr::Access::kLocalWrite | mr::Access::kRemoteRead);
    const auto va = reinterpret_cast<std::uint64_t>(mem.data());
    feed_read(kStartPsn, va, mr.rkey, 3 * kMtu);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].segment, Segment::First);
    EXPECT_EQ(out[1].segment, Segment::Middle);
    EXPECT_EQ(out[2].segment, Segment::Last);
    for (std::uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(out[i].operation, Operation::RdmaReadResponse);
        EXPECT_EQ(out[i].psn, kStartPsn + i);
    }
    EXPECT_EQ(out[2].msn, 1u);
    // The requester lost the first two responses and asks again from the second.
    feed_read(kStartPsn + 1, va + kMtu, mr.rkey, 2 * kMtu);
    out = poll_sent();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].segment, Segment::First);
    EXPECT_EQ(out[0].psn, kStartPsn + 1);
    EXPECT_TRUE(std::equal(out[0].payload.begin(), out[0].payload.end(), mem.begin() + kMtu));
    EXPECT_EQ(out[1].segment, Segment::Last);
    EXPECT_EQ(out[1].psn, kStartPsn + 2);
    EXPECT_TRUE(std::equal(out[1].payload.begin(), out[1].payload.end(), mem.begin() + 2 * kMtu));
    EXPECT_EQ(qp().epsn.value(), kStartPsn + 3);
}

// IBA 9.7.5.1.3 (C9-106): a duplicate atomic is answered with the value the
// first execution returned and is not executed again.
TEST_F(Responder, DuplicateAtomicAnsweredFromSavedResultNotExecuted) {
    alignas(8) std::uint64_t target = 10;
    const auto mr = dut_.reg(&target, sizeof target, mr::Access::kLocalWrite | mr::Access::kRemoteAtomic);
    const auto va = reinterpret_cast<std::uint64_t>(&target);
    feed_fetch_add(kStartPsn, va, mr.rkey, 5);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::AtomicAcknowledge);
    EXPECT_EQ(out[0].psn, kStartPsn);
    EXPECT_EQ(out[0].atomic_original, 10u);
    EXPECT_EQ(target, 15u);
    feed_fetch_add(kStartPsn, va, mr.rkey, 5);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::AtomicAcknowledge);
    EXPECT_EQ(out[0].psn, kStartPsn);
    EXPECT_EQ(out[0].atomic_original, 10u);
    EXPECT_EQ(target, 15u);
    EXPECT_EQ(out[0].msn, 1u);
}

// IBA 9.7.5.2.8: no receive WQE: an RNR NAK with the QP's min_rnr_timer at
// the SEND's PSN, nothing consumed; the same PSN again once a WQE is there.
TEST_F(Responder, RnrNakThenRetryAccepted) {
    feed_send(Segment::Only, kStartPsn, true);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_nak(out[0], kStartPsn, AckKind::RnrNak, 1);
    EXPECT_EQ(qp().epsn.value(), kStartPsn);
    EXPECT_EQ(counters().rnr_naks_sent, 1u);
    EXPECT_EQ(counters().naks_sent[static_cast<std::size_t>(NakReason::ReceiverNotReady)], 1u);
    std::vector<std::uint8_t> buf(64);
    post_recv(9, buf);
    feed_send(Segment::Only, kStartPsn, true, 16, 0x77);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn, 1);
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 1u);
    EXPECT_EQ(cqes[0].wr_id, 9u);
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(cqes[0].byte_len, 16u);
    EXPECT_EQ(buf[0], 0x77);
}

// IBA 9.7.6.1.1 (C9-92) and the coalescing docs/wire.md describes: requests
// without AckReq get no ACK of their own; the AckReq ones received in one
// poll get one ACK, for the last of them.
TEST_F(Responder, AckOnlyWhereAckReqAsksCoalescedPerPoll) {
    std::vector<std::vector<std::uint8_t>> bufs(5, std::vector<std::uint8_t>(64));
    for (std::size_t i = 0; i < bufs.size(); ++i) {
        post_recv(i, bufs[i]);
    }
    for (std::uint32_t i = 0; i < 3; ++i) {
        feed_send(Segment::Only, kStartPsn + i, false);
    }
    EXPECT_TRUE(poll_sent().empty());
    feed_send(Segment::Only, kStartPsn + 3, true);
    feed_send(Segment::Only, kStartPsn + 4, true);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 4, 5);
    EXPECT_EQ(q_.poll().size(), 5u);
}

// Issue 14 (1): a requester that restarts a message already acknowledged
// gets an ACK only where a duplicate asks for one (AckReq) or ends the
// message - not one per duplicate packet, and none for its first packet
// (rdma_rxe stalls when that ACK arrives while it is still resending).
TEST_F(Responder, DuplicateMessageAckedOnlyWhereAskedOrAtItsEnd) {
    std::vector<std::uint8_t> buf(4 * kMtu);
    post_recv(1, buf);
    const Segment segs[] = {Segment::First, Segment::Middle, Segment::Middle, Segment::Last};
    for (std::uint32_t i = 0; i < 4; ++i) {
        feed_send(segs[i], kStartPsn + i, i == 3, kMtu);
    }
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 3, 1);
    ASSERT_EQ(q_.poll().size(), 1u);
    // The whole message again, one packet per poll (a peer's go-back-N):
    // nothing until its LAST, which asks.
    for (std::uint32_t i = 0; i < 3; ++i) {
        feed_send(segs[i], kStartPsn + i, false, kMtu);
        EXPECT_TRUE(poll_sent().empty()) << "ACK for duplicate packet " << i;
    }
    feed_send(segs[3], kStartPsn + 3, true, kMtu);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 3, 1);
    // A duplicate that asks mid-message is answered; so is a LAST that does
    // not ask (it ends the message).
    feed_send(segs[1], kStartPsn + 1, true, kMtu);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 3, 1);
    feed_send(segs[3], kStartPsn + 3, false, kMtu);
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    expect_ack(out[0], kStartPsn + 3, 1);
    EXPECT_EQ(counters().duplicates, 6u);
    EXPECT_TRUE(q_.poll().empty());
}

// IBA 9.8.3: UC has no NAK; a gap loses the message in progress and the
// responder resumes at the next FIRST or ONLY.
class UcResponder : public Protocol {
protected:
    void SetUp() override { open(qp::QpType::Uc); }
};

TEST_F(UcResponder, ResyncAtNextFirstOrOnly) {
    std::vector<std::uint8_t> a(4 * 1024, 0xEE), b(4 * 1024, 0xEE);
    post_recv(1, a);
    post_recv(2, b);
    constexpr std::uint32_t start = kStartPsn;
    feed_send(Segment::First, start, false, 1024, 0x01);
    // start + 1 (MIDDLE) is los
    feed_send(Segment::Last, start + 2, false, 100, 0x03);
    feed_send(Segment::Middle, start + 3, false, 1024, 0x04);
    feed_send(Segment::Last, start + 4, false, 100, 0x05);
    EXPECT_TRUE(poll_sent().empty());
    EXPECT_TRUE(q_.poll().empty());
    feed_send(Segment::Only, start + 5, false, 200, 0x06);
    EXPECT_TRUE(poll_sent().empty());  // UC: never an ACK or NAK
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 1u);
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(cqes[0].byte_len, 200u);
    // The lost message's WQE was reused for the next one.
    EXPECT_EQ(cqes[0].wr_id, 1u);
    EXPECT_EQ(a[0], 0x06);
    EXPECT_EQ(a[199], 0x06);
    EXPECT_EQ(counters().dropped[static_cast<std::size_t>(DropReason::UcResync)], 3u);
    EXPECT_EQ(counters().rx_dropped, 3u);
}

// The silent drops of docs/wire.md, each counted under its own reason.
TEST_F(Responder, SilentDropsAreCountedByReason) {
    auto dropped = [this](DropReason r) { return counters().dropped[static_cast<std::size_t>(r)]; };
    wire::PacketFields f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    f.ip.dst = ipv4_gid(9);
    feed(f);
    EXPECT_EQ(dropped(DropReason::NotOurGid), 1u);
    f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    f.bth.dest_qp = kQpn + 1;
    feed(f);
    EXPECT_EQ(dropped(DropReason::UnknownQp), 1u);
    f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    f.ip.src = ipv4_gid(9);
    feed(f);
    EXPECT_EQ(dropped(DropReason::NotFromPeer), 1u);
    f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    f.bth.pkey = 0x1234;
    feed(f);
    EXPECT_EQ(dropped(DropReason::BadPkey), 1u);
    f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    f.bth.opcode = opcode_for(wire::Transport::UC, Operation::Send, Segment::Only);
    feed(f);
    EXPECT_EQ(dropped(DropReason::WrongTransport), 1u);
    // A frame whose ICRC does not verify (one payload byte changed after building).
    f = packet(Operation::Send, Segment::Only, kStartPsn, true);
    std::vector<std::uint8_t> data(16, 1);
    f.payload = data;
    std::vector<std::uint8_t> frame(wire::frame_length(f));
    ASSERT_EQ(wire::build_frame(f, frame).status, wire::BuildStatus::Ok);
    frame[wire::payload_offset(f)] ^= 0xFF;
    const wire::ParseResult r = wire::parse_frame(frame);
    ASSERT_TRUE(r.ok());
    dut_.engine().receive(r.packet, now_);
    EXPECT_EQ(dropped(DropReason::BadIcrc), 1u);
    EXPECT_EQ(counters().rx_dropped, 6u);
    EXPECT_TRUE(poll_sent().empty());
    EXPECT_EQ(qp().epsn.value(), kStartPsn);
}

}  // namespace
}  // namespace uroce::engine::test
