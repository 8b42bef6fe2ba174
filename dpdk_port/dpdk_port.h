// A DPDK ethdev port for uroced: starts the EAL (without hugepages when the
// machine has none configured), attaches one port given as a PCI address or
// vdev devargs (net_af_packet0,iface=veth0, net_tap0, net_memif0,...), sets
// it up with one RX and one TX queue, and moves frames for the engine through
// the net::Port interface.
//
// Receive hands out the mbufs themselves (no copy) until release(). Send
// copies the frame into an mbuf and queues it; flush() hands the queue to the
// NIC in one burst, retrying the part the NIC did not take a few times, then
// dropping and counting it. Frames are single-segment: the mbuf data room is
// sized for the largest frame the port carries, and received chains (which
// need RX scatter, never enabled) are dropped and counted.
//
// IPv4 header checksums go to the NIC when it offers
// RTE_ETH_TX_OFFLOAD_IPV4_CKSUM; otherwise the checksum the engine wrote goes
// out as is.
//
// rx_wait_fd(): net_tap gives its queue's fd (DPDK rx interrupts); for
// net_af_packet, which has none, a companion AF_PACKET socket signals
// arrivals (packet_wake_ring.h); for net_memif, whose PMD keeps its rx
// interrupt to itself, the sending uroced rings a datagram socket
// (memif_peer_wake.h); other PMDs give -1.
//
// Single-threaded: the engine's thread makes every call.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memif_redial.h"
#include "net/port.h"
#include "wire/headers.h"

struct rte_mbuf;

namespace uroce::port {

class PacketWakeRing;
class MemifPeerWake;

struct PortInfo {
    wire::MacAddr mac{};
    std::uint32_t mtu = 1500;  // what the port carries (after every limit below)
    bool link_up = false;
    std::uint32_t speed_mbps = 0;
    std::string driver;
    bool ipv4_checksum_offload = false;
    // How rx_wait_fd() learns of frames: "rx interrupt", "af_packet wake
    // ring", "memif peer wake", or "none" (the daemon naps instead).
    std::string rx_wait;
};

struct DpdkPortOptions {
    // 0: the port's own MTU (a kernel interface's, for af_packet/af_xdp/tap;
    // 9000 for net_memif, which has no limit of its own: docs/wires.md).
    std::uint32_t mtu = 0;
    std::uint16_t rx_ring = 1024;  // descriptors
    std::uint16_t tx_ring = 1024;
    bool rx_wait_fd = true;  // set up rx_wait_fd() where the PMD allows
};

// What the port counts beyond net::PortCounters.
struct DpdkPortStats {
    std::uint64_t rx_chained_dropped = 0;  // multi-segment frames
    std::uint64_t tx_burst_retries = 0;    // bursts the NIC took only in part
    std::uint64_t rx_missed = 0;           // NIC: no descriptor free (imissed)
    std::uint64_t rx_errors = 0;           // NIC: bad frames (ierrors)
    std::uint64_t rx_no_mbuf = 0;          // NIC: mempool empty (rx_nombuf)
    std::uint64_t memif_rings_sent = 0;      // memif: wake-ups sent to the sleeping peer
    std::uint64_t memif_wakes_received = 0;  // memif: wake-ups the peer sent us
};

class DpdkPort final : public net::Port {
public:
    // `spec`: a PCI address (0000:3b:00.1) or vdev devargs. `instance`
    // separates the EAL files of daemons on one host (--file-prefix
    // uroce-<instance>; the runtime directory is removed at shutdown). Throws
    // std::runtime_error with DPDK's reason. Several per process share one
    // EAL: the first starts it (`instance` names its files) and the others
    // attach their devices to it; a PCI port must come first (the EAL of a
    // vdev runs without the PCI bus).
    DpdkPort(const std::string& spec, const std::string& instance, const DpdkPortOptions& options = {});
    ~DpdkPort() override;
    DpdkPort(const DpdkPort&) = delete;
    DpdkPort& operator=(const DpdkPort&) = delete;

    [[nodiscard]] std::size_t receive(std::span<net::RxFrame> frames) override;
    void release(std::span<net::RxFrame> frames) override;
    bool send(std::span<const std::uint8_t> frame) override;
    // A free mbuf's data room: a frame built there is queued without a copy.
    [[nodiscard]] std::span<std::uint8_t> tx_room() override;
    [[nodiscard]] bool tx_pending() const override { return tx_queued_ > 0; }
    void flush() override;

    [[nodiscard]] wire::MacAddr mac() const override { return info_.mac; }
    [[nodiscard]] std::size_t max_frame() const override { return max_frame_; }
    [[nodiscard]] bool has_wire() const override { return true; }
    [[nodiscard]] int rx_wait_fd() const override { return rx_wait_fd_; }
    [[nodiscard]] net::PortCounters counters() const override { return counters_; }

    [[nodiscard]] const PortInfo& info() const { return info_; }
    [[nodiscard]] std::uint16_t port_id() const { return port_id_; }

    // For a net_memif client (role=client): restarts the port while its
    // link stays down, so it dials its server again (memif_redial.h). Call
    // it from the loop thread between data-path rounds, every few ms; it
    // does nothing for other ports. Returns a line worth logging, or "".
    [[nodiscard]] std::string keep_link(std::chrono::steady_clock::time_point now);
    [[nodiscard]] DpdkPortStats stats() const;

    // True when `spec` looks like a PCI address rather than vdev devargs.
    [[nodiscard]] static bool is_pci_address(const std::string& spec);

    // Frames one receive() returns at most.
    static constexpr std::uint16_t kBurst = 32;
    // Frames send() queues for flush(); a send() that finds it full hands the
    // queue to the NIC early.
    static constexpr std::uint16_t kTxQueue = 256;

private:
    void start(const std::string& spec, const std::string& instance, const DpdkPortOptions& options);
    // The first port of the process starts the EAL with its device on the
    // command line (`args`); later ones attach theirs to it (hotplug).
    void start_eal(const std::string& spec, std::vector<std::string>& args);
    void attach(const std::string& spec, const std::string& vdev);
    // The rest: MTU, queues, mempool, start, rx wake fd, MAC and link.
    void finish_start(const std::string& spec, const std::string& vdev, const DpdkPortOptions& options);
    // Stops and frees whatever start() got done, in reverse order.
    void shutdown();
    // One rte_eth_tx_burst of the queued frames; keeps what the NIC refused.
    void transmit_queued();
    void request_ipv4_checksum(rte_mbuf* m) const;
    // The mbuf send() queues for `frame`: the lent room when the frame was
    // built in it, else a new one the frame is copied into; nullptr when
    // the pool is empty.
    rte_mbuf* mbuf_for(std::span<const std::uint8_t> frame);

    std::uint16_t port_id_ = 0;
    void* mempool_ = nullptr;
    PortInfo info_;
    std::size_t max_frame_ = 0;
    bool eal_started_ = false;
    bool port_started_ = false;  // false: receive() and flush() leave the PMD alone
    std::optional<MemifRedial> redial_;  // a memif client's
    std::string memif_socket_;           // its server's socket, for log lines
    std::unique_ptr<PacketWakeRing> wake_ring_;
    std::unique_ptr<MemifPeerWake> memif_wake_;
    int rx_wait_fd_ = -1;

    std::array<rte_mbuf*, kTxQueue> tx_queue_{};
    std::array<std::uint32_t, kTxQueue> tx_lengths_{};
    std::uint16_t tx_queued_ = 0;
    rte_mbuf* tx_room_ = nullptr;  // lent by tx_room(), empty (data_len 0) until send() takes it

    net::PortCounters counters_;
    DpdkPortStats stats_;
};

}  // namespace uroce::port
