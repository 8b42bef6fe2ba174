// RC through two engines: SEND, WRITE, READ and atomics at sizes around the
// MTU, checked byte for byte; remote access errors; loss and duplication.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

const std::vector<std::uint32_t> kSizes = {1, kMtu - 1, kMtu, kMtu + 1, 2 * kMtu + 1, 5 * kMtu, 65536 + 3};

class Rc : public TwoNodes {
protected:
    std::string debug() {
        const QueuePair* q = a_.engine().find_qp(Qpn{0x11});
        const QueuePair* r = b_.engine().find_qp(Qpn{0x22});
        std::string out = " | A retired " + std::to_string(q->retired) + " sending " + std::to_string(q->sending) +
                          " sent_packets " + std::to_string(q->sent_packets) + " fetched " + std::to_string(q->fetched) +
                          " unacked " + std::to_string(q->unacked.value()) + " next " + std::to_string(q->next_psn.value()) +
                          " timer " + std::to_string(q->retransmit_at.has_value()) + " rdin " + std::to_string(q->rd_atomic_in_flight);
        for (std::uint32_t i = q->retired; i != q->fetched; ++i) {
            const SendWqe& w = q->wqes[i & (q->sq.entries() - 1)];
            out += " [wqe op " + std::to_string(int(w.opcode)) + " first " + std::to_string(w.first_psn.value()) + " packets " +
                   std::to_string(w.packets) + " received " + std::to_string(w.received) + " done " + std::to_string(w.done) + "]";
        }
        out += " | B epsn " + std::to_string(r->epsn.value()) + " pending reads " + std::to_string(r->pending_reads.size()) +
               " state " + std::to_string(int(r->attr.state));
        return out;
    }
    void SetUp() override { connect(qp::QpType::Rc); }

    // Sends `size` bytes with `op` from a buffer on A to one on B, posting a
    // receive on B for SENDs; returns A's CQEs (and B's in `b_cqes`).
    std::vector<uroce_cqe> transfer(WrOpcode op, std::vector<std::uint8_t>& src, std::vector<std::uint8_t>& dst,
                                    std::uint32_t size, std::vector<uroce_cqe>& b_cqes, std::uint32_t rkey_override = 0,
                                    std::uint64_t remote_offset = 0) {
        const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
        const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
        EXPECT_EQ(smr.error, 0);
        EXPECT_EQ(dmr.error, 0);
        if (op == WrOpcode::Send || op == WrOpcode::SendWithImm || op == WrOpcode::RdmaWriteWithImm) {
            const uroce_sge r = sge_of(dst.data(), static_cast<std::uint32_t>(dst.size()), dmr.lkey);
            qb_.post_recv(77, std::span(&r, 1));
        }
        uroce_send_wqe w = send_wqe(op, 42, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data()) + remote_offset;
        w.u.rdma.rkey = rkey_override != 0 ? rkey_override : dmr.rkey;
        w.imm_data = 0x78563412;
        if (op == WrOpcode::RdmaRead) {
            // READ pulls from B's buffer into A's.
            w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data()) + remote_offset;
        }
        const uroce_sge s = sge_of(src.data(), size, smr.lkey);
        qa_.post_send(w, std::span(&s, 1));
        std::vector<uroce_cqe> a_cqes;
        const bool needs_b = op == WrOpcode::Send || op == WrOpcode::SendWithImm || op == WrOpcode::RdmaWriteWithImm;
        EXPECT_TRUE(run_until([&] {
            for (auto& e : qa_.poll()) a_cqes.push_back(e);
            for (auto& e : qb_.poll()) b_cqes.push_back(e);
            return !a_cqes.empty() && (!needs_b || !b_cqes.empty() || a_cqes[0].status != 0);
        }));
        return a_cqes;
    }
};

TEST_F(Rc, SendAtEverySizeArrivesByteForByte) {
    for (std::uint32_t size : kSizes) {
        SCOPED_TRACE(size);
        std::vector<std::uint8_t> src(size), dst(size + 64, 0xEE);
        fill_pattern(src, size);
        std::vector<uroce_cqe> b;
        auto a = transfer(WrOpcode::SendWithImm, src, dst, size, b);
        ASSERT_EQ(a.size(), 1u);
        EXPECT_EQ(a[0].status, 0u);
        EXPECT_EQ(a[0].wr_id, 42u);
        EXPECT_EQ(a[0].opcode, static_cast<std::uint32_t>(WcOpcode::Send));
        ASSERT_EQ(b.size(), 1u);
        EXPECT_EQ(b[0].status, 0u);
        EXPECT_EQ(b[0].wr_id, 77u);
        EXPECT_EQ(b[0].byte_len, size);
        EXPECT_EQ(b[0].imm_data, 0x78563412u);
        EXPECT_TRUE(b[0].wc_flags & WcFlag::kWithImm);
        EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
        EXPECT_TRUE(std::all_of(dst.begin() + size, dst.end(), [](std::uint8_t c) { return c == 0xEE; }));
    }
}

TEST_F(Rc, WriteAndReadAtEverySize) {
    for (std::uint32_t size : kSizes) {
        SCOPED_TRACE(size);
        std::vector<std::uint8_t> src(size), dst(size + 64, 0xEE);
        fill_pattern(src, size + 1);
        std::vector<uroce_cqe> b;
        auto a = transfer(WrOpcode::RdmaWrite, src, dst, size, b);
        ASSERT_EQ(a.size(), 1u);
        EXPECT_EQ(a[0].status, 0u);
        EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
        EXPECT_TRUE(std::all_of(dst.begin() + size, dst.end(), [](std::uint8_t c) { return c == 0xEE; }));
        // Now read it back into a fresh buffer.
        std::vector<std::uint8_t> back(size, 0);
        auto r = transfer(WrOpcode::RdmaRead, back, dst, size, b);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, 0u);
        EXPECT_EQ(r[0].opcode, static_cast<std::uint32_t>(WcOpcode::RdmaRead));
        EXPECT_TRUE(std::equal(src.begin(), src.end(), back.begin()));
        EXPECT_TRUE(b.empty());  // one-sided: nothing completes on B
    }
}

TEST_F(Rc, BadRkeyAndOutOfRangeAreRemoteAccessErrorsAndWriteNothing) {
    std::vector<std::uint8_t> src(2000, 0xAB), dst(4096, 0x11);
    std::vector<uroce_cqe> b;
    // Out of range by one byte: 2000 bytes at offset 2097 of a 4096-byte MR.
    auto a = transfer(WrOpcode::RdmaWrite, src, dst, 2000, b, 0, 4096 - 2000 + 1);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](std::uint8_t c) { return c == 0x11; }));
    EXPECT_EQ(a_.engine().qp_state(Qpn{0x11}), qp::QpState::Err);
}

TEST_F(Rc, WriteWithoutRemoteWriteRightIsRefused) {
    std::vector<std::uint8_t> src(100, 0xAB), dst(4096, 0x11);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), mr::Access::kLocalWrite | mr::Access::kRemoteRead);
    uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 5, 1);
    w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.u.rdma.rkey = dmr.rkey;
    const uroce_sge s = sge_of(src.data(), 100, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> cqes;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) cqes.push_back(e);
        return !cqes.empty();
    }));
    EXPECT_EQ(cqes[0].status, static_cast<std::uint32_t>(WcStatus::RemAccessErr));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](std::uint8_t c) { return c == 0x11; }));
}

TEST_F(Rc, AtomicsReturnTheOriginalAndApplyOnce) {
    alignas(8) std::uint64_t target = 100;
    alignas(8) std::uint64_t result = 0;
    const auto tmr = b_.reg(&target, 8, kAllAccess);
    const auto rmr = a_.reg(&result, 8, kAllAccess);
    // Every frame is delivered twice: duplicates must not execute again.
    wire_.filter = [](std::span<const std::uint8_t>) { return 2; };
    uroce_send_wqe w = send_wqe(WrOpcode::AtomicFetchAndAdd, 1, 1);
    w.u.atomic.remote_addr = reinterpret_cast<std::uintptr_t>(&target);
    w.u.atomic.rkey = tmr.rkey;
    w.u.atomic.compare_add = 5;
    const uroce_sge s = sge_of(&result, 8, rmr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    uroce_send_wqe c = send_wqe(WrOpcode::AtomicCmpAndSwp, 2, 1);
    c.u.atomic.remote_addr = reinterpret_cast<std::uintptr_t>(&target);
    c.u.atomic.rkey = tmr.rkey;
    c.u.atomic.compare_add = 105;
    c.u.atomic.swap = 7;
    std::vector<uroce_cqe> cqes;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) cqes.push_back(e);
        return !cqes.empty();
    }));
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(result, 100u);
    EXPECT_EQ(target, 105u);
    qa_.post_send(c, std::span(&s, 1));
    cqes.clear();
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) cqes.push_back(e);
        return !cqes.empty();
    }));
    EXPECT_EQ(cqes[0].status, 0u);
    EXPECT_EQ(result, 105u);
    EXPECT_EQ(target, 7u);
}

TEST_F(Rc, LossAndDuplicationStillDeliverEveryByte) {
    std::mt19937 rng(12345);
    wire_.filter = [&rng](std::span<const std::uint8_t>) {
        const auto r = rng() % 100;
        return r < 5 ? 0 : r < 8 ? 2 : 1;  // 5% lost, 3% duplicated
    };
    constexpr std::uint32_t kSize = 200 * 1024 + 17;
    for (std::uint32_t round = 0; round < 8; ++round) {
        SCOPED_TRACE(round);
        std::vector<std::uint8_t> src(kSize), dst(kSize, 0), back(kSize, 0);
        fill_pattern(src, 9 + round);
        const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
        const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
        const auto bmr = a_.reg(back.data(), back.size(), kAllAccess);
        const uroce_sge r = sge_of(dst.data(), kSize, dmr.lkey);
        qb_.post_recv(100 + round, std::span(&r, 1));
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
        })) << "A: tx " << a_.engine().counters().tx_packets << " retx " << a_.engine().counters().retransmits
            << " timeouts " << a_.engine().counters().timeouts << " | cqes " << a.size() << "/" << b.size() << debug();
        for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(a[i].status, 0u) << i;
            EXPECT_EQ(a[i].wr_id, i + 1);
        }
        EXPECT_EQ(b[0].byte_len, kSize);
        EXPECT_EQ(src, dst);
        EXPECT_EQ(src, back);
    }
    EXPECT_GT(wire_.dropped, 0u);
    EXPECT_GT(a_.engine().counters().retransmits, 0u);
}

TEST_F(Rc, ReceiverNotReadyWaitsForAReceive) {
    std::vector<std::uint8_t> src(3000), dst(3000, 0);
    fill_pattern(src, 3);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge s = sge_of(src.data(), 3000, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    ASSERT_TRUE(run_until([&] { return b_.engine().counters().rnr_naks_sent >= 2; }));
    EXPECT_TRUE(qa_.poll().empty());
    const uroce_sge r = sge_of(dst.data(), 3000, dmr.lkey);
    qb_.post_recv(9, std::span(&r, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(src, dst);
}

TEST_F(Rc, RnrRetryExhaustedFails) {
    qp::QpAttr attr = rts_attr(b_, 0x22);
    attr.rnr_retry = 1;
    a_.engine().modify_qp(Qpn{0x11}, attr, qp::AttrMask::kRnrRetry);
    std::vector<std::uint8_t> src(10, 1);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    qa_.post_send(send_wqe(WrOpcode::Send, 2, 1), std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return a.size() == 2;
    }));
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::RnrRetryExcErr));
    EXPECT_EQ(a[1].status, static_cast<std::uint32_t>(WcStatus::WrFlushErr));
}

TEST_F(Rc, NoPeerExhaustsRetries) {
    qp::QpAttr attr = rts_attr(b_, 0x22);
    attr.retry_cnt = 2;
    attr.timeout = 8;  // ~1 ms
    a_.engine().modify_qp(Qpn{0x11}, attr, qp::AttrMask::kRetryCnt | qp::AttrMask::kTimeout);
    wire_.filter = [](std::span<const std::uint8_t>) { return 0; };
    std::vector<std::uint8_t> src(10, 1);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::RetryExcErr));
    EXPECT_EQ(a_.engine().counters().timeouts, 3u);
}

TEST_F(Rc, MalformedWqeFailsOnlyItsQp) {
    std::vector<std::uint8_t> src(10, 1);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    uroce_send_wqe bad = send_wqe(WrOpcode::Send, 1, 9);  // more SGEs than max_send_sge (4)
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(bad, std::span(&s, 1));
    uroce_send_wqe garbage = send_wqe(WrOpcode::Send, 2, 1);
    garbage.opcode = 200;
    qa_.post_send(garbage, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return a.size() == 2;
    }));
    EXPECT_EQ(a[0].status, static_cast<std::uint32_t>(WcStatus::LocQpOpErr));
    EXPECT_NE(a[1].status, 0u);
    EXPECT_EQ(a_.engine().qp_state(Qpn{0x11}), qp::QpState::Err);
    EXPECT_EQ(b_.engine().qp_state(Qpn{0x22}), qp::QpState::Rts);
}

TEST_F(Rc, ProducerIndexMovedBackwardsErrorsTheQpWithoutHanging) {
    std::vector<std::uint8_t> src(10, 1);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    for (int i = 0; i < 5; ++i) {
        qa_.post_send(send_wqe(WrOpcode::Send, static_cast<std::uint64_t>(i), 1, 0), std::span(&s, 1));
    }
    a_.engine().poll(now_);  // fetches all five
    // A buggy client takes posts back (found by fuzz_engine: the engine
    // looped 2^32 times).
    std::atomic_ref<std::uint32_t>(qa_.sq()->producer).store(2, std::memory_order_release);
    a_.engine().poll(now_);
    EXPECT_EQ(a_.engine().qp_state(Qpn{0x11}), qp::QpState::Err);
    EXPECT_GE(a_.engine().counters().bad_wqes, 1u);
    EXPECT_EQ(b_.engine().qp_state(Qpn{0x22}), qp::QpState::Rts);
}

TEST_F(Rc, ErrorStateFlushesPostedReceives) {
    std::vector<std::uint8_t> dst(100);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(1, std::span(&r, 1));
    qb_.post_recv(2, std::span(&r, 1));
    qp::QpAttr attr = rts_attr(a_, 0x11);
    attr.state = qp::QpState::Err;
    b_.engine().modify_qp(Qpn{0x22}, attr, qp::AttrMask::kState);
    std::vector<uroce_cqe> b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qb_.poll()) b.push_back(e);
        return b.size() == 2;
    }));
    EXPECT_EQ(b[0].status, static_cast<std::uint32_t>(WcStatus::WrFlushErr));
    EXPECT_EQ(b[1].wr_id, 2u);
}

// A receive WQE the responder is still filling stays between the RQ ring's
// consumer and producer until its message completes, so that a provider
// whose daemon dies mid-message flushes it (docs/provider.md); its slot is
// free before its CQE shows.
TEST_F(Rc, ReceiveInProgressIsRetiredWhenItCompletes) {
    std::vector<std::uint8_t> src(3 * kMtu), dst(3 * kMtu, 0);
    fill_pattern(src, 5);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), static_cast<std::uint32_t>(dst.size()), dmr.lkey);
    qb_.post_recv(5, std::span(&r, 1));
    // Only the first frame on the wire (A's SEND FIRST) gets through.
    int frames = 0;
    wire_.filter = [&](std::span<const std::uint8_t>) { return ++frames == 1 ? 1 : 0; };
    const uroce_sge s = sge_of(src.data(), static_cast<std::uint32_t>(src.size()), smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    ASSERT_TRUE(run_until([&] { return b_.engine().find_qp(Qpn{0x22})->recv_state != ReceiveWqeState::None; }));
    EXPECT_EQ(b_.engine().find_qp(Qpn{0x22})->rq_consumed, 1u);
    EXPECT_EQ(std::atomic_ref<std::uint32_t>(qb_.rq()->consumer).load(), 0u);

    wire_.filter = nullptr;  // the requester retransmits the rest
    std::vector<uroce_cqe> b;
    ASSERT_TRUE(run_until([&] {
        const std::uint32_t consumer = std::atomic_ref<std::uint32_t>(qb_.rq()->consumer).load();
        for (auto& e : qb_.poll()) {
            EXPECT_EQ(consumer, 1u) << "the slot is free before its CQE shows";
            b.push_back(e);
        }
        return !b.empty();
    }));
    EXPECT_EQ(b[0].wr_id, 5u);
    EXPECT_EQ(b[0].status, 0u);
    EXPECT_EQ(src, dst);
}

}  // namespace
}  // namespace uroce::engine::test
