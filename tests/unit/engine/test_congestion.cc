// Graceful under loss and load (docs/congestion.md): IBTA retry counts and
// their time bound, the congestion window shrinking on loss and timeouts and
// growing back, a port that refuses frames losing none of them, and many QPs
// sharing a lossy, rate-limited wire.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

constexpr std::uint32_t kConnectMask = qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu |
                                       qp::AttrMask::kDestQpn | qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn |
                                       qp::AttrMask::kAccessFlags | qp::AttrMask::kTimeout |
                                       qp::AttrMask::kRetryCnt | qp::AttrMask::kRnrRetry |
                                       qp::AttrMask::kMinRnrTimer | qp::AttrMask::kMaxQpRdAtomic |
                                       qp::AttrMask::kMaxDestRdAtomic | qp::AttrMask::kQkey;

// The PSN of an RC request frame (IPv4, no VLAN: BTH at 42, PSN in its last 3 bytes).
std::uint32_t psn_of(std::span<const std::uint8_t> frame) {
    return (std::uint32_t{frame[42 + 9]} << 16) | (std::uint32_t{frame[42 + 10]} << 8) | frame[42 + 11];
}
bool is_request(std::span<const std::uint8_t> frame) { return frame[42] < 0x0D || frame[42] > 0x12; }

// A port per node that takes `per_step` frames per 10 us step and refuses
// the rest (true: refused).
class RateLimitedPorts : public TwoNodes {
protected:
    bool take(int sender, int per_step) {
        auto& [step, taken] = ports_[sender];
        if (now_ != step) {
            step = now_;
            taken = 0;
        }
        return ++taken > per_step;
    }

private:
    std::pair<Clock::time_point, int> ports_[2]{};
};

class Congestion : public RateLimitedPorts {
protected:
    void SetUp() override { connect(qp::QpType::Rc); }

    const QueuePair& requester() { return *a_.engine().find_qp(Qpn{0x11}); }

    // Posts an RDMA WRITE of `src` into `dst` on B.
    void post_write(std::vector<std::uint8_t>& src, std::vector<std::uint8_t>& dst, std::uint64_t wr_id) {
        const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
        const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
        uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, wr_id, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
        w.u.rdma.rkey = dmr.rkey;
        const uroce_sge s = sge_of(src.data(), static_cast<std::uint32_t>(src.size()), smr.lkey);
        qa_.post_send(w, std::span(&s, 1));
    }

    void set_retry(std::uint8_t retry_cnt, std::uint8_t timeout) {
        qp::QpAttr attr = rts_attr(b_, 0x22);
        attr.retry_cnt = retry_cnt;
        attr.timeout = timeout;
        a_.engine().modify_qp(Qpn{0x11}, attr, qp::AttrMask::kRetryCnt | qp::AttrMask::kTimeout);
    }
};

TEST_F(Congestion, RetryCount7IsSevenRetriesThenRetryExceeded) {
    // IBA 9.7.6.1.3: retry_cnt 7 is a count like any other (rdma_rxe retries
    // forever instead). Timeout 8: 4.096 us * 2^8 = 1.048576 ms.
    set_retry(7, 8);
    const auto timeout = *ack_timeout(8);
    wire_.filter = [](std::span<const std::uint8_t>) { return 0; };  // the peer is gone
    std::vector<std::uint8_t> src(3 * kMtu, 1), dst(3 * kMtu, 0);
    post_write(src, dst, 1);
    const Clock::time_point posted = now_;
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    const auto elapsed = now_ - posted;
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::RetryExcErr));
    const EngineCounters& c = a_.engine().counters();
    EXPECT_EQ(c.timeouts, 8u);  // the first try and 7 retries, each waited out
    // After a timeout the window is one packet: each retry resends the oldest.
    EXPECT_EQ(c.retransmitted_packets, 7u);
    // (retry_cnt + 1) timeouts after the first send, give or take the
    // fixture's 10 us steps (one per timeout at most).
    EXPECT_GE(elapsed, 8 * timeout);
    EXPECT_LE(elapsed, 8 * timeout + std::chrono::microseconds(10 * 10));
    EXPECT_EQ(a_.engine().qp_state(Qpn{0x11}), qp::QpState::Err);
}

TEST_F(Congestion, RetryCountZeroFailsAtTheFirstTimeout) {
    set_retry(0, 8);
    wire_.filter = [](std::span<const std::uint8_t>) { return 0; };
    std::vector<std::uint8_t> src(100, 1), dst(100, 0);
    post_write(src, dst, 1);
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::RetryExcErr));
    EXPECT_EQ(a_.engine().counters().timeouts, 1u);
    EXPECT_EQ(a_.engine().counters().retransmitted_packets, 0u);
}

TEST_F(Congestion, RnrRetry7WaitsForeverEvenWithRetryCountZero) {
    set_retry(0, 8);  // retry_cnt is for lost ACKs, not RNR waits
    std::vector<std::uint8_t> src(500), dst(500, 0);
    fill_pattern(src, 5);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge s = sge_of(src.data(), 500, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    // Far more waits than any count (min_rnr_timer 1: 10 us each).
    ASSERT_TRUE(run_until([&] { return a_.engine().counters().rnr_naks_received >= 100; }));
    EXPECT_TRUE(qa_.poll().empty());
    EXPECT_EQ(a_.engine().qp_state(Qpn{0x11}), qp::QpState::Rts);
    const uroce_sge r = sge_of(dst.data(), 500, dmr.lkey);
    qb_.post_recv(9, std::span(&r, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(src, dst);
}

TEST_F(Congestion, WindowHalvesOnALossAndGrowsBack) {
    constexpr std::size_t kSize = 8 * 1024 * kMtu;  // 8192 packets
    std::vector<std::uint8_t> src(kSize), dst(kSize, 0);
    fill_pattern(src, 11);
    // Lose one packet, once the window has opened fully.
    std::uint32_t lost_psn = 0;
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (lost_psn == 0 && is_request(f) && requester().window.packets() == 128) {
            lost_psn = psn_of(f);
            return 0;
        }
        return 1;
    };
    post_write(src, dst, 1);
    std::uint32_t before = 0, lowest_after = 1000, highest_after = 0;
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        const std::uint32_t w = requester().window.packets();
        if (a_.engine().counters().seq_naks_received == 0) {
            before = std::max(before, w);
        } else if (lowest_after == 1000 || w < lowest_after) {
            lowest_after = std::min(lowest_after, w);
            highest_after = w;
        } else {
            highest_after = std::max(highest_after, w);
        }
        return !a.empty();
    }));
    ASSERT_NE(lost_psn, 0u);
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(before, 128u);
    EXPECT_EQ(a_.engine().counters().seq_naks_received, 1u);
    EXPECT_EQ(lowest_after, 64u);   // halved once, not once per packet of the lost window
    EXPECT_GT(highest_after, 80u);  // and growing back, one packet per window
    EXPECT_EQ(a_.engine().counters().timeouts, 0u);
}

TEST_F(Congestion, WindowDropsToOnePacketOnATimeoutAndGrowsBack) {
    set_retry(7, 8);
    constexpr std::size_t kSize = 2048 * kMtu;
    std::vector<std::uint8_t> src(kSize), dst(kSize, 0);
    fill_pattern(src, 12);
    // Black out the wire for a while once the window is open: every frame
    // in flight is lost, ACKs included, so only the timer recovers.
    bool blackout = false, done_blackout = false;
    Clock::time_point blackout_end{};
    wire_.filter = [&](std::span<const std::uint8_t>) {
        if (!done_blackout && !blackout && requester().window.packets() == 128) {
            blackout = true;
            blackout_end = now_ + std::chrono::microseconds(200);
        }
        if (blackout && now_ >= blackout_end) {
            blackout = false;
            done_blackout = true;
        }
        return blackout ? 0 : 1;
    };
    post_write(src, dst, 1);
    std::uint32_t after_timeout = 0, highest_after = 0;
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        if (a_.engine().counters().timeouts > 0) {
            const std::uint32_t w = requester().window.packets();
            if (after_timeout == 0) {
                after_timeout = w;
            }
            highest_after = std::max(highest_after, w);
        }
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(a_.engine().counters().timeouts, 1u);
    EXPECT_EQ(after_timeout, 1u);
    EXPECT_GE(highest_after, 64u);  // slow start back to the threshold, and beyond
}

TEST_F(Congestion, AReadLongerThanTheWindowIsAskedForInParts) {
    // A new QP's window is 4 packets: a 64-packet READ goes as several READ
    // requests, each for what the window has room for, and arrives whole.
    constexpr std::uint32_t kSize = 64 * kMtu - 100;
    std::vector<std::uint8_t> remote(kSize), back(kSize, 0);
    fill_pattern(remote, 41);
    const auto rmr = b_.reg(remote.data(), kSize, kAllAccess);
    const auto bmr = a_.reg(back.data(), kSize, kAllAccess);
    std::vector<std::uint32_t> asked;  // RETH DMA length of each READ request
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (f[42] == 0x0C) {  // RC RDMA READ request: RETH after the 12-byte BTH
            asked.push_back((std::uint32_t{f[54 + 12]} << 24) | (std::uint32_t{f[54 + 13]} << 16) |
                            (std::uint32_t{f[54 + 14]} << 8) | f[54 + 15]);
        }
        return 1;
    };
    uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 1, 1);
    rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
    rd.u.rdma.rkey = rmr.rkey;
    const uroce_sge s = sge_of(back.data(), kSize, bmr.lkey);
    qa_.post_send(rd, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(a[0].byte_len, kSize);
    EXPECT_EQ(remote, back);
    ASSERT_GT(asked.size(), 1u);
    EXPECT_EQ(asked[0], 4 * kMtu);  // the initial window
    std::uint64_t total = 0;
    for (std::uint32_t n : asked) {
        total += n;
    }
    EXPECT_EQ(total, kSize);  // the parts cover the READ once: nothing lost, nothing asked twice
    EXPECT_EQ(a_.engine().counters().retransmitted_packets, 0u);
}

TEST_F(Congestion, ReadsCompletingOutOfOrderDoNotStallTheWindow) {
    // The last response of the first READ is lost; the second READ's
    // responses all arrive first. Once the first is asked for again and
    // completes, the oldest unacknowledged PSN must move past both, or the
    // third READ (64 packets, more than the window then) never fits.
    constexpr std::uint32_t kSize = 64 * kMtu;
    std::vector<std::uint8_t> remote(kSize), back1(kSize, 0), back2(kSize, 0), back3(kSize, 0);
    fill_pattern(remote, 31);
    const auto rmr = b_.reg(remote.data(), kSize, kAllAccess);
    const QueuePair& q = requester();
    const std::uint32_t last_of_first = q.next_psn.value() + 63;
    bool lost = false;
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (!lost && !is_request(f) && psn_of(f) == last_of_first) {
            lost = true;
            return 0;
        }
        return 1;
    };
    std::vector<std::uint8_t>* backs[] = {&back1, &back2, &back3};
    for (std::uint64_t i = 0; i < 3; ++i) {
        const auto bmr = a_.reg(backs[i]->data(), kSize, kAllAccess);
        uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, i + 1, 1);
        rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
        rd.u.rdma.rkey = rmr.rkey;
        const uroce_sge s = sge_of(backs[i]->data(), kSize, bmr.lkey);
        qa_.post_send(rd, std::span(&s, 1));
    }
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return a.size() == 3;
    }));
    EXPECT_TRUE(lost);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(a[i].status, 0u) << i;
        EXPECT_EQ(remote, *backs[i]) << i;
    }
    EXPECT_EQ(a_.engine().counters().timeouts, 0u);
}

TEST_F(Congestion, ALaterReadsProgressDoesNotHideAnOlderReadsLoss) {
    // The second half of the first READ's responses is lost, and so is every
    // answer to asking for it again for a while; the second READ's responses
    // all arrive. The timer must then ask for the first READ's missing part:
    // the second READ's progress must not have moved the retransmit point
    // past it.
    set_retry(7, 8);
    constexpr std::uint32_t kSize = 64 * kMtu;
    std::vector<std::uint8_t> remote(kSize), back1(kSize, 0), back2(kSize, 0);
    fill_pattern(remote, 32);
    const auto rmr = b_.reg(remote.data(), kSize, kAllAccess);
    const std::uint32_t first = requester().next_psn.value();
    const Clock::time_point outage_end = now_ + std::chrono::microseconds(1500);  // past one timeout
    int lost = 0;
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        const std::uint32_t psn = psn_of(f);
        if (now_ < outage_end && !is_request(f) && psn >= first + 32 && psn < first + 64) {
            ++lost;
            return 0;
        }
        return 1;
    };
    std::vector<std::uint8_t>* backs[] = {&back1, &back2};
    for (std::uint64_t i = 0; i < 2; ++i) {
        const auto bmr = a_.reg(backs[i]->data(), kSize, kAllAccess);
        uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, i + 1, 1);
        rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
        rd.u.rdma.rkey = rmr.rkey;
        const uroce_sge s = sge_of(backs[i]->data(), kSize, bmr.lkey);
        qa_.post_send(rd, std::span(&s, 1));
    }
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return a.size() == 2;
    }));
    // The lost half, less what was asked for only after the outage, and
    // the retries that went during it.
    EXPECT_GT(lost, 16);
    EXPECT_GT(a_.engine().counters().timeouts, 0u);
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(a[i].status, 0u) << i;
        EXPECT_EQ(remote, *backs[i]) << i;
    }
}

// The DMA length of an RC READ request frame (RETH after the 12-byte BTH).
std::uint32_t read_length_of(std::span<const std::uint8_t> f) {
    return (std::uint32_t{f[54 + 12]} << 24) | (std::uint32_t{f[54 + 13]} << 16) | (std::uint32_t{f[54 + 14]} << 8) |
           f[54 + 15];
}

TEST_F(Congestion, ARepeatedReadIsAnsweredWithWhatItAsksFor) {
    // The first part of a READ (4 packets) loses its last three responses;
    // after the timeout the window is one packet and the requester asks for
    // one. The responder must answer that one packet, not replay the rest
    // of the part: after a timeout, 256 QPs replaying whole parts at once
    // overran the receiver again (docs/congestion.md).
    set_retry(7, 8);
    constexpr std::uint32_t kSize = 16 * kMtu;
    std::vector<std::uint8_t> remote(kSize), back(kSize, 0);
    fill_pattern(remote, 43);
    const auto rmr = b_.reg(remote.data(), kSize, kAllAccess);
    const auto bmr = a_.reg(back.data(), kSize, kAllAccess);
    const std::uint32_t first = requester().next_psn.value();
    std::vector<std::uint32_t> lost;
    std::vector<int> answers;  // responses B sent for each READ request A sent
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (f[42] == 0x0C) {
            answers.push_back(0);
            return 1;
        }
        if (is_request(f)) {
            return 1;
        }
        const std::uint32_t psn = psn_of(f);
        if (!answers.empty()) {
            ++answers.back();
        }
        if (psn > first && psn < first + 4 && std::find(lost.begin(), lost.end(), psn) == lost.end()) {
            lost.push_back(psn);
            return 0;
        }
        return 1;
    };
    uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 1, 1);
    rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
    rd.u.rdma.rkey = rmr.rkey;
    const uroce_sge s = sge_of(back.data(), kSize, bmr.lkey);
    qa_.post_send(rd, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(remote, back);
    EXPECT_EQ(lost.size(), 3u);
    EXPECT_EQ(a_.engine().counters().timeouts, 1u);
    ASSERT_GE(answers.size(), 2u);
    EXPECT_EQ(answers[0], 4);  // the first part
    EXPECT_EQ(answers[1], 1);  // the retry after the timeout: one packet asked, one answered
}

TEST_F(Congestion, AReadAskedForAgainStopsWhereTheFirstAskingStopped) {
    // A 16-packet READ goes in parts (the window opens from 4); one response
    // of the second part, near its end, is lost. The requester asks again from it, and must
    // not ask past the end of that part: the responder answers a repeated
    // request from the part it saved, so a longer one got a short answer and
    // the READ waited a timeout for the rest.
    set_retry(7, 8);
    constexpr std::uint32_t kSize = 16 * kMtu;
    std::vector<std::uint8_t> remote(kSize), back(kSize, 0);
    fill_pattern(remote, 44);
    const auto rmr = b_.reg(remote.data(), kSize, kAllAccess);
    const auto bmr = a_.reg(back.data(), kSize, kAllAccess);
    const std::uint32_t first = requester().next_psn.value();
    std::vector<std::pair<std::uint32_t, std::uint32_t>> asked;  // (PSN, packets) of each READ request
    bool lost = false;
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (f[42] == 0x0C) {
            asked.emplace_back(psn_of(f) - first, (read_length_of(f) + kMtu - 1) / kMtu);
            return 1;
        }
        if (!lost && !is_request(f) && psn_of(f) == first + 10) {
            lost = true;
            return 0;
        }
        return 1;
    };
    uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 1, 1);
    rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
    rd.u.rdma.rkey = rmr.rkey;
    const uroce_sge s = sge_of(back.data(), kSize, bmr.lkey);
    qa_.post_send(rd, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(remote, back);
    EXPECT_TRUE(lost);
    ASSERT_GE(asked.size(), 3u);
    EXPECT_EQ(asked[0], std::make_pair(0u, 4u));
    const std::uint32_t second_end = 4 + asked[1].second;
    ASSERT_GT(second_end, 11u);
    EXPECT_EQ(asked[2].first, 10u);                      // asked again from the lost one
    EXPECT_LE(asked[2].first + asked[2].second, second_end);  // and no further than the part it repeats
    EXPECT_EQ(a_.engine().counters().timeouts, 0u);    // no wait for a short answer
}

TEST_F(Congestion, APortThatRefusesFramesLosesNone) {
    // The port takes 5 frames per 10 us step and refuses the rest: the
    // engine must keep every refused frame and send it later, so nothing is
    // lost and nothing needs resending.
    wire_.refuse = [&](int sender, std::span<const std::uint8_t>) { return take(sender, 5); };
    constexpr std::uint32_t kSize = 200 * 1024 + 17;
    std::vector<std::uint8_t> src(kSize), dst(kSize, 0), sent_dst(kSize, 0), back(kSize, 0);
    fill_pattern(src, 21);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const auto rmr = b_.reg(sent_dst.data(), sent_dst.size(), kAllAccess);
    const auto bmr = a_.reg(back.data(), back.size(), kAllAccess);
    const uroce_sge r = sge_of(sent_dst.data(), kSize, rmr.lkey);
    qb_.post_recv(7, std::span(&r, 1));
    const uroce_sge s = sge_of(src.data(), kSize, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    uroce_send_wqe wr = send_wqe(WrOpcode::RdmaWrite, 2, 1);
    wr.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    wr.u.rdma.rkey = dmr.rkey;
    qa_.post_send(wr, std::span(&s, 1));
    uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 3, 1);
    rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    rd.u.rdma.rkey = dmr.rkey;
    const uroce_sge bs = sge_of(back.data(), kSize, bmr.lkey);
    qa_.post_send(rd, std::span(&bs, 1));
    std::vector<uroce_cqe> a, b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        for (auto& e : qb_.poll()) b.push_back(e);
        return a.size() == 3 && b.size() == 1;
    }));
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(a[i].status, 0u) << i;
        EXPECT_EQ(a[i].wr_id, i + 1);
    }
    EXPECT_EQ(b[0].byte_len, kSize);
    EXPECT_EQ(src, sent_dst);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(src, back);
    EXPECT_GT(wire_.refused, 100u);
    for (Node* n : {&a_, &b_}) {
        const EngineCounters& c = n->engine().counters();
        EXPECT_GT(c.tx_deferred, 0u);
        EXPECT_EQ(c.retransmits, 0u);
        EXPECT_EQ(c.retransmitted_packets, 0u);
        EXPECT_EQ(c.timeouts, 0u);
        EXPECT_EQ(c.seq_naks_sent, 0u);
    }
    EXPECT_EQ(wire_.dropped, 0u);
}

// 256 QPs on each node over a wire that carries 64 frames per 10 us step
// through a queue of 512 frames (tail drop, like a receive ring), and loses
// 0.5% at random besides.
class ManyQps : public TwoNodes {
protected:
    static constexpr std::uint32_t kQps = 256;
    static constexpr std::size_t kQueue = 512;

    void SetUp() override {
        for (std::uint32_t i = 0; i < kQps; ++i) {
            auto qa = std::make_unique<TestQp>();
            auto qb = std::make_unique<TestQp>();
            make_qp(a_, *qa, 0x100 + i, qp::QpType::Rc, 10 + i);
            make_qp(b_, *qb, 0x1000 + i, qp::QpType::Rc, 10 + i);
            a_.engine().modify_qp(Qpn{0x100 + i}, rts_attr(b_, 0x1000 + i), kConnectMask);
            b_.engine().modify_qp(Qpn{0x1000 + i}, rts_attr(a_, 0x100 + i), kConnectMask);
            as_.push_back(std::move(qa));
            bs_.push_back(std::move(qb));
        }
        wire_.deliver_per_step = 64;
        wire_.filter = [this](std::span<const std::uint8_t>) {
            if (wire_.in_flight.size() >= kQueue) {
                return 0;
            }
            return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < 0.005 ? 0 : 1;
        };
    }

    std::vector<std::unique_ptr<TestQp>> as_, bs_;
    std::mt19937_64 rng_{77};
};

TEST_F(ManyQps, WritesAndReadsCompleteWithBoundedRetransmissions) {
    constexpr std::uint32_t kSize = 16 * kMtu;  // 16 packets per message
    constexpr int kMessages = 4;                // WRITEs per QP
    constexpr int kReads = 4;                   // READs per QP
    std::vector<std::vector<std::uint8_t>> src(kQps), dst(kQps), back(kQps);
    std::uint32_t expected = 0;
    for (std::uint32_t i = 0; i < kQps; ++i) {
        src[i].resize(kSize);
        fill_pattern(src[i], i);
        dst[i].assign(kSize, 0);
        back[i].assign(kSize, 0);
        const auto smr = a_.reg(src[i].data(), kSize, kAllAccess);
        const auto dmr = b_.reg(dst[i].data(), kSize, kAllAccess);
        const auto bmr = a_.reg(back[i].data(), kSize, kAllAccess);
        for (int m = 0; m < kMessages; ++m) {
            uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 1, 1);
            w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst[i].data());
            w.u.rdma.rkey = dmr.rkey;
            const uroce_sge s = sge_of(src[i].data(), kSize, smr.lkey);
            as_[i]->post_send(w, std::span(&s, 1));
        }
        uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 2, 1);
        rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst[i].data());
        rd.u.rdma.rkey = dmr.rkey;
        const uroce_sge bs = sge_of(back[i].data(), kSize, bmr.lkey);
        for (int m = 0; m < kReads; ++m) {
            as_[i]->post_send(rd, std::span(&bs, 1));
        }
        expected += kMessages + kReads;
    }
    std::uint32_t completed = 0, failed = 0;
    const Clock::time_point start = now_;
    ASSERT_TRUE(run_until(
        [&] {
            for (auto& q : as_) {
                for (auto& e : q->poll()) {
                    ++completed;
                    failed += e.status != 0 ? 1 : 0;
                }
            }
            return completed == expected;
        },
        100000))
        << "completed " << completed << " of " << expected;
    EXPECT_EQ(failed, 0u);
    for (std::uint32_t i = 0; i < kQps; ++i) {
        ASSERT_EQ(src[i], dst[i]) << i;
        ASSERT_EQ(src[i], back[i]) << i;
    }
    // Packets needed: the WRITE packets and READ requests plus the READ
    // responses; resent: bounded well below what was needed.
    const std::uint64_t needed = std::uint64_t{kQps} * (kMessages * 16 + kReads * (1 + 16));
    const EngineCounters& ca = a_.engine().counters();
    const EngineCounters& cb = b_.engine().counters();
    std::printf("fake ms %ld, needed %lu, sent A %lu B %lu, resent %lu, timeouts %lu, seq naks %lu, wire dropped %lu\n",
                static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(now_ - start).count()),
                static_cast<unsigned long>(needed), static_cast<unsigned long>(ca.tx_packets),
                static_cast<unsigned long>(cb.tx_packets), static_cast<unsigned long>(ca.retransmitted_packets),
                static_cast<unsigned long>(ca.timeouts), static_cast<unsigned long>(ca.seq_naks_received),
                static_cast<unsigned long>(wire_.dropped));
    EXPECT_GT(wire_.dropped, 0u);
    EXPECT_LT(ca.retransmitted_packets, needed / 4);
    EXPECT_LT(ca.timeouts, std::uint64_t{kQps} * 4);
}

TEST_F(ManyQps, TogetherTheyKeepToTheEngineWindow) {
    // Every QP's own window would grow to 128 packets (64 here, a message):
    // 16384 in flight. The engine's window shares 256 among them, each
    // keeping at least the initial window (4): 1024.
    wire_.filter = [](std::span<const std::uint8_t>) { return 1; };
    constexpr std::uint32_t kSize = 64 * kMtu;
    std::vector<std::vector<std::uint8_t>> src(kQps), dst(kQps);
    for (std::uint32_t i = 0; i < kQps; ++i) {
        src[i].assign(kSize, static_cast<std::uint8_t>(i));
        dst[i].assign(kSize, 0);
        const auto smr = a_.reg(src[i].data(), kSize, kAllAccess);
        const auto dmr = b_.reg(dst[i].data(), kSize, kAllAccess);
        uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 1, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst[i].data());
        w.u.rdma.rkey = dmr.rkey;
        const uroce_sge s = sge_of(src[i].data(), kSize, smr.lkey);
        as_[i]->post_send(w, std::span(&s, 1));
    }
    const EngineConfig config;
    const std::uint32_t limit = std::max(config.engine_window, kQps * config.initial_window);
    std::uint32_t most = 0, completed = 0;
    ASSERT_TRUE(run_until([&] {
        std::uint32_t in_flight = 0;
        for (std::uint32_t i = 0; i < kQps; ++i) {
            const QueuePair* q = a_.engine().find_qp(Qpn{0x100 + i});
            in_flight += static_cast<std::uint32_t>(std::max(distance(q->sent_high, q->unacked), 0));
            for (auto& e : as_[i]->poll()) {
                EXPECT_EQ(e.status, 0u);
                ++completed;
            }
        }
        most = std::max(most, in_flight);
        return completed == kQps;
    }));
    EXPECT_GT(most, limit / 2);  // the window is used
    EXPECT_LE(most, limit);
    for (std::uint32_t i = 0; i < kQps; ++i) {
        EXPECT_EQ(src[i], dst[i]) << i;
    }
}

// 32 QPs with long WRITEs behind a port that takes 8 frames per step: the
// QPs take turns, so after a while each has sent about as much as the others.
class SharedPort : public RateLimitedPorts {
protected:
    static constexpr std::uint32_t kQps = 32;

    void SetUp() override {
        for (std::uint32_t i = 0; i < kQps; ++i) {
            auto qa = std::make_unique<TestQp>();
            auto qb = std::make_unique<TestQp>();
            make_qp(a_, *qa, 0x100 + i, qp::QpType::Rc, 10 + i);
            make_qp(b_, *qb, 0x1000 + i, qp::QpType::Rc, 10 + i);
            a_.engine().modify_qp(Qpn{0x100 + i}, rts_attr(b_, 0x1000 + i), kConnectMask);
            b_.engine().modify_qp(Qpn{0x1000 + i}, rts_attr(a_, 0x100 + i), kConnectMask);
            as_.push_back(std::move(qa));
            bs_.push_back(std::move(qb));
        }
    }

    std::vector<std::unique_ptr<TestQp>> as_, bs_;
};

TEST_F(SharedPort, QpsTakeTurnsWhenThePortIsTheBottleneck) {
    wire_.refuse = [&](int sender, std::span<const std::uint8_t>) { return take(sender, 8); };
    constexpr std::uint32_t kSize = 512 * kMtu;
    std::vector<std::uint8_t> src(kSize, 7), dst(kSize, 0);
    const auto smr = a_.reg(src.data(), kSize, kAllAccess);
    const auto dmr = b_.reg(dst.data(), kSize, kAllAccess);
    for (auto& q : as_) {
        uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 1, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
        w.u.rdma.rkey = dmr.rkey;
        const uroce_sge s = sge_of(src.data(), kSize, smr.lkey);
        q->post_send(w, std::span(&s, 1));
    }
    // 8 frames per step for 400 steps: 3200 frames, about 100 per QP.
    run_until([] { return false; }, 400);
    std::int32_t least = INT32_MAX, most = 0;
    for (std::uint32_t i = 0; i < kQps; ++i) {
        const QueuePair* q = a_.engine().find_qp(Qpn{0x100 + i});
        const std::int32_t sent = distance(q->sent_high, wire::Psn(0x100));
        least = std::min(least, sent);
        most = std::max(most, sent);
    }
    std::printf("packets sent per QP: least %d, most %d\n", least, most);
    EXPECT_GT(least, 50);
    EXPECT_LE(most - least, 40);
    EXPECT_EQ(a_.engine().counters().retransmitted_packets, 0u);
}

// The same 32 QPs behind a port that takes one frame per 10 us step, with a
// short local ACK timeout (7: 4.096 us * 2^7 = 0.52 ms) and one retry. Each
// QP's window (4 to 8 packets) puts 128 to 256 frames behind the port: the
// last of them waits 1.3 to 2.6 ms to go, several timeouts. The ACK timer
// must measure from when a request went on the wire (IBA 9.7.6.1.3), so a
// backlog of the local port costs no retry.
class BackloggedPort : public SharedPort {
protected:
    static constexpr std::uint32_t kPackets = 32;  // per QP, one WRITE
    static constexpr std::uint8_t kTimeout = 7;

    void SetUp() override {
        SharedPort::SetUp();
        for (std::uint32_t i = 0; i < kQps; ++i) {
            qp::QpAttr attr = rts_attr(b_, 0x1000 + i);
            attr.retry_cnt = 1;
            attr.timeout = kTimeout;
            a_.engine().modify_qp(Qpn{0x100 + i}, attr, qp::AttrMask::kRetryCnt | qp::AttrMask::kTimeout);
        }
        wire_.refuse = [&](int sender, std::span<const std::uint8_t>) { return sender == 0 && take(0, 1); };
    }

    // Posts a WRITE on every QP and runs until all complete; true if all did.
    bool write_all() {
        src_.resize(kQps);
        dst_.resize(kQps);
        for (std::uint32_t i = 0; i < kQps; ++i) {
            src_[i].resize(kPackets * kMtu);
            fill_pattern(src_[i], i);
            dst_[i].assign(kPackets * kMtu, 0);
            const auto smr = a_.reg(src_[i].data(), src_[i].size(), kAllAccess);
            const auto dmr = b_.reg(dst_[i].data(), dst_[i].size(), kAllAccess);
            uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, i, 1);
            w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst_[i].data());
            w.u.rdma.rkey = dmr.rkey;
            const uroce_sge s = sge_of(src_[i].data(), kPackets * kMtu, smr.lkey);
            as_[i]->post_send(w, std::span(&s, 1));
        }
        std::uint32_t completed = 0;
        return run_until([&] {
            for (auto& q : as_) {
                for (auto& e : q->poll()) {
                    EXPECT_EQ(e.status, 0u) << "wr_id " << e.wr_id;
                    ++completed;
                }
            }
            return completed == kQps;
        });
    }

    std::vector<std::vector<std::uint8_t>> src_, dst_;
};

TEST_F(BackloggedPort, WaitingForThePortIsNotATimeout) {
    ASSERT_TRUE(write_all());
    for (std::uint32_t i = 0; i < kQps; ++i) {
        EXPECT_EQ(src_[i], dst_[i]) << i;
    }
    const EngineCounters& c = a_.engine().counters();
    EXPECT_GT(c.tx_deferred, 2 * std::uint64_t{kQps});  // the backlog was there
    EXPECT_EQ(wire_.dropped, 0u);
    EXPECT_EQ(c.timeouts, 0u);
    EXPECT_EQ(c.retransmitted_packets, 0u);
}

TEST_F(BackloggedPort, AResendWaitingForThePortSpendsNoRetry) {
    // Each QP's last packet is lost once: only its timer finds out. The
    // resend then waits behind the other QPs' frames, longer than a timeout;
    // with retry_cnt 1 a second expiry before it went would end the QP in
    // RETRY_EXC_ERR.
    std::vector<bool> lost(kQps, false);
    wire_.filter = [&](std::span<const std::uint8_t> f) {
        if (!is_request(f) || psn_of(f) != 0x100 + kPackets - 1) {
            return 1;
        }
        const std::uint32_t qp = (std::uint32_t{f[42 + 5]} << 16 | std::uint32_t{f[42 + 6]} << 8 | f[42 + 7]) - 0x1000;
        if (qp >= kQps || lost[qp]) {
            return 1;
        }
        lost[qp] = true;
        return 0;
    };
    ASSERT_TRUE(write_all());
    for (std::uint32_t i = 0; i < kQps; ++i) {
        EXPECT_TRUE(lost[i]) << i;
        EXPECT_EQ(src_[i], dst_[i]) << i;
    }
    const EngineCounters& c = a_.engine().counters();
    EXPECT_EQ(c.timeouts, std::uint64_t{kQps});  // one per QP: the lost packet's
    // Going back to the oldest unacknowledged PSN resends at most what was
    // in flight: the QP's share of the engine's window (256 / 32).
    EXPECT_LE(c.retransmitted_packets, std::uint64_t{kQps} * (EngineConfig{}.engine_window / kQps));
}

}  // namespace
}  // namespace uroce::engine::test
