// Loop stalls: rounds of the daemon's loop (main.cc run_loop) that took
// longer than a threshold, counted and explained. A peer's requester
// retransmits after its local ACK timeout (67 ms for ibv_rc_pingpong and
// perftest, IBA 9.7.6.1.3) and gives up after retry_cnt + 1 of them, so a
// daemon that does not run for a few hundred milliseconds ends a transfer in
// IBV_WC_RETRY_EXC_ERR (docs/daemon.md "Loop stalls").
//
// Each round is cut into phases by marks (phase_done), each mark giving the
// time since the previous one to a phase. When a round ends (the next
// begin_round) longer than the threshold, its time is split by what the
// thread was doing, from the kernel's per-thread accounting
// (/proc/thread-self/schedstat: time on a CPU, time runnable but waiting for
// one): on a CPU, waiting for a CPU, in the sleep the idle policy asked for,
// or none of these (blocked in a system call, a page fault waiting for I/O,
// or the virtual machine's vCPU not running). The largest share is the
// stall's cause, the longest phase its place; both are counted, and a log
// line says it in words.
//
//   LoopWatch watch(std::chrono::milliseconds(100));
//   while (running) {
//       watch.begin_round(Clock::now());
//       datapath.poll(...);  watch.phase_done(LoopPhase::DataPath, Clock::now());
//       ...
//       watch.asked_sleep(timeout); idle.wait(timeout); watch.phase_done(LoopPhase::Sleep, Clock::now());
//   }
//
// Single-threaded: the loop's own thread makes every call (the schedstat
// file is the calling thread's, opened in the constructor).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace uroce::daemon {

using LoopClock = std::chrono::steady_clock;

// Where in a round of the loop the time went.
enum class LoopPhase : std::uint8_t {
    DataPath,      // Datapath::poll: frames in, one engine round, frames out
    Control,       // ControlServer::poll_once: control messages
    Housekeeping,  // relaxed-MR timers, departed clients, deadlines
    Spin,          // sched_yield() while spinning for a reply
    Sleep,         // the idle wait (epoll) and the doorbell drain after it
    Count,
};
constexpr std::size_t kLoopPhaseCount = static_cast<std::size_t>(LoopPhase::Count);
constexpr std::array<std::string_view, kLoopPhaseCount> kLoopPhaseName = {
    "data_path", "control", "housekeeping", "spin", "sleep",
};

// What the thread was doing for the largest share of a stalled round.
enum class StallCause : std::uint8_t {
    CpuWait,     // runnable, waiting for a CPU other threads had
    OnCpu,       // running: the phase's own work took that long
    AskedSleep,  // asleep for as long as the idle policy asked
    OffCpu,      // not runnable outside the asked sleep: a blocking call, a page fault, a stopped vCPU
    Count,
};
constexpr std::size_t kStallCauseCount = static_cast<std::size_t>(StallCause::Count);
constexpr std::array<std::string_view, kStallCauseCount> kStallCauseName = {
    "cpu_wait", "on_cpu", "asked_sleep", "off_cpu",
};

// A stalled round's time by what the thread was doing. `cpu_wait` is absent
// where the kernel does not account it (no CONFIG_SCHED_INFO): it is then
// part of `off_cpu`.
struct StallShares {
    std::chrono::nanoseconds on_cpu{0};
    std::chrono::nanoseconds cpu_wait{0};
    std::chrono::nanoseconds asked_sleep{0};
    std::chrono::nanoseconds off_cpu{0};
};

// The largest share (ties: the order of StallCause).
[[nodiscard]] StallCause dominant_cause(const StallShares& shares);

// Splits `wall` (the round) into shares, from what the kernel accounted
// since the last sample (taken before the round began, at most
// LoopWatch::kSampleInterval before when rounds are short) and the sleep the
// policy asked for in the round: on_cpu, then cpu_wait, then the asked
// sleep, each at most what is left of the round; the rest is off_cpu.
[[nodiscard]] StallShares split_round(std::chrono::nanoseconds wall, std::chrono::nanoseconds on_cpu,
                                      std::optional<std::chrono::nanoseconds> cpu_wait,
                                      std::chrono::nanoseconds asked_sleep);

// The calling thread's time on a CPU and waiting for one, since it started.
struct ThreadTimes {
    std::chrono::nanoseconds on_cpu{0};
    std::optional<std::chrono::nanoseconds> cpu_wait;  // absent without schedstat
};

// Reads them: /proc/thread-self/schedstat when the kernel has it, else the
// thread's CPU clock alone. One pread per sample.
class ThreadClock {
public:
    ThreadClock();
    [[nodiscard]] ThreadTimes now() const;
    [[nodiscard]] bool accounts_cpu_wait() const { return schedstat_.valid(); }

private:
    UniqueFd schedstat_;
};

// What the daemon counts (the LOOP_STALLS reply, abi/control.h).
struct LoopStallCounters {
    std::chrono::nanoseconds threshold{0};
    std::uint64_t rounds = 0;
    std::uint64_t stalls = 0;       // rounds longer than the threshold
    std::uint64_t longest_ns = 0;
    std::uint64_t stalled_ns = 0;   // the stalled rounds' time, summed
    std::array<std::uint64_t, kStallCauseCount> by_cause{};
    std::array<std::uint64_t, kLoopPhaseCount> by_phase{};
    // Every round by length, whatever the threshold (an idle round sleeps
    // up to 10 ms, idle_wait.h, so the first bucket starts above that).
    std::uint64_t rounds_over_20ms = 0;
    std::uint64_t rounds_over_100ms = 0;
    std::uint64_t rounds_over_1s = 0;
};

class LoopWatch {
public:
    // Log lines at most this often; the ones in between are counted and
    // the next line says how many were not logged.
    static constexpr std::chrono::seconds kLogInterval{1};
    // How often the thread's times are sampled (a pread) while rounds are
    // short: a stalled round is compared with the last sample, at most this
    // long before it began.
    static constexpr std::chrono::milliseconds kSampleInterval{5};

    explicit LoopWatch(std::chrono::nanoseconds threshold);

    // A round starts (and the previous one ends) at `now`.
    void begin_round(LoopClock::time_point now);
    // The time since the previous mark went to `phase`.
    void phase_done(LoopPhase phase, LoopClock::time_point now);
    // The idle policy asked for a sleep of `timeout` in this round.
    void asked_sleep(std::chrono::nanoseconds timeout) { asked_sleep_ += timeout; }
    // The slowest control message of a poll of the control socket (op 0:
    // none was served), for the log line of a stall in the Control phase.
    void control_served(std::uint16_t op, std::chrono::nanoseconds took);

    [[nodiscard]] const LoopStallCounters& counters() const { return counters_; }

private:
    void end_round(LoopClock::time_point now);
    void explain(std::chrono::nanoseconds wall, LoopClock::time_point now);
    void sample(LoopClock::time_point now);
    void log_stall(std::chrono::nanoseconds wall, LoopPhase phase, StallCause cause, const StallShares& shares,
                   LoopClock::time_point now);

    ThreadClock clock_;
    LoopStallCounters counters_;
    bool in_round_ = false;
    LoopClock::time_point round_start_{};
    LoopClock::time_point last_mark_{};
    std::array<std::chrono::nanoseconds, kLoopPhaseCount> phase_time_{};
    std::chrono::nanoseconds asked_sleep_{0};
    std::uint16_t slowest_op_ = 0;
    std::chrono::nanoseconds slowest_op_took_{0};
    // The thread's times at the last sample.
    LoopClock::time_point sampled_at_{};
    ThreadTimes sampled_{};
    LoopClock::time_point next_log_{};
    std::uint64_t unlogged_ = 0;
};

}  // namespace uroce::daemon
