#include "packet_wake_ring.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace uroce::port {

namespace {

// One page of 32 slots of 128 bytes: room for the tpacket2 header, the
// sockaddr_ll and the one byte kept (slots must be multiples of 16 bytes).
constexpr unsigned kBlockSize = 4096;
constexpr unsigned kSlotSize = 128;
constexpr unsigned kSlots = kBlockSize / kSlotSize;

std::system_error os_error(const std::string& what) {
    return std::system_error(errno, std::generic_category(), "af_packet wake ring: " + what);
}

std::uint32_t& status_of(void* ring, std::size_t slot) {
    auto* base = static_cast<std::uint8_t*>(ring) + slot * kSlotSize;
    return reinterpret_cast<tpacket2_hdr*>(base)->tp_status;
}

}  // namespace

PacketWakeRing::PacketWakeRing(const std::string& interface) {
    const unsigned ifindex = if_nametoindex(interface.c_str());
    if (ifindex == 0) {
        throw os_error("no interface " + interface);
    }
    // Protocol 0: the socket takes no frames until bind() below, when the
    // ring and the filter are in place.
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        throw os_error("socket");
    }
    auto fail = [this](const std::string& what) {
        auto e = os_error(what);
        close(fd_);
        return e;
    };
    const int version = TPACKET_V2;
    const int one = 1;
    // Keep one byte of each frame: "ret #1" (the snap length).
    sock_filter keep_one_byte[] = {BPF_STMT(BPF_RET | BPF_K, 1)};
    const sock_fprog program{.len = 1, .filter = keep_one_byte};
    tpacket_req req{.tp_block_size = kBlockSize, .tp_block_nr = 1, .tp_frame_size = kSlotSize, .tp_frame_nr = kSlots};
    if (setsockopt(fd_, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) != 0) {
        throw fail("PACKET_VERSION");
    }
    if (setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0) {
        throw fail("PACKET_IGNORE_OUTGOING");
    }
    if (setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof(program)) != 0) {
        throw fail("SO_ATTACH_FILTER");
    }
    if (setsockopt(fd_, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0) {
        throw fail("PACKET_RX_RING");
    }
    ring_ = mmap(nullptr, kBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (ring_ == MAP_FAILED) {
        ring_ = nullptr;
        throw fail("mmap");
    }
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) != 0) {
        munmap(ring_, kBlockSize);
        throw fail("bind to " + interface);
    }
}

PacketWakeRing::~PacketWakeRing() {
    if (ring_ != nullptr) {
        munmap(ring_, kBlockSize);
    }
    close(fd_);
}

bool PacketWakeRing::drain() {
    bool any = false;
    for (;;) {
        // The kernel writes a slot, then publishes it by setting TP_STATUS_USER
        // (after a write barrier); acquire pairs with that, and release
        // publishes our hand-back (packet_mmap.rst "TPACKET versions").
        std::atomic_ref<std::uint32_t> status(status_of(ring_, next_));
        if ((status.load(std::memory_order_acquire) & TP_STATUS_USER) == 0) {
            return any;
        }
        status.store(TP_STATUS_KERNEL, std::memory_order_release);
        next_ = (next_ + 1) % kSlots;
        any = true;
    }
}

}  // namespace uroce::port
