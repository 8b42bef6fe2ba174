// In-process ports. A LoopbackPort on its own is the embedded loopback device
// of `uroced --port loopback`: frames sent on it come back to it as received,
// and it reaches nothing else (has_wire() is false). Two ports made with
// make_wire_pair() are joined by a wire: frames one sends arrive on the
// other, so two engines (or two neighbour tables) talk inside one test. Each
// direction of a wire can drop, duplicate and reorder frames on request.
//
// Queues are bounded like a NIC's rings: a full transmit queue or an empty
// buffer pool makes send() fail (counted in tx_dropped), a full receive queue
// drops arriving frames (counted in WireCounters::rx_dropped).
//
// Single-threaded: one thread calls every method of both ports of a pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "net/port.h"
#include "wire/headers.h"

namespace uroce::net {

// The largest standard frame: 1500-byte MTU, 14-byte Ethernet header and one
// 4-byte 802.1Q tag (no FCS: ports never see it).
constexpr std::size_t kStandardMaxFrame = 1500 + 14 + 4;

struct LoopbackConfig {
    wire::MacAddr mac{};
    std::size_t max_frame = kStandardMaxFrame;
    std::size_t rx_queue_frames = 1024;  // received frames waiting for receive()
    std::size_t tx_queue_frames = 1024;  // sent frames waiting for flush()
};

// Faults a wire applies to the frames one port hands to it at flush(). The
// n-th frame (counting from 1, per direction) meets, in this order: drop_if,
// drop_every, drop_probability, then reorder_every and duplicate_every.
struct WireFaults {
    std::uint32_t drop_every = 0;       // drop frames n % N == 0 (0: never)
    double drop_probability = 0.0;      // drop each frame with this probability
    std::uint64_t seed = 1;             // of the generator drop_probability uses
    std::uint32_t duplicate_every = 0;  // deliver frames n % N == 0 twice
    // Hold frames n % N == 0 back and deliver them right after the next frame,
    // or at the next flush() if no frame follows in this one.
    std::uint32_t reorder_every = 0;
    // Drop the frames for which this returns true (tests target one packet).
    std::function<bool(std::span<const std::uint8_t>)> drop_if{};
};

struct WireCounters {
    // As the sender: what happened to the frames this port put on the wire.
    std::uint64_t delivered = 0;  // copies placed in the receiver's queue
    std::uint64_t fault_dropped = 0;
    std::uint64_t duplicated = 0;
    std::uint64_t reordered = 0;
    // As the receiver: frames that arrived while its receive queue was full,
    // or were sent after it was destroyed.
    std::uint64_t rx_dropped = 0;
};

namespace detail {
struct Wire;
struct FrameBuffer;
}  // namespace detail

struct WirePair;

class LoopbackPort final : public Port {
public:
    // A port whose frames come back to itself.
    explicit LoopbackPort(const LoopbackConfig& config);
    ~LoopbackPort() override;
    LoopbackPort(const LoopbackPort&) = delete;
    LoopbackPort& operator=(const LoopbackPort&) = delete;

    [[nodiscard]] std::size_t receive(std::span<RxFrame> frames) override;
    void release(std::span<RxFrame> frames) override;
    bool send(std::span<const std::uint8_t> frame) override;
    void flush() override;
    // A free frame buffer: a frame built there is queued without a copy.
    [[nodiscard]] std::span<std::uint8_t> tx_room() override;
    // The lone port: its frames never leave the process (port.h).
    [[nodiscard]] bool icrc_unread() const override { return !has_wire_; }
    void seal_icrcs() override;

    [[nodiscard]] wire::MacAddr mac() const override { return config_.mac; }
    [[nodiscard]] std::size_t max_frame() const override { return config_.max_frame; }
    [[nodiscard]] bool has_wire() const override { return has_wire_; }
    [[nodiscard]] PortCounters counters() const override { return counters_; }

    // Faults on the frames this port sends (replaces any set before).
    void set_faults(WireFaults faults);
    [[nodiscard]] const WireCounters& wire_counters() const { return wire_counters_; }
    // Frames waiting for receive().
    [[nodiscard]] std::size_t rx_pending() const;

private:
    friend WirePair make_wire_pair(const LoopbackConfig& a, const LoopbackConfig& b);
    class FrameRing;

    LoopbackPort(const LoopbackConfig& config, std::shared_ptr<detail::Wire> wire, int side);
    [[nodiscard]] LoopbackPort* peer() const;
    void put_on_wire(detail::FrameBuffer* frame);
    void deliver(detail::FrameBuffer* frame);
    // Accepts a frame into this port's receive queue, or drops it when full.
    bool arrive(detail::FrameBuffer* frame);
    [[nodiscard]] bool draw_drop();

    LoopbackConfig config_;
    std::shared_ptr<detail::Wire> wire_;
    int side_ = 0;
    bool has_wire_ = false;
    std::unique_ptr<FrameRing> rx_queue_;
    std::unique_ptr<FrameRing> tx_queue_;
    PortCounters counters_;
    WireCounters wire_counters_;
    WireFaults faults_;
    std::uint64_t frames_on_wire_ = 0;  // n of WireFaults
    std::uint64_t rng_state_ = 0;
    detail::FrameBuffer* held_ = nullptr;  // reordered frame waiting for its successor
    detail::FrameBuffer* tx_room_ = nullptr;  // lent by tx_room() until send() takes it
    std::uint64_t held_at_flush_ = 0;
    std::uint64_t flushes_ = 0;
};

struct WirePair {
    std::unique_ptr<LoopbackPort> a;
    std::unique_ptr<LoopbackPort> b;
};

// Two ports joined by a wire; both report has_wire() true.
[[nodiscard]] WirePair make_wire_pair(const LoopbackConfig& a, const LoopbackConfig& b);

}  // namespace uroce::net
