// When an empty poll_cq gives the CPU away (verbs_provider/empty_poll_yield.h):
// never within a short poll-then-block, within a long spin once the CQ has
// been empty for the threshold, and less often when yields turn out slow.
#include <gtest/gtest.h>

#include <cstdint>

#include "empty_poll_yield.h"

namespace uroce::provider {
namespace {

constexpr std::int64_t kUs = 1000;
constexpr std::int64_t kMin = EmptyPollYield::kMinThresholdNs;

// Polls every `step` ns from `from` until `until`, each yield taking
// `yield_ns`; the number of yields.
int spin(EmptyPollYield& y, std::int64_t from, std::int64_t until, std::int64_t step, std::int64_t yield_ns = 0) {
    int yields = 0;
    for (std::int64_t t = from; t < until; t += step) {
        if (y.empty_should_yield(t)) {
            ++yields;
            y.yielded(t, t + yield_ns);
            t += yield_ns;
        }
    }
    return yields;
}

TEST(EmptyPollYield, RsocketsTenMicrosecondPollThenBlockNeverYields) {
    EmptyPollYield y;
    // 1000 messages: 10 us of empty polls every 50 ns, block 200 us, then
    // the completion.
    std::int64_t t = 1'000'000;
    int yields = 0;
    for (int m = 0; m < 1000; ++m) {
        yields += spin(y, t, t + 10 * kUs, 50);
        t += 210 * kUs;
        y.found();
    }
    EXPECT_EQ(yields, 0);
}

TEST(EmptyPollYield, LongSpinWithQuickYieldsYieldsOncePerThreshold) {
    EmptyPollYield y;
    const std::int64_t start = 5'000'000;
    EXPECT_EQ(spin(y, start, start + kMin, 100), 0);
    // Quick yields (the peer ran and gave the CPU back): one a threshold.
    EXPECT_EQ(spin(y, start + kMin, start + 11 * kMin, 100, 1 * kUs), 10);
    EXPECT_EQ(y.threshold_ns(), kMin);
}

TEST(EmptyPollYield, SlowYieldsDoubleTheThresholdUpToItsBound) {
    EmptyPollYield y;
    // Every yield keeps the thread off the CPU for 3 ms: background work.
    const int yields = spin(y, 0, 200'000 * kUs, 100, 3000 * kUs);
    EXPECT_EQ(y.threshold_ns(), EmptyPollYield::kMaxThresholdNs);
    // 50 us, 100, ..., 3.2 ms: far fewer yields than one every 50 us.
    EXPECT_LT(yields, 200'000 / (50 + 3000) / 2 + 8);
    // Quick yields bring it back down.
    spin(y, 300'000 * kUs, 400'000 * kUs, 100, 1 * kUs);
    EXPECT_EQ(y.threshold_ns(), kMin);
}

TEST(EmptyPollYield, ACompletionStartsTheStretchAgain) {
    EmptyPollYield y;
    EXPECT_EQ(spin(y, 0, kMin - 100, 100), 0);
    y.found();
    EXPECT_FALSE(y.empty_should_yield(kMin));
    EXPECT_FALSE(y.empty_should_yield(2 * kMin - 100));
    EXPECT_TRUE(y.empty_should_yield(2 * kMin));
}

TEST(EmptyPollYield, APauseBetweenPollsStartsTheStretchAgain) {
    EmptyPollYield y;
    EXPECT_FALSE(y.empty_should_yield(0));
    // The program blocked on its channel for a second and polls again:
    // its earlier empty poll does not count.
    EXPECT_FALSE(y.empty_should_yield(1'000'000'000));
    EXPECT_FALSE(y.empty_should_yield(1'000'000'000 + kMin / 2));
    EXPECT_TRUE(y.empty_should_yield(1'000'000'000 + kMin));
}

}  // namespace
}  // namespace uroce::provider
