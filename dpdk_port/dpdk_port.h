// A DPDK ethdev port for uroced: starts the EAL (without hugepages when the
// machine has none configured), attaches one port given as a PCI address or
// vdev devargs (net_af_packet0,iface=veth0, net_tap0, net_memif0,...), and
// sets it up with one RX and one TX queue. The data path (rx/tx bursts, ARP,
// ND) arrives with issue 5; this part gives the daemon the port's MAC, MTU
// and link state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wire/headers.h"

namespace uroce::port {

struct PortInfo {
    wire::MacAddr mac{};
    std::uint32_t mtu = 1500;
    bool link_up = false;
    std::uint32_t speed_mbps = 0;
    std::string driver;
};

class DpdkPort {
public:
    // `spec`: a PCI address (0000:3b:00.1) or vdev devargs. `instance`
    // separates the EAL files of daemons on one host. Throws
    // std::runtime_error with DPDK's reason.
    DpdkPort(const std::string& spec, const std::string& instance);
    ~DpdkPort();
    DpdkPort(const DpdkPort&) = delete;
    DpdkPort& operator=(const DpdkPort&) = delete;

    [[nodiscard]] const PortInfo& info() const { return info_; }
    [[nodiscard]] std::uint16_t port_id() const { return port_id_; }

    // True when `spec` looks like a PCI address rather than vdev devargs.
    [[nodiscard]] static bool is_pci_address(const std::string& spec);

private:
    std::uint16_t port_id_ = 0;
    void* mempool_ = nullptr;
    PortInfo info_;
};

}  // namespace uroce::port
