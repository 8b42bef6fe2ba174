// The engine's explained-failure records (docs/explain.md): a refused
// request (responder), an error completion (requester or receive), each
// written only on its failure path and handed to the observer the daemon
// set. Without an observer nothing is built.
#include "engine/failure_report.h"

#include <algorithm>

#include "engine/engine.h"
#include "wire/opcode.h"

namespace uroce::engine {

namespace {

// mr::RefusedCheck and FailureCheck share their first values.
constexpr bool same_values() {
    return static_cast<int>(mr::RefusedCheck::Count) == static_cast<int>(FailureCheck::InvalidRequest) &&
           static_cast<int>(mr::RefusedCheck::RelaxedAfterDereg) == static_cast<int>(FailureCheck::RelaxedAfterDereg) &&
           static_cast<int>(mr::RefusedCheck::OdpFault) == static_cast<int>(FailureCheck::OdpFault);
}
static_assert(same_values());

std::uint8_t bth_opcode_of(mr::RemoteOp op) {
    switch (op) {
        case mr::RemoteOp::Read:
            return wire::opcode::kRcRdmaReadRequest;
        case mr::RemoteOp::Atomic:
            return wire::opcode::kRcCompareSwap;
        case mr::RemoteOp::Write:
        case mr::RemoteOp::Local:
            break;
    }
    return wire::opcode::kRcRdmaWriteOnly;
}

void set_peer(uroce_explain_record& r, const wire::Gid& gid) { std::copy(gid.begin(), gid.end(), r.peer_gid); }

// Why a work request completed with `status` (the peer's NAK, if one ended it).
FailureCheck completion_check(WcStatus status, bool peer_nak) {
    switch (status) {
        case WcStatus::RemAccessErr:
        case WcStatus::RemOpErr:
        case WcStatus::RemInvRdReqErr:
            return FailureCheck::PeerNak;
        case WcStatus::RemInvReqErr:
            return peer_nak ? FailureCheck::PeerNak : FailureCheck::InvalidRequest;
        case WcStatus::RetryExcErr:
            return FailureCheck::RetryExceeded;
        case WcStatus::RnrRetryExcErr:
            return FailureCheck::RnrRetryExceeded;
        case WcStatus::LocProtErr:
            return FailureCheck::LocalProtection;
        case WcStatus::LocLenErr:
            return FailureCheck::LocalLength;
        case WcStatus::LocQpOpErr:
            return FailureCheck::LocalQpOperation;
        case WcStatus::BadRespErr:
            return FailureCheck::BadResponse;
        case WcStatus::WrFlushErr:
            return FailureCheck::Flushed;
        case WcStatus::MwBindErr:
            return FailureCheck::MwBind;
        default:
            return FailureCheck::OtherStatus;
    }
}

}  // namespace

FailureCheck check_of(mr::RefusedCheck check) { return static_cast<FailureCheck>(check); }

void fill_diagnosis(uroce_explain_record& r, const mr::AccessDiagnosis& d) {
    r.check = static_cast<std::uint32_t>(check_of(d.check));
    if (d.region_known) {
        r.flags |= UROCE_EXPLAIN_REGION_KNOWN;
        r.region_pd = d.region_pd;
        r.region_start = d.region_start;
        r.region_length = d.region_length;
        r.region_access = d.region_access;
    }
    if (d.before_start) {
        r.flags |= UROCE_EXPLAIN_BEFORE_START;
    }
    r.overrun = d.overrun;
    if (d.has_history) {
        r.flags |= UROCE_EXPLAIN_HISTORY;
        r.registered_ns = d.registered_ns;
        r.deregistered_ns = d.deregistered_ns;
    }
}

uroce_explain_record stale_access_record(const mr::StaleAccessReport& s) {
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::StaleAccess);
    r.check = static_cast<std::uint32_t>(FailureCheck::RelaxedAfterDereg);
    r.client = s.owner;
    r.qpn = s.qpn;
    r.remote_qpn = s.peer.qpn;
    set_peer(r, s.peer.gid);
    r.opcode = bth_opcode_of(s.op);
    r.va = s.va;
    r.length = s.length;
    r.rkey = s.key;
    r.nak = UROCE_EXPLAIN_NO_NAK;
    r.count = 1;
    r.qp_pd = s.pd;
    r.region_pd = s.pd;
    r.region_start = s.user_addr;
    r.region_length = s.user_length;
    r.region_access = s.access_flags;
    r.registered_ns = s.registered_ns;
    r.deregistered_ns = s.deregistered_ns;
    r.flags = UROCE_EXPLAIN_REGION_KNOWN | UROCE_EXPLAIN_HISTORY;
    return r;
}

void Engine::note_key_refusal(const QueuePair& qp, const EpochGuard& guard, const mr::RemoteRequest& request,
                              mr::CheckStatus status) {
    (void)qp;
    if (failure_observer_) {
        key_refusal_ = KeyRefusal{request, mrs_.diagnose_remote(guard, request, status)};
    }
}

void Engine::note_refusal(const QueuePair& qp, wire::Psn psn, RequestFailure failure) {
    const std::optional<KeyRefusal> key = std::exchange(key_refusal_, std::nullopt);
    if (!failure_observer_) {
        return;
    }
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::RequestRefused);
    r.client = qp.owner;
    r.qpn = qp.qpn;
    r.remote_qpn = qp.attr.dest_qp_num;
    r.qp_pd = qp.pd;
    r.psn = psn.value();
    r.count = 1;
    r.check = static_cast<std::uint32_t>(failure == RequestFailure::InvalidRequest ? FailureCheck::InvalidRequest
                                                                                   : FailureCheck::RemoteOperational);
    if (const wire::Packet* p = current_request_; p != nullptr) {
        set_peer(r, p->src_gid());
        r.opcode = p->opcode();
        if (const wire::Reth* reth = p->reth()) {
            r.va = reth->va.get();
            r.rkey = reth->rkey.get();
            r.length = reth->dma_length.get();
        } else if (const wire::AtomicEth* a = p->atomic_eth()) {
            r.va = a->va.get();
            r.rkey = a->rkey.get();
            r.length = 8;
        }
        if (failure == RequestFailure::InvalidRequest && check_qp_access(qp, p->info()) != RequestFailure::None) {
            r.check = static_cast<std::uint32_t>(FailureCheck::QpAccessNotEnabled);
        }
    }
    if (key) {
        // A later packet of a WRITE is checked with the message's key at its own address.
        r.va = key->request.va;
        r.length = key->request.length;
        r.rkey = key->request.rkey.value();
        fill_diagnosis(r, key->diagnosis);
    }
    r.nak = qp.type == qp::QpType::Rc ? static_cast<std::int32_t>(outcome(failure).nak) : UROCE_EXPLAIN_NO_NAK;
    r.wc_status = static_cast<std::uint32_t>(outcome(failure).requester_status);
    failure_observer_(r);
}

void Engine::note_error_completion(const uroce_cqe& cqe, const SendWqe* w) {
    if (!failure_observer_) {
        return;
    }
    const QueuePair* qp = find_qp(Qpn{cqe.qp_num});
    uroce_explain_record r{};
    r.kind = static_cast<std::uint32_t>(FailureKind::ErrorCompletion);
    r.qpn = cqe.qp_num;
    r.opcode = cqe.opcode;
    r.wr_id = cqe.wr_id;
    r.wc_status = cqe.status;
    r.nak = UROCE_EXPLAIN_NO_NAK;
    r.count = 1;
    bool peer_nak = false;
    if (qp != nullptr) {
        r.client = qp->owner;
        r.remote_qpn = qp->attr.dest_qp_num;
        r.qp_pd = qp->pd;
        std::copy(qp->attr.ah_attr.dgid.begin(), qp->attr.ah_attr.dgid.end(), r.peer_gid);
        if (w != nullptr && qp->peer_nak && w->status != WcStatus::WrFlushErr) {
            peer_nak = true;
            r.nak = static_cast<std::int32_t>(qp->peer_nak->code);
            r.psn = qp->peer_nak->psn.value();
        }
    }
    if (w != nullptr) {
        r.flags |= UROCE_EXPLAIN_SEND_QUEUE;
        r.va = w->remote_addr;
        r.rkey = w->rkey;
        r.length = w->length;
    }
    r.check = static_cast<std::uint32_t>(completion_check(static_cast<WcStatus>(cqe.status), peer_nak));
    failure_observer_(r);
}

}  // namespace uroce::engine
