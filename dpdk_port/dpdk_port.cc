#include "dpdk_port.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <fstream>
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

namespace uroce::port {

namespace {

// Hugepages configured on this machine (any size)?
bool hugepages_available() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    long value = 0;
    while (f >> key >> value) {
        if (key == "HugePages_Total:") {
            return value > 0;
        }
        f.ignore(256, '\n');
    }
    return false;
}

// Descriptors per queue and mbufs: enough to keep both rings full with
// headroom for packets the engine holds (retransmission, reassembly).
constexpr std::uint16_t kRingSize = 1024;
constexpr unsigned kMbufs = 4 * kRingSize - 1;  // 2^n - 1 is optimal for rte_mempool
constexpr unsigned kMbufCache = 256;

// The MTU of the kernel interface named by an `iface=` devarg, or 0.
std::uint32_t interface_mtu(const std::string& spec) {
    const auto at = spec.find("iface=");
    if (at == std::string::npos) {
        return 0;
    }
    const std::string iface = spec.substr(at + 6, spec.find(',', at) - (at + 6));
    if (iface.empty() || iface.find('/') != std::string::npos) {
        return 0;
    }
    std::ifstream f("/sys/class/net/" + iface + "/mtu");
    std::uint32_t mtu = 0;
    return (f >> mtu) && mtu >= 576 && mtu <= 65535 ? mtu : 0;
}

std::runtime_error dpdk_error(const std::string& what, int err) {
    return std::runtime_error(what + ": " + rte_strerror(err < 0 ? -err : err));
}

}  // namespace

bool DpdkPort::is_pci_address(const std::string& spec) {
    // [DDDD:]BB:DD.F in hex: what DPDK's --allow takes.
    auto hex_run = [&spec](std::size_t& i, std::size_t n) {
        for (std::size_t k = 0; k < n; ++k, ++i) {
            if (i >= spec.size() || std::isxdigit(static_cast<unsigned char>(spec[i])) == 0) {
                return false;
            }
        }
        return true;
    };
    std::size_t i = 0;
    const bool with_domain = spec.size() == 12;
    if (with_domain && !(hex_run(i, 4) && spec[i++] == ':')) {
        return false;
    }
    if (!with_domain && spec.size() != 7) {
        return false;
    }
    return hex_run(i, 2) && spec[i++] == ':' && hex_run(i, 2) && spec[i++] == '.' && spec[i] >= '0' &&
           spec[i] <= '7' && i + 1 == spec.size();
}

DpdkPort::DpdkPort(const std::string& spec, const std::string& instance) {
    std::vector<std::string> args = {"uroced", "--file-prefix=uroce-" + instance, "--log-level=lib.eal:warning"};
    if (!hugepages_available()) {
        // DPDK 22.11: --in-memory cannot be combined with --no-huge; -m sizes
        // the anonymous memory EAL uses instead.
        args.insert(args.end(), {"--no-huge", "-m", "256", "--no-shconf"});
    }
    if (is_pci_address(spec)) {
        args.push_back("--allow=" + spec);
    } else {
        args.push_back("--no-pci");
        args.push_back("--vdev=" + spec);
    }
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
        throw dpdk_error("cannot start the DPDK EAL for --port " + spec, rte_errno);
    }
    if (rte_eth_dev_count_avail() != 1) {
        rte_eal_cleanup();
        throw std::runtime_error("--port " + spec + ": DPDK found " + std::to_string(rte_eth_dev_count_avail()) +
                                 " ports, expected exactly one (is the interface or device there?)");
    }
    port_id_ = static_cast<std::uint16_t>(rte_eth_find_next(0));

    rte_eth_dev_info dev_info{};
    if (int rc = rte_eth_dev_info_get(port_id_, &dev_info); rc != 0) {
        throw dpdk_error("rte_eth_dev_info_get", rc);
    }
    info_.driver = dev_info.driver_name != nullptr ? dev_info.driver_name : "?";
    auto* pool = rte_pktmbuf_pool_create(("uroce_" + instance).c_str(), kMbufs, kMbufCache, 0,
                                         RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
    if (pool == nullptr) {
        throw dpdk_error("cannot allocate the packet buffer pool", rte_errno);
    }
    mempool_ = pool;
    rte_eth_conf conf{};
    if (int rc = rte_eth_dev_configure(port_id_, 1, 1, &conf); rc != 0) {
        throw dpdk_error("rte_eth_dev_configure", rc);
    }
    const int socket = rte_eth_dev_socket_id(port_id_);
    const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
    if (int rc = rte_eth_rx_queue_setup(port_id_, 0, kRingSize, sock, nullptr, pool); rc != 0) {
        throw dpdk_error("rte_eth_rx_queue_setup", rc);
    }
    if (int rc = rte_eth_tx_queue_setup(port_id_, 0, kRingSize, sock, nullptr); rc != 0) {
        throw dpdk_error("rte_eth_tx_queue_setup", rc);
    }
    if (int rc = rte_eth_dev_start(port_id_); rc != 0) {
        throw dpdk_error("rte_eth_dev_start", rc);
    }
    rte_ether_addr mac{};
    if (rte_eth_macaddr_get(port_id_, &mac) == 0) {
        for (int i = 0; i < 6; ++i) {
            info_.mac[static_cast<std::size_t>(i)] = mac.addr_bytes[i];
        }
    }
    std::uint16_t mtu = 1500;
    if (rte_eth_dev_get_mtu(port_id_, &mtu) == 0) {
        info_.mtu = mtu;
    }
    // Kernel-interface PMDs (af_packet, af_xdp) report DPDK's default MTU,
    // not the interface's: take the interface's and tell the PMD.
    if (const std::uint32_t kernel_mtu = interface_mtu(spec); kernel_mtu != 0) {
        info_.mtu = kernel_mtu;
        rte_eth_dev_set_mtu(port_id_, static_cast<std::uint16_t>(kernel_mtu));
    }
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port_id_, &link) == 0) {
        info_.link_up = link.link_status == RTE_ETH_LINK_UP;
        info_.speed_mbps = link.link_speed;
    }
}

DpdkPort::~DpdkPort() {
    rte_eth_dev_stop(port_id_);
    rte_eth_dev_close(port_id_);
    rte_mempool_free(static_cast<rte_mempool*>(mempool_));
    rte_eal_cleanup();
}

}  // namespace uroce::port
