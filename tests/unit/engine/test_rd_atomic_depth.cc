// 128 RDMA READs outstanding at once, as rdma_rxe allows (issue 14 item 2):
// the requester keeps all of them on the wire under max_rd_atomic 128 and the
// responder, with 128 resources (max_dest_rd_atomic), answers every one.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

constexpr std::uint32_t kDepth = 128;
constexpr std::uint32_t kReadBytes = 64;

class RdAtomicDepth : public TwoNodes {
protected:
    void SetUp() override {
        for (TestQp* q : {&qa_, &qb_}) {
            q->sq_entries = 2 * kDepth;
            q->cq_entries = 4 * kDepth;
        }
        make_qp(a_, qa_, 0x11, qp::QpType::Rc, 1);
        make_qp(b_, qb_, 0x22, qp::QpType::Rc, 1);
        constexpr std::uint32_t all = qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu |
                                      qp::AttrMask::kDestQpn | qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn |
                                      qp::AttrMask::kAccessFlags | qp::AttrMask::kTimeout |
                                      qp::AttrMask::kRetryCnt | qp::AttrMask::kRnrRetry |
                                      qp::AttrMask::kMinRnrTimer | qp::AttrMask::kMaxQpRdAtomic |
                                      qp::AttrMask::kMaxDestRdAtomic;
        qp::QpAttr to_b = rts_attr(b_, 0x22);
        qp::QpAttr to_a = rts_attr(a_, 0x11);
        for (qp::QpAttr* a : {&to_b, &to_a}) {
            a->max_rd_atomic = kDepth;
            a->max_dest_rd_atomic = kDepth;
        }
        a_.engine().modify_qp(0x11, to_b, all);
        b_.engine().modify_qp(0x22, to_a, all);
    }
};

TEST_F(RdAtomicDepth, HundredTwentyEightReadsInFlightAllAnswered) {
    std::vector<std::uint8_t> remote(kDepth * kReadBytes);
    std::vector<std::uint8_t> local(kDepth * kReadBytes, 0);
    fill_pattern(remote, 5);
    const auto lmr = a_.reg(local.data(), local.size(), kAllAccess);
    const auto rmr = b_.reg(remote.data(), remote.size(), kAllAccess);
    ASSERT_EQ(lmr.error, 0);
    ASSERT_EQ(rmr.error, 0);
    for (std::uint32_t i = 0; i < kDepth; ++i) {
        uroce_send_wqe w = send_wqe(WrOpcode::RdmaRead, i, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data()) + i * kReadBytes;
        w.u.rdma.rkey = rmr.rkey;
        const uroce_sge s = sge_of(local.data() + i * kReadBytes, kReadBytes, lmr.lkey);
        qa_.post_send(w, std::span(&s, 1));
    }
    // One poll of A alone, nothing delivered yet: all 128 requests leave
    // before any response can come back.
    a_.engine().poll(now_);
    EXPECT_EQ(a_.engine().find_qp(0x11)->rd_atomic_in_flight, kDepth);
    EXPECT_EQ(wire_.in_flight.size(), kDepth);

    std::vector<uroce_cqe> done;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) done.push_back(e);
        return done.size() == kDepth;
    }));
    for (std::uint32_t i = 0; i < kDepth; ++i) {
        EXPECT_EQ(done[i].status, 0u) << i;
        EXPECT_EQ(done[i].wr_id, i);
    }
    EXPECT_TRUE(std::equal(remote.begin(), remote.end(), local.begin()));
    EXPECT_EQ(a_.engine().counters().retransmits, 0u);  // every response served from B's 128 resources
}

}  // namespace
}  // namespace uroce::engine::test
