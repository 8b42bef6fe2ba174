#include "dpdk_port.h"

#include <sched.h>

#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cerrno>
#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "memif_peer_wake.h"
#include "packet_wake_ring.h"

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

// Ethernet header plus one 802.1Q tag: what a frame adds to the MTU (the FCS
// never reaches software).
constexpr std::uint32_t kL2Overhead = 14 + 4;

// mbufs a core keeps in its mempool cache. The cache may hold up to 1.5 times
// this before flushing back (rte_mempool's flush threshold).
constexpr unsigned kMbufCache = 256;

// Bursts flush() makes before it leaves what the NIC still refuses for the
// next flush().
constexpr int kTxAttempts = 4;

// DPDK's net_af_packet copies each frame through a TPACKET_V2 ring slot of
// `framesz` bytes (devarg, 2048 by default); the kernel puts the frame 34
// bytes into the slot (the 32-byte tpacket2 header, aligned to 16 with room
// for a 16-byte link header, less the 14-byte Ethernet header), so longer
// frames are cut short on receive.
constexpr std::uint32_t kAfPacketDefaultFrameSize = 2048;
constexpr std::uint32_t kAfPacketSlotOverhead = 34;

// Slots in each of af_packet's rings (`framecnt`; the PMD's default is 512).
// The receive ring must hold what peers may have in flight towards this port
// while the daemon is not scheduled: the engines' windows let 256 QPs have
// 1024 packets unacknowledged (4 each, docs/congestion.md), twice the
// default ring, and the kernel drops what overflows it, which small windows
// find only by ACK timeouts. 4096 slots hold four times that; each ring is
// kept to kAfPacketRingBytes (8 MiB with the default 2048-byte slots), but
// never below the PMD's default.
constexpr std::uint32_t kAfPacketFrameCount = 4096;
constexpr std::uint32_t kAfPacketDefaultFrameCount = 512;
constexpr std::uint32_t kAfPacketRingBytes = 8u << 20;

// net_memif (shared memory between two processes on one host) has no MTU of
// its own: a frame longer than a ring buffer (`bsize`) spans chained
// descriptors, and the PMD's 1518-byte max_rx_pktlen is a placeholder it
// does not enforce. Without --mtu a memif port runs with jumbo frames, the
// Ethernet MTU that holds RoCE's largest path MTU (4096) with room to spare,
// and each buffer holds one whole frame (fewer descriptors per packet).
constexpr std::uint32_t kMemifDefaultMtu = 9000;
constexpr std::uint32_t kMemifBufferAlign = 128;  // keeps buffers cache-line aligned

// The DpdkPorts of this process share one EAL: the first starts it (with its
// own device on the command line), the others attach theirs with
// rte_dev_probe(), and the last to go stops it (rte_eal_cleanup) and removes
// its runtime directory.
struct SharedEal {
    int users = 0;
    bool no_pci = false;  // the first port was a vdev: the PCI bus is off
};
SharedEal shared_eal;

// The ethdev ports there are now.
std::set<std::uint16_t> ethdev_ports() {
    std::set<std::uint16_t> ports;
    for (std::uint16_t id = 0; id < RTE_MAX_ETHPORTS; ++id) {
        if (rte_eth_dev_is_valid_port(id) != 0) {
            ports.insert(id);
        }
    }
    return ports;
}

// The value of `key=` in vdev devargs ("net_af_packet0,iface=veth0,framesz=4096").
std::optional<std::string> devarg(const std::string& spec, const std::string& key) {
    std::size_t start = spec.find(',');
    while (start != std::string::npos) {
        const std::size_t end = spec.find(',', start + 1);
        const std::string item = spec.substr(start + 1, end == std::string::npos ? end : end - start - 1);
        if (item.rfind(key + "=", 0) == 0) {
            return item.substr(key.size() + 1);
        }
        start = end;
    }
    return std::nullopt;
}

bool driver_is(const std::string& spec, const std::string& driver) {
    return spec.rfind(driver, 0) == 0 && spec.size() > driver.size() &&
           std::isdigit(static_cast<unsigned char>(spec[driver.size()])) != 0;
}

// The MTU of the kernel interface named by an `iface=` devarg, or 0. Asked
// of the kernel (SIOCGIFMTU) rather than read from /sys, which shows the
// namespace sysfs was mounted in, not necessarily ours.
std::uint32_t interface_mtu(const std::string& spec) {
    const auto iface = devarg(spec, "iface");
    if (!iface || iface->empty() || iface->size() >= IFNAMSIZ) {
        return 0;
    }
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return 0;
    }
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, iface->data(), iface->size());
    const bool ok = ioctl(s, SIOCGIFMTU, &ifr) == 0;
    close(s);
    return ok && ifr.ifr_mtu >= 576 ? static_cast<std::uint32_t>(ifr.ifr_mtu) : 0;
}

std::uint32_t af_packet_frame_size(const std::string& spec) {
    const auto text = devarg(spec, "framesz");
    if (!text) {
        return kAfPacketDefaultFrameSize;
    }
    try {
        return static_cast<std::uint32_t>(std::stoul(*text));
    } catch (const std::exception&) {
        return kAfPacketDefaultFrameSize;  // the PMD rejects it with its own message
    }
}

// memif devargs with uroce's defaults where the user gave none: a socket
// in the file system (socket-abstract=no; an abstract socket belongs to one
// network namespace, and the two daemons usually sit in two) and buffers
// that each hold a whole frame of `mtu`.
std::string memif_vdev(std::string vdev, std::uint32_t mtu) {
    if (devarg(vdev, "socket") && !devarg(vdev, "socket-abstract")) {
        vdev += ",socket-abstract=no";
    }
    if (!devarg(vdev, "bsize")) {
        const std::uint32_t frame = mtu + kL2Overhead;
        vdev += ",bsize=" + std::to_string((frame + kMemifBufferAlign - 1) / kMemifBufferAlign * kMemifBufferAlign);
    }
    return vdev;
}

// DPDK 22.11's af_packet PMD puts its sockets in the PACKET_FANOUT group
// (getpid() ^ ifindex) & 0xffff of the network namespace
// (rte_eth_af_packet.c). A group of that id already held by a socket on
// another interface (a second uroced whose PID differs from this one's as
// the two interfaces' indexes do) refuses it with EINVAL and the PMD makes
// no port. Asks the kernel the same question with a socket of our own; a
// sentence for the error, or "" when the group is free or cannot be asked.
std::string af_packet_fanout_clash(const std::string& spec) {
    const auto iface = devarg(spec, "iface");
    const unsigned ifindex = iface ? if_nametoindex(iface->c_str()) : 0;
    if (ifindex == 0) {
        return "";
    }
    // A protocol, not 0: the kernel lets only a bound, running socket join a
    // fanout group. It lives for the two calls below.
    const int s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (s < 0) {
        return "";
    }
    sockaddr_ll addr{};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = htons(ETH_P_ALL);
    addr.sll_ifindex = static_cast<int>(ifindex);
    const unsigned group = (static_cast<unsigned>(getpid()) ^ ifindex) & 0xffff;
    const int arg = static_cast<int>(group | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG |
                                               PACKET_FANOUT_FLAG_ROLLOVER) << 16));
    const bool clash = bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
                       setsockopt(s, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) != 0 && errno == EINVAL;
    close(s);
    if (!clash) {
        return "";
    }
    return "the af_packet PMD's PACKET_FANOUT group " + std::to_string(group) + " (this PID " +
           std::to_string(getpid()) + " xor ifindex " + std::to_string(ifindex) +
           ") is held in this network namespace by a socket on another interface (another uroced?); start the "
           "daemon again (another PID), or serve both devices from one daemon (--device, docs/daemon.md)";
}

// `spec` less its `key=` devarg (uroce's own, which the PMD would refuse).
std::string without_devarg(const std::string& spec, const std::string& key) {
    const std::size_t at = spec.find("," + key + "=");
    if (at == std::string::npos) {
        return spec;
    }
    const std::size_t end = spec.find(',', at + 1);
    return spec.substr(0, at) + (end == std::string::npos ? "" : spec.substr(end));
}

// DPDK's net_memif defaults (rte_eth_memif.h: ETH_MEMIF_DEFAULT_SOCKET_FILENAME;
// interface id 0; role server).
constexpr const char* kMemifDefaultSocket = "/run/memif.sock";

// The sending daemon's wake-up for a memif port (memif_peer_wake.h) when the
// devargs say `uroce-wake=yes`. Not the default: where two busy-polling
// programs share a CPU, the naps' frequent wake-ups are what make them take
// turns before a scheduler tick (docs/wires.md "Why it is not the default"),
// and a peer that is not uroced never rings.
std::unique_ptr<MemifPeerWake> memif_peer_wake(const std::string& spec) {
    if (devarg(spec, "uroce-wake").value_or("no") != "yes") {
        return nullptr;
    }
    const std::string role = devarg(spec, "role").value_or("server");
    const MemifRole memif_role = role == "client" || role == "slave" ? MemifRole::Client : MemifRole::Server;
    std::uint32_t id = 0;
    try {
        id = static_cast<std::uint32_t>(std::stoul(devarg(spec, "id").value_or("0")));
    } catch (const std::exception&) {
        return nullptr;  // the PMD refuses the devargs with its own message
    }
    return std::make_unique<MemifPeerWake>(devarg(spec, "socket").value_or(kMemifDefaultSocket), id, memif_role);
}

std::runtime_error dpdk_error(const std::string& what, int err) {
    return std::runtime_error(what + ": " + rte_strerror(err < 0 ? -err : err));
}

std::uint8_t* mbuf_bytes(rte_mbuf* m) { return static_cast<std::uint8_t*>(m->buf_addr) + m->data_off; }

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

DpdkPort::DpdkPort(const std::string& spec, const std::string& instance, const DpdkPortOptions& options) {
    try {
        start(spec, instance, options);
    } catch (...) {
        shutdown();  // a constructor that throws gets no destructor call
        throw;
    }
}

void DpdkPort::start(const std::string& spec, const std::string& instance, const DpdkPortOptions& options) {
    const bool af_packet = driver_is(spec, "net_af_packet");
    const bool memif = driver_is(spec, "net_memif");
    info_.rx_wait = "none";
    if (af_packet && options.rx_wait_fd) {
        // Before the EAL opens the PMD's socket: see packet_wake_ring.h.
        try {
            wake_ring_ = std::make_unique<PacketWakeRing>(devarg(spec, "iface").value_or(""));
        } catch (const std::exception& e) {
            info_.rx_wait = std::string("none (") + e.what() + ")";
        }
    }
    if (memif && options.rx_wait_fd) {
        try {
            memif_wake_ = memif_peer_wake(spec);
        } catch (const std::exception& e) {
            info_.rx_wait = std::string("none (") + e.what() + ")";
        }
    }

    std::vector<std::string> args = {"uroced", "--file-prefix=uroce-" + instance, "--log-level=lib.eal:warning",
                                     "--no-telemetry"};
    if (!hugepages_available()) {
        // DPDK 22.11: --in-memory cannot be combined with --no-huge; -m sizes
        // the anonymous memory EAL uses instead.
        args.insert(args.end(), {"--no-huge", "-m", "256", "--no-shconf"});
    }
    // af_packet's ring slots (framesz, 2048 bytes unless given) bound the
    // frames it carries: for an interface with jumbo frames, and no framesz
    // of the user's, size the slots (and blocks, a multiple of the page
    // size) for the interface's MTU so the port runs at it.
    std::string vdev = spec;
    if (af_packet && !devarg(spec, "framesz") && !devarg(spec, "blocksz")) {
        const std::uint32_t want_mtu = options.mtu != 0 ? options.mtu : interface_mtu(spec);
        const std::uint32_t slot = want_mtu + kAfPacketSlotOverhead + kL2Overhead;
        if (slot > kAfPacketDefaultFrameSize) {
            const std::uint32_t rounded = (slot + 4095) / 4096 * 4096;
            vdev += ",framesz=" + std::to_string(rounded) + ",blocksz=" + std::to_string(rounded);
        }
    }
    // af_packet's qdisc_bypass (1 unless given) sends past the kernel's
    // queueing layer: tcpdump on the interface never sees what uroce sends,
    // and tc rules (netem) do not apply to it. A user debugging a wire
    // expects both, so the daemon asks for 0 unless the devargs say
    // (docs/daemon.md has the cost).
    if (af_packet && !devarg(spec, "qdisc_bypass")) {
        vdev += ",qdisc_bypass=0";
    }
    if (af_packet && !devarg(spec, "framecnt")) {
        const std::uint32_t slot = af_packet_frame_size(vdev);
        const std::uint32_t count = std::clamp(kAfPacketRingBytes / std::max(slot, 1u), kAfPacketDefaultFrameCount,
                                               kAfPacketFrameCount);
        vdev += ",framecnt=" + std::to_string(count);
    }
    if (memif) {
        vdev = memif_vdev(without_devarg(vdev, "uroce-wake"), options.mtu != 0 ? options.mtu : kMemifDefaultMtu);
    }
    if (is_pci_address(spec)) {
        args.push_back("--allow=" + spec);
    } else {
        args.push_back("--no-pci");
        args.push_back("--vdev=" + vdev);
    }
    if (shared_eal.users > 0) {
        attach(spec, vdev);
    } else {
        start_eal(spec, args);
    }
    finish_start(spec, vdev, options);
}

void DpdkPort::attach(const std::string& spec, const std::string& vdev) {
    if (is_pci_address(spec) && shared_eal.no_pci) {
        throw std::runtime_error("--port " + spec + ": the daemon's first DPDK port is a vdev, so its EAL runs "
                                 "without the PCI bus; give the PCI port first");
    }
    const std::set<std::uint16_t> before = ethdev_ports();
    if (int rc = rte_dev_probe(is_pci_address(spec) ? spec.c_str() : vdev.c_str()); rc != 0) {
        throw dpdk_error("cannot attach --port " + spec + " (is the interface or device there?)", -rc);
    }
    ++shared_eal.users;
    eal_started_ = true;
    for (const std::uint16_t id : ethdev_ports()) {
        if (before.count(id) == 0) {
            port_id_ = id;
            return;
        }
    }
    throw std::runtime_error("--port " + spec + ": DPDK attached it but made no ethdev port of it");
}

void DpdkPort::start_eal(const std::string& spec, std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    // The EAL pins the calling thread to its main lcore (CPU 0 unless told
    // otherwise). uroced is one polling thread that must share a small
    // machine with its clients and often a second daemon: give it back the
    // CPUs it was allowed before, and let the scheduler place it.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    const bool have_affinity = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
        const int err = rte_errno;
        // What it made of its runtime directory is ours alone (the
        // instance is unique while the daemon runs, docs/daemon.md).
        std::error_code ec;
        if (const char* dir = rte_eal_get_runtime_dir(); dir != nullptr && dir[0] != '\0') {
            std::filesystem::remove_all(dir, ec);
        }
        throw dpdk_error("cannot start the DPDK EAL for --port " + spec, err);
    }
    if (have_affinity) {
        sched_setaffinity(0, sizeof allowed, &allowed);
    }
    eal_started_ = true;
    ++shared_eal.users;
    shared_eal.no_pci = !is_pci_address(spec);
    if (rte_eth_dev_count_avail() != 1) {
        const std::string clash = driver_is(spec, "net_af_packet") ? af_packet_fanout_clash(spec) : "";
        throw std::runtime_error("--port " + spec + ": DPDK found " + std::to_string(rte_eth_dev_count_avail()) +
                                 " ports, expected exactly one (" +
                                 (clash.empty() ? "is the interface or device there?" : clash) + ")");
    }
    port_id_ = static_cast<std::uint16_t>(rte_eth_find_next(0));
}

void DpdkPort::finish_start(const std::string& spec, const std::string& vdev, const DpdkPortOptions& options) {
    const bool af_packet = driver_is(spec, "net_af_packet");
    const bool tap = driver_is(spec, "net_tap");
    const bool memif = driver_is(spec, "net_memif");

    rte_eth_dev_info dev_info{};
    if (int rc = rte_eth_dev_info_get(port_id_, &dev_info); rc != 0) {
        throw dpdk_error("rte_eth_dev_info_get", rc);
    }
    info_.driver = dev_info.driver_name != nullptr ? dev_info.driver_name : "?";

    // The MTU: asked for, or the port's own. A kernel interface carries no
    // more than its own MTU, and af_packet no more than its ring slots.
    const std::uint32_t kernel_mtu = interface_mtu(spec);
    const std::uint32_t own_mtu = kernel_mtu != 0 ? kernel_mtu : (memif ? kMemifDefaultMtu : RTE_ETHER_MTU);
    std::uint32_t mtu = options.mtu != 0 ? options.mtu : own_mtu;
    if (kernel_mtu != 0) {
        mtu = std::min(mtu, kernel_mtu);
    }
    const std::uint32_t af_packet_slot = af_packet ? af_packet_frame_size(vdev) : 0;
    if (af_packet) {
        mtu = std::min(mtu, af_packet_slot - kAfPacketSlotOverhead - kL2Overhead);
    }
    // What the PMD says it takes. PMDs on kernel interfaces report Ethernet
    // defaults (af_packet: 1518-byte frames) they do not enforce: for them
    // the kernel's limits above are the real ones.
    const std::uint32_t device_max_mtu =
        dev_info.max_mtu != UINT16_MAX ? dev_info.max_mtu : dev_info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN;
    if (kernel_mtu == 0 && !memif) {
        mtu = std::min(mtu, device_max_mtu);
    }
    info_.mtu = mtu;
    max_frame_ = mtu + kL2Overhead;

    rte_eth_conf conf{};
    conf.rxmode.mtu = std::min(mtu, device_max_mtu);
    if ((dev_info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0) {
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
        info_.ipv4_checksum_offload = true;
    }
    if (tap && options.rx_wait_fd) {
        // net_tap's rx "interrupt" is its queue fd itself (tap_intr.c).
        conf.intr_conf.rxq = 1;
    }
    if (int rc = rte_eth_dev_configure(port_id_, 1, 1, &conf); rc != 0) {
        throw dpdk_error("rte_eth_dev_configure", rc);
    }
    std::uint16_t rx_ring = options.rx_ring;
    std::uint16_t tx_ring = options.tx_ring;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_ring, &tx_ring); rc != 0) {
        throw dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    }

    // Every mbuf that can be out of the pool at once: a full RX ring, a full
    // TX ring (freed only as the NIC completes), two bursts held by the
    // engine between receive() and release(), the send queue, the room lent
    // by tx_room(), and the per-core cache. 2^n - 1 suits rte_mempool's ring best.
    const unsigned needed = rx_ring + tx_ring + 2u * kBurst + kTxQueue + 1 + kMbufCache * 3 / 2;
    const unsigned mbufs = std::bit_ceil(needed + 1) - 1;
    // One segment per frame: the data room holds the largest frame (and, for
    // af_packet, a whole ring slot, which its rx queue setup insists on).
    const std::uint32_t data_room =
        RTE_PKTMBUF_HEADROOM + std::max({static_cast<std::uint32_t>(max_frame_), std::uint32_t{2048}, af_packet_slot});
    if (data_room > UINT16_MAX) {
        throw std::runtime_error("--port " + spec + ": frames of " + std::to_string(max_frame_) +
                                 " bytes do not fit an mbuf");
    }
    // One pool per port: the names are the EAL's, shared by every port.
    const std::string pool_name = "uroce_frames" + std::to_string(port_id_);
    auto* pool = rte_pktmbuf_pool_create(pool_name.c_str(), mbufs, kMbufCache, 0, static_cast<std::uint16_t>(data_room),
                                         static_cast<int>(rte_socket_id()));
    if (pool == nullptr) {
        throw dpdk_error("cannot allocate the packet buffer pool (" + std::to_string(mbufs) + " mbufs of " +
                             std::to_string(data_room) + " bytes)",
                         rte_errno);
    }
    mempool_ = pool;

    const int socket = rte_eth_dev_socket_id(port_id_);
    const unsigned sock = socket < 0 ? 0u : static_cast<unsigned>(socket);
    if (int rc = rte_eth_rx_queue_setup(port_id_, 0, rx_ring, sock, nullptr, pool); rc != 0) {
        throw dpdk_error("rte_eth_rx_queue_setup", rc);
    }
    rte_eth_txconf txconf = dev_info.default_txconf;
    txconf.offloads = conf.txmode.offloads;
    if (int rc = rte_eth_tx_queue_setup(port_id_, 0, tx_ring, sock, &txconf); rc != 0) {
        throw dpdk_error("rte_eth_tx_queue_setup", rc);
    }
    const bool memif_client = memif && devarg(spec, "role").value_or("server") == "client";
    const int started = rte_eth_dev_start(port_id_);
    if (started != 0 && !memif_client) {
        throw dpdk_error("rte_eth_dev_start", started);
    }
    // A memif client whose server's socket is not there yet fails to start
    // (connect(2) refused): it dials again from keep_link().
    port_started_ = started == 0;
    if (memif_client) {
        redial_.emplace(std::chrono::steady_clock::now());
        memif_socket_ = devarg(spec, "socket").value_or("(abstract)");
    }
    // IPv6 Neighbor Solicitations go to solicited-node multicast groups a
    // NIC filters out unless told otherwise. PMDs without the notion say
    // -ENOTSUP, which is fine.
    rte_eth_allmulticast_enable(port_id_);

    if (tap && options.rx_wait_fd) {
        if (const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id_, 0); fd >= 0) {
            rx_wait_fd_ = fd;
            info_.rx_wait = "rx interrupt";
        }
    } else if (wake_ring_) {
        rx_wait_fd_ = wake_ring_->fd();
        info_.rx_wait = "af_packet wake ring";
    } else if (memif_wake_) {
        rx_wait_fd_ = memif_wake_->fd();
        info_.rx_wait = "memif peer wake";
    }

    rte_ether_addr mac{};
    if (rte_eth_macaddr_get(port_id_, &mac) == 0) {
        std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), info_.mac.begin());
    }
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port_id_, &link) == 0) {
        // A memif server's link comes up when its peer connects, which may
        // be after this daemon is ready (the peer's daemon starts second):
        // the port counts as plugged in, and frames sent before the peer is
        // there are lost as on a cable with nobody at the other end.
        info_.link_up = link.link_status == RTE_ETH_LINK_UP || memif;
        info_.speed_mbps = link.link_speed;
    }
}

DpdkPort::~DpdkPort() { shutdown(); }

void DpdkPort::shutdown() {
    if (tx_room_ != nullptr) {
        rte_pktmbuf_free(std::exchange(tx_room_, nullptr));
    }
    if (tx_queued_ > 0) {
        rte_pktmbuf_free_bulk(tx_queue_.data(), tx_queued_);
        tx_queued_ = 0;
    }
    if (port_started_) {
        rte_eth_dev_stop(port_id_);
        port_started_ = false;
    }
    if (eal_started_ && rte_eth_dev_is_valid_port(port_id_) != 0) {
        rte_eth_dev_close(port_id_);
    }
    if (mempool_ != nullptr) {
        rte_mempool_free(static_cast<rte_mempool*>(mempool_));
        mempool_ = nullptr;
    }
    if (eal_started_ && --shared_eal.users > 0) {
        eal_started_ = false;  // another port of this process still uses the EAL
    }
    if (eal_started_) {
        // The EAL leaves its runtime directory (/var/run/dpdk/<file-prefix>:
        // config, fbarray and socket files) behind; nobody else uses ours.
        const std::string runtime_dir = rte_eal_get_runtime_dir();
        rte_eal_cleanup();
        eal_started_ = false;
        std::error_code ec;
        std::filesystem::remove_all(runtime_dir, ec);
    }
    wake_ring_.reset();
    memif_wake_.reset();
}

// ---- data path ---------------------------------------------------------------

std::size_t DpdkPort::receive(std::span<net::RxFrame> frames) {
    if (!port_started_) {
        return 0;  // a stopped port's burst functions are DPDK's "not ready" stubs
    }
    std::array<rte_mbuf*, kBurst> mbufs{};
    const auto want = static_cast<std::uint16_t>(std::min<std::size_t>(frames.size(), kBurst));
    std::uint16_t n = rte_eth_rx_burst(port_id_, 0, mbufs.data(), want);
    // An empty queue re-arms the wake ring; frames that slipped in before
    // the drain are picked up by the second burst (packet_wake_ring.h).
    if (n == 0 && wake_ring_ && wake_ring_->drain()) {
        n = rte_eth_rx_burst(port_id_, 0, mbufs.data(), want);
    }
    // memif: an empty ring arms the peer's wake-up, and a second look
    // catches a frame the peer queued before it saw us armed
    // (memif_peer_wake.h).
    if (memif_wake_ && n == 0 && memif_wake_->arm()) {
        n = rte_eth_rx_burst(port_id_, 0, mbufs.data(), want);
    }
    if (memif_wake_ && n > 0) {
        memif_wake_->disarm();
    }
    std::size_t out = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = mbufs[i];
        if (m->nb_segs != 1) {
            rte_pktmbuf_free(m);
            stats_.rx_chained_dropped += 1;
            continue;
        }
        frames[out++] = net::RxFrame{std::span<const std::uint8_t>(mbuf_bytes(m), m->data_len), m};
        counters_.rx_frames += 1;
        counters_.rx_bytes += m->data_len;
    }
    return out;
}

void DpdkPort::release(std::span<net::RxFrame> frames) {
    std::array<rte_mbuf*, kBurst> batch{};
    unsigned count = 0;
    for (net::RxFrame& f : frames) {
        if (f.handle == nullptr) {
            continue;
        }
        batch[count++] = static_cast<rte_mbuf*>(f.handle);
        f.handle = nullptr;
        if (count == batch.size()) {
            rte_pktmbuf_free_bulk(batch.data(), count);
            count = 0;
        }
    }
    if (count > 0) {
        rte_pktmbuf_free_bulk(batch.data(), count);
    }
}

bool DpdkPort::send(std::span<const std::uint8_t> frame) {
    if (frame.size() > max_frame_ || frame.size() < RTE_ETHER_HDR_LEN) {
        counters_.tx_dropped += 1;
        return false;
    }
    if (tx_queued_ == kTxQueue) {
        transmit_queued();
        if (tx_queued_ == kTxQueue) {
            counters_.tx_dropped += 1;
            return false;
        }
    }
    rte_mbuf* m = mbuf_for(frame);
    if (m == nullptr) {
        counters_.tx_dropped += 1;
        return false;
    }
    if (info_.ipv4_checksum_offload) {
        request_ipv4_checksum(m);
    }
    tx_queue_[tx_queued_] = m;
    tx_lengths_[tx_queued_] = static_cast<std::uint32_t>(frame.size());
    ++tx_queued_;
    return true;
}

std::span<std::uint8_t> DpdkPort::tx_room() {
    if (tx_room_ == nullptr) {
        tx_room_ = rte_pktmbuf_alloc(static_cast<rte_mempool*>(mempool_));
        if (tx_room_ == nullptr) {
            return {};
        }
    }
    return {mbuf_bytes(tx_room_), std::min<std::size_t>(rte_pktmbuf_tailroom(tx_room_), max_frame_)};
}

rte_mbuf* DpdkPort::mbuf_for(std::span<const std::uint8_t> frame) {
    const auto length = static_cast<std::uint16_t>(frame.size());
    if (tx_room_ != nullptr && frame.data() == mbuf_bytes(tx_room_)) {
        rte_mbuf* m = std::exchange(tx_room_, nullptr);
        (void)rte_pktmbuf_append(m, length);  // fits: send() checked it against max_frame_, the room's size
        return m;
    }
    rte_mbuf* m = rte_pktmbuf_alloc(static_cast<rte_mempool*>(mempool_));
    if (m == nullptr) {
        return nullptr;
    }
    char* data = rte_pktmbuf_append(m, length);
    if (data == nullptr) {  // cannot happen: the data room holds max_frame_
        rte_pktmbuf_free(m);
        return nullptr;
    }
    // memmove: a frame sent twice (a fault rule's duplicate) is copied out
    // of the mbuf the first send() queued.
    std::memmove(data, frame.data(), frame.size());
    return m;
}

void DpdkPort::request_ipv4_checksum(rte_mbuf* m) const {
    std::uint8_t* p = mbuf_bytes(m);
    const std::size_t length = m->data_len;
    std::size_t l2 = RTE_ETHER_HDR_LEN;
    std::uint16_t ether_type = static_cast<std::uint16_t>(p[12] << 8 | p[13]);
    if (ether_type == RTE_ETHER_TYPE_VLAN && length >= l2 + 4) {
        ether_type = static_cast<std::uint16_t>(p[16] << 8 | p[17]);
        l2 += 4;
    }
    if (ether_type != RTE_ETHER_TYPE_IPV4 || length < l2 + sizeof(rte_ipv4_hdr)) {
        return;
    }
    const std::size_t l3 = std::size_t{p[l2] & 0x0Fu} * 4;
    if (l3 < sizeof(rte_ipv4_hdr) || length < l2 + l3) {
        return;
    }
    // The NIC computes the checksum over a header whose checksum field is
    // zero (rte_mbuf_core.h, RTE_MBUF_F_TX_IP_CKSUM).
    p[l2 + offsetof(rte_ipv4_hdr, hdr_checksum)] = 0;
    p[l2 + offsetof(rte_ipv4_hdr, hdr_checksum) + 1] = 0;
    m->tx_offload = rte_mbuf_tx_offload(l2, l3, 0, 0, 0, 0, 0);
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
}

void DpdkPort::transmit_queued() {
    if (tx_queued_ == 0) {
        return;
    }
    if (!port_started_) {
        // A memif client waiting for its server: no wire to send on, as a
        // cable with nobody at the other end.
        rte_pktmbuf_free_bulk(tx_queue_.data(), tx_queued_);
        counters_.tx_dropped += tx_queued_;
        tx_queued_ = 0;
        return;
    }
    const std::uint16_t sent = rte_eth_tx_burst(port_id_, 0, tx_queue_.data(), tx_queued_);
    if (memif_wake_ && sent > 0) {
        memif_wake_->ring_peer();
    }
    for (std::uint16_t i = 0; i < sent; ++i) {
        counters_.tx_frames += 1;
        counters_.tx_bytes += tx_lengths_[i];
    }
    const std::uint16_t left = static_cast<std::uint16_t>(tx_queued_ - sent);
    if (left > 0 && sent > 0) {
        std::memmove(tx_queue_.data(), tx_queue_.data() + sent, left * sizeof(tx_queue_[0]));
        std::memmove(tx_lengths_.data(), tx_lengths_.data() + sent, left * sizeof(tx_lengths_[0]));
    }
    tx_queued_ = left;
}

void DpdkPort::flush() {
    for (int attempt = 0; attempt < kTxAttempts && tx_queued_ > 0; ++attempt) {
        if (attempt > 0) {
            stats_.tx_burst_retries += 1;
        }
        transmit_queued();
    }
    // What is left stays queued, in order: send() refuses new frames while
    // the queue is full, so the engine holds them (transmit backpressure)
    // instead of the port dropping them.
}

std::string DpdkPort::keep_link(std::chrono::steady_clock::time_point now) {
    if (!redial_) {
        return {};
    }
    rte_eth_link link{};
    const bool up = port_started_ && rte_eth_link_get_nowait(port_id_, &link) == 0 &&
                    link.link_status == RTE_ETH_LINK_UP;
    switch (redial_->check(up, now)) {
        case RedialAction::None:
            return {};
        case RedialAction::Reconnected:
            return "memif client connected to its server " + memif_socket_;
        case RedialAction::Dial:
            break;
    }
    if (port_started_) {
        transmit_queued();  // nothing left for the stopped port's stubs
        rte_pktmbuf_free_bulk(tx_queue_.data(), tx_queued_);
        counters_.tx_dropped += tx_queued_;
        tx_queued_ = 0;
        rte_eth_dev_stop(port_id_);
        port_started_ = false;
    }
    const int rc = rte_eth_dev_start(port_id_);
    port_started_ = rc == 0;
    if (!std::has_single_bit(redial_->dials())) {
        return {};  // dials 1, 2, 4, 8, ... are logged: a server that never comes fills no log
    }
    return "memif client link down: dialled " + memif_socket_ + " again (attempt " +
           std::to_string(redial_->dials()) + "): " + (rc == 0 ? "connecting" : "no server there") +
           "; next look in " + std::to_string(redial_->delay().count()) + " ms";
}

DpdkPortStats DpdkPort::stats() const {
    DpdkPortStats s = stats_;
    rte_eth_stats nic{};
    if (rte_eth_stats_get(port_id_, &nic) == 0) {
        s.rx_missed = nic.imissed;
        s.rx_errors = nic.ierrors;
        s.rx_no_mbuf = nic.rx_nombuf;
    }
    if (memif_wake_) {
        s.memif_rings_sent = memif_wake_->counters().rings_sent;
        s.memif_wakes_received = memif_wake_->counters().wakes_drained;
    }
    return s;
}

}  // namespace uroce::port
