// uroced: the uroce software RoCEv2 device daemon.
//
//   uroced --port loopback --ip 192.0.2.1 [--ip 2001:db8::1] [--name uroce0]
//          [--state-dir /run/uroce] [--mtu 9000] [--realtime-priority 0-99 (1)] [--spin-us 200] [--stall-ms 100]
//          [--fault RULE]... [--fault-seed N] [--no-fault-hook] [--no-capture-hook]
//          [--device name=N,port=SPEC,ip=ADDR,state-dir=DIR[,mtu=M][,netns=NS]]...
//
// Publishes each device under its state directory (a sysfs-style tree for
// libibverbs, the /dev/infiniband node, the control socket) and serves
// clients until SIGINT or SIGTERM, every device from one loop thread
// (device_instance.h). Logs go to stderr.
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client_quota.h"
#include "control_server.h"
#include "datapath.h"
#include "device_instance.h"
#include "device_spec.h"
#include "dpdk_instance.h"
#include "fault/rule_parse.h"
#include "idle_wait.h"
#include "log.h"
#include "loop_stalls.h"
#include "net/fault_port.h"
#include "realtime.h"

namespace {

std::atomic<bool> stop_requested{false};

void on_signal(int) { stop_requested.store(true); }

// The daemon's one loop: the data path runs while there is work and for a
// short spin window after it; then the rings' doorbells are armed, the rings
// looked at once more, and the loop sleeps until a doorbell, a control
// message, a frame (when the port can say so) or the next timer
// (idle_wait.h). Control messages are served between data-path rounds.
// The loop's thread runs SCHED_FIFO where permitted (realtime.h), dropping
// back to SCHED_OTHER for the rest of a busy stretch that outlasts its
// budget; --realtime-priority 0 keeps it SCHED_OTHER.
struct LoopSchedule {
    // Without the flag: kDefaultRealtimePriority, and a refusal is normal
    // (an unprivileged daemon), so it is said quietly.
    std::optional<int> realtime_priority;  // 0: SCHED_OTHER
    std::optional<std::chrono::microseconds> spin;  // the idle policy's default when unset
    // Rounds longer than this are counted and logged as stalls (loop_stalls.h).
    std::chrono::milliseconds stall_threshold{100};
};

// A real-time thread's spin keeps every SCHED_OTHER thread off its CPU (its
// sched_yield() hands the CPU only to other real-time threads), and on a
// small machine the reply it waits for usually comes from one of those (a
// client, or the kernel's softirq thread that carries a veth's frames): so
// with an rx wake fd it sleeps at once and the wake-up brings it back; a
// port without one (memif) would only nap, so it spins briefly first.
// Measured over a veth under load: 2-byte WRITE latency 38-46 us median
// with no spin, 3.9-4.1 ms with a 20 us spin (docs/daemon.md).
constexpr std::chrono::microseconds kRealtimeSpinWithRxFd{0};
// The lowest real-time priority: above every SCHED_OTHER program, below any
// real-time thread an administrator set up (docs/daemon.md "Real-time
// priority" has the figures that made it the default).
constexpr int kDefaultRealtimePriority = 1;
constexpr std::chrono::microseconds kRealtimeSpinWithoutRxFd{20};

using Devices = std::vector<std::unique_ptr<uroce::daemon::DeviceInstance>>;

// Empties a device's doorbell eventfd so the next sleep blocks again.
// RWF_NOWAIT: every client holds this eventfd's open file description and
// could clear its O_NONBLOCK; the daemon must not block here.
void drain_doorbell(uroce::daemon::DeviceInstance& device) {
    std::uint64_t rings = 0;
    iovec iov{&rings, sizeof rings};
    [[maybe_unused]] const ssize_t r = ::preadv2(device.server().doorbell_fd(), &iov, 1, -1, RWF_NOWAIT);
}

// One pass of every device's data path; whether any of them worked.
bool poll_datapaths(Devices& devices, std::chrono::steady_clock::time_point now) {
    bool worked = false;
    for (auto& d : devices) {
        worked = d->datapath().poll(now) || worked;
    }
    return worked;
}

// The earliest of the devices' timers and of the frames their fault hooks
// hold back (a delayed or reordered frame falls due), and `cap`.
std::chrono::steady_clock::time_point next_deadline(Devices& devices, std::chrono::steady_clock::time_point cap) {
    auto deadline = cap;
    for (auto& d : devices) {
        if (const auto t = d->datapath().next_deadline(); t && *t < deadline) {
            deadline = *t;
        }
        if (const auto* faults = d->faults(); faults != nullptr) {
            if (const auto held = faults->next_deadline(); held && *held < deadline) {
                deadline = *held;
            }
        }
    }
    return deadline;
}

// Whether every device's frames wake the loop: a port with an rx wake fd
// (watched), or one with no wire (loopback), which receives only what this
// loop sent, so nothing arrives while the loop sleeps.
bool watch_devices(uroce::daemon::IdleWait& idle, Devices& devices) {
    bool frames_wake_loop = true;
    for (auto& d : devices) {
        idle.watch(d->server().epoll_fd());
        idle.watch(d->server().doorbell_fd());
        const auto& port = d->port();
        const bool wakes = (port.rx_wait_fd() >= 0 && idle.watch_rx(port.rx_wait_fd())) || !port.has_wire();
        frames_wake_loop = frames_wake_loop && wakes;
    }
    return frames_wake_loop;
}

// The daemon's one loop for all its devices (docs/daemon.md "Several devices
// in one daemon"): each round polls every device's data path, and the sleep
// waits on all their control sockets, doorbells and rx wake fds at once.
void run_loop(Devices& devices, const LoopSchedule& schedule) {
    using namespace uroce;
    using Clock = std::chrono::steady_clock;
    daemon::IdleWait idle;
    const int priority = schedule.realtime_priority.value_or(kDefaultRealtimePriority);
    daemon::RealtimeClass realtime(priority);
    if (!realtime.problem().empty() && schedule.realtime_priority) {
        daemon::log_warn("{}", realtime.problem());
    } else if (!realtime.problem().empty()) {
        daemon::log_info("loop thread: {}", realtime.problem());
    } else if (realtime.state() == daemon::RealtimeState::Running) {
        daemon::log_info("loop thread: SCHED_FIFO priority {}, {} ms busy budget", priority,
                         daemon::RealtimeClass::kBusyBudget.count());
    }
    for (auto& d : devices) {
        d->datapath().set_idle_counters(&idle.counters());  // for STATS, served from this loop
    }
    const bool frames_wake_loop = watch_devices(idle, devices);
    daemon::IdlePolicyConfig idle_config;
    if (realtime.state() == daemon::RealtimeState::Running) {
        idle_config.spin = frames_wake_loop ? kRealtimeSpinWithRxFd : kRealtimeSpinWithoutRxFd;
    }
    if (schedule.spin) {
        idle_config.spin = *schedule.spin;
    }
    if (const char* spin = std::getenv("UROCE_SPIN_US")) {
        idle_config.spin = std::chrono::microseconds(std::atoi(spin));
    }
    daemon::IdlePolicy policy(idle_config);
    daemon::LoopWatch watch(schedule.stall_threshold);
    for (auto& d : devices) {
        d->server().set_loop_stalls(&watch.counters());  // for LOOP_STALLS, served from this loop
    }
    auto serve_control_of = [&watch](daemon::DeviceInstance& d) {
        d.server().poll_once(0);
        const auto slowest = d.server().take_slowest_op();
        watch.control_served(slowest.op, slowest.took);
    };
    auto serve_control = [&devices, &watch, &serve_control_of] {
        for (auto& d : devices) {
            serve_control_of(*d);
        }
        watch.phase_done(daemon::LoopPhase::Control, Clock::now());
    };
    Clock::time_point next_control = Clock::now();
    Clock::time_point next_pools = Clock::now();
    while (!stop_requested.load(std::memory_order_relaxed)) {
        realtime.check_budget();
        Clock::time_point now = Clock::now();
        watch.begin_round(now);
        bool worked = poll_datapaths(devices, now);
        idle.round_done(worked);
        watch.phase_done(daemon::LoopPhase::DataPath, Clock::now());
        if (now >= next_control) {
            // Control messages are rare; look at most every 100 us while busy.
            serve_control();
            next_control = now + std::chrono::microseconds(100);
        }
        if (now >= next_pools) {
            for (auto& d : devices) {
                d->server().poll_pools(now);  // relaxed-MR invalidation timers
                d->server().check_clients(now);  // clients whose process exec'ed or exited
                d->keep_link(now);  // a memif client dials its server again
            }
            next_pools = now + std::chrono::milliseconds(10);
        }
        const std::optional<Clock::time_point> deadline = next_deadline(devices, next_pools);
        const daemon::IdlePolicy::Decision d = policy.after_poll(worked, now, deadline, frames_wake_loop);
        watch.phase_done(daemon::LoopPhase::Housekeeping, Clock::now());
        if (!d.sleep) {
            if (!worked) {
                // Spinning for a reply: let anything else runnable on this
                // CPU (a client, a second daemon) go first. On small
                // machines the reply usually comes from one of them.
                sched_yield();
                watch.phase_done(daemon::LoopPhase::Spin, Clock::now());
            }
            continue;
        }
        // rings.h doorbell protocol: arm, then look once more before sleeping.
        for (auto& device : devices) {
            device->datapath().arm_doorbells();
        }
        if (poll_datapaths(devices, Clock::now())) {
            (void)policy.after_poll(true, Clock::now(), deadline, frames_wake_loop);
            watch.phase_done(daemon::LoopPhase::DataPath, Clock::now());
            continue;
        }
        watch.phase_done(daemon::LoopPhase::DataPath, Clock::now());
        watch.asked_sleep(d.timeout);
        const bool woken = idle.wait(d.timeout);
        realtime.after_sleep();
        watch.phase_done(daemon::LoopPhase::Sleep, Clock::now());
        if (woken) {
            // Only the control sockets and doorbells the wait found readable
            // (every device's when it could not report them all): each one
            // asked is a system call, and a message's wake-up should cost
            // as few as it can (docs/daemon.md "System calls per wake-up").
            const bool complete = idle.fired_complete();
            for (auto& device : devices) {
                if (!complete || idle.fired(device->server().epoll_fd())) {
                    serve_control_of(*device);
                } else {
                    device->server().retry_refused_writes();
                }
                if (!complete || idle.fired(device->server().doorbell_fd())) {
                    drain_doorbell(*device);
                }
            }
            watch.phase_done(daemon::LoopPhase::Control, Clock::now());
            // The wait looked at every control socket just now.
            next_control = Clock::now() + std::chrono::microseconds(100);
        }
    }
    for (auto& d : devices) {
        d->datapath().set_idle_counters(nullptr);
        d->server().set_loop_stalls(nullptr);
        d->log_summary();
    }
    const auto& i = idle.counters();
    daemon::log_info("idle: {} sleeps ({} woken by an fd; {} ran to their timeout and the round after found work), "
                     "{:.3f} s asleep",
                     i.sleeps, i.woken_by_fd, i.timeouts_then_work, static_cast<double>(i.slept_ns) / 1e9);
    if (priority != 0) {
        daemon::log_info("real-time: {} busy stretches outlasted the budget", realtime.demotions());
    }
    const auto& w = watch.counters();
    daemon::log_info("loop: {} rounds, {} stalls over {} ms (longest {:.1f} ms); rounds over 20 ms {}, 100 ms {}, "
                     "1 s {}",
                     w.rounds, w.stalls, schedule.stall_threshold.count(), static_cast<double>(w.longest_ns) / 1e6,
                     w.rounds_over_20ms, w.rounds_over_100ms, w.rounds_over_1s);
}

// The devices' specs from the command line: the single-device flags
// describe the first, each --device one more. Empty (logged) when one is bad.
std::vector<uroce::daemon::DeviceSpec> device_specs(const uroce::daemon::DeviceSpec& first,
                                                    const std::vector<std::string>& device_texts) {
    using namespace uroce;
    std::vector<daemon::DeviceSpec> specs;
    if (std::string problem = daemon::check_device_spec(first); !problem.empty()) {
        daemon::log_error("--{}", problem);
        return {};
    }
    specs.push_back(first);
    for (const std::string& text : device_texts) {
        daemon::ParsedDeviceSpec parsed = daemon::parse_device_spec(text);
        if (!parsed.spec) {
            daemon::log_error("--device {}: {}", text, parsed.error);
            return {};
        }
        specs.push_back(std::move(*parsed.spec));
    }
    if (std::string problem = daemon::check_device_set(specs); !problem.empty()) {
        daemon::log_error("--device: {}", problem);
        return {};
    }
    return specs;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace uroce;
    CLI::App app{"uroced: the uroce software RoCEv2 device daemon"};
    daemon::DeviceSpec first;
    app.add_option("--port", first.port,
                   "'loopback' (no NIC), a PCI address, or DPDK vdev devargs such as net_af_packet0,iface=veth0")
        ->required();
    app.add_option("--ip", first.ips, "IPv4 or IPv6 address of the port (repeatable)")->required();
    app.add_option("--name", first.name, "device name (must start with 'uroce')")->capture_default_str();
    app.add_option("--state-dir", first.state_dir, "where the device is published")->capture_default_str();
    app.add_option("--mtu", first.mtu, "Ethernet MTU of the port (default: the port's own, 9000 for loopback)")
        ->check(CLI::Range(daemon::kMinMtu, daemon::kMaxMtu));
    std::vector<std::string> device_texts;
    app.add_option("--device", device_texts,
                   "one more device served by the same loop thread: "
                   "name=N,port=SPEC,ip=ADDR,state-dir=DIR[,mtu=M][,netns=NS] (repeatable; a DPDK port's devargs "
                   "follow port=; netns: open the port inside /run/netns/NS; docs/daemon.md)");
    LoopSchedule schedule;
    app.add_option("--realtime-priority", schedule.realtime_priority,
                   "run the loop thread SCHED_FIFO at this priority (1-99, default 1; 0: SCHED_OTHER); "
                   "falls back to SCHED_OTHER where not permitted (docs/daemon.md)")
        ->check(CLI::Range(0, 99));
    std::uint32_t spin_us = 0;
    auto* spin_option = app.add_option("--spin-us", spin_us,
                                       "microseconds the loop keeps polling after its last work before it sleeps "
                                       "(SCHED_OTHER: 200; SCHED_FIFO: 0 where frames wake the loop, "
                                       "else 20)")
                            ->check(CLI::Range(0u, 100000u));
    std::uint32_t stall_ms = 100;
    app.add_option("--stall-ms", stall_ms,
                   "a loop round longer than this many milliseconds is counted and logged as a stall, with its "
                   "cause (`uroce stats` group loop_stalls; docs/daemon.md)")
        ->capture_default_str()
        ->check(CLI::Range(1u, 60000u));
    // ---- per-client quotas (client_quota.h, docs/daemon.md "Quotas"); 0: the derived default ----
    daemon::QuotaLimits quota_flags{0, 0, 0, 0};
    std::uint64_t quota_memory_mib = 0;
    app.add_option("--client-max-objects", quota_flags.objects,
                   "objects (PD, MR, MW, CQ, QP, SRQ, AH, relaxed-pool slot) one client may hold "
                   "(default 1048576, a quarter of the device's MR keys)");
    app.add_option("--client-max-mappings", quota_flags.mappings,
                   "daemon mappings (rings, pools, shared MRs) one client may hold "
                   "(default: a quarter of vm.max_map_count less the daemon's own)");
    app.add_option("--client-max-memory-mib", quota_memory_mib,
                   "MiB of shared memory (rings, pools, shared MRs) one client may have the daemon map "
                   "(default: a quarter of the machine's memory)");
    app.add_option("--client-max-fds", quota_flags.fds,
                   "daemon file descriptors (completion channels) one client may hold "
                   "(default: a quarter of RLIMIT_NOFILE, raised to its hard limit, less the daemon's own)");
    // ---- end of per-client quotas ----
    // ---- fault injection (docs/fault-injection.md) ----
    std::vector<std::string> fault_texts;
    std::uint64_t fault_seed = 1;
    bool no_fault_hook = false;
    app.add_option("--fault", fault_texts,
                   "a fault-injection rule, e.g. drop:rate=5%,dir=both or reorder:rate=2%,depth=8 "
                   "(repeatable; docs/fault-injection.md)");
    app.add_option("--fault-seed", fault_seed, "seed of the fault rules' random streams")->capture_default_str();
    app.add_flag("--no-fault-hook", no_fault_hook,
                 "leave the fault-injection hook out of the data path (only to measure what it costs; "
                 "`uroce fault` then answers 'not supported')");
    // ---- end of fault injection ----
    bool no_capture_hook = false;
    app.add_flag("--no-capture-hook", no_capture_hook,
                 "leave the capture hook out of the data path (only to measure what it costs; "
                 "`uroce capture` then answers 'not supported')");
    CLI11_PARSE(app, argc, argv);
    if (spin_option->count() > 0) {
        schedule.spin = std::chrono::microseconds(spin_us);
    }
    schedule.stall_threshold = std::chrono::milliseconds(stall_ms);

    const std::vector<daemon::DeviceSpec> specs = device_specs(first, device_texts);
    if (specs.empty()) {
        return 2;
    }
    daemon::DeviceHooks hooks;
    hooks.fault_seed = fault_seed;
    hooks.fault_hook = !no_fault_hook;
    hooks.capture_hook = !no_capture_hook;
    for (const auto& t : fault_texts) {
        const fault::ParsedRule parsed = fault::parse_rule(t);
        if (!parsed.rule) {
            daemon::log_error("--fault {}: {}", t, parsed.error);
            return 2;
        }
        hooks.fault_rules.push_back(*parsed.rule);
    }
    if (no_fault_hook && !hooks.fault_rules.empty()) {
        daemon::log_error("--fault and --no-fault-hook: the rules need the hook");
        return 2;
    }
    quota_flags.bytes = quota_memory_mib << 20;
    hooks.quota_flags = quota_flags;
    try {
        // The first device names the EAL's files; every DPDK port of the
        // daemon shares that one EAL (dpdk_port.h).
        const std::string eal = daemon::dpdk_instance(specs.front().name, specs.front().state_dir);
        Devices devices;
        for (const daemon::DeviceSpec& spec : specs) {
            devices.push_back(std::make_unique<daemon::DeviceInstance>(spec, hooks, eal));
        }

        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        signal(SIGPIPE, SIG_IGN);

        for (const auto& d : devices) {
            d->log_ready();
        }
        run_loop(devices, schedule);

        for (auto& d : devices) {
            d->shutdown_clients();
        }
        // The devices go in reverse order: the first port's EAL goes last.
        while (!devices.empty()) {
            devices.pop_back();
        }
    } catch (const std::exception& e) {
        daemon::log_error("{}", e.what());
        return 1;
    }
    daemon::log_info("stopped");
    return 0;
}
