// When a net_memif client port dials its server again. DPDK 22.11's memif
// client connects once, in rte_eth_dev_start() (drivers/net/memif
// memif_connect_client: connect(2) on the server's socket, and a start
// that fails when nobody listens there), and never again: not when the
// server's socket appears later (daemons started in the wrong order), not
// after the server went away. The port restarts it (stop, start) while its
// link stays down, with a bounded backoff (docs/wires.md). Pure: the port
// tells it the link state and the time, it answers what to do.
#pragma once

#include <chrono>

namespace uroce::port {

enum class RedialState {
    Connected,  // the link is up
    Waiting,    // down: dialling again when the delay has passed
};

enum class RedialAction {
    None,         // nothing to do now
    Dial,         // restart the port (rte_eth_dev_stop, rte_eth_dev_start)
    Reconnected,  // the link came up after being down: worth a log line
};

class MemifRedial {
public:
    using Clock = std::chrono::steady_clock;
    // The first delay covers a handshake (a few control messages over the
    // socket, answered by the peer's interrupt thread, milliseconds) so a
    // dial is not cut short by the next one; it doubles up to kMaxDelay, so
    // a server that never comes costs one restart a few seconds.
    static constexpr std::chrono::milliseconds kFirstDelay{50};
    static constexpr std::chrono::milliseconds kMaxDelay{2000};

    // `now`: when the port was started (a dial in progress, or failed).
    explicit MemifRedial(Clock::time_point now);

    // What to do, given the link's state at `now`. After Dial, the next
    // Dial comes no sooner than the (doubled) delay.
    [[nodiscard]] RedialAction check(bool link_up, Clock::time_point now);

    [[nodiscard]] RedialState state() const { return state_; }
    // Dials since the link was last up.
    [[nodiscard]] unsigned dials() const { return dials_; }
    [[nodiscard]] std::chrono::milliseconds delay() const { return delay_; }

private:
    RedialState state_ = RedialState::Waiting;
    Clock::time_point next_dial_;
    std::chrono::milliseconds delay_ = kFirstDelay;
    unsigned dials_ = 0;
};

}  // namespace uroce::port
