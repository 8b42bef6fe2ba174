// A completion queue that QPs on several engine threads complete into
// (uroced --cores N, docs/architecture.md "More than one core"): perftest
// -q 8 puts eight QPs on one send CQ and one receive CQ, and with the QPs
// spread over threads, each thread is a producer of the same ring.
//
// The consumer protocol of abi/rings.h is unchanged: one producer index
// that only moves forward over slots already written. One mutex covers what
// a producer does with the ring: the full check, the slot copy, the
// producer store, and the notify-request check with the sequence it
// answers (so two threads never both send the event for one arming). The
// completion event itself (a write to the channel) is left to the caller,
// outside the lock. Completions are one per message, not per packet, and a
// CQ whose QPs all live on one thread never contends.
#pragma once

#include <cstdint>
#include <mutex>

#include "abi/rings.h"
#include "engine/rings.h"

namespace uroce::engine {

// Whether the CQ has a completion channel (ibv_create_cq's channel).
enum class CqChannel : std::uint8_t { None, Present };

// What became of one CQE pushed to a SharedCq.
enum class CqPush : std::uint8_t {
    Written,       // in the ring; no completion event due
    WrittenEvent,  // in the ring, and the consumer armed the CQ for it: send the event
    Lost,          // the ring was full: the CQE is lost (never written over an unread one)
    LostFirst,     // the same, the first time: deliver IBV_EVENT_CQ_ERR
};

class SharedCq {
public:
    SharedCq(CqRing ring, CqChannel channel) : ring_(ring), channel_(channel) {}
    SharedCq(const SharedCq&) = delete;
    SharedCq& operator=(const SharedCq&) = delete;

    // From any engine thread. `solicited`: a receive completion of a
    // message with the solicited event bit (ibv_req_notify_cq(3)).
    CqPush push(const uroce_cqe& cqe, bool solicited);

private:
    std::mutex mutex_;
    CqRing ring_;                   // its producer count is the one count, under mutex_
    const CqChannel channel_;
    std::uint32_t notify_seen_ = 0;  // last notify_request sequence answered
    bool overrun_reported_ = false;
};

}  // namespace uroce::engine
