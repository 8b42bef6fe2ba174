// A wake-up fd for net_memif ports, rung by the sending uroced.
//
// Why not the PMD's own: memif's protocol has a per-ring interrupt eventfd
// (sent with MEMIF_MSG_TYPE_ADD_RING) that the sender writes unless the
// receiver's ring has MEMIF_RING_FLAG_MASK_INT, but DPDK's net_memif keeps
// it to itself. Its eth_dev_ops has no rx_queue_intr_enable/disable and it
// fills in no ethdev intr_handle, so rte_eth_dev_rx_intr_enable() and
// rte_eth_dev_rx_intr_ctl_q_get_fd() answer -ENOTSUP; and memif_connect()
// sets MASK_INT on every receive ring at each (re)connect ("polling mode"),
// so the sender never writes the eventfd (DPDK 22.11 up to 24.x). Reaching
// the eventfd and the ring flags would mean copying the PMD's private
// struct memif_queue.
//
// So the two daemons ring each other beside the PMD, through two files next
// to the memif socket, per interface id and role:
//   <socket>.uroce-wake-<id>-<role>       a shared page: `armed`, `rings`
//   <socket>.uroce-wake-<id>-<role>.sock  a Unix datagram socket: fd()
// The receiver arms (armed = 1) when a receive finds its ring empty and
// then looks at the ring once more; the sender, after handing frames to
// the ring, takes `armed` (exchange to 0) and, when it was set, sends one
// datagram to the receiver's socket and counts it in `rings`. Both sides
// store and then load with a full fence between (receiver: armed, then the
// ring; sender: the ring, then armed), so a frame is either seen by the
// receiver's second look or its sender sees the receiver armed: no lost
// wake-up. While frames keep coming the receiver stays disarmed and the
// sender makes no system call.
//
// The page file is never removed, so a peer that maps it keeps the right
// page when this daemon restarts (its memif reconnects); the socket is bound
// anew at each start and found by its path. A peer that is not uroced (VPP,
// testpmd) never rings. Opt-in (`uroce-wake=yes` in the devargs,
// docs/wires.md): it loses no wake-up, but where busy-polling programs
// share a CPU they take turns only when something wakes, and the naps it
// replaces woke the loop often enough to give them those turns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace uroce::port {

struct MemifWakePage {
    std::atomic<std::uint32_t> armed{0};  // 1: the owner may sleep; ring it
    std::atomic<std::uint64_t> rings{0};  // datagrams sent to the owner
};

struct MemifWakeCounters {
    std::uint64_t rings_sent = 0;      // datagrams this side sent its peer
    std::uint64_t wakes_drained = 0;   // datagrams this side received
};

enum class MemifRole : std::uint8_t { Server, Client };

class MemifPeerWake {
public:
    // `socket_path`: the memif control socket (the `socket` devarg);
    // `id`: the interface id; `role`: this port's. Throws std::system_error
    // when the page or the socket cannot be made.
    MemifPeerWake(const std::string& socket_path, std::uint32_t id, MemifRole role);
    ~MemifPeerWake();
    MemifPeerWake(const MemifPeerWake&) = delete;
    MemifPeerWake& operator=(const MemifPeerWake&) = delete;

    // Readable when the peer rang.
    [[nodiscard]] int fd() const { return fd_; }

    // The receive ring was found empty: drains what the peer sent and arms.
    // True when the caller must look at the ring once more (armed just now).
    bool arm();
    // Frames came: no need to be rung.
    void disarm();
    // Frames were handed to the peer's ring: ring it if it sleeps.
    void ring_peer();

    [[nodiscard]] MemifWakeCounters counters() const { return counters_; }

    // The two files of one side (the page; the socket adds ".sock").
    [[nodiscard]] static std::string page_path(const std::string& socket_path, std::uint32_t id, MemifRole role);

private:
    void drain();
    // Maps the peer's page once it exists (the peer may start later).
    bool find_peer();

    int fd_ = -1;
    MemifWakePage* own_ = nullptr;
    MemifWakePage* peer_ = nullptr;
    std::string own_socket_;
    std::string peer_page_;
    std::string peer_socket_;
    bool armed_ = false;
    std::uint64_t drained_rings_ = 0;  // own_->rings when last drained
    std::chrono::steady_clock::time_point next_peer_look_{};
    MemifWakeCounters counters_;
};

}  // namespace uroce::port
