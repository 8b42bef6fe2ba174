// The provider's side of a CQ ring (abi/rings.h): ibv_poll_cq reads the CQEs
// the daemon wrote between consumer and producer and hands back the slots;
// ibv_req_notify_cq asks the daemon for one completion event.
//
// Only types of <infiniband/verbs.h> are used, no libibverbs function, so the
// unit tests compile this file on its own against an in-process ring.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "abi/rings.h"

namespace uroce::provider {

class CompletionRing {
public:
    // Takes the ring the daemon made at `ring` (`bytes` of mapping). 0, or
    // EPROTO when the header does not describe a usable ring.
    int attach(void* ring, std::size_t bytes);
    [[nodiscard]] bool attached() const { return header_ != nullptr; }
    [[nodiscard]] std::uint32_t entries() const { return entries_; }

    // ibv_poll_cq(3): up to `num_entries` completions, oldest first; returns
    // how many (0 when none), or -1 for a negative num_entries.
    int poll(int num_entries, ibv_wc* wc);
    // ibv_req_notify_cq(3): the next completion (solicited ones only, if
    // asked) written after this call produces one event on the CQ's channel.
    void request_notify(bool solicited_only);
    // A QP moved to RESET leaves nothing behind (ibv_modify_qp(3): RESET
    // clears its queues), so its completions not yet polled are removed, as
    // hardware providers clean their CQs (mlx5's __mlx5_cq_clean): the other
    // QPs' CQEs, in order, move up over them and the consumer index passes
    // the freed slots. Only slots below the producer index read here are
    // touched; the daemon writes only at and above it. Returns how many
    // were removed.
    std::uint32_t discard_qp(std::uint32_t qpn);

private:
    std::mutex mutex_;  // pollers on several threads take CQEs in turn
    uroce_cq_ring* header_ = nullptr;
    uroce_cqe* slots_ = nullptr;
    std::uint32_t entries_ = 0;
    std::uint32_t consumer_ = 0;  // CQEs taken
    std::atomic<std::uint32_t> notify_sequence_{0};
};

// One CQE as the ibv_wc it describes.
void cqe_to_wc(const uroce_cqe& cqe, ibv_wc& wc);

}  // namespace uroce::provider
