// The data-path checks: one for a local SGE, one for a remote request. Each
// runs inside the caller's EpochGuard, takes no table lock (only a stale
// relaxed-slot access takes the pool's stats mutex, to record its report),
// and answers with the first failed check (check_status.h maps it to a completion status and a
// NAK). Ranges are compared as offsets so no sum can overflow.
#include <algorithm>

#include "access_flags.h"
#include "keys.h"
#include "mr_table.h"

namespace uroce::mr {

namespace {

// True when [addr, addr + length) lies inside [base, base + size).
bool in_range(std::uint64_t base, std::uint64_t size, std::uint64_t addr, std::uint64_t length) {
    return addr >= base && addr - base <= size && length <= size - (addr - base);
}

std::uint32_t right_for(RemoteOp op) {
    switch (op) {
        case RemoteOp::Read:
            return Access::kRemoteRead;
        case RemoteOp::Write:
            return Access::kRemoteWrite;
        case RemoteOp::Atomic:
            return Access::kRemoteAtomic;
        case RemoteOp::Local:
            break;
    }
    return 0;
}

Translation fail(CheckStatus s) { return Translation{s, 0, nullptr}; }

// The fields of a registration the checks need, whichever object holds it.
struct View {
    std::uint32_t access;
    std::uint64_t iova;
    std::uint64_t length;
    std::uint64_t host_base;
};

// Where `addr` (inside the view) lands, and whether an on-demand mapping is
// there right now.
Translation translate(const Descriptor* d, const View& v, std::uint64_t addr, std::uint64_t length, bool write,
                      CheckStatus odp_fault) {
    const std::uint64_t host = v.host_base + (addr - v.iova);
    if (d->on_demand && (d->address_space == nullptr || !d->address_space->accessible(host, length, write))) {
        return fail(odp_fault);
    }
    return Translation{CheckStatus::Ok, host, d};
}

}  // namespace

// Checklist for a local SGE (IBA 10.6, memory protection): the lkey names a live MR
// (entry present, key byte equal, an MR and not a window); the MR is in the
// QP's PD; LOCAL_WRITE if the device writes into it; the range lies inside.
Translation MrTable::check_local(const EpochGuard& /*guard*/, MrKey lkey, PdHandle pd, std::uint64_t addr,
                                 std::uint64_t length, bool device_writes, Qpn qpn) const {
    const Descriptor* d = lookup(lkey);
    if (d == nullptr || d->is_window()) {
        return fail(CheckStatus::LkeyInvalid);
    }
    View v{d->access, d->iova, d->length, d->host_base};
    RelaxedPool::SlotView slot;
    if (d->kind == ObjectKind::Relaxed) {
        slot = d->pool->read_slot(d->slot, key_byte(lkey));
        if (slot.corrupt) {
            d->pool->note_corrupt_slot();
        }
        if (!slot.valid) {
            return fail(CheckStatus::LkeyInvalid);
        }
        v = View{slot.access, slot.addr, slot.length, slot.addr};
    }
    if (d->pd != pd.value()) {
        return fail(CheckStatus::LocalPdMismatch);
    }
    if (device_writes && (v.access & Access::kLocalWrite) == 0) {
        return fail(CheckStatus::LocalWriteNotGranted);
    }
    if (!in_range(v.iova, v.length, addr, length)) {
        return fail(CheckStatus::LocalOutOfRange);
    }
    if (d->kind == ObjectKind::Relaxed && slot.deregistered) {
        notify_stale(d->pool->report_stale(slot, d->slot, RemoteOp::Local, qpn.value(), Peer{}, addr, length));
    }
    return translate(d, v, addr, length, device_writes, CheckStatus::LocalOdpFault);
}

// Checklist for a remote request (IBA 9.7.5.2.4 / 10.6.7; docs/wire.md): the
// QP allows the operation; a zero-length READ or WRITE needs no key (IBA
// 9.4.1.1); the rkey names a live MR, relaxed slot or bound window; a type 2
// window is bound to this QP; same PD as the QP; the right is granted;
// atomics are 8 bytes, 8-byte aligned; the range lies inside.
Translation MrTable::check_remote(const EpochGuard& /*guard*/, const RemoteRequest& r) const {
    const std::uint32_t right = right_for(r.op);
    if ((r.qp_access & right) == 0) {
        return fail(CheckStatus::QpAccessNotEnabled);
    }
    if (r.length == 0 && r.op != RemoteOp::Atomic) {
        return Translation{CheckStatus::Ok, 0, nullptr};
    }
    const Descriptor* d = lookup(r.rkey);
    if (d == nullptr) {
        return fail(CheckStatus::RkeyInvalid);
    }
    View v{d->access, d->iova, d->length, d->host_base};
    RelaxedPool::SlotView slot;
    switch (d->kind) {
        case ObjectKind::Mr:
            break;
        case ObjectKind::MwType1:
        case ObjectKind::MwType2:
            if (!d->bound) {
                return fail(CheckStatus::RkeyInvalid);
            }
            if (d->kind == ObjectKind::MwType2 && d->bound_qpn != r.qpn.value()) {
                return fail(CheckStatus::WindowWrongQp);
            }
            break;
        case ObjectKind::Relaxed:
            slot = d->pool->read_slot(d->slot, key_byte(r.rkey));
            if (slot.corrupt) {
                d->pool->note_corrupt_slot();
            }
            if (!slot.valid) {
                return fail(CheckStatus::RkeyInvalid);
            }
            v = View{slot.access, slot.addr, slot.length, slot.addr};
            break;
    }
    if (d->pd != r.pd.value()) {
        return fail(CheckStatus::RemotePdMismatch);
    }
    if ((v.access & right) == 0) {
        return fail(CheckStatus::RemoteAccessNotGranted);
    }
    if (r.op == RemoteOp::Atomic && (r.length != 8 || (r.va & 7) != 0)) {
        return fail(CheckStatus::AtomicMisaligned);
    }
    if (!in_range(v.iova, v.length, r.va, r.length)) {
        return fail(CheckStatus::RemoteOutOfRange);
    }
    if (d->kind == ObjectKind::Relaxed && slot.deregistered) {
        notify_stale(d->pool->report_stale(slot, d->slot, r.op, r.qpn.value(), r.peer, r.va, r.length));
    }
    return translate(d, v, r.va, r.length, r.op != RemoteOp::Read, CheckStatus::RemoteOdpFault);
}

}  // namespace uroce::mr
