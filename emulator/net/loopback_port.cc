#include "loopback_port.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "wire/parse.h"

namespace uroce::net {

namespace detail {

struct FrameBuffer {
    std::unique_ptr<std::uint8_t[]> bytes;
    std::size_t length = 0;
    bool built_in_room = false;  // sent from the lent tx_room(), not copied in
};

// What the ports of one wire share: the buffer pool (a frame sent by one port
// is released by the other, so the pool cannot belong to either) and the two
// ends (the same port twice for a lone loopback port).
struct Wire {
    std::size_t frame_capacity = 0;
    std::size_t buffer_limit = 0;
    std::vector<std::unique_ptr<FrameBuffer>> buffers;
    std::vector<FrameBuffer*> free;
    std::array<LoopbackPort*, 2> ends{};

    FrameBuffer* take() {
        if (!free.empty()) {
            FrameBuffer* f = free.back();
            free.pop_back();
            return f;
        }
        if (buffers.size() >= buffer_limit) {
            return nullptr;
        }
        auto f = std::make_unique<FrameBuffer>();
        f->bytes = std::make_unique<std::uint8_t[]>(frame_capacity);
        buffers.push_back(std::move(f));
        return buffers.back().get();
    }

    void give_back(FrameBuffer* f) { free.push_back(f); }
};

}  // namespace detail

using detail::FrameBuffer;

// A fixed-capacity FIFO of frame buffers (a NIC descriptor ring).
class LoopbackPort::FrameRing {
public:
    explicit FrameRing(std::size_t capacity) : slots_(std::max<std::size_t>(capacity, 1)) {}

    [[nodiscard]] std::size_t size() const { return count_; }
    [[nodiscard]] bool empty() const { return count_ == 0; }

    bool push(FrameBuffer* f) {
        if (count_ == slots_.size()) {
            return false;
        }
        slots_[(head_ + count_) % slots_.size()] = f;
        ++count_;
        return true;
    }

    template <typename F>
    void for_each(F&& f) {
        for (std::size_t i = 0; i < count_; ++i) {
            f(slots_[(head_ + i) % slots_.size()]);
        }
    }

    FrameBuffer* pop() {
        FrameBuffer* f = slots_[head_];
        head_ = (head_ + 1) % slots_.size();
        --count_;
        return f;
    }

private:
    std::vector<FrameBuffer*> slots_;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
};

namespace {

// Enough buffers for every queue of both ends to be full and as many frames
// again held by receivers between receive() and release().
std::size_t buffer_limit(const LoopbackConfig& a, const LoopbackConfig& b) {
    return 2 * (a.rx_queue_frames + a.tx_queue_frames + b.rx_queue_frames + b.tx_queue_frames);
}

// SplitMix64 (Steele, Lea, Flood 2014): a small, seedable generator whose
// sequence is the same everywhere, so a seeded fault pattern is reproducible.
std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

bool every(std::uint32_t period, std::uint64_t n) { return period != 0 && n % period == 0; }

}  // namespace

LoopbackPort::LoopbackPort(const LoopbackConfig& config)
    : LoopbackPort(config, std::make_shared<detail::Wire>(), 0) {
    wire_->frame_capacity = config.max_frame;
    wire_->buffer_limit = buffer_limit(config, config) / 2;
    wire_->ends = {this, this};
}

LoopbackPort::LoopbackPort(const LoopbackConfig& config, std::shared_ptr<detail::Wire> wire, int side)
    : config_(config),
      wire_(std::move(wire)),
      side_(side),
      rx_queue_(std::make_unique<FrameRing>(config.rx_queue_frames)),
      tx_queue_(std::make_unique<FrameRing>(config.tx_queue_frames)) {}

LoopbackPort::~LoopbackPort() {
    while (!rx_queue_->empty()) {
        wire_->give_back(rx_queue_->pop());
    }
    while (!tx_queue_->empty()) {
        wire_->give_back(tx_queue_->pop());
    }
    if (held_ != nullptr) {
        wire_->give_back(held_);
    }
    if (tx_room_ != nullptr) {
        wire_->give_back(tx_room_);
    }
    for (auto& end : wire_->ends) {
        if (end == this) {
            end = nullptr;
        }
    }
}

WirePair make_wire_pair(const LoopbackConfig& a, const LoopbackConfig& b) {
    auto wire = std::make_shared<detail::Wire>();
    wire->frame_capacity = std::max(a.max_frame, b.max_frame);
    wire->buffer_limit = buffer_limit(a, b);
    WirePair pair{std::unique_ptr<LoopbackPort>(new LoopbackPort(a, wire, 0)),
                  std::unique_ptr<LoopbackPort>(new LoopbackPort(b, wire, 1))};
    pair.a->has_wire_ = true;
    pair.b->has_wire_ = true;
    wire->ends = {pair.a.get(), pair.b.get()};
    return pair;
}

LoopbackPort* LoopbackPort::peer() const { return wire_->ends[static_cast<std::size_t>(1 - side_)]; }

std::size_t LoopbackPort::rx_pending() const { return rx_queue_->size(); }

void LoopbackPort::set_faults(WireFaults faults) {
    faults_ = std::move(faults);
    rng_state_ = faults_.seed;
    frames_on_wire_ = 0;
}

std::size_t LoopbackPort::receive(std::span<RxFrame> frames) {
    std::size_t n = 0;
    while (n < frames.size() && !rx_queue_->empty()) {
        FrameBuffer* f = rx_queue_->pop();
        frames[n] = RxFrame{std::span<const std::uint8_t>(f->bytes.get(), f->length), f, f->built_in_room};
        counters_.rx_frames += 1;
        counters_.rx_bytes += f->length;
        ++n;
    }
    return n;
}

void LoopbackPort::release(std::span<RxFrame> frames) {
    for (RxFrame& rx : frames) {
        if (rx.handle != nullptr) {
            wire_->give_back(static_cast<FrameBuffer*>(rx.handle));
            rx.handle = nullptr;
        }
    }
}

bool LoopbackPort::send(std::span<const std::uint8_t> frame) {
    // A NIC refuses frames larger than its MTU allows; a runt is the sender's bug.
    if (frame.size() > config_.max_frame || frame.size() < sizeof(wire::EthHdr) ||
        tx_queue_->size() == config_.tx_queue_frames) {
        counters_.tx_dropped += 1;
        return false;
    }
    FrameBuffer* f = nullptr;
    if (tx_room_ != nullptr && frame.data() == tx_room_->bytes.get()) {
        f = std::exchange(tx_room_, nullptr);  // built in place: nothing to copy
        f->built_in_room = true;
    } else {
        f = wire_->take();
        if (f == nullptr) {
            counters_.tx_dropped += 1;
            return false;
        }
        std::memcpy(f->bytes.get(), frame.data(), frame.size());
        // A copied frame may be a fault rule's corrupted copy or bytes a test
        // made up: only the room itself is vouched for (port.h, icrc_vouched).
        f->built_in_room = false;
    }
    f->length = frame.size();
    tx_queue_->push(f);
    return true;
}

void LoopbackPort::seal_icrcs() {
    // Every frame queued from the room, whether or not its ICRC was left
    // out: sealing one that has it rewrites the same four bytes.
    auto seal = [](FrameBuffer* f) {
        if (f != nullptr && f->built_in_room) {
            wire::seal_icrc(std::span<std::uint8_t>(f->bytes.get(), f->length));
        }
    };
    tx_queue_->for_each(seal);
    rx_queue_->for_each(seal);
    seal(held_);
}

std::span<std::uint8_t> LoopbackPort::tx_room() {
    if (tx_room_ == nullptr) {
        tx_room_ = wire_->take();
        if (tx_room_ == nullptr) {
            return {};
        }
    }
    return {tx_room_->bytes.get(), config_.max_frame};
}

void LoopbackPort::flush() {
    ++flushes_;
    while (!tx_queue_->empty()) {
        FrameBuffer* f = tx_queue_->pop();
        counters_.tx_frames += 1;
        counters_.tx_bytes += f->length;
        put_on_wire(f);
    }
    // A frame held back in an earlier flush has waited long enough.
    if (held_ != nullptr && held_at_flush_ < flushes_) {
        deliver(std::exchange(held_, nullptr));
    }
}

bool LoopbackPort::draw_drop() {
    if (faults_.drop_probability <= 0.0) {
        return false;
    }
    // 53 random bits give a uniform double in [0, 1).
    const double u = static_cast<double>(splitmix64(rng_state_) >> 11) * 0x1.0p-53;
    return u < faults_.drop_probability;
}

void LoopbackPort::put_on_wire(FrameBuffer* f) {
    const std::uint64_t n = ++frames_on_wire_;
    const std::span<const std::uint8_t> bytes(f->bytes.get(), f->length);
    if ((faults_.drop_if && faults_.drop_if(bytes)) || every(faults_.drop_every, n) || draw_drop()) {
        wire_counters_.fault_dropped += 1;
        wire_->give_back(f);
        return;
    }
    if (every(faults_.duplicate_every, n)) {
        if (FrameBuffer* copy = wire_->take(); copy != nullptr) {
            std::memcpy(copy->bytes.get(), f->bytes.get(), f->length);
            copy->length = f->length;
            copy->built_in_room = f->built_in_room;  // the same bytes
            wire_counters_.duplicated += 1;
            deliver(copy);
        }
    }
    if (every(faults_.reorder_every, n) && held_ == nullptr) {
        held_ = f;
        held_at_flush_ = flushes_;
        wire_counters_.reordered += 1;
        return;
    }
    deliver(f);
    if (held_ != nullptr) {
        deliver(std::exchange(held_, nullptr));
    }
}

void LoopbackPort::deliver(FrameBuffer* f) {
    LoopbackPort* to = peer();
    if (to == nullptr) {
        wire_counters_.rx_dropped += 1;  // the other end is gone: nobody counts it there
        wire_->give_back(f);
        return;
    }
    if (to->arrive(f)) {
        wire_counters_.delivered += 1;
    }
}

bool LoopbackPort::arrive(FrameBuffer* f) {
    if (!rx_queue_->push(f)) {
        wire_counters_.rx_dropped += 1;
        wire_->give_back(f);
        return false;
    }
    return true;
}

}  // namespace uroce::net
