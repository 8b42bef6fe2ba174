// When a program polling an empty CQ should give its CPU away.
//
// The "hardware" is a process too: a program that spins on an empty CQ on a
// machine with fewer cores than busy threads can keep uroced (or, on one
// core, its own peer) from the CPU that would produce the completion, so an
// empty poll_cq may call sched_yield(). But a yield is not free under load:
// Linux's fair scheduler (EEVDF) moves the yielding thread's deadline back by
// a whole slice (3 ms with the default base slice of 0.75 ms on 2 CPUs), so
// with other runnable work on the machine every yield costs milliseconds.
// Yielding on every empty poll made rstream's 64-byte ping-pong (rsockets
// polls for 10 us, then sleeps on its channel) take 2.3 to 5.2 ms a transfer
// beside a loaded machine's background builds, against 0.12 to 0.94 ms with
// no yields at all.
//
// So the yield follows what it costs. While yields are quick (the CPU went
// to the daemon or the peer and came back within kSlowYieldNs) an empty CQ
// yields at once, as the "hardware" needs: with uroced's loop not real-time
// and two programs spinning on two CPUs, a 2-byte WRITE's latency on the
// loopback port is 3 us with these yields and 29 us with none for the
// first 50 us. A slow yield (the CPU went to other work) starts a stretch
// rule: the CQ yields only after it has been found empty for `threshold_ns`
// of polls without a pause, a threshold that doubles from kBackoffStartNs
// (longer than rsockets' 10 us poll) up to kMaxThresholdNs with each slow
// yield and shrinks by an eighth with each quick one: beside background work
// some yields come back quickly by chance, and halving on those kept
// rstream's threshold bouncing back to where it paid a slice per message.
//
// A slow yield is judged by what the next poll finds. If it finds a batch of
// completions (kProductiveBatch or more), the CPU went to work that fed this
// CQ (the daemon, or the peer program reposting its receives) and the yield
// counts as quick: two perftest programs and uroced on two CPUs take whole
// slices from each other, and counting those yields as slow switched
// ib_send_bw's CQs to long spins that kept the peer from reposting (64 KiB
// SEND on the loopback port 0.67x of yielding on every empty poll, on a
// quiet machine). A ping-pong such as rstream's finds one or two completions
// after a yield, so beside background work its threshold still grows.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace uroce::provider {

class EmptyPollYield {
public:
    // The first threshold after a slow yield: longer than rsockets' default
    // polling time (10 us), short next to a scheduler slice.
    static constexpr std::int64_t kBackoffStartNs = 50'000;
    // About one slice of the scheduler on a small machine: past it a
    // spinning thread is preempted anyway.
    static constexpr std::int64_t kMaxThresholdNs = 3'200'000;
    // A yield this long gave the CPU to work that was not ours.
    static constexpr std::int64_t kSlowYieldNs = 500'000;
    // A gap this long between two empty polls: the program blocked on its
    // channel or did other work, and the next poll starts a new stretch.
    static constexpr std::int64_t kPauseNs = 50'000;
    // Completions found by the poll after a slow yield that make it a yield
    // that paid: more than a ping-pong's send and receive completion.
    static constexpr int kProductiveBatch = 4;

    // A poll found `completions` (one or more): the empty stretch is over,
    // and a slow yield before it is judged by how many it found.
    void found(int completions) noexcept {
        if (slow_yield_pending_.exchange(false, std::memory_order_relaxed)) {
            adapt(completions >= kProductiveBatch ? YieldCost::Quick : YieldCost::Slow);
        }
        stretch_start_ns_.store(kNoStretch, std::memory_order_relaxed);
    }

    // A poll found none at `now_ns` (CLOCK_MONOTONIC): true when the polls
    // have found the CQ empty for the threshold or longer without a pause
    // (kPauseNs); the poll that starts a stretch never yields.
    bool empty_should_yield(std::int64_t now_ns) noexcept {
        if (slow_yield_pending_.exchange(false, std::memory_order_relaxed)) {
            adapt(YieldCost::Slow);  // slow, and nothing came of it
        }
        const std::int64_t threshold = threshold_ns();
        const std::int64_t start = stretch_start_ns_.load(std::memory_order_relaxed);
        const std::int64_t last = last_empty_ns_.exchange(now_ns, std::memory_order_relaxed);
        if (start == kNoStretch || now_ns - last >= kPauseNs) {
            // Several threads may start a stretch at once: any of their
            // times will do.
            stretch_start_ns_.store(now_ns, std::memory_order_relaxed);
            return false;
        }
        return now_ns - start >= threshold;
    }

    // A yield ran from `start_ns` to `end_ns`: adapt the threshold to what
    // yielding costs (a slow one once the next poll has shown whether it
    // paid), and count the next stretch from the yield's end.
    void yielded(std::int64_t start_ns, std::int64_t end_ns) noexcept {
        if (slow_yield_pending_.exchange(false, std::memory_order_relaxed)) {
            adapt(YieldCost::Slow);  // another thread's slow yield, never judged
        }
        if (end_ns - start_ns > kSlowYieldNs) {
            slow_yield_pending_.store(true, std::memory_order_relaxed);
        } else {
            adapt(YieldCost::Quick);
        }
        stretch_start_ns_.store(end_ns, std::memory_order_relaxed);
        last_empty_ns_.store(end_ns, std::memory_order_relaxed);
    }

    std::int64_t threshold_ns() const noexcept { return threshold_ns_.load(std::memory_order_relaxed); }

private:
    enum class YieldCost { Quick, Slow };
    // Slow doubles the threshold (from kBackoffStartNs, up to
    // kMaxThresholdNs); quick takes an eighth off (at least 1 ns, to zero).
    void adapt(YieldCost cost) noexcept {
        const std::int64_t t = threshold_ns();
        const std::int64_t next = cost == YieldCost::Slow
                                      ? std::min(std::max(2 * t, kBackoffStartNs), kMaxThresholdNs)
                                      : t - std::max<std::int64_t>(t / 8, std::min<std::int64_t>(t, 1));
        threshold_ns_.store(next, std::memory_order_relaxed);
    }

    static constexpr std::int64_t kNoStretch = -1;
    std::atomic<bool> slow_yield_pending_{false};
    std::atomic<std::int64_t> stretch_start_ns_{kNoStretch};
    std::atomic<std::int64_t> last_empty_ns_{0};
    std::atomic<std::int64_t> threshold_ns_{0};
};

// CLOCK_MONOTONIC in nanoseconds (a vDSO read, no system call).
std::int64_t monotonic_ns() noexcept;

// The empty-poll step of poll_cq and start_poll: yields when `yield` says
// so, and tells it what the yield cost.
void after_empty_poll(EmptyPollYield& yield) noexcept;

}  // namespace uroce::provider
