#include "realtime.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace uroce::daemon {

namespace {

// Set by the SIGXCPU handler (RLIMIT_RTTIME's soft limit), read by the loop.
std::atomic<bool> budget_spent{false};

void on_sigxcpu(int) { budget_spent.store(true, std::memory_order_relaxed); }

// Soft limit only: SIGXCPU, never the hard limit's SIGKILL. Set again after
// each SIGXCPU: the kernel raises the soft limit by a second every time it
// fires (kernel/time/posix-cpu-timers.c, check_thread_timers).
bool set_budget_limit() {
    rlimit rt{};
    getrlimit(RLIMIT_RTTIME, &rt);
    rt.rlim_cur = static_cast<rlim_t>(std::chrono::microseconds(RealtimeClass::kBusyBudget).count());
    if (rt.rlim_max != RLIM_INFINITY && rt.rlim_max < rt.rlim_cur) {
        rt.rlim_cur = rt.rlim_max;  // a tighter limit of the administrator's stays
    }
    return setrlimit(RLIMIT_RTTIME, &rt) == 0;
}

}  // namespace

RealtimeClass::RealtimeClass(int priority) : priority_(priority) {
    if (priority_ == 0) {
        return;
    }
    struct sigaction sa {};
    sa.sa_handler = on_sigxcpu;
    sigaction(SIGXCPU, &sa, nullptr);
    if (!set_budget_limit()) {
        problem_ = std::string("cannot set RLIMIT_RTTIME: ") + std::strerror(errno) + "; staying SCHED_OTHER";
        return;
    }
    if (set_fifo()) {
        state_ = RealtimeState::Running;
    }
}

RealtimeClass::~RealtimeClass() {
    if (state_ != RealtimeState::Off) {
        set_other();
    }
}

bool RealtimeClass::set_fifo() {
    sched_param p{};
    p.sched_priority = priority_;
    // This thread only (the EAL's interrupt thread and others keep theirs).
    if (const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p); rc != 0) {
        problem_ = std::string("SCHED_FIFO priority ") + std::to_string(priority_) + " refused: " +
                   std::strerror(rc) + " (needs CAP_SYS_NICE or RLIMIT_RTPRIO); staying SCHED_OTHER";
        return false;
    }
    return true;
}

void RealtimeClass::set_other() {
    sched_param p{};
    p.sched_priority = 0;
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &p);
}

void RealtimeClass::check_budget() {
    if (state_ != RealtimeState::Running || !budget_spent.load(std::memory_order_relaxed)) {
        return;
    }
    budget_spent.store(false, std::memory_order_relaxed);
    set_other();
    state_ = RealtimeState::OverBudget;
    demotions_ += 1;
}

void RealtimeClass::after_sleep() {
    if (state_ != RealtimeState::OverBudget) {
        return;
    }
    budget_spent.store(false, std::memory_order_relaxed);
    if (set_budget_limit() && set_fifo()) {
        state_ = RealtimeState::Running;
    }
}

}  // namespace uroce::daemon
