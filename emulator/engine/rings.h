// Daemon-side views of the shared rings of abi/rings.h. The memory belongs to
// a client, which may write anything into it at any time: every index read
// from it is masked into the ring, every WQE is copied out before it is
// looked at (fetch_send_wqe / fetch_recv_wqe in wqe.h), and nothing read from it is trusted for bounds.
#pragma once

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "abi/rings.h"

namespace uroce::engine {

template <typename T>
std::atomic_ref<T> shared_field(T& field) {
    return std::atomic_ref<T>(field);
}

// A work queue (SQ, RQ, SRQ): the daemon consumes.
class WorkRing {
public:
    WorkRing() = default;
    // `header` is followed by entries * stride bytes of slots; entries is a
    // power of two (the daemon made the ring, so these are trusted).
    WorkRing(uroce_wq_ring* header, std::uint32_t entries, std::uint32_t stride, std::uint32_t max_sge,
             std::uint32_t max_inline)
        : header_(header), slots_(reinterpret_cast<std::uint8_t*>(header + 1)), entries_(entries), stride_(stride),
          max_sge_(max_sge), max_inline_(max_inline) {}

    [[nodiscard]] bool valid() const { return header_ != nullptr; }
    [[nodiscard]] std::uint32_t entries() const { return entries_; }
    [[nodiscard]] std::uint32_t stride() const { return stride_; }
    [[nodiscard]] std::uint32_t max_sge() const { return max_sge_; }
    [[nodiscard]] std::uint32_t max_inline() const { return max_inline_; }

    // seq_cst, not just acquire: after arm_doorbell() this load must not be
    // ordered before the arming store (the doorbell protocol of abi/rings.h).
    // On x86 both are a plain load.
    [[nodiscard]] std::uint32_t producer() const {
        return shared_field(header_->producer).load(std::memory_order_seq_cst);
    }
    void publish_consumer(std::uint32_t consumed) {
        shared_field(header_->consumer).store(consumed, std::memory_order_release);
    }
    // Copies slot `index` (a free-running counter) into `out` (stride bytes).
    void copy_slot(std::uint32_t index, std::uint8_t* out) const {
        std::memcpy(out, slots_ + static_cast<std::size_t>(index & (entries_ - 1)) * stride_, stride_);
    }
    void arm_doorbell() { shared_field(header_->doorbell_armed).store(1, std::memory_order_seq_cst); }
    void mark_error() { shared_field(header_->error).store(1, std::memory_order_relaxed); }
    void clear_error() { shared_field(header_->error).store(0, std::memory_order_relaxed); }

private:
    uroce_wq_ring* header_ = nullptr;
    std::uint8_t* slots_ = nullptr;
    std::uint32_t entries_ = 0;
    std::uint32_t stride_ = 0;
    std::uint32_t max_sge_ = 0;
    std::uint32_t max_inline_ = 0;
};

// A completion queue: the daemon produces.
class CqRing {
public:
    CqRing() = default;
    CqRing(uroce_cq_ring* header, std::uint32_t entries)
        : header_(header), slots_(reinterpret_cast<uroce_cqe*>(header + 1)), entries_(entries) {}

    [[nodiscard]] bool valid() const { return header_ != nullptr; }
    [[nodiscard]] std::uint32_t entries() const { return entries_; }

    // False when the ring is full (the consumer has not caught up): overrun.
    bool push(const uroce_cqe& cqe) {
        const std::uint32_t consumer = shared_field(header_->consumer).load(std::memory_order_acquire);
        if (produced_ - consumer >= entries_) {
            shared_field(header_->overrun).store(1, std::memory_order_relaxed);
            return false;
        }
        std::memcpy(&slots_[produced_ & (entries_ - 1)], &cqe, sizeof cqe);
        ++produced_;
        // seq_cst: the notify_request load that follows must not be ordered
        // before this store (x86 reorders a store with a later load), or a
        // CQE and an arming that cross would both go unseen: the provider
        // polls after arming, the daemon reads the arming after producing.
        shared_field(header_->producer).store(produced_, std::memory_order_seq_cst);
        return true;
    }
    [[nodiscard]] std::uint32_t notify_request() const {
        return shared_field(header_->notify_request).load(std::memory_order_seq_cst);
    }
    // ibv_resize_cq: writes the CQEs the consumer has not taken into `next`,
    // oldest first, and hands over a pending notify request. False (nothing
    // written) when they do not fit.
    bool move_unread_to(CqRing& next) const {
        const std::uint32_t consumer = shared_field(header_->consumer).load(std::memory_order_acquire);
        // A consumer further back than a ring's worth is a broken client's.
        const std::uint32_t unread = std::min(produced_ - consumer, entries_);
        if (unread > next.entries_) {
            return false;
        }
        for (std::uint32_t i = produced_ - unread; i != produced_; ++i) {
            uroce_cqe cqe;
            std::memcpy(&cqe, &slots_[i & (entries_ - 1)], sizeof cqe);
            next.push(cqe);
        }
        shared_field(next.header_->notify_request).store(notify_request(), std::memory_order_seq_cst);
        return true;
    }

private:
    uroce_cq_ring* header_ = nullptr;
    uroce_cqe* slots_ = nullptr;
    std::uint32_t entries_ = 0;
    std::uint32_t produced_ = 0;  // the daemon's own count; never read back from shared memory
};

}  // namespace uroce::engine
