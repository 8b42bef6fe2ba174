// Relaxed (FMR-style) memory regions, the daemon's side: a pre-allocated pool
// of keys per PD whose slots the owning client fills in shared memory
// (abi/relaxed_mr.h, client side in relaxed_client.h).
//
// Semantics (the Solaris ibv_reg_mr_relaxed(3) page and Linux's former FMR
// pools; see docs/memory-registration.md):
// - access is granted to whole pages: the registered area is rounded out to
//   the first and last page boundaries;
// - deregistration only marks the slot; the slot stays usable by anyone
//   holding its key until it is invalidated, in a batch, once `dirty_watermark`
//   slots are pending, once `invalidate_after` has passed, or at flush();
// - invalidation gives the slot a new key byte (daemon-private), so an old
//   rkey never matches a later registration;
// - every access through a deregistered, not yet invalidated slot is counted
//   and reported with the registration's history.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "abi/relaxed_mr.h"
#include "access_report.h"
#include "common/epoch.h"

namespace uroce::mr {

struct RelaxedPoolConfig {
    std::uint32_t capacity = 1024;
    std::uint32_t dirty_watermark = 64;
    std::chrono::nanoseconds invalidate_after = std::chrono::milliseconds(10);
    std::uint32_t page_size = 4096;
    std::size_t max_reports = 64;  // stale-access reports kept per pool
};

// The slots follow the header.
[[nodiscard]] inline uroce_relaxed_slot* relaxed_slots(uroce_relaxed_pool_header* h) {
    return reinterpret_cast<uroce_relaxed_slot*>(h + 1);
}

// Bytes of shared memory a pool of `capacity` slots needs.
[[nodiscard]] constexpr std::size_t relaxed_pool_bytes(std::uint32_t capacity) {
    return sizeof(uroce_relaxed_pool_header) + std::size_t{capacity} * sizeof(uroce_relaxed_slot);
}

class RelaxedPool {
public:
    // A consistent snapshot of one slot, as the data path reads it.
    struct SlotView {
        bool valid = false;         // registered or pending invalidation, key byte matches, fields sane
        bool deregistered = false;  // pending invalidation: a stale access
        bool corrupt = false;       // state says usable but the fields fail validation
        std::uint32_t access = 0;
        std::uint64_t addr = 0;
        std::uint64_t length = 0;
        std::uint64_t user_addr = 0;
        std::uint64_t user_length = 0;
        std::uint64_t registered_ns = 0;
        std::uint64_t deregistered_ns = 0;
    };

    RelaxedPool(EpochDomain& epoch, std::uint32_t pd, std::uint32_t owner, std::uint32_t base_index,
                const RelaxedPoolConfig& config, uroce_relaxed_pool_header* shared, std::uint64_t max_mr_size);

    [[nodiscard]] std::uint32_t pd() const { return pd_; }
    [[nodiscard]] std::uint32_t owner() const { return owner_; }
    [[nodiscard]] std::uint32_t base_index() const { return base_index_; }
    [[nodiscard]] std::uint32_t capacity() const { return config_.capacity; }
    [[nodiscard]] const RelaxedPoolConfig& config() const { return config_; }
    // The key byte slot `slot` answers to now (daemon-private).
    [[nodiscard]] std::uint8_t slot_key_byte(std::uint32_t slot) const {
        return key_bytes_[slot].load(std::memory_order_relaxed);
    }

    // Data path, inside an EpochGuard: the slot as it is now, if `key_byte`
    // is its current key byte.
    [[nodiscard]] SlotView read_slot(std::uint32_t slot, std::uint8_t key_byte) const;
    void note_corrupt_slot() const;
    // Records the stale access (counted, kept in the pool's recent reports)
    // and returns the report.
    StaleAccessReport report_stale(const SlotView& v, std::uint32_t slot, RemoteOp op, std::uint32_t qpn,
                                   const Peer& peer, std::uint64_t va, std::uint64_t length) const;
    // What slot `slot` holds now whatever its state or key byte, read
    // without the seqlock (a failure report's best guess at the MR that was
    // there). Inside an EpochGuard.
    [[nodiscard]] SlotView peek_slot(std::uint32_t slot) const;

    // Daemon tick: invalidates the pending slots when the dirty count reaches
    // the watermark or `invalidate_after` has passed since the last sweep.
    // Returns how many slots were invalidated. Not inside an EpochGuard.
    std::size_t poll(std::chrono::steady_clock::time_point now);
    // ibv_flush_relaxed_mr: invalidates every pending slot and returns once
    // no reader can still use them. Not inside an EpochGuard.
    std::size_t flush();

    void add_stats(PdStats& into) const;

private:
    std::size_t sweep(std::uint32_t enough);
    [[nodiscard]] std::uint32_t key_of(std::uint32_t slot) const;

    EpochDomain& epoch_;
    const std::uint32_t pd_;
    const std::uint32_t owner_;
    const std::uint32_t base_index_;
    const RelaxedPoolConfig config_;
    const std::uint64_t max_mr_size_;
    uroce_relaxed_pool_header* const shared_;
    std::unique_ptr<std::atomic<std::uint8_t>[]> key_bytes_;  // the truth about keys: never shared

    std::mutex sweep_mutex_;
    std::chrono::steady_clock::time_point last_sweep_{};
    std::uint32_t cursor_ = 0;          // where the next sweep starts (sweep_mutex_)
    std::vector<std::uint32_t> batch_;  // reused by sweep() (sweep_mutex_)

    mutable std::mutex stats_mutex_;
    mutable std::atomic<std::uint64_t> stale_accesses_{0};
    mutable std::atomic<std::uint64_t> corrupt_slots_{0};
    std::uint64_t invalidations_ = 0;
    std::uint64_t batches_ = 0;
    std::uint64_t flushes_ = 0;
    mutable std::deque<StaleAccessReport> reports_;
};

}  // namespace uroce::mr
