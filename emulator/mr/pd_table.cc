#include "pd_table.h"

#include <cerrno>

namespace uroce::mr {

PdTable::Alloc PdTable::alloc(std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    if (pds_.size() >= max_pd_) {
        return {ENOMEM, 0};
    }
    // Handles are never reused while the device lives (2^32 allocations), so
    // a stale handle from an exited client cannot name a new client's PD.
    while (next_ == 0 || pds_.contains(next_)) {
        ++next_;
    }
    const std::uint32_t pd = next_++;
    pds_.emplace(pd, Pd{owner, 0});
    return {0, pd};
}

int PdTable::dealloc(std::uint32_t pd, std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    auto it = pds_.find(pd);
    if (it == pds_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    if (it->second.refs != 0) {
        return EBUSY;
    }
    pds_.erase(it);
    return 0;
}

bool PdTable::owned_by(std::uint32_t pd, std::uint32_t owner) const {
    std::lock_guard lock(mutex_);
    auto it = pds_.find(pd);
    return it != pds_.end() && it->second.owner == owner;
}

void PdTable::ref(std::uint32_t pd) {
    std::lock_guard lock(mutex_);
    if (auto it = pds_.find(pd); it != pds_.end()) {
        ++it->second.refs;
    }
}

void PdTable::unref(std::uint32_t pd) {
    std::lock_guard lock(mutex_);
    if (auto it = pds_.find(pd); it != pds_.end() && it->second.refs > 0) {
        --it->second.refs;
    }
}

std::size_t PdTable::destroy_owner(std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    return std::erase_if(pds_, [owner](const auto& kv) { return kv.second.owner == owner; });
}

std::size_t PdTable::count() const {
    std::lock_guard lock(mutex_);
    return pds_.size();
}

}  // namespace uroce::mr
