// Real-time scheduling for the daemon's loop thread (opt-in: --realtime-priority).
//
// When busy threads outnumber CPUs (two polling programs and two daemons on a
// 2-core CI runner), a SCHED_OTHER daemon gets a CPU only when the scheduler
// preempts a program that spins on memory, so a frame or a doorbell can wait
// a whole time slice. A SCHED_FIFO daemon preempts them the moment its epoll
// sleep ends, as the kernel's softirq does for rdma_rxe.
//
// Guards, so a real-time daemon cannot take the machine:
//   - the loop sleeps after a short spin (idle_wait.h; --spin-us), and
//     sched_yield() does not hand the CPU to SCHED_OTHER threads, so the spin
//     is kept short under real-time priority;
//   - RLIMIT_RTTIME (setrlimit(2)): after kBusyBudget of CPU without a
//     blocking call the kernel sends SIGXCPU, and the loop goes back to
//     SCHED_OTHER until its next sleep (a long busy stretch of bulk traffic
//     then shares the CPU like any other thread);
//   - the kernel's own throttle (/proc/sys/kernel/sched_rt_runtime_us,
//     950000 of every 1000000 us by default) still leaves the rest to others.
// Where the policy is not permitted (no CAP_SYS_NICE and RLIMIT_RTPRIO 0, a
// container without it) the daemon says so and runs as SCHED_OTHER.
//
// Single-threaded: the loop's own thread calls every member.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace uroce::daemon {

enum class RealtimeState {
    Off,          // not asked for, or refused: SCHED_OTHER
    Running,      // SCHED_FIFO at the asked priority
    OverBudget,   // SIGXCPU came: SCHED_OTHER until the next sleep
};

class RealtimeClass {
public:
    // CPU time one busy stretch may take at real-time priority (RLIMIT_RTTIME
    // soft limit; the kernel checks it at each tick, so allow a few ticks).
    static constexpr std::chrono::milliseconds kBusyBudget{20};

    // priority 0: stays Off. Otherwise tries SCHED_FIFO `priority` (1-99);
    // problem() says why not when it cannot.
    explicit RealtimeClass(int priority);
    ~RealtimeClass();
    RealtimeClass(const RealtimeClass&) = delete;
    RealtimeClass& operator=(const RealtimeClass&) = delete;

    // Each loop round: a SIGXCPU since the last call drops to SCHED_OTHER.
    void check_budget();
    // After the loop slept (a blocking call, so RLIMIT_RTTIME restarts):
    // back to SCHED_FIFO if the budget had run out.
    void after_sleep();

    [[nodiscard]] RealtimeState state() const { return state_; }
    [[nodiscard]] const std::string& problem() const { return problem_; }
    [[nodiscard]] std::uint64_t demotions() const { return demotions_; }

private:
    bool set_fifo();
    void set_other();

    int priority_ = 0;
    RealtimeState state_ = RealtimeState::Off;
    std::string problem_;
    std::uint64_t demotions_ = 0;
};

}  // namespace uroce::daemon
