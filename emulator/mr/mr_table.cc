// The control path of the key table: registration, rereg, deregistration,
// memory windows, relaxed pools, and the cleanup of a client that has gone.
// The data-path checks are in mr_check.cc.
#include "mr_table.h"

#include <algorithm>
#include <cerrno>

#include "access_flags.h"
#include "keys.h"

namespace uroce::mr {

MrTable::MrTable(PdTable& pds, Limits limits)
    : pds_(pds), limits_(limits), segments_(new std::atomic<Entry*>[kSegments]) {
    for (std::uint32_t i = 0; i < kSegments; ++i) {
        segments_[i].store(nullptr, std::memory_order_relaxed);
    }
}

MrTable::~MrTable() {
    for (std::uint32_t s = 0; s < kSegments; ++s) {
        Entry* seg = segments_[s].load(std::memory_order_relaxed);
        if (seg == nullptr) {
            continue;
        }
        for (std::uint32_t i = 0; i < kSegmentSize; ++i) {
            delete seg[i].desc.load(std::memory_order_relaxed);
        }
        delete[] seg;
    }
    epoch_.synchronize();
}

MrTable::Entry* MrTable::entry(std::uint32_t index) const {
    if (index > kMaxIndex) {
        return nullptr;
    }
    Entry* seg = segments_[index >> kSegmentBits].load(std::memory_order_acquire);
    return seg == nullptr ? nullptr : &seg[index & (kSegmentSize - 1)];
}

MrTable::Entry& MrTable::entry_for_write(std::uint32_t index) {
    std::atomic<Entry*>& slot = segments_[index >> kSegmentBits];
    Entry* seg = slot.load(std::memory_order_relaxed);
    if (seg == nullptr) {
        // Segments appear under the control mutex and are never freed before
        // the table, so a reader that finds one can always use it.
        seg = new Entry[kSegmentSize];
        slot.store(seg, std::memory_order_release);
    }
    return seg[index & (kSegmentSize - 1)];
}

const Descriptor* MrTable::lookup(MrKey key) const {
    const Entry* e = entry(key_index(key));
    if (e == nullptr) {
        return nullptr;
    }
    // seq_cst pairs with the seq_cst epoch store of the reader's guard and the
    // seq_cst exchange in publish(): that total order is what guarantees a
    // retired descriptor is never freed under a reader (epoch.h).
    const Descriptor* d = e->desc.load(std::memory_order_seq_cst);
    if (d == nullptr || (d->kind != ObjectKind::Relaxed && d->key_byte != key_byte(key))) {
        return nullptr;
    }
    return d;
}

const Descriptor* MrTable::owned(MrKey key, std::uint32_t owner) const {
    const Descriptor* d = lookup(key);
    return d != nullptr && d->owner == owner && d->kind != ObjectKind::Relaxed ? d : nullptr;
}

int MrTable::allocate_index(std::uint32_t& index) {
    if (!free_indices_.empty()) {
        index = free_indices_.back();
        free_indices_.pop_back();
        return 0;
    }
    if (high_water_ > kMaxIndex) {
        return ENOMEM;
    }
    index = high_water_++;
    return 0;
}

int MrTable::allocate_block(std::uint32_t count, std::uint32_t& base) {
    if (count == 0 || kMaxIndex + 1 - high_water_ < count) {
        return ENOMEM;
    }
    base = high_water_;
    high_water_ += count;
    return 0;
}

void MrTable::free_index(std::uint32_t index) { free_indices_.push_back(index); }

void MrTable::publish(std::uint32_t index, const Descriptor* d) {
    Entry& e = entry_for_write(index);
    const Descriptor* old = e.desc.exchange(d, std::memory_order_seq_cst);
    if (old != nullptr) {
        retire(old);
    }
}

void MrTable::retire(const Descriptor* d) {
    epoch_.retire([d] { delete d; });
    // Reclaim as we go so retired descriptors do not pile up between syncs.
    if (epoch_.pending() > reclaim_at_) {
        epoch_.reclaim();
        // A reader that holds its guard for long keeps everything retired
        // since its epoch: without this, every retire meanwhile would rescan
        // the whole list (O(pending) per deregistration).
        reclaim_at_ = std::max<std::size_t>(1024, 2 * epoch_.pending());
    }
}

int MrTable::make_mr(const RegRequest& r, Descriptor& d) const {
    const AccessCheck ac = check_mr_access(r.access);
    if (ac.error != 0) {
        return ac.error;
    }
    if (!pds_.owned_by(r.pd, r.owner)) {
        return EINVAL;
    }
    const bool on_demand = (ac.flags & Access::kOnDemand) != 0;
    // Implicit ODP (ibv_reg_mr(3)): addr 0, length SIZE_MAX, ON_DEMAND.
    const bool implicit = on_demand && r.addr == 0 && r.length == UINT64_MAX && r.backing == Backing::ProcessMemory;

    d = Descriptor{};
    d.kind = ObjectKind::Mr;
    d.pd = r.pd;
    d.owner = r.owner;
    d.access = ac.flags;
    d.on_demand = on_demand;
    d.address_space = r.address_space;
    d.dmabuf_handle = r.dmabuf_handle;

    if (implicit) {
        if (r.iova.value_or(0) != 0 || (ac.flags & (Access::kZeroBased | Access::kHugetlb)) != 0) {
            return EINVAL;
        }
        if (r.address_space == nullptr) {
            return EINVAL;  // nothing to check accesses against
        }
        d.backing = Backing::ImplicitOdp;
        d.iova = 0;
        d.length = UINT64_MAX;
        d.host_base = 0;
        return 0;
    }

    if (r.length == 0 || r.length > limits_.max_mr_size || r.addr + r.length < r.addr) {
        return EINVAL;
    }
    // ZERO_BASED, or ibv_reg_mr_iova with iova 0: keys address from 0.
    std::uint64_t iova = r.iova.value_or(r.addr);
    if ((ac.flags & Access::kZeroBased) != 0) {
        iova = 0;
    }
    if (iova + r.length < iova) {
        return EINVAL;
    }
    d.backing = r.backing;
    d.iova = iova;
    d.length = r.length;
    d.host_base = r.addr;

    if (r.backing == Backing::DmaBuf) {
        if (r.dmabuf_handle < 0 || (ac.flags & (Access::kOnDemand | Access::kHugetlb)) != 0) {
            return EINVAL;
        }
        return 0;
    }
    if (r.address_space != nullptr) {
        if ((ac.flags & Access::kHugetlb) != 0 && !r.address_space->huge_page_size(r.addr, r.length)) {
            return EINVAL;  // HUGETLB promised, but the range is not huge-page backed
        }
        // Pinning fails on unmapped memory (EFAULT, as the kernel reports it),
        // and an MR that may be written pins for write (ib_umem_get with
        // FOLL_WRITE): read-only memory fails too. This is what keeps the
        // copying way's writes (/proc/PID/mem, FOLL_FORCE) to memory that was
        // writable (docs/security.md). On-demand regions are only checked
        // when accessed.
        const bool written = (ac.flags & (Access::kLocalWrite | Access::kRemoteWrite | Access::kRemoteAtomic)) != 0;
        if (!on_demand && !r.address_space->accessible(r.addr, r.length, written)) {
            return EFAULT;
        }
    } else if ((ac.flags & Access::kHugetlb) != 0) {
        return EINVAL;
    }
    return 0;
}

Registered MrTable::reg_mr(const RegRequest& r) {
    std::lock_guard lock(mutex_);
    auto d = std::make_unique<Descriptor>();
    if (int err = make_mr(r, *d); err != 0) {
        return {err, 0, 0};
    }
    if (mr_count_ >= limits_.max_mr) {
        return {ENOMEM, 0, 0};
    }
    std::uint32_t index = 0;
    if (int err = allocate_index(index); err != 0) {
        return {err, 0, 0};
    }
    Entry& e = entry_for_write(index);
    e.last_key_byte = static_cast<std::uint8_t>(e.last_key_byte + 1);
    e.bound_windows = 0;
    d->index = index;
    d->key_byte = e.last_key_byte;
    const std::uint32_t key = d->key();
    by_owner_[r.owner].insert(index);
    pds_.ref(r.pd);
    ++mr_count_;
    publish(index, d.release());
    return {0, key, key};
}

int MrTable::rereg_mr(std::uint32_t lkey, std::uint32_t flags, const RegRequest& r) {
    std::lock_guard lock(mutex_);
    if ((flags & ~rereg::kSupported) != 0) {
        return EINVAL;
    }
    const Descriptor* old = owned(MrKey{lkey}, r.owner);
    if (old == nullptr || old->kind != ObjectKind::Mr) {
        return EINVAL;
    }
    if (flags == 0) {
        return 0;
    }
    if (entry(old->index)->bound_windows != 0) {
        return EBUSY;
    }
    // Start from the current registration and apply what `flags` changes.
    RegRequest merged;
    merged.owner = r.owner;
    merged.pd = (flags & rereg::kChangePd) != 0 ? r.pd : old->pd;
    merged.access = (flags & rereg::kChangeAccess) != 0 ? r.access : old->access;
    merged.address_space = old->address_space;
    if ((flags & rereg::kChangeTranslation) != 0) {
        merged.addr = r.addr;
        merged.length = r.length;
        merged.iova = r.iova;
        merged.backing = r.backing;
        merged.dmabuf_handle = r.dmabuf_handle;
        if (r.address_space != nullptr) {
            merged.address_space = r.address_space;
        }
    } else {
        merged.backing = old->backing;
        merged.dmabuf_handle = old->dmabuf_handle;
        if (old->backing == Backing::ImplicitOdp) {
            merged.addr = 0;
            merged.length = UINT64_MAX;
        } else {
            merged.addr = old->host_base;
            merged.length = old->length;
            merged.iova = old->iova;
        }
    }
    auto d = std::make_unique<Descriptor>();
    if (int err = make_mr(merged, *d); err != 0) {
        return err;
    }
    d->index = old->index;
    d->key_byte = old->key_byte;
    if (d->pd != old->pd) {
        pds_.ref(d->pd);
        pds_.unref(old->pd);
    }
    // Not publish(d->index, d.release()): argument evaluation order is
    // unspecified, and release() first makes d->index a null dereference.
    const std::uint32_t index = d->index;
    publish(index, d.release());
    return 0;
}

int MrTable::dereg_locked(const Descriptor* d) {
    Entry* e = entry(d->index);
    if (e->bound_windows != 0) {
        return EBUSY;
    }
    remove_locked(d, mr_count_);
    return 0;
}

void MrTable::remove_locked(const Descriptor* d, std::size_t& count) {
    // Copy what is needed first: publish() retires `d`.
    const std::uint32_t index = d->index;
    const std::uint32_t pd = d->pd;
    const std::uint32_t owner = d->owner;
    publish(index, nullptr);
    free_index(index);
    pds_.unref(pd);
    --count;
    if (auto it = by_owner_.find(owner); it != by_owner_.end()) {
        it->second.erase(index);
    }
}

int MrTable::dereg_mr(std::uint32_t lkey, std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    const Descriptor* d = owned(MrKey{lkey}, owner);
    if (d == nullptr || d->kind != ObjectKind::Mr) {
        return EINVAL;
    }
    return dereg_locked(d);
}

KeyResult MrTable::alloc_mw(std::uint32_t pd, std::uint32_t owner, MwType type) {
    std::lock_guard lock(mutex_);
    if (!pds_.owned_by(pd, owner)) {
        return {EINVAL, 0};
    }
    if (mw_count_ >= limits_.max_mw) {
        return {ENOMEM, 0};
    }
    std::uint32_t index = 0;
    if (int err = allocate_index(index); err != 0) {
        return {err, 0};
    }
    Entry& e = entry_for_write(index);
    e.last_key_byte = static_cast<std::uint8_t>(e.last_key_byte + 1);
    e.bound_windows = 0;
    auto d = std::make_unique<Descriptor>();
    d->kind = type == MwType::Type1 ? ObjectKind::MwType1 : ObjectKind::MwType2;
    d->index = index;
    d->key_byte = e.last_key_byte;
    d->pd = pd;
    d->owner = owner;
    const std::uint32_t key = d->key();
    by_owner_[owner].insert(index);
    pds_.ref(pd);
    ++mw_count_;
    publish(index, d.release());
    return {0, key};
}

void MrTable::unbind_locked(const Descriptor* mw) {
    if (!mw->bound) {
        return;
    }
    if (Entry* parent = entry(mw->parent_index); parent != nullptr && parent->bound_windows > 0) {
        --parent->bound_windows;
    }
}

int MrTable::dealloc_mw_locked(const Descriptor* d) {
    unbind_locked(d);
    remove_locked(d, mw_count_);
    return 0;
}

int MrTable::dealloc_mw(std::uint32_t rkey, std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    // A type 2 window's rkey changes with each bind; deallocation names the
    // window by its index, whatever key byte it carries now.
    const Entry* e = entry(key_index(rkey));
    const Descriptor* d = e == nullptr ? nullptr : e->desc.load(std::memory_order_relaxed);
    if (d == nullptr || !d->is_window() || d->owner != owner) {
        return EINVAL;
    }
    return dealloc_mw_locked(d);
}

namespace {

// The window a bind produces over `mr`: shares its backing, starts at the
// bound address (or 0 when zero-based).
Descriptor bound_window(const Descriptor& mw, const Descriptor& mr, const BindRequest& r, std::uint32_t access_flags) {
    Descriptor w = mw;
    w.bound = true;
    w.parent_index = mr.index;
    w.access = access_flags;
    w.iova = (access_flags & Access::kZeroBased) != 0 ? 0 : r.addr;
    w.length = r.length;
    w.host_base = mr.host_base + (r.addr - mr.iova);
    w.backing = mr.backing;
    w.on_demand = mr.on_demand;
    w.dmabuf_handle = mr.dmabuf_handle;
    w.address_space = mr.address_space;
    return w;
}

bool inside(const Descriptor& mr, std::uint64_t addr, std::uint64_t length) {
    return addr >= mr.iova && addr - mr.iova <= mr.length && length <= mr.length - (addr - mr.iova);
}

}  // namespace

KeyResult MrTable::bind_mw_type1(const BindRequest& r) {
    std::lock_guard lock(mutex_);
    const Descriptor* mw = owned(MrKey{r.mw_key}, r.owner);
    if (mw == nullptr || mw->kind != ObjectKind::MwType1) {
        return {EINVAL, 0};
    }
    // Every bind gives the window a new rkey (IBA 10.6.7.2.3).
    const auto next_byte = static_cast<std::uint8_t>(entry(mw->index)->last_key_byte + 1);
    const int err = bind_type1_locked(mw, r, next_byte);
    return {err, err == 0 ? make_key(mw->index, next_byte) : 0};
}

int MrTable::bind_mw_posted(const BindRequest& r) {
    ObjectKind kind = ObjectKind::Mr;
    {
        std::lock_guard lock(mutex_);
        const Entry* e = entry(key_index(r.mw_key));
        const Descriptor* mw = e == nullptr ? nullptr : e->desc.load(std::memory_order_relaxed);
        if (mw == nullptr || mw->owner != r.owner) {
            return EINVAL;
        }
        if (mw->kind == ObjectKind::MwType1) {
            // ibv_bind_mw(3) posted the window's next rkey (ibv_inc_rkey of
            // the current one), which the consumer already holds.
            return bind_type1_locked(mw, r, key_byte(r.mw_key));
        }
        kind = mw->kind;
    }
    return kind == ObjectKind::MwType2 ? bind_mw_type2(r) : EINVAL;
}

int MrTable::bind_type1_locked(const Descriptor* mw, const BindRequest& r, std::uint8_t new_key_byte) {
    auto next = std::make_unique<Descriptor>(*mw);
    if (r.length == 0) {
        // ibv_bind_mw(3): a zero-length bind unbinds the window.
        unbind_locked(mw);
        next->bound = false;
    } else {
        const Descriptor* mr = owned(MrKey{r.mr_lkey}, r.owner);
        if (mr == nullptr || mr->kind != ObjectKind::Mr || mr->pd != mw->pd || r.qp_pd != mw->pd) {
            return EINVAL;
        }
        const AccessCheck ac = check_mw_access(r.access, mr->access);
        if (ac.error != 0 || !inside(*mr, r.addr, r.length)) {
            return EINVAL;
        }
        unbind_locked(mw);
        *next = bound_window(*mw, *mr, r, ac.flags);
        ++entry(mr->index)->bound_windows;
    }
    entry(mw->index)->last_key_byte = new_key_byte;
    next->key_byte = new_key_byte;
    publish(mw->index, next.release());
    return 0;
}

int MrTable::bind_mw_type2(const BindRequest& r) {
    std::lock_guard lock(mutex_);
    const Entry* e = entry(key_index(r.mw_key));
    const Descriptor* mw = e == nullptr ? nullptr : e->desc.load(std::memory_order_relaxed);
    if (mw == nullptr || mw->kind != ObjectKind::MwType2 || mw->owner != r.owner) {
        return EINVAL;
    }
    // IBA 10.6.7.2.2: a type 2 window is bound only from the free state, and
    // the QP, the window and the MR share one PD.
    if (mw->bound || r.length == 0) {
        return EINVAL;
    }
    const Descriptor* mr = owned(MrKey{r.mr_lkey}, r.owner);
    if (mr == nullptr || mr->kind != ObjectKind::Mr || mr->pd != mw->pd || r.qp_pd != mw->pd) {
        return EINVAL;
    }
    const AccessCheck ac = check_mw_access(r.access, mr->access);
    if (ac.error != 0 || !inside(*mr, r.addr, r.length)) {
        return EINVAL;
    }
    auto next = std::make_unique<Descriptor>(bound_window(*mw, *mr, r, ac.flags));
    next->key_byte = key_byte(r.mw_key);
    next->bound_qpn = r.qpn;
    entry_for_write(mw->index).last_key_byte = next->key_byte;
    ++entry(mr->index)->bound_windows;
    publish(mw->index, next.release());
    return 0;
}

int MrTable::invalidate(std::uint32_t rkey, std::uint32_t pd, std::optional<std::uint32_t> receiving_qpn) {
    std::lock_guard lock(mutex_);
    const Descriptor* mw = lookup(MrKey{rkey});
    if (mw == nullptr || mw->kind != ObjectKind::MwType2 || !mw->bound || mw->pd != pd) {
        return EINVAL;
    }
    if (receiving_qpn && *receiving_qpn != mw->bound_qpn) {
        return EINVAL;
    }
    unbind_locked(mw);
    auto next = std::make_unique<Descriptor>(*mw);
    next->bound = false;
    next->bound_qpn = 0;
    next->length = 0;
    publish(mw->index, next.release());
    return 0;
}

RelaxedPool* MrTable::create_relaxed_pool(std::uint32_t pd, std::uint32_t owner, const RelaxedPoolConfig& config,
                                          uroce_relaxed_pool_header* shared, int& error) {
    std::lock_guard lock(mutex_);
    error = 0;
    const std::uint32_t page = config.page_size;
    if (!pds_.owned_by(pd, owner) || shared == nullptr || config.capacity == 0 || page < 4096 ||
        (page & (page - 1)) != 0 || config.dirty_watermark == 0) {
        error = EINVAL;
        return nullptr;
    }
    if (mr_count_ + config.capacity > limits_.max_mr) {
        error = ENOMEM;
        return nullptr;
    }
    std::uint32_t base = 0;
    if ((error = allocate_block(config.capacity, base)) != 0) {
        return nullptr;
    }
    auto pool = std::make_unique<RelaxedPool>(epoch_, pd, owner, base, config, shared, limits_.max_mr_size);
    for (std::uint32_t i = 0; i < config.capacity; ++i) {
        auto d = std::make_unique<Descriptor>();
        d->kind = ObjectKind::Relaxed;
        d->index = base + i;
        d->pd = pd;
        d->owner = owner;
        d->pool = pool.get();
        d->slot = i;
        entry_for_write(base + i).bound_windows = 0;
        publish(base + i, d.release());
    }
    mr_count_ += config.capacity;
    pds_.ref(pd);
    pools_.push_back(std::move(pool));
    return pools_.back().get();
}

int MrTable::destroy_relaxed_pool(RelaxedPool* pool, std::uint32_t owner) {
    std::unique_ptr<RelaxedPool> doomed;
    {
        std::lock_guard lock(mutex_);
        auto it = std::find_if(pools_.begin(), pools_.end(), [pool](const auto& p) { return p.get() == pool; });
        if (it == pools_.end() || (*it)->owner() != owner) {
            return EINVAL;
        }
        for (std::uint32_t i = 0; i < pool->capacity(); ++i) {
            publish(pool->base_index() + i, nullptr);
            // The pool, not the entry, kept the slot's key byte: carry it over
            // so the entry's next user gets a byte none of the slot's keys had.
            entry_for_write(pool->base_index() + i).last_key_byte = pool->slot_key_byte(i);
            free_index(pool->base_index() + i);
        }
        mr_count_ -= pool->capacity();
        pds_.unref(pool->pd());
        doomed = std::move(*it);
        pools_.erase(it);
    }
    // Readers may still be inside the pool's slots: wait them out before the
    // pool (and the caller's shared memory) goes away.
    epoch_.synchronize();
    return 0;
}

std::size_t MrTable::destroy_owner(std::uint32_t owner) {
    std::size_t destroyed = 0;
    std::vector<RelaxedPool*> pools;
    {
        std::lock_guard lock(mutex_);
        auto it = by_owner_.find(owner);
        if (it != by_owner_.end()) {
            std::vector<std::uint32_t> indices(it->second.begin(), it->second.end());
            // Windows first, so their MRs are no longer busy.
            for (int pass = 0; pass < 2; ++pass) {
                for (std::uint32_t index : indices) {
                    const Descriptor* d = entry(index)->desc.load(std::memory_order_relaxed);
                    if (d == nullptr || d->owner != owner) {
                        continue;
                    }
                    if (pass == 0 && d->is_window()) {
                        dealloc_mw_locked(d);
                        ++destroyed;
                    } else if (pass == 1 && d->kind == ObjectKind::Mr && dereg_locked(d) == 0) {
                        ++destroyed;
                    }
                }
            }
            by_owner_.erase(owner);
        }
        for (const auto& p : pools_) {
            if (p->owner() == owner) {
                pools.push_back(p.get());
            }
        }
    }
    for (RelaxedPool* p : pools) {
        if (destroy_relaxed_pool(p, owner) == 0) {
            ++destroyed;
        }
    }
    // The retired descriptors hold the owner's address space, and with it the
    // /proc/<pid>/maps its HELLO carried: free them now rather than once a
    // thousand more are pending (retire()), so a departed client's files
    // close with it and a churn of short-lived clients cannot pile them up.
    epoch_.synchronize();
    return destroyed;
}

TableCounts MrTable::counts() const {
    std::lock_guard lock(mutex_);
    TableCounts c;
    c.mws = mw_count_;
    c.relaxed_pools = pools_.size();
    for (const auto& p : pools_) {
        c.relaxed_slots += p->capacity();
    }
    c.mrs = mr_count_ - c.relaxed_slots;
    return c;
}

PdStats MrTable::pd_stats(std::uint32_t pd) const {
    std::lock_guard lock(mutex_);
    PdStats s;
    for (const auto& p : pools_) {
        if (p->pd() == pd) {
            p->add_stats(s);
        }
    }
    return s;
}

void MrTable::for_each_mr(const std::function<bool(const Descriptor&)>& visit, std::uint32_t first_index) const {
    std::lock_guard lock(mutex_);
    // by_owner_ holds the index of every MR and window: sorting those is
    // cheaper than walking the key space, which relaxed pools make sparse.
    std::vector<const Descriptor*> mrs;
    for (const auto& [owner, indices] : by_owner_) {
        for (const std::uint32_t index : indices) {
            const Descriptor* d = index >= first_index ? entry(index)->desc.load(std::memory_order_relaxed) : nullptr;
            if (d != nullptr && d->kind == ObjectKind::Mr) {
                mrs.push_back(d);
            }
        }
    }
    std::sort(mrs.begin(), mrs.end(), [](const Descriptor* a, const Descriptor* b) { return a->index < b->index; });
    for (const Descriptor* d : mrs) {
        if (!visit(*d)) {
            return;
        }
    }
}

}  // namespace uroce::mr
