// RDMA READs outstanding under max_rd_atomic / max_dest_rd_atomic 128, as
// rdma_rxe allows (issue 14 item 2): the requester keeps more than the old
// limit of 16 on the wire at once (how many the congestion window lets it)
// and the responder, with 128 resources, answers every one, nothing resent.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

constexpr std::uint32_t kDepth = 128;
constexpr std::uint32_t kReads = 512;  // enough for the congestion window to open
constexpr std::uint32_t kReadBytes = 64;
constexpr std::uint32_t kOldLimit = 16;

class RdAtomicDepth : public TwoNodes {
protected:
    void SetUp() override {
        for (TestQp* q : {&qa_, &qb_}) {
            q->sq_entries = kReads;
            q->cq_entries = 2 * kReads;
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
        a_.engine().modify_qp(Qpn{0x11}, to_b, all);
        b_.engine().modify_qp(Qpn{0x22}, to_a, all);
    }
};

TEST_F(RdAtomicDepth, MoreThanSixteenReadsInFlightAllAnswered) {
    std::vector<std::uint8_t> remote(kReads * kReadBytes);
    std::vector<std::uint8_t> local(kReads * kReadBytes, 0);
    fill_pattern(remote, 5);
    const auto lmr = a_.reg(local.data(), local.size(), kAllAccess);
    const auto rmr = b_.reg(remote.data(), remote.size(), kAllAccess);
    ASSERT_EQ(lmr.error, 0);
    ASSERT_EQ(rmr.error, 0);
    for (std::uint32_t i = 0; i < kReads; ++i) {
        uroce_send_wqe w = send_wqe(WrOpcode::RdmaRead, i, 1);
        w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data()) + i * kReadBytes;
        w.u.rdma.rkey = rmr.rkey;
        const uroce_sge s = sge_of(local.data() + i * kReadBytes, kReadBytes, lmr.lkey);
        qa_.post_send(w, std::span(&s, 1));
    }
    std::vector<uroce_cqe> done;
    std::uint32_t most_in_flight = 0;
    ASSERT_TRUE(run_until([&] {
        most_in_flight = std::max(most_in_flight, a_.engine().find_qp(Qpn{0x11})->rd_atomic_in_flight);
        EXPECT_LE(a_.engine().find_qp(Qpn{0x11})->rd_atomic_in_flight, kDepth);
        for (auto& e : qa_.poll()) done.push_back(e);
        return done.size() == kReads;
    }));
    EXPECT_GT(most_in_flight, kOldLimit);
    for (std::uint32_t i = 0; i < kReads; ++i) {
        EXPECT_EQ(done[i].status, 0u) << i;
        EXPECT_EQ(done[i].wr_id, i);
    }
    EXPECT_TRUE(std::equal(remote.begin(), remote.end(), local.begin()));
    EXPECT_EQ(a_.engine().counters().retransmits, 0u);  // every response served from B's 128 resources
}

}  // namespace
}  // namespace uroce::engine::test
