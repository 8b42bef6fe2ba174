// The narrow interface between the RoCEv2 engine and whatever moves Ethernet
// frames: a DPDK ethdev (dpdk_port/), or the in-process loopback wire
// (loopback_port.h). The engine never sees DPDK types.
//
// Receive: receive() fills up to frames.size() RxFrames; each frame's bytes
// stay valid until release() is called for it. Send: send() copies the frame
// into the port's transmit queue (false when the queue is full: the frame is
// refused and counted in tx_dropped; the caller still has it and the engine
// offers it again later); flush() hands queued frames to the wire. What the
// wire does not take at once stays queued for the next flush (tx_pending()).
// The engine calls flush() once per poll iteration.
//
// Building in place: tx_room() lends the caller the buffer the port's next
// frame would be copied into (a free mbuf's data room, a loopback frame
// buffer). A send() of a frame that starts at the beginning of that room
// queues the room itself instead of copying (docs/architecture.md, "Copies
// per byte moved"); any other send() copies as before. The same room comes
// back from tx_room() until a send() takes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/headers.h"

namespace uroce::net {

struct RxFrame {
    std::span<const std::uint8_t> bytes;
    void* handle = nullptr;  // the port's own (an mbuf, a buffer slot)
    // The port vouches that these bytes are a frame this daemon built in a
    // lent tx_room() and that nothing touched since, so its ICRC holds
    // without being computed again: the loopback port's frames that never
    // left the process (docs/architecture.md, "ICRC on the loopback port").
    // Never set for bytes that came from a wire or went through a copy.
    bool icrc_vouched = false;
};

struct PortCounters {
    std::uint64_t rx_frames = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t tx_frames = 0;
    std::uint64_t tx_bytes = 0;
    std::uint64_t tx_dropped = 0;  // refused by send(): queue full, no buffer, bad size
};

class Port {
public:
    virtual ~Port() = default;

    [[nodiscard]] virtual std::size_t receive(std::span<RxFrame> frames) = 0;
    virtual void release(std::span<RxFrame> frames) = 0;
    virtual bool send(std::span<const std::uint8_t> frame) = 0;
    virtual void flush() = 0;
    // At least max_frame() bytes to build the next frame in, or empty when
    // the port cannot lend one (no buffer free; a port that always copies).
    [[nodiscard]] virtual std::span<std::uint8_t> tx_room() { return {}; }
    // Whether nothing would read the ICRC of a frame built in tx_room() and
    // sent now: the lone loopback port with no fault rule engaged and no
    // capture running. The engine then leaves the ICRC out (wire::Icrc).
    // When the answer turns false (a rule, a capture), the caller calls
    // seal_icrcs() before it receives again.
    [[nodiscard]] virtual bool icrc_unread() const { return false; }
    // Computes the ICRC of every frame built in the room that the port still
    // holds, so none without one is seen by what now watches.
    virtual void seal_icrcs() {}

    [[nodiscard]] virtual wire::MacAddr mac() const = 0;
    // Largest frame send() accepts (the Ethernet MTU plus the 14-byte header
    // and one VLAN tag).
    [[nodiscard]] virtual std::size_t max_frame() const = 0;
    // Whether the port reaches anything but itself (loopback: false; then
    // every destination is local and no neighbour resolution happens).
    [[nodiscard]] virtual bool has_wire() const = 0;
    // An fd that becomes readable when frames arrive, or -1 when the port
    // cannot tell (then the daemon naps briefly instead of sleeping).
    [[nodiscard]] virtual int rx_wait_fd() const { return -1; }
    // Frames flush() could not hand to the wire yet (the NIC took a burst
    // only in part); they go at the next flush().
    [[nodiscard]] virtual bool tx_pending() const { return false; }

    [[nodiscard]] virtual PortCounters counters() const = 0;
};

}  // namespace uroce::net
