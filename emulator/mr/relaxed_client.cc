#include "relaxed_client.h"

#include <atomic>
#include <cerrno>

#include "access_flags.h"
#include "keys.h"
#include "relaxed_pool.h"

namespace uroce::mr {

namespace {

template <typename T>
std::atomic_ref<T> atomic(T& field) {
    return std::atomic_ref<T>(field);
}

constexpr std::uint32_t kRelaxedAccess = Access::kLocalWrite | Access::kRemoteMask | Access::kRelaxedOrdering;

}  // namespace

RelaxedRegistration RelaxedClient::reg(std::uint64_t addr, std::uint64_t length, std::uint32_t access_flags,
                                       std::uint64_t now_ns) {
    const AccessCheck ac = check_mr_access(access_flags);
    if (ac.error != 0 || (ac.flags & ~kRelaxedAccess) != 0 || length == 0 || addr + length < addr) {
        return {EINVAL, 0, 0, 0};
    }
    const std::uint64_t page = shared_->page_size;
    const std::uint64_t first = addr & ~(page - 1);
    const std::uint64_t end = (addr + length + page - 1) & ~(page - 1);
    if (end <= first) {
        return {EINVAL, 0, 0, 0};  // rounding up wrapped past the top of the address space
    }

    const std::uint32_t n = shared_->capacity;
    uroce_relaxed_slot* slots = relaxed_slots(shared_);
    bool pending = false;
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint32_t i = (next_ + k) % n;
        uroce_relaxed_slot& s = slots[i];
        std::uint32_t c = atomic(s.ctrl).load(std::memory_order_acquire);
        const std::uint32_t state = UROCE_RELAXED_STATE(c);
        if (state == UROCE_RELAXED_DEREGISTERED || state == UROCE_RELAXED_INVALIDATING) {
            pending = true;
        }
        if (state != UROCE_RELAXED_FREE) {
            continue;
        }
        const std::uint32_t gen = UROCE_RELAXED_GEN(c) + 1;
        if (!atomic(s.ctrl).compare_exchange_strong(c, UROCE_RELAXED_CTRL(gen, UROCE_RELAXED_WRITING),
                                                    std::memory_order_acq_rel)) {
            continue;
        }
        // Release stores after the generation bump: the daemon's seqlock read
        // (RelaxedPool::read_slot) relies on it to notice a rewrite.
        constexpr auto rel = std::memory_order_release;
        atomic(s.access).store(ac.flags, rel);
        atomic(s.addr).store(first, rel);
        atomic(s.length).store(end - first, rel);
        atomic(s.user_addr).store(addr, rel);
        atomic(s.user_length).store(length, rel);
        atomic(s.registered_ns).store(now_ns, rel);
        atomic(s.deregistered_ns).store(0, rel);
        atomic(s.ctrl).store(UROCE_RELAXED_CTRL(gen, UROCE_RELAXED_REGISTERED), std::memory_order_release);
        next_ = (i + 1) % n;
        return {0, atomic(s.key).load(std::memory_order_acquire), first, end - first};
    }
    if (pending || atomic(shared_->dirty).load(std::memory_order_relaxed) != 0) {
        atomic(shared_->eagain).fetch_add(1, std::memory_order_relaxed);
        return {EAGAIN, 0, 0, 0};
    }
    return {ENOMEM, 0, 0, 0};
}

int RelaxedClient::dereg(std::uint32_t key, std::uint64_t now_ns) {
    const std::uint32_t index = key_index(key);
    if (index < shared_->base_index || index - shared_->base_index >= shared_->capacity) {
        return EINVAL;
    }
    uroce_relaxed_slot& s = relaxed_slots(shared_)[index - shared_->base_index];
    std::uint32_t c = atomic(s.ctrl).load(std::memory_order_acquire);
    if (UROCE_RELAXED_STATE(c) != UROCE_RELAXED_REGISTERED || atomic(s.key).load(std::memory_order_acquire) != key) {
        return EINVAL;
    }
    atomic(s.deregistered_ns).store(now_ns, std::memory_order_release);
    // A plain release store: only the client moves a slot out of REGISTERED,
    // and the daemon never touches a REGISTERED slot. Two threads racing to
    // deregister the same key is an application bug that at worst counts one
    // dirty slot twice (the count is only a hint).
    atomic(s.ctrl).store(UROCE_RELAXED_CTRL(UROCE_RELAXED_GEN(c), UROCE_RELAXED_DEREGISTERED),
                         std::memory_order_release);
    // The dirty count only tells the daemon when the watermark is near: a
    // load and a store, not a locked add. Two threads deregistering at once
    // may count one slot; the slot is still found by the next sweep (timer
    // sweeps and flush scan the whole pool).
    std::atomic_ref<std::uint32_t> dirty(shared_->dirty);
    dirty.store(dirty.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}

}  // namespace uroce::mr
