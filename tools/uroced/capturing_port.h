// A net::Port that records what the data path sends into a CaptureTap
// (capture_tap.h) and otherwise passes everything to the port it wraps.
// Received frames are recorded by the data path itself, which knows whether
// a receive check dropped them (Datapath::capture_received).
//
// Where a fault-injecting port decorator is added, it goes between the data
// path and this port, so what this port records is what reached the wire,
// and the fault port's drop observer reports what it dropped through
// CaptureTap::record_dropped.
#pragma once

#include "capture_tap.h"
#include "net/port.h"

namespace uroce::daemon {

class CapturingPort final : public net::Port {
public:
    CapturingPort(net::Port& inner, CaptureTap& tap) : inner_(inner), tap_(tap) {}

    [[nodiscard]] std::size_t receive(std::span<net::RxFrame> frames) override { return inner_.receive(frames); }
    void release(std::span<net::RxFrame> frames) override { inner_.release(frames); }
    bool send(std::span<const std::uint8_t> frame) override {
        const bool taken = inner_.send(frame);
        if (tap_.active() && taken) [[unlikely]] {
            tap_.record(CaptureDirection::Sent, frame);
        }
        return taken;
    }
    void flush() override { inner_.flush(); }
    [[nodiscard]] std::span<std::uint8_t> tx_room() override { return inner_.tx_room(); }
    // A capture records every ICRC: not while one runs.
    [[nodiscard]] bool icrc_unread() const override { return !tap_.active() && inner_.icrc_unread(); }
    void seal_icrcs() override { inner_.seal_icrcs(); }

    [[nodiscard]] wire::MacAddr mac() const override { return inner_.mac(); }
    [[nodiscard]] std::size_t max_frame() const override { return inner_.max_frame(); }
    [[nodiscard]] bool has_wire() const override { return inner_.has_wire(); }
    [[nodiscard]] int rx_wait_fd() const override { return inner_.rx_wait_fd(); }
    [[nodiscard]] bool tx_pending() const override { return inner_.tx_pending(); }
    [[nodiscard]] net::PortCounters counters() const override { return inner_.counters(); }

private:
    net::Port& inner_;
    CaptureTap& tap_;
};

}  // namespace uroce::daemon
