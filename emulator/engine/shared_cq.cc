#include "engine/shared_cq.h"

namespace uroce::engine {

CqPush SharedCq::push(const uroce_cqe& cqe, bool solicited) {
    const std::lock_guard lock(mutex_);
    if (!ring_.push(cqe)) {
        if (overrun_reported_) {
            return CqPush::Lost;
        }
        overrun_reported_ = true;
        return CqPush::LostFirst;
    }
    // As Engine::complete (completions.cc): an event for the first CQE after
    // an arming; with solicited_only, only for a solicited or error one.
    const std::uint32_t request = ring_.notify_request();
    const std::uint32_t sequence = request >> 1;
    if (sequence == notify_seen_ || channel_ == CqChannel::None) {
        return CqPush::Written;
    }
    const bool solicited_only = (request & 1u) != 0;
    if (solicited_only && !solicited && cqe.status == 0) {
        return CqPush::Written;
    }
    notify_seen_ = sequence;
    return CqPush::WrittenEvent;
}

}  // namespace uroce::engine
