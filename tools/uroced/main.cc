// uroced: the uroce software RoCEv2 device daemon.
//
//   uroced --port loopback --ip 192.0.2.1 [--ip 2001:db8::1] [--name uroce0]
//          [--state-dir /run/uroce] [--mtu 1500] [--realtime-priority 0-99 (1)] [--spin-us 200] [--stall-ms 100]
//          [--fault RULE]... [--fault-seed N] [--no-fault-hook] [--no-capture-hook]
//
// Publishes the device under the state directory (a sysfs-style tree for
// libibverbs, the /dev/infiniband node, the control socket) and serves
// clients until SIGINT or SIGTERM. Logs go to stderr.
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "capturing_port.h"
#include "client_quota.h"
#include "control_server.h"
#include "datapath.h"
#include "idle_wait.h"
#include "net/fault_port.h"
#include "net/loopback_port.h"
#include "udp_sink.h"
#ifdef UROCE_HAVE_DPDK
#include "dpdk_port.h"
#endif
#include "device/device.h"
#include "device_node.h"
#include "dpdk_instance.h"
#include "fault/rule_parse.h"
#include "instance_lock.h"
#include "log.h"
#include "loop_stalls.h"
#include "realtime.h"
#include "sysfs_tree.h"
#include "wire/describe.h"

namespace {

std::atomic<bool> stop_requested{false};

void on_signal(int) { stop_requested.store(true); }

// A locally administered unicast MAC derived from the device name, so a
// loopback device keeps its GIDs across restarts.
uroce::wire::MacAddr loopback_mac(const std::string& name) {
    const std::size_t h = std::hash<std::string>{}(name);
    return {0x02, 0x75, static_cast<std::uint8_t>(h >> 24), static_cast<std::uint8_t>(h >> 16),
            static_cast<std::uint8_t>(h >> 8), static_cast<std::uint8_t>(h)};
}

// Takes the state directory's lock for `name`; false (logged) when another
// uroced holds it or it cannot be taken.
bool lock_instance(const uroce::daemon::InstanceLock& lock, const std::string& name, const std::string& state_dir) {
    using Outcome = uroce::daemon::InstanceLock::Outcome;
    switch (lock.outcome()) {
        case Outcome::Acquired:
            if (lock.found_stale()) {
                uroce::daemon::log_warn("the last uroced of {} in {} did not stop cleanly; removing what it left",
                                        name, state_dir);
            }
            return true;
        case Outcome::HeldByOther:
            uroce::daemon::log_error("another uroced ({}) is serving {} from {} (it holds {}); stop it first, or "
                                     "give this one another --name or --state-dir",
                                     lock.holder_pid() ? fmt::format("pid {}", *lock.holder_pid()) : "pid unknown",
                                     name, state_dir, lock.path().string());
            return false;
        case Outcome::Failed:
            uroce::daemon::log_error("{}", lock.problem());
            return false;
    }
    return false;
}

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

// `faults`, when the fault hook is installed, holds frames back: its next
// deadline wakes the loop too.
void run_loop(uroce::daemon::ControlServer& server, uroce::daemon::Datapath& datapath, uroce::net::Port& port,
              const LoopSchedule& schedule, const uroce::net::FaultPort* faults) {
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
    datapath.set_idle_counters(&idle.counters());  // for STATS, served from this loop
    idle.watch(server.epoll_fd());
    idle.watch(server.doorbell_fd());
    // A port with no wire (loopback) receives only what this loop sent, so,
    // like a port with an rx wake fd, nothing arrives while the loop sleeps.
    const bool frames_wake_loop = (port.rx_wait_fd() >= 0 && idle.watch_rx(port.rx_wait_fd())) || !port.has_wire();
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
    server.set_loop_stalls(&watch.counters());  // for LOOP_STALLS, served from this loop
    auto serve_control = [&server, &watch] {
        server.poll_once(0);
        const auto slowest = server.take_slowest_op();
        watch.control_served(slowest.op, slowest.took);
        watch.phase_done(daemon::LoopPhase::Control, Clock::now());
    };
    Clock::time_point next_control = Clock::now();
    Clock::time_point next_pools = Clock::now();
    while (!stop_requested.load(std::memory_order_relaxed)) {
        realtime.check_budget();
        Clock::time_point now = Clock::now();
        watch.begin_round(now);
        bool worked = datapath.poll(now);
        watch.phase_done(daemon::LoopPhase::DataPath, Clock::now());
        if (now >= next_control) {
            // Control messages are rare; look at most every 100 us while busy.
            serve_control();
            next_control = now + std::chrono::microseconds(100);
        }
        if (now >= next_pools) {
            server.poll_pools(now);  // relaxed-MR invalidation timers
            server.check_clients(now);  // clients whose process exec'ed or exited
            next_pools = now + std::chrono::milliseconds(10);
        }
        auto deadline = datapath.next_deadline();
        if (!deadline || *deadline > next_pools) {
            deadline = next_pools;
        }
        if (faults != nullptr) {
            if (const auto held = faults->next_deadline(); held && *held < *deadline) {
                deadline = held;  // a delayed or reordered frame falls due
            }
        }
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
        datapath.arm_doorbells();
        if (datapath.poll(Clock::now())) {
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
            serve_control();
            next_control = Clock::now() + std::chrono::microseconds(100);
            // Drain the doorbell so the next sleep blocks again. RWF_NOWAIT:
            // every client holds this eventfd's open file description and
            // could clear its O_NONBLOCK; the daemon must not block here.
            std::uint64_t rings = 0;
            iovec iov{&rings, sizeof rings};
            [[maybe_unused]] const ssize_t r = ::preadv2(server.doorbell_fd(), &iov, 1, -1, RWF_NOWAIT);
        }
    }
    datapath.set_idle_counters(nullptr);
    server.set_loop_stalls(nullptr);
    const auto& e = datapath.engine().counters();
    const auto& i = idle.counters();
    daemon::log_info("engine: {} packets in, {} out, {} dropped, {} retransmitted, {} timeouts, {} RNR NAKs sent, "
                     "{} received, {} sequence NAKs sent, {} received, {} duplicates, {} bad WQEs",
                     e.rx_packets, e.tx_packets, e.rx_dropped, e.retransmits, e.timeouts, e.rnr_naks_sent,
                     e.rnr_naks_received, e.seq_naks_sent, e.seq_naks_received, e.duplicates, e.bad_wqes);
    datapath.log_cm_summary();
    const net::MembershipCounters m = datapath.membership().counters();
    daemon::log_info("multicast membership: {} reports sent, {} leaves, {} queries answered or ignored, "
                     "{} malformed queries, {} refused by the port, {} groups reported now",
                     m.reports_sent, m.leaves_sent, m.queries, m.malformed, m.tx_refused, m.groups);
    daemon::log_info("idle: {} sleeps ({} woken by an fd), {:.3f} s asleep", i.sleeps, i.woken_by_fd,
                     static_cast<double>(i.slept_ns) / 1e9);
    if (priority != 0) {
        daemon::log_info("real-time: {} busy stretches outlasted the budget", realtime.demotions());
    }
    const auto& w = watch.counters();
    daemon::log_info("loop: {} rounds, {} stalls over {} ms (longest {:.1f} ms); rounds over 20 ms {}, 100 ms {}, "
                     "1 s {}",
                     w.rounds, w.stalls, schedule.stall_threshold.count(), static_cast<double>(w.longest_ns) / 1e6,
                     w.rounds_over_20ms, w.rounds_over_100ms, w.rounds_over_1s);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace uroce;
    CLI::App app{"uroced: the uroce software RoCEv2 device daemon"};
    std::string port_spec;
    std::vector<std::string> ip_texts;
    std::string name = "uroce0";
    std::string state_dir = "/run/uroce";
    std::uint32_t mtu = 0;
    app.add_option("--port", port_spec,
                   "'loopback' (no NIC), a PCI address, or DPDK vdev devargs such as net_af_packet0,iface=veth0")
        ->required();
    app.add_option("--ip", ip_texts, "IPv4 or IPv6 address of the port (repeatable)")->required();
    app.add_option("--name", name, "device name (must start with 'uroce')")->capture_default_str();
    app.add_option("--state-dir", state_dir, "where the device is published")->capture_default_str();
    app.add_option("--mtu", mtu, "Ethernet MTU of the port (default: the port's own, 1500 for loopback)")
        ->check(CLI::Range(576u, 9216u));
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

    if (name.rfind("uroce", 0) != 0 || name.size() > 32 || name.find('/') != std::string::npos) {
        daemon::log_error("--name {}: must start with 'uroce' (the provider claims that prefix), at most 32 characters, "
                          "no '/'", name);
        return 2;
    }
    device::DeviceConfig cfg;
    cfg.name = name;
    for (const auto& t : ip_texts) {
        auto gid = device::parse_ip(t);
        if (!gid) {
            daemon::log_error("--ip {}: not an IPv4 or IPv6 address", t);
            return 2;
        }
        cfg.ips.push_back(*gid);
    }
    std::vector<fault::Rule> fault_rules;
    for (const auto& t : fault_texts) {
        const fault::ParsedRule parsed = fault::parse_rule(t);
        if (!parsed.rule) {
            daemon::log_error("--fault {}: {}", t, parsed.error);
            return 2;
        }
        fault_rules.push_back(*parsed.rule);
    }
    if (no_fault_hook && !fault_rules.empty()) {
        daemon::log_error("--fault and --no-fault-hook: the rules need the hook");
        return 2;
    }
    std::unique_ptr<daemon::InstanceLock> lock;
    try {
        std::filesystem::create_directories(state_dir);
        lock = std::make_unique<daemon::InstanceLock>(state_dir, name);
    } catch (const std::exception& e) {
        daemon::log_error("{}", e.what());
        return 1;
    }
    if (!lock_instance(*lock, name, state_dir)) {
        return 1;
    }
    try {
#ifdef UROCE_HAVE_DPDK
        std::unique_ptr<port::DpdkPort> nic;
#endif
        std::unique_ptr<net::LoopbackPort> loop;
        net::Port* port = nullptr;
        if (port_spec == "loopback") {
            cfg.port.mac = loopback_mac(name);
            cfg.port.netdev_mtu = mtu != 0 ? mtu : 1500;
            net::LoopbackConfig lc;
            lc.mac = cfg.port.mac;
            lc.max_frame = cfg.port.netdev_mtu + 18;  // Ethernet header and one VLAN tag
            loop = std::make_unique<net::LoopbackPort>(lc);
            port = loop.get();
        } else {
#ifdef UROCE_HAVE_DPDK
            port::DpdkPortOptions options;
            options.mtu = mtu;
            nic = std::make_unique<port::DpdkPort>(port_spec, daemon::dpdk_instance(name, state_dir), options);
            const auto& info = nic->info();
            cfg.port.mac = info.mac;
            cfg.port.netdev_mtu = info.mtu;  // the effective MTU, after the port clamped --mtu
            cfg.port.link_up = info.link_up;
            if (info.speed_mbps != 0) {
                cfg.port.speed_mbps = info.speed_mbps;
            }
            port = nic.get();
            daemon::log_info("DPDK port {} ({}), MAC {}, MTU {}, link {}", port_spec, info.driver,
                             wire::to_string(info.mac), info.mtu, info.link_up ? "up" : "down");
#else
            daemon::log_error("--port {}: this uroced was built without DPDK; only 'loopback' is available",
                              port_spec);
            return 2;
#endif
        }
        // Device limits the daemon can reach: every CQ, QP and SRQ costs it
        // one mapping (and a CQ with a channel one descriptor).
        const daemon::DeviceBudget budget = daemon::measure_device_budget();
        daemon::QuotaLimits quota = daemon::default_quota(budget);
        quota_flags.bytes = quota_memory_mib << 20;
        for (auto [flag, value] : {std::pair{quota_flags.objects, &quota.objects},
                                   std::pair{quota_flags.mappings, &quota.mappings},
                                   std::pair{quota_flags.bytes, &quota.bytes}, std::pair{quota_flags.fds, &quota.fds}}) {
            if (flag != 0) {
                *value = flag;
            }
        }
        auto reachable = [&](std::uint32_t& limit) {
            limit = static_cast<std::uint32_t>(std::min<std::uint64_t>({limit, budget.mappings, budget.fds}));
        };
        reachable(cfg.queue_limits.max_cq);
        reachable(cfg.queue_limits.max_qp);
        reachable(cfg.queue_limits.max_srq);
        daemon::log_info("budget: {} mappings, {} descriptors; per client: {} objects, {} mappings, {} MiB, {} fds",
                         budget.mappings, budget.fds, quota.objects, quota.mappings, quota.bytes >> 20, quota.fds);
        device::Device dev(cfg);
        const std::string socket_path = (std::filesystem::path(state_dir) / (name + ".sock")).string();
        daemon::ControlServer server(socket_path, dev);
        server.set_quota(daemon::ClientQuota(quota, budget));
        // Packet capture (docs/capture.md): what the data path sends passes
        // the tap on its way to the port. The fault hook sits in front of it
        // (Datapath -> FaultPort -> CapturingPort -> port), so a frame it
        // drops on the way out is recorded once, as dropped, not as sent.
        daemon::CaptureTap capture_tap;
        daemon::CapturingPort capturing_port(*port, capture_tap);
        if (!no_capture_hook) {
            port = &capturing_port;
        }
        std::unique_ptr<net::FaultPort> faults;
        if (!no_fault_hook) {
            faults = std::make_unique<net::FaultPort>(*port, fault_seed);
            for (const fault::Rule& r : fault_rules) {
                daemon::log_info("fault rule {}: {}", faults->add_rule(r), fault::format_rule(r));
            }
            faults->set_drop_observer([&capture_tap](fault::Direction way, std::span<const std::uint8_t> frame,
                                                     std::string_view rule) {
                if (capture_tap.active()) [[unlikely]] {
                    const auto direction =
                        way == fault::Direction::Rx ? daemon::CaptureDirection::Received : daemon::CaptureDirection::Sent;
                    capture_tap.record_dropped(direction, frame, fmt::format("dropped by fault injection: {}", rule));
                }
            });
            port = faults.get();
            server.attach_faults(*faults);
        }
        daemon::Datapath datapath(dev, *port);
        if (!no_capture_hook) {
            datapath.set_capture(capture_tap);
        }
        server.attach(datapath);
        // On a kernel interface (af_packet) the host stack sees our RoCE
        // traffic too: keep it from answering with ICMP port unreachable.
        std::unique_ptr<daemon::UdpSink> sink;
        if (port->has_wire()) {
            std::string problem;
            sink = daemon::UdpSink::open(problem);
            if (!problem.empty()) {
                daemon::log_warn("{}", problem);
            }
        }

        daemon::SysfsDevice sd;
        sd.name = name;
        sd.node_guid = dev.node_guid();
        sd.control_socket = socket_path;
        sd.gids = dev.gids();
        daemon::SysfsTree tree(std::filesystem::path(state_dir) / "sys", sd);
        const daemon::DeviceNode node(tree.uverbs_name());
        if (!node.problem().empty()) {
            daemon::log_warn("{}", node.problem());
        }
        if (tree.removed_stale() || node.removed_stale()) {
            daemon::log_info("removed the stale entries of a uroced that did not stop cleanly");
        }

        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        signal(SIGPIPE, SIG_IGN);

        daemon::log_info("{} ready: port {} (MTU {}, active IB MTU {}), {} GIDs, state in {}", name, port_spec,
                         cfg.port.netdev_mtu, device::mtu_bytes(dev.active_mtu()), dev.gids().size(), state_dir);
        daemon::log_info("clients: eval \"$(uroce env --state-dir {})\", or uroce exec -- PROGRAM", state_dir);
        run_loop(server, datapath, *port, schedule, faults.get());

        daemon::log_info("stopping: telling {} clients the device is gone", dev.client_count());
        server.shutdown_clients();
    } catch (const std::exception& e) {
        daemon::log_error("{}", e.what());
        return 1;
    }
    daemon::log_info("stopped");
    return 0;
}
