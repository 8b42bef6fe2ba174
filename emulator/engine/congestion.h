// Per-QP congestion window of an RC requester (docs/congestion.md): how many
// PSNs the QP may have unacknowledged. TCP-like AIMD (RFC 5681): slow start
// doubles the window every round trip up to the slow-start threshold, then
// congestion avoidance adds one packet per window acknowledged; a loss (a
// PSN-sequence NAK, a gap in READ responses) halves it once per window of
// data; a retransmit timeout drops it to one packet. The engine has no ECN
// marks or CNPs to react to, so loss is the only congestion signal.
#pragma once

#include <algorithm>
#include <cstdint>

#include "wire/psn.h"

namespace uroce::engine {

class CongestionWindow {
public:
    // Smallest window after a loss: two packets keep the ACK clock running
    // (RFC 5681's minimum ssthresh). After a timeout the window is one packet
    // (RFC 5681 3.1, the loss window).
    static constexpr std::uint32_t kMinAfterLoss = 2;
    static constexpr std::uint32_t kAfterTimeout = 1;

    CongestionWindow() = default;
    // `limit`: the most the window grows to (EngineConfig::send_window);
    // `initial`: where a new QP starts.
    CongestionWindow(std::uint32_t limit, std::uint32_t initial)
        : limit_(std::max<std::uint32_t>(limit, 1)), window_(std::clamp<std::uint32_t>(initial, 1, limit_)),
          threshold_(limit_) {}

    [[nodiscard]] std::uint32_t packets() const { return window_; }
    [[nodiscard]] std::uint32_t threshold() const { return threshold_; }

    // `acked` packets were newly acknowledged.
    void on_ack(std::uint32_t acked) {
        if (window_ < threshold_) {
            window_ = std::min(window_ + acked, threshold_);  // slow start
            return;
        }
        counted_ += acked;  // congestion avoidance: one packet per window acknowledged
        while (counted_ >= window_ && window_ < limit_) {
            counted_ -= window_;
            ++window_;
        }
        if (window_ == limit_) {
            counted_ = 0;
        }
    }

    // A packet at `lost` went missing; `next` is the PSN the QP sends next.
    // Losses of packets sent before the last decrease belong to the same
    // window and decrease nothing (RFC 6582's recovery point).
    void on_loss(wire::Psn lost, wire::Psn next) {
        if (reduced_ && lost < recover_) {
            return;
        }
        threshold_ = std::max(window_ / 2, kMinAfterLoss);
        window_ = std::min(threshold_, limit_);
        counted_ = 0;
        mark(next);
    }

    // The retransmit timer expired with `next` the PSN the QP sends next.
    void on_timeout(wire::Psn next) {
        threshold_ = std::max(window_ / 2, kMinAfterLoss);
        window_ = kAfterTimeout;
        counted_ = 0;
        mark(next);
    }

private:
    void mark(wire::Psn next) {
        recover_ = next;
        reduced_ = true;
    }

    std::uint32_t limit_ = 128;
    std::uint32_t window_ = 4;
    std::uint32_t threshold_ = 128;
    std::uint32_t counted_ = 0;  // packets acknowledged towards the next increase
    wire::Psn recover_{};
    bool reduced_ = false;
};

}  // namespace uroce::engine
