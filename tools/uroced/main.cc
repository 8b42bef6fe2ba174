// uroced: the uroce software RoCEv2 device daemon.
//
//   uroced --port loopback --ip 192.0.2.1 [--ip 2001:db8::1] [--name uroce0]
//          [--state-dir /run/uroce] [--mtu 1500]
//
// Publishes the device under the state directory (a sysfs-style tree for
// libibverbs, the /dev/infiniband node, the control socket) and serves
// clients until SIGINT or SIGTERM. Logs go to stderr.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>

#include "control_server.h"
#ifdef UROCE_HAVE_DPDK
#include "dpdk_port.h"
#endif
#include "device/device.h"
#include "log.h"
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
    CLI11_PARSE(app, argc, argv);

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
    try {
#ifdef UROCE_HAVE_DPDK
        std::unique_ptr<port::DpdkPort> nic;
#endif
        if (port_spec == "loopback") {
            cfg.port.mac = loopback_mac(name);
            cfg.port.netdev_mtu = mtu != 0 ? mtu : 1500;
        } else {
#ifdef UROCE_HAVE_DPDK
            nic = std::make_unique<port::DpdkPort>(port_spec, name);
            const auto& info = nic->info();
            cfg.port.mac = info.mac;
            cfg.port.netdev_mtu = mtu != 0 ? mtu : info.mtu;
            cfg.port.link_up = info.link_up;
            if (info.speed_mbps != 0) {
                cfg.port.speed_mbps = info.speed_mbps;
            }
            daemon::log_info("DPDK port {} ({}), MAC {}, MTU {}, link {}", port_spec, info.driver,
                             wire::to_string(info.mac), info.mtu, info.link_up ? "up" : "down");
#else
            daemon::log_error("--port {}: this uroced was built without DPDK; only 'loopback' is available",
                              port_spec);
            return 2;
#endif
        }
        device::Device dev(cfg);
        std::filesystem::create_directories(state_dir);
        const std::string socket_path = (std::filesystem::path(state_dir) / (name + ".sock")).string();
        daemon::ControlServer server(socket_path, dev);

        daemon::SysfsDevice sd;
        sd.name = name;
        sd.node_guid = dev.node_guid();
        sd.control_socket = socket_path;
        sd.gids = dev.gids();
        daemon::SysfsTree tree(std::filesystem::path(state_dir) / "sys", sd);
        bool node_created = false;
        const std::string node_problem = daemon::ensure_device_node(tree.uverbs_name(), node_created);
        if (!node_problem.empty()) {
            daemon::log_warn("{}", node_problem);
        }

        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        signal(SIGPIPE, SIG_IGN);

        daemon::log_info("{} ready: port {} (MTU {}, active IB MTU {}), {} GIDs, state in {}", name, port_spec,
                         cfg.port.netdev_mtu, device::mtu_bytes(dev.active_mtu()), dev.gids().size(), state_dir);
        daemon::log_info("clients: eval \"$(uroce env --state-dir {})\", or uroce exec -- PROGRAM", state_dir);
        // 10 ms ticks drive the relaxed-MR invalidation timers.
        server.run(stop_requested, 10, [&server] { server.poll_pools(std::chrono::steady_clock::now()); });

        daemon::log_info("stopping: telling {} clients the device is gone", dev.client_count());
        server.shutdown_clients();
        if (node_created) {
            daemon::remove_device_node(tree.uverbs_name());
        }
    } catch (const std::exception& e) {
        daemon::log_error("{}", e.what());
        return 1;
    }
    daemon::log_info("stopped");
    return 0;
}
