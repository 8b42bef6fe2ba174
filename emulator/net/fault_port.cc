#include "fault_port.h"

#include <algorithm>

namespace uroce::net {

using fault::Clock;
using fault::Decision;
using fault::Direction;
using fault::Verdict;

struct FaultPort::LentFrame {
    std::vector<std::uint8_t> bytes;
};

FaultPort::FaultPort(Port& inner, std::uint64_t seed) : inner_(inner), injector_(seed) {}

FaultPort::~FaultPort() = default;

// ---- the fast path: one branch, then the wrapped port ----

std::size_t FaultPort::receive(std::span<RxFrame> frames) {
    if (!engaged_) [[likely]] {
        return inner_.receive(frames);
    }
    return receive_faulty(frames);
}

void FaultPort::release(std::span<RxFrame> frames) {
    if (!engaged_) [[likely]] {
        inner_.release(frames);
        return;
    }
    release_faulty(frames);
}

bool FaultPort::send(std::span<const std::uint8_t> frame) {
    if (!engaged_) [[likely]] {
        return inner_.send(frame);
    }
    return send_faulty(frame);
}

void FaultPort::flush() {
    if (engaged_) [[unlikely]] {
        flush_faulty();
    }
    inner_.flush();
}

// ---- rules ----

std::uint32_t FaultPort::add_rule(const fault::Rule& rule) {
    const std::uint32_t id = injector_.add(rule, Clock::now());
    update_engaged();
    return id;
}

bool FaultPort::remove_rule(std::uint32_t id) {
    const bool removed = injector_.remove(id);
    update_engaged();
    return removed;
}

void FaultPort::clear_rules() {
    injector_.clear();
    update_engaged();
}

void FaultPort::reseed(std::uint64_t seed) { injector_.reseed(seed); }

void FaultPort::update_engaged() {
    engaged_ = injector_.armed() || !held_rx_.empty() || !held_tx_.empty() || !ready_rx_.empty() || !lent_.empty();
}

std::optional<Clock::time_point> FaultPort::next_deadline() const {
    std::optional<Clock::time_point> next;
    if (!ready_rx_.empty()) {
        return Clock::now();
    }
    for (const auto* queue : {&held_rx_, &held_tx_}) {
        for (const HeldFrame& f : *queue) {
            if (!next || f.due < *next) {
                next = f.due;
            }
        }
    }
    return next;
}

// ---- the slow path ----

bool FaultPort::due(const HeldFrame& f, Clock::time_point now) { return now >= f.due; }

void FaultPort::count_passing(std::deque<HeldFrame>& held) {
    for (HeldFrame& f : held) {
        if (f.frames_left > 1) {
            --f.frames_left;
        } else if (f.frames_left == 1) {
            f.frames_left = 0;
            f.due = Clock::time_point::min();  // due now: its successors have passed
        }
    }
}

FaultPort::HeldFrame FaultPort::hold(std::span<const std::uint8_t> frame, const Decision& d) {
    HeldFrame h;
    h.bytes.assign(frame.begin(), frame.end());
    h.due = d.hold_until;
    h.frames_left = d.hold_frames;  // a delay (0) is due by time alone; a reorder by either
    return h;
}

std::vector<std::uint8_t> FaultPort::changed_copy(std::span<const std::uint8_t> frame, const Decision& d) {
    std::vector<std::uint8_t> copy(frame.begin(), frame.end());
    if (d.verdict == Verdict::Corrupt && d.corrupt_offset < copy.size()) {
        copy[d.corrupt_offset] ^= d.corrupt_xor;
    } else if (d.verdict == Verdict::Truncate) {
        copy.resize(d.keep_bytes);
    }
    return copy;
}

void FaultPort::observe_drop(Direction way, std::span<const std::uint8_t> frame, const Decision& d) const {
    if (drop_observer_) {
        drop_observer_(way, frame, d.rule_text);
    }
}

void FaultPort::lend(std::vector<std::uint8_t> bytes, RxFrame& out) {
    auto lent = std::make_unique<LentFrame>();
    lent->bytes = std::move(bytes);
    out = RxFrame{std::span<const std::uint8_t>(lent->bytes), lent.get()};
    lent_.push_back(std::move(lent));
}

std::size_t FaultPort::receive_faulty(std::span<RxFrame> frames) {
    const Clock::time_point now = Clock::now();
    // Held frames now due join the copies waiting, in the order they were held.
    for (auto it = held_rx_.begin(); it != held_rx_.end();) {
        if (due(*it, now)) {
            ready_rx_.push_back(std::move(it->bytes));
            it = held_rx_.erase(it);
        } else {
            ++it;
        }
    }
    std::size_t out = 0;
    while (out < frames.size() && !ready_rx_.empty()) {
        lend(std::move(ready_rx_.front()), frames[out++]);
        ready_rx_.pop_front();
    }
    const std::size_t first_new = out;
    const std::size_t got = out < frames.size() ? inner_.receive(frames.subspan(out)) : 0;
    inner_release_.clear();
    for (std::size_t i = first_new; i < first_new + got; ++i) {
        const RxFrame frame = frames[i];
        const Decision d = injector_.decide(Direction::Rx, frame.bytes, now);
        switch (d.verdict) {
            case Verdict::Pass:
                frames[out++] = frame;
                count_passing(held_rx_);
                continue;
            case Verdict::Duplicate:
                frames[out++] = frame;
                ready_rx_.emplace_back(frame.bytes.begin(), frame.bytes.end());
                count_passing(held_rx_);
                continue;
            case Verdict::Drop:
                observe_drop(Direction::Rx, frame.bytes, d);
                break;
            case Verdict::Hold:
                held_rx_.push_back(hold(frame.bytes, d));
                break;
            case Verdict::Corrupt:
            case Verdict::Truncate:
                lend(changed_copy(frame.bytes, d), frames[out++]);
                count_passing(held_rx_);
                break;
        }
        inner_release_.push_back(frame);  // the wrapped port's buffer goes back now
    }
    if (!inner_release_.empty()) {
        inner_.release(inner_release_);
    }
    update_engaged();
    return out;
}

void FaultPort::release_faulty(std::span<RxFrame> frames) {
    inner_release_.clear();
    for (RxFrame& f : frames) {
        const auto ours = std::find_if(lent_.begin(), lent_.end(),
                                       [&](const std::unique_ptr<LentFrame>& l) { return l.get() == f.handle; });
        if (ours != lent_.end()) {
            lent_.erase(ours);
            f.handle = nullptr;
        } else {
            inner_release_.push_back(f);
        }
    }
    if (!inner_release_.empty()) {
        inner_.release(inner_release_);
    }
    update_engaged();
}

bool FaultPort::send_faulty(std::span<const std::uint8_t> frame) {
    const Decision d = injector_.decide(Direction::Tx, frame, Clock::now());
    bool taken = true;
    switch (d.verdict) {
        case Verdict::Pass:
            taken = inner_.send(frame);
            break;
        case Verdict::Duplicate:
            taken = inner_.send(frame);
            if (taken) {
                (void)inner_.send(frame);  // a second copy the queue refuses is simply not sent
            }
            break;
        case Verdict::Drop:
            observe_drop(Direction::Tx, frame, d);
            return true;  // the wire took it, as far as the sender can tell
        case Verdict::Hold:
            held_tx_.push_back(hold(frame, d));
            update_engaged();
            return true;
        case Verdict::Corrupt:
        case Verdict::Truncate:
            taken = inner_.send(changed_copy(frame, d));
            break;
    }
    if (taken) {
        count_passing(held_tx_);
    }
    return taken;
}

void FaultPort::flush_faulty() {
    const Clock::time_point now = Clock::now();
    for (auto it = held_tx_.begin(); it != held_tx_.end();) {
        if (due(*it, now)) {
            // Sent once: a frame the queue refuses now is lost, as on a
            // congested link; the engine's retransmission recovers it.
            (void)inner_.send(it->bytes);
            it = held_tx_.erase(it);
        } else {
            ++it;
        }
    }
    update_engaged();
}

}  // namespace uroce::net
