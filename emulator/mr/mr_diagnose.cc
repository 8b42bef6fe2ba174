// MrTable::diagnose_remote: after check_remote refused a request, which
// condition it was and what the key names. It looks at the table again
// (inside the caller's guard, no lock), so the answer describes the table as
// it is now; the data path itself never runs this.
#include "access_flags.h"
#include "keys.h"
#include "mr_table.h"

namespace uroce::mr {

namespace {

RefusedCheck missing_right(RemoteOp op) {
    switch (op) {
        case RemoteOp::Read:
            return RefusedCheck::NoRemoteRead;
        case RemoteOp::Atomic:
            return RefusedCheck::NoRemoteAtomic;
        case RemoteOp::Write:
        case RemoteOp::Local:
            break;
    }
    return RefusedCheck::NoRemoteWrite;
}

void describe_region(AccessDiagnosis& d, std::uint32_t pd, std::uint64_t start, std::uint64_t length,
                     std::uint32_t access) {
    d.region_known = true;
    d.region_pd = pd;
    d.region_start = start;
    d.region_length = length;
    d.region_access = access;
}

// How far [va, va + length) reaches outside the region: the bytes before its
// start, or those past its end (offsets, so no sum overflows unnoticed).
void measure_overrun(AccessDiagnosis& d, std::uint64_t va, std::uint64_t length) {
    if (va < d.region_start) {
        d.before_start = true;
        d.overrun = d.region_start - va;
        return;
    }
    std::uint64_t reach = 0;
    if (__builtin_add_overflow(va - d.region_start, length, &reach)) {
        reach = UINT64_MAX;
    }
    d.overrun = reach > d.region_length ? reach - d.region_length : 0;
}

}  // namespace

AccessDiagnosis MrTable::diagnose_remote(const EpochGuard& /*guard*/, const RemoteRequest& r,
                                         CheckStatus status) const {
    AccessDiagnosis d;
    switch (status) {
        case CheckStatus::QpAccessNotEnabled:
            d.check = RefusedCheck::QpAccessNotEnabled;
            return d;
        case CheckStatus::AtomicMisaligned:
            d.check = RefusedCheck::AtomicMisaligned;
            return d;
        case CheckStatus::WindowWrongQp:
            d.check = RefusedCheck::WindowWrongQp;
            return d;
        case CheckStatus::RemoteOdpFault:
            d.check = RefusedCheck::OdpFault;
            return d;
        default:
            break;
    }
    const Entry* e = entry(key_index(r.rkey));
    const Descriptor* desc = e != nullptr ? e->desc.load(std::memory_order_seq_cst) : nullptr;
    if (desc == nullptr) {
        d.check = RefusedCheck::KeyNotFound;
        return d;
    }
    if (desc->kind == ObjectKind::Relaxed) {
        const RelaxedPool::SlotView slot = desc->pool->peek_slot(desc->slot);
        describe_region(d, desc->pd, slot.user_addr, slot.user_length, slot.access);
        if (status == CheckStatus::RkeyInvalid) {
            // The key byte moves on only when a deregistered slot is invalidated.
            const bool moved_on = desc->pool->slot_key_byte(desc->slot) != key_byte(r.rkey);
            d.check = moved_on ? RefusedCheck::RelaxedAfterDereg : RefusedCheck::KeyNotFound;
            d.has_history = moved_on;
            d.registered_ns = slot.registered_ns;
            d.deregistered_ns = slot.deregistered_ns;
            return d;
        }
    } else {
        if (desc->key_byte != key_byte(r.rkey)) {
            d.check = RefusedCheck::KeyByteStale;
            return d;
        }
        if (desc->is_window() && !desc->bound) {
            d.check = RefusedCheck::WindowNotBound;
            return d;
        }
        describe_region(d, desc->pd, desc->iova, desc->length, desc->access);
    }
    switch (status) {
        case CheckStatus::RemotePdMismatch:
            d.check = RefusedCheck::PdMismatch;
            break;
        case CheckStatus::RemoteAccessNotGranted:
            d.check = missing_right(r.op);
            break;
        case CheckStatus::RemoteOutOfRange:
            d.check = RefusedCheck::OutOfRange;
            if (desc->kind == ObjectKind::Relaxed) {
                // The slot grants whole pages: measure against what was granted.
                const RelaxedPool::SlotView slot = desc->pool->peek_slot(desc->slot);
                d.region_start = slot.addr;
                d.region_length = slot.length;
            }
            measure_overrun(d, r.va, r.length);
            break;
        default:
            d.check = RefusedCheck::KeyNotFound;
            break;
    }
    return d;
}

}  // namespace uroce::mr
