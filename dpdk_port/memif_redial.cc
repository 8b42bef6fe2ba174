#include "memif_redial.h"

#include <algorithm>

namespace uroce::port {

MemifRedial::MemifRedial(Clock::time_point now) : next_dial_(now + kFirstDelay) {}

RedialAction MemifRedial::check(bool link_up, Clock::time_point now) {
    if (link_up) {
        const bool was_down = state_ == RedialState::Waiting && dials_ > 0;
        state_ = RedialState::Connected;
        delay_ = kFirstDelay;
        dials_ = 0;
        return was_down ? RedialAction::Reconnected : RedialAction::None;
    }
    if (state_ == RedialState::Connected) {
        // The server went away (or closed the connection): give it the
        // first delay to come back before dialling.
        state_ = RedialState::Waiting;
        next_dial_ = now + kFirstDelay;
        return RedialAction::None;
    }
    if (now < next_dial_) {
        return RedialAction::None;
    }
    dials_ += 1;
    delay_ = std::min<std::chrono::milliseconds>(delay_ * 2, kMaxDelay);
    next_dial_ = now + delay_;
    return RedialAction::Dial;
}

}  // namespace uroce::port
