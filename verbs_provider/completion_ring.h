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

// When the daemon generated a completion (abi/rings.h uroce_cqe), in
// nanoseconds: CLOCK_MONOTONIC (the device clock of
// read_completion_ts) and CLOCK_REALTIME.
struct CompletionTime {
    std::uint64_t device_ns;
    std::uint64_t wallclock_ns;
};

class CompletionRing {
public:
    // Takes the ring the daemon made at `ring` (`bytes` of mapping). 0, or
    // EPROTO when the header does not describe a usable ring.
    int attach(void* ring, std::size_t bytes);
    [[nodiscard]] bool attached() const { return header_ != nullptr; }
    [[nodiscard]] std::uint32_t entries() const { return entries_; }

    // ibv_poll_cq(3): up to `num_entries` completions, oldest first; returns
    // how many (0 when none), or -1 for a negative num_entries. With
    // `times`, also when each was generated (num_entries of them).
    int poll(int num_entries, ibv_wc* wc, CompletionTime* times = nullptr);
    // ibv_resize_cq(3): with polling held off, `swap(ring, bytes)` has the
    // daemon move the unpolled completions into a new ring and maps it (0 or
    // an errno); the CQ then continues there. The caller unmaps the old one.
    template <typename Swap>
    int resize(Swap&& swap) {
        std::lock_guard lock(mutex_);
        void* ring = nullptr;
        std::size_t bytes = 0;
        if (const int err = swap(ring, bytes); err != 0) {
            return err;
        }
        return attach(ring, bytes);
    }
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
