// Completions: CQEs into a CQ's shared ring (abi/rings.h) and completion
// events on its channel. An event goes out for the first CQE written after
// ibv_req_notify_cq armed the CQ; with solicited_only, only for a solicited
// receive or an error completion (ibv_req_notify_cq(3)).
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"

namespace uroce::engine {

namespace {

std::uint64_t clock_ns(clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

void Engine::complete(std::uint32_t cq_handle, const uroce_cqe& completion, bool solicited) {
    auto it = cqs_.find(cq_handle);
    if (it == cqs_.end()) {
        return;
    }
    CompletionQueue& cq = it->second;
    // The completion's time, as ibv_cq_ex reports it (abi/rings.h): taken
    // when the CQE is generated, on both clocks (two vDSO reads, 60 to 120
    // ns together: only for CQs that asked, UROCE_CQ_TIMESTAMPS).
    uroce_cqe cqe = completion;
    if (cqe.status != 0 && failure_observer_) {
        note_error_completion(cqe, completing_send_);
    }
    if (cq.stamp == CompletionStamp::Times) {
        cqe.timestamp_ns = clock_ns(CLOCK_MONOTONIC);
        cqe.wallclock_ns = clock_ns(CLOCK_REALTIME);
    }
    if (!cq.ring.push(cqe)) {
        // Overrun: the CQE is lost, never written over an unread one. The
        // consumer learns through IBV_EVENT_CQ_ERR, once.
        ++counters_.cq_overruns;
        if (!cq.overrun_reported) {
            cq.overrun_reported = true;
            if (async_event_) {
                async_event_(cq.owner, cq.cookie, AsyncEvent::CqErr);
            }
        }
        return;
    }
    const std::uint32_t request = cq.ring.notify_request();
    const std::uint32_t sequence = request >> 1;
    if (sequence == cq.notify_seen || cq.channel_fd < 0) {
        return;
    }
    const bool solicited_only = (request & 1u) != 0;
    if (solicited_only && !solicited && cqe.status == 0) {
        return;
    }
    cq.notify_seen = sequence;
    // ibv_get_cq_event(3) reads the 8-byte CQ handle (our cookie) from the fd.
    // RWF_NOWAIT: never blocks, even if the client cleared O_NONBLOCK on the
    // pipe's open file description, which it shares (a full pipe loses the
    // event, as the client asked for by not reading).
    std::uint64_t cookie = cq.cookie;
    iovec iov{&cookie, sizeof cookie};
    [[maybe_unused]] const ssize_t w = ::pwritev2(cq.channel_fd, &iov, 1, -1, RWF_NOWAIT);
}

void Engine::complete_send(QueuePair& qp, const SendWqe& w) {
    uroce_cqe cqe{};
    cqe.wr_id = w.wr_id;
    cqe.status = static_cast<std::uint32_t>(w.status);
    cqe.opcode = static_cast<std::uint32_t>(wc_opcode_of(w.opcode));
    cqe.byte_len = static_cast<std::uint32_t>(w.length);
    cqe.qp_num = qp.qpn;
    completing_send_ = &w;
    complete(qp.send_cq, cqe, false);
    completing_send_ = nullptr;
}

}  // namespace uroce::engine
