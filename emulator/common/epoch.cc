#include "epoch.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <thread>

namespace uroce {

namespace {

std::atomic<std::uint64_t> next_domain_id{1};

// Domains alive now, so a thread that exits after a domain was destroyed does
// not touch the domain's freed slots.
std::mutex live_domains_mutex;
std::set<std::uint64_t>& live_domains() {
    static std::set<std::uint64_t> ids;
    return ids;
}

bool domain_alive(std::uint64_t id) {
    std::lock_guard lock(live_domains_mutex);
    return live_domains().contains(id);
}

}  // namespace

// What one thread holds in one domain: the slot and the guard nesting depth.
struct EpochDomain::Held {
    std::uint64_t domain_id = 0;  // 0: entry unused
    ReaderSlot* slot = nullptr;
    unsigned depth = 0;
};

namespace {

// A thread rarely uses more than one or two domains; a small array scanned
// linearly keeps entering a guard to a few instructions.
constexpr std::size_t kDomainsPerThread = 16;

struct HeldTable {
    std::array<EpochDomain::Held, kDomainsPerThread> entries{};

    // At thread exit, give back the slots this thread holds in live domains.
    ~HeldTable() {
        std::lock_guard lock(live_domains_mutex);
        for (auto& h : entries) {
            if (h.domain_id != 0 && live_domains().contains(h.domain_id)) {
                h.slot->epoch.store(0, std::memory_order_release);
                h.slot->owned.store(false, std::memory_order_release);
            }
        }
    }
};

thread_local HeldTable held_table;

}  // namespace

EpochDomain::EpochDomain() : domain_id_(next_domain_id.fetch_add(1)) {
    std::lock_guard lock(live_domains_mutex);
    live_domains().insert(domain_id_);
}

EpochDomain::~EpochDomain() {
    {
        std::lock_guard lock(live_domains_mutex);
        live_domains().erase(domain_id_);
    }
    for (auto& r : retired_) {
        r.deleter();
    }
}

EpochDomain::Held& EpochDomain::held_by_this_thread() {
    for (auto& h : held_table.entries) {
        if (h.domain_id == domain_id_) {
            return h;
        }
    }
    // First guard of this thread in this domain: take a free entry (reusing
    // one left by a destroyed domain if need be) and a free reader slot.
    Held* entry = nullptr;
    for (auto& h : held_table.entries) {
        if (h.domain_id == 0 || (h.depth == 0 && !domain_alive(h.domain_id))) {
            entry = &h;
            break;
        }
    }
    if (entry == nullptr) {
        throw std::runtime_error("EpochDomain: a thread uses too many domains at once");
    }
    for (std::size_t i = 0; i < readers_.size(); ++i) {
        ReaderSlot& s = readers_[i];
        bool expected = false;
        if (s.owned.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
            // Grow the range the reclaimer scans before this slot can hold an
            // epoch (the guard's seq_cst epoch store comes after this).
            std::size_t used = readers_used_.load(std::memory_order_seq_cst);
            while (used < i + 1 && !readers_used_.compare_exchange_weak(used, i + 1, std::memory_order_seq_cst)) {
            }
            *entry = Held{domain_id_, &s, 0};
            return *entry;
        }
    }
    throw std::runtime_error("EpochDomain: more than kMaxReaders threads hold guards");
}

EpochGuard::EpochGuard(EpochDomain& domain) {
    EpochDomain::Held& held = domain.held_by_this_thread();
    slot_ = held.slot;
    depth_ = &held.depth;
    if ((*depth_)++ == 0) {
        // Publish the epoch read before touching any shared object: the
        // seq_cst store is not reordered with the seq_cst loads of the
        // reclaimer, which is what the grace-period argument needs.
        slot_->epoch.store(domain.global_epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
    }
}

EpochGuard::~EpochGuard() {
    if (--(*depth_) == 0) {
        slot_->epoch.store(0, std::memory_order_release);
    }
}

void EpochDomain::retire(std::function<void()> deleter) {
    // The object is already unlinked. Readers that enter after this increment
    // cannot find it; readers that entered in an epoch <= e may still hold it.
    const std::uint64_t e = global_epoch_.fetch_add(1, std::memory_order_seq_cst);
    std::lock_guard lock(retired_mutex_);
    retired_.push_back({e, std::move(deleter)});
}

std::uint64_t EpochDomain::oldest_active_epoch() const {
    // Only slots ever taken can hold an epoch: a grace period costs the
    // threads that read, not kMaxReaders cache lines. A reader taking a new
    // slot after this load enters after the caller's epoch increment, so it
    // cannot hold what the caller is waiting to free.
    std::uint64_t oldest = UINT64_MAX;
    const std::size_t used = readers_used_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < used; ++i) {
        const std::uint64_t e = readers_[i].epoch.load(std::memory_order_seq_cst);
        if (e != 0 && e < oldest) {
            oldest = e;
        }
    }
    return oldest;
}

std::size_t EpochDomain::reclaim() {
    // Objects retired from here on carry an epoch >= the global epoch read
    // now, and must survive this pass whatever the scan finds: a reader may
    // enter after the scan and still find them before they are unlinked. (With
    // the scan alone, finding no reader meant "free everything", including
    // objects another thread retired between the scan and the partition.)
    const std::uint64_t now = global_epoch_.load(std::memory_order_seq_cst);
    const std::uint64_t oldest = std::min(now, oldest_active_epoch());
    std::vector<Retired> ready;
    {
        std::lock_guard lock(retired_mutex_);
        auto keep = std::stable_partition(retired_.begin(), retired_.end(),
                                          [oldest](const Retired& r) { return r.epoch >= oldest; });
        std::move(keep, retired_.end(), std::back_inserter(ready));
        retired_.erase(keep, retired_.end());
    }
    for (auto& r : ready) {
        r.deleter();
    }
    return ready.size();
}

void EpochDomain::synchronize() {
    const std::uint64_t target = global_epoch_.fetch_add(1, std::memory_order_seq_cst);
    // Every reader that entered at or before `target` must leave.
    while (oldest_active_epoch() <= target) {
        std::this_thread::yield();
    }
    reclaim();
}

std::size_t EpochDomain::pending() const {
    std::lock_guard lock(retired_mutex_);
    return retired_.size();
}

}  // namespace uroce
