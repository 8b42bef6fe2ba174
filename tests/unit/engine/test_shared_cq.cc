// A CQ completed into by several engine threads (engine/shared_cq.h): every
// CQE lands in a slot of its own, the producer index counts them all, each
// producer's CQEs keep their order, a full ring loses CQEs without writing
// over unread ones (and reports the first loss once), and one arming yields
// one completion event however many threads complete.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/shared_cq.h"
#include "engine_harness.h"

namespace uroce::engine::test {
namespace {

uroce_cqe cqe_of(std::uint32_t producer, std::uint32_t index) {
    uroce_cqe c{};
    c.qp_num = producer;
    c.wr_id = index;
    return c;
}

const uroce_cqe& slot(RingMemory& m, std::uint32_t i) {
    return reinterpret_cast<const uroce_cqe*>(m.cq() + 1)[i & (m.cq()->entries - 1)];
}

TEST(SharedCq, TwoProducersFillDistinctSlotsInTheirOwnOrder) {
    constexpr std::uint32_t kEntries = 1u << 16;
    constexpr std::uint32_t kPerProducer = 20000;
    RingMemory m = make_cq(kEntries);
    SharedCq cq(CqRing(m.cq(), kEntries), CqChannel::None);
    std::atomic<bool> go{false};
    auto produce = [&](std::uint32_t producer) {
        while (!go.load(std::memory_order_acquire)) {
        }
        for (std::uint32_t i = 0; i < kPerProducer; ++i) {
            EXPECT_EQ(cq.push(cqe_of(producer, i), false), CqPush::Written);
        }
    };
    std::thread a(produce, 1);
    std::thread b(produce, 2);
    go.store(true, std::memory_order_release);
    a.join();
    b.join();

    ASSERT_EQ(m.cq()->producer, 2 * kPerProducer);
    std::uint64_t next[3] = {0, 0, 0};
    for (std::uint32_t i = 0; i < 2 * kPerProducer; ++i) {
        const uroce_cqe& c = slot(m, i);
        ASSERT_TRUE(c.qp_num == 1 || c.qp_num == 2) << "slot " << i << " not written";
        ASSERT_EQ(c.wr_id, next[c.qp_num]) << "producer " << c.qp_num << " out of order at slot " << i;
        ++next[c.qp_num];
    }
    EXPECT_EQ(next[1], kPerProducer);
    EXPECT_EQ(next[2], kPerProducer);
}

TEST(SharedCq, AFullRingLosesCompletionsAndReportsTheFirstLossOnce) {
    RingMemory m = make_cq(4);
    SharedCq cq(CqRing(m.cq(), 4), CqChannel::None);
    for (std::uint32_t i = 0; i < 4; ++i) {
        ASSERT_EQ(cq.push(cqe_of(1, i), false), CqPush::Written);
    }
    EXPECT_EQ(cq.push(cqe_of(1, 4), false), CqPush::LostFirst);
    EXPECT_EQ(cq.push(cqe_of(2, 5), false), CqPush::Lost);
    EXPECT_EQ(m.cq()->producer, 4u);
    EXPECT_NE(m.cq()->overrun, 0u);
    EXPECT_EQ(slot(m, 0).wr_id, 0u);  // the unread CQE was not written over
}

TEST(SharedCq, OneArmingYieldsOneEventAcrossProducers) {
    constexpr std::uint32_t kEntries = 1024;
    constexpr std::uint32_t kPerProducer = 256;
    RingMemory m = make_cq(kEntries);
    SharedCq cq(CqRing(m.cq(), kEntries), CqChannel::Present);
    m.cq()->notify_request = 1u << 1;  // armed: sequence 1, any completion
    std::atomic<std::uint32_t> events{0};
    auto produce = [&](std::uint32_t producer) {
        for (std::uint32_t i = 0; i < kPerProducer; ++i) {
            if (cq.push(cqe_of(producer, i), false) == CqPush::WrittenEvent) {
                events.fetch_add(1);
            }
        }
    };
    std::thread a(produce, 1);
    std::thread b(produce, 2);
    a.join();
    b.join();
    EXPECT_EQ(events.load(), 1u);
}

TEST(SharedCq, SolicitedOnlyArmingWaitsForASolicitedOrErrorCompletion) {
    RingMemory m = make_cq(16);
    SharedCq cq(CqRing(m.cq(), 16), CqChannel::Present);
    m.cq()->notify_request = (1u << 1) | 1u;  // sequence 1, solicited only
    EXPECT_EQ(cq.push(cqe_of(1, 0), false), CqPush::Written);
    EXPECT_EQ(cq.push(cqe_of(1, 1), true), CqPush::WrittenEvent);
    EXPECT_EQ(cq.push(cqe_of(1, 2), true), CqPush::Written);  // answered already
}

TEST(SharedCq, NoChannelNoEvent) {
    RingMemory m = make_cq(16);
    SharedCq cq(CqRing(m.cq(), 16), CqChannel::None);
    m.cq()->notify_request = 1u << 1;
    EXPECT_EQ(cq.push(cqe_of(1, 0), true), CqPush::Written);
}

}  // namespace
}  // namespace uroce::engine::test
