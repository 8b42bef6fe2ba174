// The daemon loop's stall watch (tools/uroced/loop_stalls.h): how a stalled
// round's time is split and which share names the cause, rounds counted by
// length on a clock the test moves, the phase that took longest, and the
// thread times it reads from the kernel (a thread that waits for a CPU other
// threads keep busy is seen waiting).
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "loop_stalls.h"

namespace uroce::daemon {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

TEST(StallShares, EachShareTakesAtMostWhatIsLeftOfTheRound) {
    const StallShares s = split_round(150ms, 20ms, 100ms, 10ms);
    EXPECT_EQ(s.on_cpu, 20ms);
    EXPECT_EQ(s.cpu_wait, 100ms);
    EXPECT_EQ(s.asked_sleep, 10ms);
    EXPECT_EQ(s.off_cpu, 20ms);
    // The kernel's counts cover a window that began before the round.
    const StallShares capped = split_round(150ms, 30ms, 200ms, 10ms);
    EXPECT_EQ(capped.on_cpu, 30ms);
    EXPECT_EQ(capped.cpu_wait, 120ms);
    EXPECT_EQ(capped.asked_sleep, 0ms);
    EXPECT_EQ(capped.off_cpu, 0ms);
}

TEST(StallShares, WithoutSchedstatWaitingIsPartOfOffCpu) {
    const StallShares s = split_round(150ms, 10ms, std::nullopt, 0ms);
    EXPECT_EQ(s.cpu_wait, 0ms);
    EXPECT_EQ(s.off_cpu, 140ms);
    EXPECT_EQ(dominant_cause(s), StallCause::OffCpu);
}

TEST(StallShares, TheLargestShareIsTheCause) {
    EXPECT_EQ(dominant_cause(split_round(300ms, 10ms, 280ms, 0ms)), StallCause::CpuWait);
    EXPECT_EQ(dominant_cause(split_round(300ms, 250ms, 40ms, 0ms)), StallCause::OnCpu);
    EXPECT_EQ(dominant_cause(split_round(300ms, 0ms, 10ms, 280ms)), StallCause::AskedSleep);
    EXPECT_EQ(dominant_cause(split_round(300ms, 0ms, 10ms, 10ms)), StallCause::OffCpu);
}

class LoopWatchTest : public ::testing::Test {
protected:
    LoopWatch watch_{100ms};
    LoopClock::time_point t_ = LoopClock::now();

    // One round: each phase in turn takes its time.
    void round(std::initializer_list<std::pair<LoopPhase, nanoseconds>> phases, nanoseconds asked = 0ns) {
        watch_.begin_round(t_);
        watch_.asked_sleep(asked);
        for (const auto& [phase, took] : phases) {
            t_ += took;
            watch_.phase_done(phase, t_);
        }
    }
    void end() { watch_.begin_round(t_); }
};

TEST_F(LoopWatchTest, ShortRoundsAreCountedNotStalls) {
    for (int i = 0; i < 10; ++i) {
        round({{LoopPhase::DataPath, 50us}, {LoopPhase::Sleep, 10ms}}, 10ms);
    }
    end();
    const LoopStallCounters& c = watch_.counters();
    EXPECT_EQ(c.rounds, 10u);
    EXPECT_EQ(c.stalls, 0u);
    EXPECT_EQ(c.rounds_over_20ms, 0u);
    EXPECT_EQ(c.threshold, 100ms);
}

TEST_F(LoopWatchTest, ARoundOverTheThresholdIsAStallInItsLongestPhase) {
    round({{LoopPhase::DataPath, 1ms}, {LoopPhase::Control, 130ms}, {LoopPhase::Sleep, 2ms}}, 2ms);
    round({{LoopPhase::DataPath, 1ms}, {LoopPhase::Spin, 40ms}});
    round({{LoopPhase::DataPath, 1ms}, {LoopPhase::Spin, 1200ms}});
    end();
    const LoopStallCounters& c = watch_.counters();
    EXPECT_EQ(c.rounds, 3u);
    EXPECT_EQ(c.stalls, 2u);
    EXPECT_EQ(c.longest_ns, static_cast<std::uint64_t>(nanoseconds(1201ms).count()));
    EXPECT_EQ(c.stalled_ns, static_cast<std::uint64_t>(nanoseconds(133ms + 1201ms).count()));
    EXPECT_EQ(c.by_phase[static_cast<std::size_t>(LoopPhase::Control)], 1u);
    EXPECT_EQ(c.by_phase[static_cast<std::size_t>(LoopPhase::Spin)], 1u);
    EXPECT_EQ(c.rounds_over_20ms, 3u);
    EXPECT_EQ(c.rounds_over_100ms, 2u);
    EXPECT_EQ(c.rounds_over_1s, 1u);
    // The thread did not really wait or run for that long: the time is off a CPU.
    EXPECT_EQ(c.by_cause[static_cast<std::size_t>(StallCause::OffCpu)], 2u);
}

TEST_F(LoopWatchTest, ASleepAsLongAsAskedIsThatCause) {
    round({{LoopPhase::DataPath, 1ms}, {LoopPhase::Sleep, 500ms}}, 500ms);
    end();
    EXPECT_EQ(watch_.counters().stalls, 1u);
    EXPECT_EQ(watch_.counters().by_cause[static_cast<std::size_t>(StallCause::AskedSleep)], 1u);
    EXPECT_EQ(watch_.counters().by_phase[static_cast<std::size_t>(LoopPhase::Sleep)], 1u);
}

// Two threads pinned to one CPU: while one keeps it busy, the other (runnable
// at once) must wait; the kernel counts that wait, and the running one's CPU.
TEST(ThreadClock, SeesTimeOnACpuAndTimeWaitingForOne) {
    ThreadClock clock;
    if (!clock.accounts_cpu_wait()) {
        GTEST_SKIP() << "this kernel has no /proc/thread-self/schedstat (CONFIG_SCHED_INFO)";
    }
    cpu_set_t all{};
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof all, &all), 0);
    cpu_set_t one{};
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    const ThreadTimes before = clock.now();
    std::atomic<bool> stop{false};
    std::thread hog([&] {
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    // Until both counts pass the bound (a loaded machine gives this thread
    // fewer milliseconds of each per wall-clock second), within a deadline.
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    auto enough = [&] {
        const ThreadTimes t = clock.now();
        return t.on_cpu - before.on_cpu > 20ms && *t.cpu_wait - *before.cpu_wait > 20ms;
    };
    while (!enough() && std::chrono::steady_clock::now() < give_up) {
    }
    stop = true;
    hog.join();
    const ThreadTimes after = clock.now();
    pthread_setaffinity_np(pthread_self(), sizeof all, &all);
    EXPECT_GT(after.on_cpu - before.on_cpu, 10ms);
    EXPECT_GT(*after.cpu_wait - *before.cpu_wait, 10ms);
}

}  // namespace
}  // namespace uroce::daemon
