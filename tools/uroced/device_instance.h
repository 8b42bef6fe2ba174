// One device a uroced serves: its port (loopback or DPDK) and the wrappers
// the data path sends through (Datapath -> FaultPort -> CapturingPort ->
// port), the device::Device, its ControlServer (<state-dir>/<name>.sock), the
// UDP 4791 sink of a kernel interface, the sysfs tree and /dev node stock
// libibverbs reads, and the instance lock (<state-dir>/<name>.lock). A daemon
// holds one per --device (docs/daemon.md "Several devices in one daemon");
// its one loop (main.cc) serves them all.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client_quota.h"
#include "device_spec.h"
#include "fault/rule.h"

namespace uroce::net {
class FaultPort;
class LoopbackPort;
class Port;
}  // namespace uroce::net
namespace uroce::device {
class Device;
}
namespace uroce::port {
class DpdkPort;
}

namespace uroce::daemon {

class CaptureTap;
class CapturingPort;
class ControlServer;
class Datapath;
class DeviceNode;
class InstanceLock;
class SysfsTree;
class UdpSink;

// What every device of one daemon shares: the hooks in front of its port and
// the per-client quota flags (0: the derived default).
struct DeviceHooks {
    std::vector<fault::Rule> fault_rules;
    std::uint64_t fault_seed = 1;
    bool fault_hook = true;
    bool capture_hook = true;
    QuotaLimits quota_flags{0, 0, 0, 0};
};

class DeviceInstance {
public:
    // Takes the instance lock, opens the port (inside spec.netns when given)
    // and publishes the device. Throws std::runtime_error with the reason
    // (another uroced holds the lock, the port cannot be opened, ...).
    // `dpdk_instance`: the EAL file prefix, when this port starts the EAL.
    DeviceInstance(const DeviceSpec& spec, const DeviceHooks& hooks, const std::string& dpdk_instance);
    ~DeviceInstance();
    DeviceInstance(const DeviceInstance&) = delete;
    DeviceInstance& operator=(const DeviceInstance&) = delete;

    [[nodiscard]] const DeviceSpec& spec() const { return spec_; }
    [[nodiscard]] ControlServer& server() { return *server_; }
    [[nodiscard]] Datapath& datapath() { return *datapath_; }
    // The port the data path sends through (the outermost wrapper).
    [[nodiscard]] net::Port& port() { return *port_; }
    // The fault hook, when installed: frames it holds back wake the loop.
    [[nodiscard]] const net::FaultPort* faults() const { return faults_.get(); }

    // The "ready" lines of the log.
    void log_ready() const;
    // The engine's, the CM's and the multicast membership's totals.
    void log_summary();
    // Tells the clients the device is gone.
    void shutdown_clients();
    // Housekeeping of the port's link: a memif client whose link stays
    // down dials its server again (docs/wires.md), with a log line.
    void keep_link(std::chrono::steady_clock::time_point now);

private:
    void take_lock();
    void open_port();
    void build(const DeviceHooks& hooks);

    DeviceSpec spec_;
    std::string dpdk_instance_;
    std::unique_ptr<InstanceLock> lock_;
#ifdef UROCE_HAVE_DPDK
    std::unique_ptr<port::DpdkPort> nic_;
#endif
    std::unique_ptr<net::LoopbackPort> loop_;
    net::Port* port_ = nullptr;
    std::uint32_t netdev_mtu_ = 0;
    std::unique_ptr<device::Device> dev_;
    std::unique_ptr<ControlServer> server_;
    std::unique_ptr<CaptureTap> capture_tap_;
    std::unique_ptr<CapturingPort> capturing_port_;
    std::unique_ptr<net::FaultPort> faults_;
    std::unique_ptr<Datapath> datapath_;
    std::unique_ptr<UdpSink> sink_;
    std::unique_ptr<SysfsTree> tree_;
    std::unique_ptr<DeviceNode> node_;
};

}  // namespace uroce::daemon
