// A wake-up fd for DPDK's net_af_packet PMD, which has no rx interrupt
// (its eth_dev_ops has no rx_queue_intr_enable in DPDK 22.11, and its
// socket is private). A second AF_PACKET socket on the same interface gets a
// copy of every frame the interface receives; its readability is the "frames
// arrived" signal the daemon sleeps on.
//
// The socket receives into a one-page TPACKET_V2 ring (packet_mmap), keeping
// one byte of each frame, and ignores the frames we send
// (PACKET_IGNORE_OUTGOING). It is readable while a slot of the ring is
// marked for user space (TP_STATUS_USER); drain() hands the slots back with
// plain memory writes, no system call, so the port can do it on every poll
// that finds its queue empty. While the port is busy the ring fills up and
// the kernel drops further copies at the cost of a ring-full check.
//
// Order matters: open the wake ring before the PMD opens its socket. The
// kernel hands a frame to the packet sockets of an interface newest first
// (dev_add_pack() adds at the head of the list), so the PMD's ring holds a
// frame before the wake ring sees it: a thread woken by the wake ring finds
// the frame, and after drain() a second rx burst finds every frame whose
// wake-up was drained. Opened the other way round, about 5% of wake-ups
// came before their frame in tests/unit/net/test_dpdk_port.cc; in this
// order none did in 3600.
#pragma once

#include <cstddef>
#include <string>

namespace uroce::port {

class PacketWakeRing {
public:
    // Throws std::system_error when the interface or the socket is refused.
    explicit PacketWakeRing(const std::string& interface);
    ~PacketWakeRing();
    PacketWakeRing(const PacketWakeRing&) = delete;
    PacketWakeRing& operator=(const PacketWakeRing&) = delete;

    [[nodiscard]] int fd() const { return fd_; }
    // Returns every slot marked for user space to the kernel; true when there
    // was at least one (a frame arrived since the last drain).
    bool drain();

private:
    int fd_ = -1;
    void* ring_ = nullptr;
    std::size_t next_ = 0;  // the slot the kernel fills next, in order
};

}  // namespace uroce::port
