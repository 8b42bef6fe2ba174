// Adaptive polling for the daemon's main loop: poll the engine while there is
// work; after the last work keep polling for a short spin window (a reply
// usually comes within microseconds); then sleep until something can need us
// (a watched fd turns readable: the control socket's epoll fd, the doorbell
// eventfd, the port's rx_wait_fd) or the engine's next timer is due.
//
// A port with an rx fd wakes us when frames arrive, so the sleep can be long.
// A port without one has to be looked at: it is given naps that grow with
// the idle time (idle / nap_divisor, from first_nap up to max_nap), so the
// delay a nap adds to a frame stays a small fraction of the quiet time before
// it, and an idle daemon wakes at most 1/max_nap times a second.
//
//   IdleWait idle;
//   idle.watch(control_epoll_fd); idle.watch(doorbell_fd);
//   if (port.rx_wait_fd() >= 0) idle.watch_rx(port.rx_wait_fd());
//   while (running) {
//       const bool worked = engine.poll();
//       idle.after_poll(worked, engine.next_timer());
//   }
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

#include "common/unique_fd.h"

namespace uroce::daemon {

using IdleClock = std::chrono::steady_clock;

struct IdlePolicyConfig {
    // Keep polling this long after the last work (a ping-pong round trip over
    // a veth is ~20 us; a client's next post follows its completion sooner).
    std::chrono::nanoseconds spin = std::chrono::microseconds(200);
    std::chrono::nanoseconds first_nap = std::chrono::microseconds(50);
    std::chrono::nanoseconds max_nap = std::chrono::milliseconds(1);
    std::uint32_t nap_divisor = 16;
    // Longest sleep when the port announces frames on an fd: only a safety
    // net, since every source of work then wakes the loop by itself.
    std::chrono::nanoseconds max_sleep_with_rx_fd = std::chrono::milliseconds(10);
};

// The decision alone, on a clock the caller passes in (tests move it).
class IdlePolicy {
public:
    struct Decision {
        bool sleep = false;
        std::chrono::nanoseconds timeout{0};  // when sleep
    };

    explicit IdlePolicy(IdlePolicyConfig config = {}) : config_(config) {}

    // After one poll of the engine: whether it did any work, the time, the
    // engine's next timer if it has one, and whether received frames will
    // make a watched fd readable.
    [[nodiscard]] Decision after_poll(bool did_work, IdleClock::time_point now,
                                      std::optional<IdleClock::time_point> next_timer, bool have_rx_fd);

    [[nodiscard]] const IdlePolicyConfig& config() const { return config_; }

private:
    IdlePolicyConfig config_;
    std::optional<IdleClock::time_point> last_work_;
};

struct IdleCounters {
    std::uint64_t sleeps = 0;
    std::uint64_t woken_by_fd = 0;  // the rest ended at their timeout
    std::uint64_t slept_ns = 0;     // total time asleep
    // Sleeps that ran to their timeout and after which the next data-path
    // round found work: a frame or a doorbell that did not wake the loop (a
    // lost or late wake-up), or a timer that fell due. A timeout followed
    // by an idle round is the safety net of an idle loop, not a lost wake-up.
    std::uint64_t timeouts_then_work = 0;
};

// The policy plus the sleeping: an epoll set of the fds that announce work.
// Sleeps with nanosecond timeouts (epoll_pwait2, Linux 5.11) and sets the
// calling thread's timer slack to 1 us (PR_SET_TIMERSLACK; the default 50 us
// would stretch every nap), so construct it on the thread that runs the loop.
class IdleWait {
public:
    // Throws std::system_error when the epoll set cannot be made.
    explicit IdleWait(IdlePolicyConfig config = {});
    ~IdleWait();
    IdleWait(const IdleWait&) = delete;
    IdleWait& operator=(const IdleWait&) = delete;

    // Wake when `fd` is readable (level-triggered). False, errno set, when
    // epoll refuses it (a regular file, a closed fd).
    bool watch(int fd);
    // The same for the port's rx_wait_fd; sleeps then last up to
    // max_sleep_with_rx_fd instead of naps.
    bool watch_rx(int fd);
    void unwatch(int fd);

    // Polls on or sleeps, as the policy decides.
    void after_poll(bool did_work, std::optional<IdleClock::time_point> next_timer);

    // Sleeps until a watched fd is readable (true) or `timeout` passes (false).
    bool wait(std::chrono::nanoseconds timeout);
    // Whether the last wait() found `fd` readable, and whether its answer
    // was complete: epoll reports at most kMaxReported fds a call, so when it
    // filled them all, others may be readable too (level-triggered, the
    // next wait reports them at once). Lets the loop serve only what woke it
    // instead of asking every control socket and doorbell again, a system
    // call each.
    [[nodiscard]] bool fired(int fd) const;
    [[nodiscard]] bool fired_complete() const { return fired_count_ < kMaxReported; }
    // The loop's data-path round after a wait(): whether it found work
    // (counted in timeouts_then_work when that wait ran to its timeout).
    void round_done(bool worked);

    [[nodiscard]] const IdleCounters& counters() const { return counters_; }

private:
    static constexpr int kMaxReported = 8;

    IdlePolicy policy_;
    uroce::UniqueFd epoll_fd_;
    std::array<int, kMaxReported> fired_{};
    int fired_count_ = 0;
    bool have_rx_fd_ = false;
    int rx_fd_ = -1;
    bool after_timeout_ = false;  // the last wait() ran to its timeout, no round since
    IdleCounters counters_;
};

}  // namespace uroce::daemon
