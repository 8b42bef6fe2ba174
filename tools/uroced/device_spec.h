// What one device of a uroced is built from: the single-device flags
// (--name, --port, --ip, --state-dir, --mtu) describe the first, and each
// --device SPEC one more (docs/daemon.md "Several devices in one daemon"):
//
//   --device name=uroce_b,port=net_af_packet1,iface=veth1,ip=10.0.0.2,state-dir=/run/uroce-b[,mtu=9000][,netns=NS]
//
// The keys are name, port, ip (repeatable), state-dir, mtu and netns. A DPDK
// port spec has commas of its own: everything after port= up to the next of
// these keys belongs to the port (no af_packet, memif or tap devarg has one
// of their names).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::daemon {

struct DeviceSpec {
    std::string name = "uroce0";
    std::string port;  // "loopback", a PCI address, or DPDK vdev devargs
    std::vector<std::string> ips;
    std::string state_dir = "/run/uroce";
    std::uint32_t mtu = 0;  // 0: the port's own
    // A network namespace under /run/netns: the port's sockets (af_packet)
    // and the UDP sink are opened inside it. Empty: the daemon's own.
    std::string netns;
};

// The MTUs --mtu and mtu= accept.
inline constexpr std::uint32_t kMinMtu = 576;
inline constexpr std::uint32_t kMaxMtu = 9216;

struct ParsedDeviceSpec {
    std::optional<DeviceSpec> spec;
    std::string error;  // when !spec: what is wrong, naming the part
};

// Parses the text of one --device. Every key but mtu and netns is required.
[[nodiscard]] ParsedDeviceSpec parse_device_spec(std::string_view text);

// The checks every device passes, whichever flags described it: "" when
// fine, else the reason (a name the provider would not claim, a netns name
// with '/', ...).
[[nodiscard]] std::string check_device_spec(const DeviceSpec& spec);

// The checks between the devices of one daemon: distinct names, distinct
// state directories (one libibverbs device per state directory). "" when fine.
[[nodiscard]] std::string check_device_set(const std::vector<DeviceSpec>& specs);

}  // namespace uroce::daemon
