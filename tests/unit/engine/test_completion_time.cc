// A CQ made with UROCE_CQ_TIMESTAMPS has every CQE carry the time uroced
// wrote it (abi/rings.h timestamp_ns, wallclock_ns), which the provider's
// extended CQs report as read_completion_ts and
// read_completion_wallclock_ns: both clocks read between the post and the
// poll, the requester's after the responder's. Other CQs are not stamped.
#include <gtest/gtest.h>
#include <time.h>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

std::uint64_t now_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

class CompletionTime : public TwoNodes {
protected:
    void SetUp() override {
        connect(qp::QpType::Rc);
        // Both QPs complete on CQ 1 of their node: now a stamping one.
        a_.engine().add_cq(CqHandle{1}, ClientId{kOwner}, CqRing(qa_.cq(), qa_.cq_entries), -1, 0xC0FFEE,
                           CompletionStamp::Times);
        b_.engine().add_cq(CqHandle{1}, ClientId{kOwner}, CqRing(qb_.cq(), qb_.cq_entries), -1, 0xC0FFEE,
                           CompletionStamp::Times);
    }
};

TEST_F(CompletionTime, EveryCqeIsStampedWhenWritten) {
    std::vector<std::uint8_t> src(100, 0x5A), dst(100);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(7, std::span(&r, 1));
    const std::uint64_t mono_before = now_ns(CLOCK_MONOTONIC);
    const std::uint64_t wall_before = now_ns(CLOCK_REALTIME);
    const uroce_sge s = sge_of(src.data(), 100, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 8, 1), std::span(&s, 1));
    std::vector<uroce_cqe> a, b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        for (auto& e : qb_.poll()) b.push_back(e);
        return !a.empty() && !b.empty();
    }));
    const std::uint64_t mono_after = now_ns(CLOCK_MONOTONIC);
    const std::uint64_t wall_after = now_ns(CLOCK_REALTIME);
    for (const uroce_cqe& e : {a[0], b[0]}) {
        EXPECT_GE(e.timestamp_ns, mono_before);
        EXPECT_LE(e.timestamp_ns, mono_after);
        EXPECT_GE(e.wallclock_ns, wall_before);
        EXPECT_LE(e.wallclock_ns, wall_after);
    }
    // The sender completes on the ACK, after the receiver's completion.
    EXPECT_LE(b[0].timestamp_ns, a[0].timestamp_ns);
}

TEST_F(CompletionTime, CqsThatDidNotAskAreNotStamped) {
    a_.engine().add_cq(CqHandle{1}, ClientId{kOwner}, CqRing(qa_.cq(), qa_.cq_entries), -1, 0xC0FFEE);
    std::vector<std::uint8_t> src(8, 1), dst(8);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 9, 1);
    w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.u.rdma.rkey = dmr.rkey;
    const uroce_sge s = sge_of(src.data(), 8, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty();
    }));
    EXPECT_EQ(a[0].timestamp_ns, 0u);
    EXPECT_EQ(a[0].wallclock_ns, 0u);
}

}  // namespace
}  // namespace uroce::engine::test
