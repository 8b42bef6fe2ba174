// The requester and completer's rules (IBA 9.7.5.2, 9.7.6), one packet at a
// time: what the engine sends again after a NAK, an RNR NAK, a gap in READ
// responses, an ACK past a lost READ response and a timeout, and when it
// gives up.
#include <algorithm>

#include "protocol_fixture.h"

namespace uroce::engine::test {
namespace {

using wire::AckKind;
using wire::Operation;
using wire::Segment;

class Completer : public Protocol {
protected:
    void SetUp() override {
        open(qp::QpType::Rc, [this](qp::QpAttr& a) {
            a.retry_cnt = retry_cnt_;
            a.rnr_retry = rnr_retry_;
        });
    }
    std::uint8_t retry_cnt_ = 2;
    std::uint8_t rnr_retry_ = 1;
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = static_cast<std::uint8_t>(i * 13 + seed + (i >> 10));
    }
    return v;
}

// IBA 9.7.5.2.8: an RNR NAK stops the requester for the timer it carries,
// then the same PSN goes again; rnr_retry such NAKs, then RNR_RETRY_EXC_ERR.
TEST_F(Completer, RnrNakWaitsThenResendsUntilRetriesRunOut) {
    std::vector<std::uint8_t> data(64, 0x42);
    post_send(WrOpcode::Send, 7, data);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::Send);
    EXPECT_EQ(out[0].psn, kStartPsn);
    // RNR timer code 13: 960 us (IBA table 45).
    feed_ack(kStartPsn, AckKind::RnrNak, 13);
    advance(std::chrono::microseconds(900));
    EXPECT_TRUE(poll_sent().empty());
    advance(std::chrono::microseconds(100));
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].psn, kStartPsn);
    EXPECT_TRUE(q_.poll().empty());
    // rnr_retry is 1: the second RNR NAK ends it.
    feed_ack(kStartPsn, AckKind::RnrNak, 13);
    poll();
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 1u);
    EXPECT_EQ(cqes[0].wr_id, 7u);
    EXPECT_EQ(cqes[0].status, static_cast<std::uint32_t>(WcStatus::RnrRetryExcErr));
    EXPECT_EQ(counters().rnr_naks_received, 2u);
    EXPECT_EQ(counters().naks_received[static_cast<std::size_t>(NakReason::ReceiverNotReady)], 2u);
}

// IBA 9.7.6.1.3: no ACK within the local ACK timeout: the requester sends
// again from the oldest unacknowledged PSN, retry_cnt times; then RETRY_EXC_ERR.
TEST_F(Completer, TimeoutResendsRetryCountTimesThenFails) {
    std::vector<std::uint8_t> data(64, 0x42);
    post_send(WrOpcode::Send, 8, data);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    const auto timeout = *ack_timeout(14);
    for (int retry = 0; retry < retry_cnt_; ++retry) {
        advance(timeout);
        out = poll_sent();
        ASSERT_EQ(out.size(), 1u) << "retry " << retry;
        EXPECT_EQ(out[0].psn, kStartPsn);
        EXPECT_TRUE(q_.poll().empty());
    }
    advance(timeout);
    EXPECT_TRUE(poll_sent().empty());
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 1u);
    EXPECT_EQ(cqes[0].wr_id, 8u);
    EXPECT_EQ(cqes[0].status, static_cast<std::uint32_t>(WcStatus::RetryExcErr));
    EXPECT_EQ(counters().timeouts, static_cast<std::uint64_t>(retry_cnt_ + 1));
}

// IBA 9.7.5.1.2 seen from the requester: a PSN-sequence NAK acknowledges
// what came before it and the requester goes back to the NAK's PSN.
TEST_F(Completer, SequenceNakGoesBackToItsPsn) {
    std::vector<std::uint8_t> data(3 * kMtu, 0x42);
    post_send(WrOpcode::Send, 9, data);
    auto out = poll_sent();
    ASSERT_GE(out.size(), 3u);
    feed_ack(kStartPsn + 1, AckKind::Nak, static_cast<std::uint8_t>(wire::NakCode::PsnSequenceError));
    out = poll_sent();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].psn, kStartPsn + 1);
    EXPECT_EQ(out[0].segment, Segment::Middle);
    EXPECT_EQ(out[1].psn, kStartPsn + 2);
    EXPECT_EQ(counters().seq_naks_received, 1u);
    EXPECT_EQ(counters().naks_received[static_cast<std::size_t>(NakReason::PsnSequenceError)], 1u);
}

// IBA 9.7.5.1.2 (C9-112): a gap in READ responses makes the requester ask
// again from the first missing response, once per gap.
TEST_F(Completer, GapInReadResponsesAsksAgainFromTheMissingOne) {
    std::vector<std::uint8_t> local(3 * kMtu, 0);
    const std::vector<std::uint8_t> remote = pattern(3 * kMtu, 3);
    constexpr std::uint64_t kRemoteVa = 0x10000;
    post_send(WrOpcode::RdmaRead, 10, local, kRemoteVa, 0x1234);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::RdmaReadRequest);
    EXPECT_EQ(out[0].read_length, 3 * kMtu);
    const std::span<const std::uint8_t> r(remote);
    feed_read_response(Segment::First, kStartPsn, r.subspan(0, kMtu));
    feed_read_response(Segment::Last, kStartPsn + 2, r.subspan(2 * kMtu, kMtu));  // MIDDLE lost
    out = poll_sent();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::RdmaReadRequest);
    EXPECT_EQ(out[0].psn, kStartPsn + 1);
    EXPECT_EQ(out[0].read_va, kRemoteVa + kMtu);
    EXPECT_EQ(out[0].read_length, 2 * kMtu);
    // A later response of the same gap does not ask again.
    feed_read_response(Segment::Last, kStartPsn + 2, r.subspan(2 * kMtu, kMtu));
    EXPECT_TRUE(poll_sent().empty());
    EXPECT_EQ(counters().seq_naks_received, 1u);
    feed_read_response(Segment::First, kStartPsn + 1, r.subspan(kMtu, kMtu));
    feed_read_response(Segment::Last, kStartPsn + 2, r.subspan(2 * kMtu, kMtu));
    poll();
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 1u);
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(cqes[0].opcode, static_cast<std::uint32_t>(WcOpcode::RdmaRead));
    EXPECT_EQ(local, remote);
}

// IBA 9.7.5.1.4 (implied NAK): an ACK for a PSN past a READ whose response
// never came means the response was lost: the READ is asked for again and
// does not complete until its data has arrived.
TEST_F(Completer, AckPastLostReadResponseAsksAgain) {
    std::vector<std::uint8_t> local(kMtu, 0);
    std::vector<std::uint8_t> data(64, 0x42);
    const std::vector<std::uint8_t> remote = pattern(kMtu, 5);
    post_send(WrOpcode::RdmaRead, 11, local, 0x20000, 0x1234);
    post_send(WrOpcode::Send, 12, data);
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].operation, Operation::RdmaReadRequest);
    EXPECT_EQ(out[1].operation, Operation::Send);
    EXPECT_EQ(out[1].psn, kStartPsn + 1);
    feed_ack(kStartPsn + 1, AckKind::Ack, 0x1F, 2);
    out = poll_sent();
    ASSERT_GE(out.size(), 1u);
    EXPECT_EQ(out[0].operation, Operation::RdmaReadRequest);
    EXPECT_EQ(out[0].psn, kStartPsn);
    EXPECT_TRUE(q_.poll().empty());  // neither completes before the READ's data
    feed_read_response(Segment::Only, kStartPsn, remote);
    feed_ack(kStartPsn + 1, AckKind::Ack, 0x1F, 2);
    poll();
    const auto cqes = q_.poll();
    ASSERT_EQ(cqes.size(), 2u);
    EXPECT_EQ(cqes[0].wr_id, 11u);
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(cqes[1].wr_id, 12u);
    EXPECT_EQ(cqes[1].status, 0u);
    EXPECT_EQ(local, remote);
}

// A go-back-N (here a PSN-sequence NAK) points the requester at a WQE; an
// ACK that was late or reordered then acknowledges that WQE before its
// resend went. The requester goes on from the next WQE. It used to stay on
// the retired one, whose slot the next fetch fills with a newer WQE: that
// WQE went out in the middle of the stream with the wrong PSNs, and the
// WQE after the acknowledged ones never did (RETRY_EXC_ERR under faults).
class CompleterFullRing : public Completer {
protected:
    void SetUp() override {
        q_.sq_entries = 4;
        Completer::SetUp();
    }
};

TEST_F(CompleterFullRing, AckOfTheWqeBeingResentMovesOnToTheNext) {
    constexpr std::uint64_t kVa = 0x10000;
    std::vector<std::uint8_t> data(2 * kMtu, 0x42);
    for (std::uint64_t wr = 1; wr <= 4; ++wr) {
        post_send(WrOpcode::RdmaWrite, wr, data, wr * kVa, 0x77);
    }
    auto out = poll_sent();
    ASSERT_EQ(out.size(), 4u);  // the initial window: WQEs 1 and 2
    feed_ack(kStartPsn + 1, AckKind::Nak, static_cast<std::uint8_t>(wire::NakCode::PsnSequenceError));
    feed_ack(kStartPsn + 3, AckKind::Ack, 0x1F, 2);  // late: WQEs 1 and 2 had arrived
    post_send(WrOpcode::RdmaWrite, 5, data, 5 * kVa, 0x77);  // into WQE 1's slot
    out = poll_sent();
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out[0].psn, kStartPsn + 4);
    EXPECT_EQ(out[0].segment, Segment::First);
    EXPECT_EQ(out[0].read_va, 3 * kVa);
    std::vector<std::uint64_t> done;
    for (int round = 0; round < 20 && done.size() < 5; ++round) {
        std::uint32_t highest = kStartPsn + 3;
        for (const SentFrame& s : out) {
            highest = std::max(highest, s.psn);
            if (s.segment == Segment::First) {  // WQE n starts at PSN 2(n - 1), its address n * kVa
                EXPECT_EQ(s.psn - kStartPsn, (s.read_va / kVa - 1) * 2);
            }
        }
        feed_ack(highest, AckKind::Ack, 0x1F, (highest - kStartPsn + 1) / 2);
        out = poll_sent();
        for (const auto& c : q_.poll()) {
            EXPECT_EQ(c.status, 0u) << "wr " << c.wr_id;
            done.push_back(c.wr_id);
        }
    }
    EXPECT_EQ(done, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(counters().timeouts, 0u);
}

}  // namespace
}  // namespace uroce::engine::test
