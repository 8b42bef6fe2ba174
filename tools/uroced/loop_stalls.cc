#include "loop_stalls.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "log.h"

namespace uroce::daemon {

namespace {

using std::chrono::nanoseconds;

double ms(nanoseconds t) { return static_cast<double>(t.count()) / 1e6; }

nanoseconds thread_cpu_clock() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec);
}

}  // namespace

StallCause dominant_cause(const StallShares& s) {
    const std::array<std::pair<nanoseconds, StallCause>, kStallCauseCount> shares = {{
        {s.cpu_wait, StallCause::CpuWait},
        {s.on_cpu, StallCause::OnCpu},
        {s.asked_sleep, StallCause::AskedSleep},
        {s.off_cpu, StallCause::OffCpu},
    }};
    auto best = shares[0];
    for (const auto& share : shares) {
        if (share.first > best.first) {
            best = share;
        }
    }
    return best.second;
}

StallShares split_round(nanoseconds wall, nanoseconds on_cpu, std::optional<nanoseconds> cpu_wait,
                        nanoseconds asked_sleep) {
    StallShares s;
    nanoseconds left = wall;
    auto take = [&left](nanoseconds want) {
        const nanoseconds got = std::clamp(want, nanoseconds(0), left);
        left -= got;
        return got;
    };
    s.on_cpu = take(on_cpu);
    s.cpu_wait = take(cpu_wait.value_or(nanoseconds(0)));
    s.asked_sleep = take(asked_sleep);
    s.off_cpu = left;
    return s;
}

ThreadClock::ThreadClock() : schedstat_(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}

ThreadTimes ThreadClock::now() const {
    // "<ns on a CPU> <ns runnable, waiting for a CPU> <timeslices>"
    // (Documentation/scheduler/sched-stats.rst).
    if (schedstat_.valid()) {
        char text[96];
        const ssize_t n = ::pread(schedstat_.get(), text, sizeof(text) - 1, 0);
        unsigned long long on_cpu = 0;
        unsigned long long waited = 0;
        if (n > 0) {
            text[n] = '\0';
            if (std::sscanf(text, "%llu %llu", &on_cpu, &waited) == 2) {
                return {nanoseconds(on_cpu), nanoseconds(waited)};
            }
        }
    }
    return {thread_cpu_clock(), std::nullopt};
}

LoopWatch::LoopWatch(nanoseconds threshold) {
    counters_.threshold = threshold;
    sampled_at_ = LoopClock::now();
    sampled_ = clock_.now();
}

void LoopWatch::begin_round(LoopClock::time_point now) {
    if (in_round_) {
        end_round(now);
    }
    in_round_ = true;
    round_start_ = now;
    last_mark_ = now;
    phase_time_.fill(nanoseconds(0));
    asked_sleep_ = nanoseconds(0);
    slowest_op_ = 0;
    slowest_op_took_ = nanoseconds(0);
    if (now - sampled_at_ >= kSampleInterval) {
        sample(now);
    }
}

void LoopWatch::phase_done(LoopPhase phase, LoopClock::time_point now) {
    phase_time_[static_cast<std::size_t>(phase)] += now - last_mark_;
    last_mark_ = now;
}

void LoopWatch::control_served(std::uint16_t op, nanoseconds took) {
    if (op != 0 && took >= slowest_op_took_) {
        slowest_op_ = op;
        slowest_op_took_ = took;
    }
}

void LoopWatch::sample(LoopClock::time_point now) {
    sampled_at_ = now;
    sampled_ = clock_.now();
}

void LoopWatch::end_round(LoopClock::time_point now) {
    // What follows the last mark (the loop's own bookkeeping) goes with it.
    ++counters_.rounds;
    const nanoseconds wall = now - round_start_;
    counters_.rounds_over_20ms += wall > std::chrono::milliseconds(20) ? 1 : 0;
    counters_.rounds_over_100ms += wall > std::chrono::milliseconds(100) ? 1 : 0;
    counters_.rounds_over_1s += wall > std::chrono::seconds(1) ? 1 : 0;
    if (wall > counters_.threshold) [[unlikely]] {
        explain(wall, now);
    }
}

void LoopWatch::explain(nanoseconds wall, LoopClock::time_point now) {
    const ThreadTimes before = sampled_;
    sample(now);
    const nanoseconds on_cpu = sampled_.on_cpu - before.on_cpu;
    std::optional<nanoseconds> cpu_wait;
    if (sampled_.cpu_wait && before.cpu_wait) {
        cpu_wait = *sampled_.cpu_wait - *before.cpu_wait;
    }
    const nanoseconds asked = std::min(asked_sleep_, phase_time_[static_cast<std::size_t>(LoopPhase::Sleep)]);
    const StallShares shares = split_round(wall, on_cpu, cpu_wait, asked);
    const StallCause cause = dominant_cause(shares);
    const auto longest = std::max_element(phase_time_.begin(), phase_time_.end());
    const auto phase = static_cast<LoopPhase>(longest - phase_time_.begin());
    ++counters_.stalls;
    counters_.stalled_ns += static_cast<std::uint64_t>(wall.count());
    counters_.longest_ns = std::max(counters_.longest_ns, static_cast<std::uint64_t>(wall.count()));
    ++counters_.by_cause[static_cast<std::size_t>(cause)];
    ++counters_.by_phase[static_cast<std::size_t>(phase)];
    log_stall(wall, phase, cause, shares, now);
}

void LoopWatch::log_stall(nanoseconds wall, LoopPhase phase, StallCause cause, const StallShares& s,
                          LoopClock::time_point now) {
    if (now < next_log_) {
        ++unlogged_;
        return;
    }
    next_log_ = now + kLogInterval;
    std::string where = fmt::format("{:.1f} ms in {}", ms(phase_time_[static_cast<std::size_t>(phase)]),
                                    kLoopPhaseName[static_cast<std::size_t>(phase)]);
    if (phase == LoopPhase::Control && slowest_op_ != 0) {
        where += fmt::format(" (slowest control op {} took {:.1f} ms)", slowest_op_, ms(slowest_op_took_));
    }
    const std::string waited = clock_.accounts_cpu_wait() ? fmt::format("{:.1f} ms waiting for a CPU, ", ms(s.cpu_wait))
                                                          : std::string("(waiting for a CPU not accounted), ");
    double load[1] = {0.0};
    const bool have_load = getloadavg(load, 1) == 1;
    log_warn("loop stall {}: a round took {:.1f} ms (threshold {:.0f} ms), {}: {:.1f} ms on a CPU, {}"
             "{:.1f} ms asleep as asked, {:.1f} ms off a CPU otherwise; cause {}{}{}",
             counters_.stalls, ms(wall), ms(counters_.threshold), where, ms(s.on_cpu), waited, ms(s.asked_sleep),
             ms(s.off_cpu), kStallCauseName[static_cast<std::size_t>(cause)],
             have_load ? fmt::format("; load average {:.1f}", load[0]) : std::string(),
             unlogged_ != 0 ? fmt::format("; {} more stalls not logged since the last line", unlogged_)
                            : std::string());
    unlogged_ = 0;
}

}  // namespace uroce::daemon
