// When an empty poll_cq gives the CPU away (verbs_provider/empty_poll_yield.h):
// at once while yields are quick; once they turn out slow, only after a
// stretch of empty polls that grows while they stay slow, so a short
// poll-then-block no longer yields; a slow yield after which the CQ holds a
// batch of completions counts as quick.
#include <gtest/gtest.h>

#include <cstdint>

#include "empty_poll_yield.h"

namespace uroce::provider {
namespace {

constexpr std::int64_t kUs = 1000;
constexpr std::int64_t kBackoff = EmptyPollYield::kBackoffStartNs;
constexpr std::int64_t kSlow = EmptyPollYield::kSlowYieldNs + 1;

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

// 1000 messages: 10 us of empty polls every 50 ns, block 200 us, then the
// completion; the yields.
int poll_then_block(EmptyPollYield& y, std::int64_t& t, std::int64_t yield_ns) {
    int yields = 0;
    for (int m = 0; m < 1000; ++m) {
        yields += spin(y, t, t + 10 * kUs, 50, yield_ns);
        t += 210 * kUs;
        y.found(1);
    }
    return yields;
}

TEST(EmptyPollYield, QuickYieldsComeAtOnceAsTheDaemonNeeds) {
    EmptyPollYield y;
    EXPECT_EQ(y.threshold_ns(), 0);
    EXPECT_FALSE(y.empty_should_yield(1000));  // the first empty poll
    EXPECT_TRUE(y.empty_should_yield(1050));
    y.yielded(1050, 1050 + 2 * kUs);  // the daemon ran and gave the CPU back
    EXPECT_TRUE(y.empty_should_yield(1050 + 2 * kUs + 50));
    EXPECT_EQ(y.threshold_ns(), 0);
}

TEST(EmptyPollYield, SlowYieldsStopAPollThenBlockProgramYielding) {
    EmptyPollYield y;
    std::int64_t t = 1'000'000;
    // Beside background work every yield takes 3 ms: a handful of them
    // raise the threshold past the 10 us poll, and then none come.
    const int first = poll_then_block(y, t, 3000 * kUs);
    EXPECT_GE(y.threshold_ns(), kBackoff);
    EXPECT_LT(first, 4);
    EXPECT_EQ(poll_then_block(y, t, 3000 * kUs), 0);
}

TEST(EmptyPollYield, SlowYieldsDoubleTheThresholdUpToItsBoundQuickOnesWearItDown) {
    EmptyPollYield y;
    const int yields = spin(y, 0, 200'000 * kUs, 100, 3000 * kUs);
    EXPECT_EQ(y.threshold_ns(), EmptyPollYield::kMaxThresholdNs);
    // 50 us, 100, ..., 3.2 ms: far fewer yields than one a poll.
    EXPECT_LT(yields, 200'000 / (50 + 3000) / 2 + 8);
    // One quick yield by chance takes an eighth off, not half.
    const std::int64_t before = y.threshold_ns();
    y.yielded(0, 1 * kUs);
    EXPECT_EQ(y.threshold_ns(), before - before / 8);
    // A run of quick ones brings it down to yielding at once.
    spin(y, 300'000 * kUs, 400'000 * kUs, 100, 1 * kUs);
    EXPECT_EQ(y.threshold_ns(), 0);
}

TEST(EmptyPollYield, LongSpinWithAThresholdYieldsOncePerThreshold) {
    EmptyPollYield y;
    y.yielded(0, kSlow);
    EXPECT_EQ(y.threshold_ns(), 0) << "judged by the next poll";
    EXPECT_FALSE(y.empty_should_yield(kSlow + 50));  // found nothing: slow
    ASSERT_EQ(y.threshold_ns(), kBackoff);
    const std::int64_t start = 5'000'000;
    EXPECT_EQ(spin(y, start, start + kBackoff, 100, kSlow), 0);
    EXPECT_EQ(spin(y, start + kBackoff, start + kBackoff + 100, 100, kSlow), 1);
    EXPECT_FALSE(y.empty_should_yield(start + kBackoff + kSlow + 50));  // still empty: that yield was slow
    EXPECT_EQ(y.threshold_ns(), 2 * kBackoff);
}

TEST(EmptyPollYield, ACompletionOrAPauseStartsTheStretchAgain) {
    EmptyPollYield y;
    y.yielded(0, kSlow);
    EXPECT_FALSE(y.empty_should_yield(kSlow + 100));
    EXPECT_FALSE(y.empty_should_yield(kSlow + kBackoff - 100));
    y.found(1);
    EXPECT_FALSE(y.empty_should_yield(kSlow + kBackoff));
    EXPECT_FALSE(y.empty_should_yield(kSlow + 2 * kBackoff - 100));
    EXPECT_TRUE(y.empty_should_yield(kSlow + 2 * kBackoff));
    // Blocked for a second: the earlier empty polls do not count.
    const std::int64_t later = 1'000'000'000;
    EXPECT_FALSE(y.empty_should_yield(later));
    EXPECT_FALSE(y.empty_should_yield(later + 2 * kBackoff - 100));
}

TEST(EmptyPollYield, ASlowYieldJudgedByTheCompletionsFoundAfterIt) {
    EmptyPollYield y;
    y.yielded(0, kSlow);
    y.found(1);  // a ping-pong's one completion: it cost a slice for that
    EXPECT_EQ(y.threshold_ns(), kBackoff);
    y.yielded(0, kSlow);
    y.found(EmptyPollYield::kProductiveBatch);  // the peer and the daemon filled the CQ
    EXPECT_EQ(y.threshold_ns(), kBackoff - kBackoff / 8);
}

TEST(EmptyPollYield, ABandwidthProgramWhoseSlowYieldsFillItsCqKeepsYieldingAtOnce) {
    EmptyPollYield y;
    std::int64_t t = 1'000'000;
    int yields = 0;
    for (int batch = 0; batch < 1000; ++batch) {
        // Empty polls every 50 ns until one yields; the yield takes a whole
        // slice of the peer program, which comes back with 16 completions.
        while (!y.empty_should_yield(t)) {
            t += 50;
        }
        ++yields;
        y.yielded(t, t + 3000 * kUs);
        t += 3000 * kUs;
        y.found(16);
    }
    EXPECT_EQ(y.threshold_ns(), 0);
    EXPECT_EQ(yields, 1000);
}

}  // namespace
}  // namespace uroce::provider
