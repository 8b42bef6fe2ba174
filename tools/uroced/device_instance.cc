#include "device_instance.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>

#include "capture_tap.h"
#include "capturing_port.h"
#include "control_server.h"
#include "datapath.h"
#include "device/device.h"
#include "device/gid_table.h"
#include "device_node.h"
#include "fault/rule_parse.h"
#include "instance_lock.h"
#include "log.h"
#include "net/fault_port.h"
#include "net/loopback_port.h"
#include "netns_scope.h"
#include "sysfs_tree.h"
#include "udp_sink.h"
#include "wire/describe.h"
#ifdef UROCE_HAVE_DPDK
#include "dpdk_port.h"
#endif

namespace uroce::daemon {

namespace {

// The loopback port's Ethernet MTU when --mtu is not given.
constexpr std::uint32_t kLoopbackDefaultMtu = 9000;

// A locally administered unicast MAC derived from the device name, so a
// loopback device keeps its GIDs across restarts.
wire::MacAddr loopback_mac(const std::string& name) {
    const std::size_t h = std::hash<std::string>{}(name);
    return {0x02, 0x75, static_cast<std::uint8_t>(h >> 24), static_cast<std::uint8_t>(h >> 16),
            static_cast<std::uint8_t>(h >> 8), static_cast<std::uint8_t>(h)};
}

// The device limits the daemon can reach and the per-client quota: every CQ,
// QP and SRQ costs it one mapping (and a CQ with a channel one descriptor).
QuotaLimits quota_for(const DeviceBudget& budget, QuotaLimits flags, device::DeviceConfig& cfg) {
    QuotaLimits quota = default_quota(budget);
    for (auto [flag, value] : {std::pair{flags.objects, &quota.objects}, std::pair{flags.mappings, &quota.mappings},
                               std::pair{flags.bytes, &quota.bytes}, std::pair{flags.fds, &quota.fds}}) {
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
    log_info("budget: {} mappings, {} descriptors; per client: {} objects, {} mappings, {} MiB, {} fds",
             budget.mappings, budget.fds, quota.objects, quota.mappings, quota.bytes >> 20, quota.fds);
    return quota;
}

}  // namespace

DeviceInstance::DeviceInstance(const DeviceSpec& spec, const DeviceHooks& hooks, const std::string& dpdk_instance)
    : spec_(spec), dpdk_instance_(dpdk_instance) {
    take_lock();
    // The port's sockets, and the sink's, belong to the device's namespace.
    const NetnsScope in_netns(spec_.netns);
    open_port();
    build(hooks);
}

DeviceInstance::~DeviceInstance() = default;

void DeviceInstance::take_lock() {
    std::filesystem::create_directories(spec_.state_dir);
    lock_ = std::make_unique<InstanceLock>(spec_.state_dir, spec_.name);
    using Outcome = InstanceLock::Outcome;
    switch (lock_->outcome()) {
        case Outcome::Acquired:
            if (lock_->found_stale()) {
                log_warn("the last uroced of {} in {} did not stop cleanly; removing what it left", spec_.name,
                         spec_.state_dir);
            }
            return;
        case Outcome::HeldByOther:
            throw std::runtime_error(fmt::format(
                "another uroced ({}) is serving {} from {} (it holds {}); stop it first, or give this one another "
                "--name or --state-dir",
                lock_->holder_pid() ? fmt::format("pid {}", *lock_->holder_pid()) : "pid unknown", spec_.name,
                spec_.state_dir, lock_->path().string()));
        case Outcome::Failed:
            throw std::runtime_error(lock_->problem());
    }
}

void DeviceInstance::open_port() {
    if (spec_.port == "loopback") {
        net::LoopbackConfig lc;
        lc.mac = loopback_mac(spec_.name);
        // No wire, so no reason for the 1500 a NIC starts with: 9000, as on
        // memif, gives path MTU 4096 and a quarter of the packets for large
        // messages (docs/daemon.md, --mtu).
        netdev_mtu_ = spec_.mtu != 0 ? spec_.mtu : kLoopbackDefaultMtu;
        lc.max_frame = netdev_mtu_ + 18;  // Ethernet header and one VLAN tag
        loop_ = std::make_unique<net::LoopbackPort>(lc);
        port_ = loop_.get();
        return;
    }
#ifdef UROCE_HAVE_DPDK
    port::DpdkPortOptions options;
    options.mtu = spec_.mtu;
    nic_ = std::make_unique<port::DpdkPort>(spec_.port, dpdk_instance_, options);
    const auto& info = nic_->info();
    netdev_mtu_ = info.mtu;  // the effective MTU, after the port clamped --mtu
    port_ = nic_.get();
    log_info("DPDK port {} ({}), MAC {}, MTU {}, link {}{}", spec_.port, info.driver, wire::to_string(info.mac),
             info.mtu, info.link_up ? "up" : "down", spec_.netns.empty() ? "" : ", in netns " + spec_.netns);
#else
    throw std::runtime_error(
        fmt::format("--port {}: this uroced was built without DPDK; only 'loopback' is available", spec_.port));
#endif
}

void DeviceInstance::build(const DeviceHooks& hooks) {
    device::DeviceConfig cfg;
    cfg.name = spec_.name;
    for (const auto& t : spec_.ips) {
        cfg.ips.push_back(*device::parse_ip(t));  // checked by check_device_spec
    }
    cfg.port.netdev_mtu = netdev_mtu_;
    cfg.port.mac = port_->mac();
#ifdef UROCE_HAVE_DPDK
    if (nic_) {
        cfg.port.link_up = nic_->info().link_up;
        if (nic_->info().speed_mbps != 0) {
            cfg.port.speed_mbps = nic_->info().speed_mbps;
        }
    }
#endif
    const DeviceBudget budget = measure_device_budget();
    const QuotaLimits quota = quota_for(budget, hooks.quota_flags, cfg);
    dev_ = std::make_unique<device::Device>(cfg);
    const std::string socket_path = (std::filesystem::path(spec_.state_dir) / (spec_.name + ".sock")).string();
    server_ = std::make_unique<ControlServer>(socket_path, *dev_);
    server_->set_quota(ClientQuota(quota, budget));
    // Packet capture (docs/capture.md): what the data path sends passes
    // the tap on its way to the port. The fault hook sits in front of it
    // (Datapath -> FaultPort -> CapturingPort -> port), so a frame it
    // drops on the way out is recorded once, as dropped, not as sent.
    capture_tap_ = std::make_unique<CaptureTap>();
    capturing_port_ = std::make_unique<CapturingPort>(*port_, *capture_tap_);
    if (hooks.capture_hook) {
        port_ = capturing_port_.get();
    }
    if (hooks.fault_hook) {
        faults_ = std::make_unique<net::FaultPort>(*port_, hooks.fault_seed);
        for (const fault::Rule& r : hooks.fault_rules) {
            log_info("fault rule {}: {}", faults_->add_rule(r), fault::format_rule(r));
        }
        faults_->set_drop_observer([tap = capture_tap_.get()](fault::Direction way,
                                                              std::span<const std::uint8_t> frame,
                                                              std::string_view rule) {
            if (tap->active()) [[unlikely]] {
                const auto direction =
                    way == fault::Direction::Rx ? CaptureDirection::Received : CaptureDirection::Sent;
                tap->record_dropped(direction, frame, fmt::format("dropped by fault injection: {}", rule));
            }
        });
        port_ = faults_.get();
        server_->attach_faults(*faults_);
    }
    datapath_ = std::make_unique<Datapath>(*dev_, *port_);
    if (hooks.capture_hook) {
        datapath_->set_capture(*capture_tap_);
    }
    server_->attach(*datapath_);
    // On a kernel interface (af_packet) the host stack sees our RoCE
    // traffic too: keep it from answering with ICMP port unreachable.
    if (port_->has_wire()) {
        std::string problem;
        sink_ = UdpSink::open(problem);
        if (!problem.empty()) {
            log_warn("{}", problem);
        }
    }
    SysfsDevice sd;
    sd.name = spec_.name;
    sd.node_guid = dev_->node_guid();
    sd.control_socket = socket_path;
    sd.gids = dev_->gids();
    tree_ = std::make_unique<SysfsTree>(std::filesystem::path(spec_.state_dir) / "sys", sd);
    node_ = std::make_unique<DeviceNode>(tree_->uverbs_name());
    if (!node_->problem().empty()) {
        log_warn("{}", node_->problem());
    }
    if (tree_->removed_stale() || node_->removed_stale()) {
        log_info("removed the stale entries of a uroced that did not stop cleanly");
    }
}

void DeviceInstance::keep_link([[maybe_unused]] std::chrono::steady_clock::time_point now) {
#ifdef UROCE_HAVE_DPDK
    if (nic_) {
        if (const std::string line = nic_->keep_link(now); !line.empty()) {
            log_info("{}: {}", spec_.name, line);
        }
    }
#endif
}

void DeviceInstance::log_ready() const {
    log_info("{} ready: port {} (MTU {}, active IB MTU {}), {} GIDs, state in {}", spec_.name, spec_.port,
             netdev_mtu_, device::mtu_bytes(dev_->active_mtu()), dev_->gids().size(), spec_.state_dir);
    log_info("clients: eval \"$(uroce env --state-dir {})\", or uroce exec -- PROGRAM", spec_.state_dir);
}

void DeviceInstance::log_summary() {
    const auto& e = datapath_->engine().counters();
    log_info("engine: {} packets in, {} out, {} dropped, {} retransmitted, {} timeouts, {} RNR NAKs sent, "
             "{} received, {} sequence NAKs sent, {} received, {} duplicates, {} bad WQEs",
             e.rx_packets, e.tx_packets, e.rx_dropped, e.retransmits, e.timeouts, e.rnr_naks_sent,
             e.rnr_naks_received, e.seq_naks_sent, e.seq_naks_received, e.duplicates, e.bad_wqes);
    datapath_->log_cm_summary();
    const net::MembershipCounters m = datapath_->membership().counters();
    log_info("multicast membership: {} reports sent, {} leaves, {} queries answered or ignored, "
             "{} malformed queries, {} refused by the port, {} groups reported now",
             m.reports_sent, m.leaves_sent, m.queries, m.malformed, m.tx_refused, m.groups);
}

void DeviceInstance::shutdown_clients() {
    log_info("stopping: telling {} clients of {} the device is gone", dev_->client_count(), spec_.name);
    server_->shutdown_clients();
}

}  // namespace uroce::daemon
