// A port that injects faults (docs/fault-injection.md): it wraps the real
// port (DPDK or loopback) and passes every frame, both ways, past a
// fault::Injector. A frame can be dropped, duplicated, held back (reorder,
// delay), corrupted or truncated; held frames wait in this decorator and
// are delivered (received) or sent when due, which the daemon's loop learns
// from next_deadline().
//
// With no rule installed and nothing held, receive(), release(), send() and
// flush() cost one predictable branch each before calling the wrapped port
// (the daemon always installs the decorator, so rules can be added while it
// runs).
//
// Frames this port hands out of its own storage (duplicates, corrupted or
// truncated copies, frames that were held) stay valid until release(), like
// the wrapped port's own (port.h).
// Single-threaded: the daemon's loop calls every method.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fault/injector.h"
#include "net/port.h"

namespace uroce::net {

// Called for every frame a rule drops (drop, down, silent), before it goes:
// which way it was travelling, its bytes, and the rule's text.
using DropObserver =
    std::function<void(fault::Direction way, std::span<const std::uint8_t> frame, std::string_view rule)>;

class FaultPort final : public Port {
public:
    FaultPort(Port& inner, std::uint64_t seed);
    ~FaultPort() override;
    FaultPort(const FaultPort&) = delete;
    FaultPort& operator=(const FaultPort&) = delete;

    [[nodiscard]] std::size_t receive(std::span<RxFrame> frames) override;
    void release(std::span<RxFrame> frames) override;
    bool send(std::span<const std::uint8_t> frame) override;
    void flush() override;
    // The inner port's: a frame passed on unchanged is not copied; a held,
    // corrupted or truncated one is a copy, and the room stays lent.
    [[nodiscard]] std::span<std::uint8_t> tx_room() override { return inner_.tx_room(); }
    // A rule reads frames (corrupts, copies, holds them): not while engaged.
    [[nodiscard]] bool icrc_unread() const override { return !engaged_ && inner_.icrc_unread(); }
    void seal_icrcs() override { inner_.seal_icrcs(); }

    [[nodiscard]] wire::MacAddr mac() const override { return inner_.mac(); }
    [[nodiscard]] std::size_t max_frame() const override { return inner_.max_frame(); }
    [[nodiscard]] bool has_wire() const override { return inner_.has_wire(); }
    [[nodiscard]] int rx_wait_fd() const override { return inner_.rx_wait_fd(); }
    [[nodiscard]] bool tx_pending() const override { return inner_.tx_pending(); }
    [[nodiscard]] PortCounters counters() const override { return inner_.counters(); }

    // ---- rules (the control server's FAULT_* ops, uroced --fault) ----
    std::uint32_t add_rule(const fault::Rule& rule);
    bool remove_rule(std::uint32_t id);
    void clear_rules();
    void reseed(std::uint64_t seed);
    [[nodiscard]] const fault::Injector& injector() const { return injector_; }
    // Frames held now (delayed or reordered), both ways.
    [[nodiscard]] std::size_t held() const { return held_rx_.size() + held_tx_.size() + ready_rx_.size(); }

    // When a held frame is due (now, when one is due already); nullopt when
    // nothing is held.
    [[nodiscard]] std::optional<fault::Clock::time_point> next_deadline() const;

    // Told about every frame a rule drops (e.g. a packet capture marking
    // injected drops). Replaces the one set before; an empty function stops it.
    void set_drop_observer(DropObserver observer) { drop_observer_ = std::move(observer); }

private:
    struct HeldFrame {
        std::vector<std::uint8_t> bytes;
        fault::Clock::time_point due;  // the latest release
        std::uint32_t frames_left = 0; // reorder: later frames still to pass it (0: due by time only)
    };
    struct LentFrame;  // a frame of ours handed out by receive()

    std::size_t receive_faulty(std::span<RxFrame> frames);
    void release_faulty(std::span<RxFrame> frames);
    bool send_faulty(std::span<const std::uint8_t> frame);
    void flush_faulty();
    // Applies a decision that changes the frame's bytes: the changed copy.
    static std::vector<std::uint8_t> changed_copy(std::span<const std::uint8_t> frame, const fault::Decision& d);
    static HeldFrame hold(std::span<const std::uint8_t> frame, const fault::Decision& d);
    // One frame passed in `held`'s direction: reordered frames count it.
    static void count_passing(std::deque<HeldFrame>& held);
    static bool due(const HeldFrame& f, fault::Clock::time_point now);
    void observe_drop(fault::Direction way, std::span<const std::uint8_t> frame, const fault::Decision& d) const;
    void lend(std::vector<std::uint8_t> bytes, RxFrame& out);
    // Whether the slow path is needed: rules, or frames of ours in flight.
    void update_engaged();

    Port& inner_;
    fault::Injector injector_;
    bool engaged_ = false;
    std::deque<HeldFrame> held_rx_;
    std::deque<HeldFrame> held_tx_;
    std::deque<std::vector<std::uint8_t>> ready_rx_;  // copies to deliver at the next receive()
    std::vector<std::unique_ptr<LentFrame>> lent_;
    std::vector<RxFrame> inner_release_;  // scratch of release_faulty / receive_faulty
    DropObserver drop_observer_;
};

}  // namespace uroce::net
