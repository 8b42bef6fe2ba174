#include "relaxed_pool.h"

#include <time.h>

#include <cstring>

#include "access_flags.h"
#include "keys.h"

namespace uroce::mr {

namespace {

// Slots live in memory the client writes at any time: every field is read
// through an atomic_ref so concurrent client writes are not data races.
template <typename T>
T load(const T& field, std::memory_order order = std::memory_order_relaxed) {
    return std::atomic_ref<T>(const_cast<T&>(field)).load(order);
}

template <typename T>
void store(T& field, T value, std::memory_order order = std::memory_order_relaxed) {
    std::atomic_ref<T>(field).store(value, order);
}

std::uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// Access a relaxed MR may grant: the ordinary rights only.
constexpr std::uint32_t kRelaxedAccess = Access::kLocalWrite | Access::kRemoteMask | Access::kRelaxedOrdering;

}  // namespace

RelaxedPool::RelaxedPool(EpochDomain& epoch, std::uint32_t pd, std::uint32_t owner, std::uint32_t base_index,
                         const RelaxedPoolConfig& config, uroce_relaxed_pool_header* shared,
                         std::uint64_t max_mr_size)
    : epoch_(epoch),
      pd_(pd),
      owner_(owner),
      base_index_(base_index),
      config_(config),
      max_mr_size_(max_mr_size),
      shared_(shared),
      key_bytes_(new std::atomic<std::uint8_t>[config.capacity]) {
    std::memset(static_cast<void*>(shared_), 0, relaxed_pool_bytes(config.capacity));
    shared_->version = UROCE_RELAXED_ABI_VERSION;
    shared_->capacity = config.capacity;
    shared_->page_size = config.page_size;
    shared_->base_index = base_index;
    for (std::uint32_t i = 0; i < config.capacity; ++i) {
        key_bytes_[i].store(0, std::memory_order_relaxed);
        store(relaxed_slots(shared_)[i].key, key_of(i));
    }
}

std::uint32_t RelaxedPool::key_of(std::uint32_t slot) const {
    return make_key(base_index_ + slot, key_bytes_[slot].load(std::memory_order_relaxed));
}

RelaxedPool::SlotView RelaxedPool::read_slot(std::uint32_t slot, std::uint8_t key_byte) const {
    SlotView v;
    // seq_cst, like the key table's descriptor loads: a reader that saw the
    // old key byte is then seen by the sweep's grace period.
    if (slot >= config_.capacity || key_bytes_[slot].load(std::memory_order_seq_cst) != key_byte) {
        return v;
    }
    const uroce_relaxed_slot& s = relaxed_slots(shared_)[slot];
    // A seqlock read: the client bumps the generation whenever it takes a
    // slot to rewrite it, so equal generations around the reads mean the
    // fields belong to the registration the state describes. The client
    // stores the fields with release after bumping the generation, and these
    // loads acquire, so a field from a newer registration makes the second
    // generation load see the bump. No fences: ThreadSanitizer does not
    // model them, and on x86 acquire loads and release stores are plain moves.
    constexpr auto acq = std::memory_order_acquire;
    const std::uint32_t before = load(s.ctrl, acq);
    const std::uint32_t state = UROCE_RELAXED_STATE(before);
    if (state != UROCE_RELAXED_REGISTERED && state != UROCE_RELAXED_DEREGISTERED) {
        return v;
    }
    v.access = load(s.access, acq);
    v.addr = load(s.addr, acq);
    v.length = load(s.length, acq);
    v.user_addr = load(s.user_addr, acq);
    v.user_length = load(s.user_length, acq);
    v.registered_ns = load(s.registered_ns, acq);
    v.deregistered_ns = load(s.deregistered_ns, acq);
    const std::uint32_t after = load(s.ctrl, acq);
    if (UROCE_RELAXED_GEN(after) != UROCE_RELAXED_GEN(before)) {
        return v;  // rewritten while we read: the old registration is gone
    }
    const std::uint64_t page_mask = config_.page_size - 1;
    const bool sane = (v.addr & page_mask) == 0 && (v.length & page_mask) == 0 && v.length != 0 &&
                      v.length <= max_mr_size_ && v.addr + v.length > v.addr &&
                      (v.access & ~kRelaxedAccess) == 0 && check_mr_access(v.access).error == 0;
    if (!sane) {
        v.corrupt = true;
        return v;
    }
    v.valid = true;
    // A slot deregistered after `before` was read is still registered as far
    // as this access goes; only the state seen before the reads counts.
    v.deregistered = state == UROCE_RELAXED_DEREGISTERED || UROCE_RELAXED_STATE(after) == UROCE_RELAXED_DEREGISTERED;
    return v;
}

void RelaxedPool::note_corrupt_slot() const { corrupt_slots_.fetch_add(1, std::memory_order_relaxed); }

RelaxedPool::SlotView RelaxedPool::peek_slot(std::uint32_t slot) const {
    SlotView v;
    if (slot >= config_.capacity) {
        return v;
    }
    const uroce_relaxed_slot& s = relaxed_slots(shared_)[slot];
    constexpr auto acq = std::memory_order_acquire;
    v.access = load(s.access, acq);
    v.addr = load(s.addr, acq);
    v.length = load(s.length, acq);
    v.user_addr = load(s.user_addr, acq);
    v.user_length = load(s.user_length, acq);
    v.registered_ns = load(s.registered_ns, acq);
    v.deregistered_ns = load(s.deregistered_ns, acq);
    return v;
}

StaleAccessReport RelaxedPool::report_stale(const SlotView& v, std::uint32_t slot, RemoteOp op, std::uint32_t qpn,
                                            const Peer& peer, std::uint64_t va, std::uint64_t length) const {
    stale_accesses_.fetch_add(1, std::memory_order_relaxed);
    StaleAccessReport r;
    r.pd = pd_;
    r.key = make_key(base_index_ + slot, key_bytes_[slot].load(std::memory_order_relaxed));
    r.user_addr = v.user_addr;
    r.user_length = v.user_length;
    r.granted_addr = v.addr;
    r.granted_length = v.length;
    r.access_flags = v.access;
    r.registered_ns = v.registered_ns;
    r.deregistered_ns = v.deregistered_ns;
    r.op = op;
    r.qpn = qpn;
    r.peer = peer;
    r.va = va;
    r.length = length;
    r.seen_ns = monotonic_ns();
    r.owner = owner_;
    std::lock_guard lock(stats_mutex_);
    reports_.push_back(r);
    while (reports_.size() > config_.max_reports) {
        reports_.pop_front();
    }
    return r;
}

std::size_t RelaxedPool::sweep(std::uint32_t enough) {
    // Take every deregistered slot away from the client and give it a new key
    // byte; after one grace period no reader can still be using the old one.
    // The scan resumes where the previous one stopped and ends once `enough`
    // slots are taken (the client's dirty count, at the watermark), so a
    // watermark sweep costs what was deregistered rather than the capacity:
    // a slot is a cache line, and a 64k-slot pool swept every 64
    // deregistrations otherwise reads 1000 lines per deregistration. A count
    // that lies only delays slots to a later sweep; the cursor goes round.
    std::vector<std::uint32_t>& batch = batch_;
    batch.clear();
    const std::uint32_t n = config_.capacity;
    std::uint32_t slot = cursor_;
    for (std::uint32_t k = 0; k < n && batch.size() < enough; ++k, slot = slot + 1 == n ? 0 : slot + 1) {
        std::uint32_t& ctrl = relaxed_slots(shared_)[slot].ctrl;
        std::uint32_t c = load(ctrl, std::memory_order_acquire);
        if (UROCE_RELAXED_STATE(c) != UROCE_RELAXED_DEREGISTERED) {
            continue;
        }
        // A plain store, not a compare-and-swap: no client transition starts
        // from DEREGISTERED, so only a client rewriting its own slot behind the
        // protocol's back could race here, and that only hurts its own slot.
        store(ctrl, UROCE_RELAXED_CTRL(UROCE_RELAXED_GEN(c), UROCE_RELAXED_INVALIDATING), std::memory_order_relaxed);
        // seq_cst, pairing with the data path's seq_cst load: a reader that
        // still saw the old byte is seen inside its guard by synchronize().
        key_bytes_[slot].store(static_cast<std::uint8_t>(key_bytes_[slot].load(std::memory_order_relaxed) + 1),
                               std::memory_order_seq_cst);
        batch.push_back(slot);
    }
    cursor_ = slot;
    if (batch.empty()) {
        return 0;
    }
    epoch_.synchronize();
    for (std::uint32_t i : batch) {
        uroce_relaxed_slot& s = relaxed_slots(shared_)[i];
        store(s.key, key_of(i));
        const std::uint32_t c = load(s.ctrl);
        store(s.ctrl, UROCE_RELAXED_CTRL(UROCE_RELAXED_GEN(c), UROCE_RELAXED_FREE), std::memory_order_release);
    }
    // The dirty count is the client's hint; take off what was invalidated
    // without going below zero whatever the client wrote.
    std::atomic_ref<std::uint32_t> dirty(shared_->dirty);
    std::uint32_t d = dirty.load(std::memory_order_relaxed);
    while (!dirty.compare_exchange_weak(d, d > batch.size() ? d - static_cast<std::uint32_t>(batch.size()) : 0)) {
    }
    std::lock_guard lock(stats_mutex_);
    invalidations_ += batch.size();
    ++batches_;
    return batch.size();
}

std::size_t RelaxedPool::poll(std::chrono::steady_clock::time_point now) {
    std::lock_guard lock(sweep_mutex_);
    const std::uint32_t dirty = load(shared_->dirty);
    if (dirty < config_.dirty_watermark && now - last_sweep_ < config_.invalidate_after) {
        return 0;
    }
    last_sweep_ = now;
    // At the watermark the client's count says how many to look for; on the
    // timer alone, look at every slot.
    return sweep(dirty >= config_.dirty_watermark ? dirty : UINT32_MAX);
}

std::size_t RelaxedPool::flush() {
    std::lock_guard lock(sweep_mutex_);
    const std::size_t n = sweep(UINT32_MAX);
    // Even with nothing pending here, a flush promises that invalidations done
    // by an earlier sweep are complete: wait out readers once more.
    epoch_.synchronize();
    std::lock_guard stats(stats_mutex_);
    ++flushes_;
    return n;
}

void RelaxedPool::add_stats(PdStats& into) const {
    into.stale_accesses += stale_accesses_.load(std::memory_order_relaxed);
    into.corrupt_slots += corrupt_slots_.load(std::memory_order_relaxed);
    into.eagain += load(shared_->eagain);
    std::lock_guard lock(stats_mutex_);
    into.invalidations += invalidations_;
    into.invalidation_batches += batches_;
    into.flushes += flushes_;
    into.recent_stale.insert(into.recent_stale.end(), reports_.begin(), reports_.end());
}

}  // namespace uroce::mr
