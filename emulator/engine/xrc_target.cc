// An XRC target QP's requests (IBA annex A14): every request carries an
// XRCETH naming an XRC SRQ, which must belong to the target's XRC domain.
// The SRQ then serves the request: a SEND takes its receive WQE from that
// SRQ and completes into the SRQ's CQ, and memory is checked against the
// SRQ's PD (the target QP has none of its own) and reached in the SRQ's
// client. RDMA WRITE, READ and atomics otherwise run as on an RC QP.
#include "engine/engine.h"

namespace uroce::engine {

RequestFailure Engine::select_xrc_srq(QueuePair& qp, const wire::Packet& p) {
    const wire::XrcEth* xrceth = p.xrceth();
    if (xrceth == nullptr) {
        return RequestFailure::InvalidRequest;  // the parser gives every XRC request one
    }
    const std::uint32_t srqn = xrceth->xrc_srq.get();
    auto it = srqs_.find(srqn);
    // No XRC SRQ with that number: a malformed request (NAK Invalid Request).
    if (it == srqs_.end() || it->second.xrc.domain == 0) {
        return RequestFailure::InvalidRequest;
    }
    // An XRC SRQ of another domain: the domain is XRC's protection boundary,
    // as a PD is for a remote key (NAK Remote Access Error).
    if (it->second.xrc.domain != qp.xrc_domain) {
        return RequestFailure::RemoteAccess;
    }
    // A multi-packet SEND or WRITE stays with the SRQ it started on.
    if (qp.message != InboundMessage::None && qp.srq != srqn) {
        return RequestFailure::InvalidRequest;
    }
    const SharedReceiveQueue& srq = it->second;
    qp.srq = srqn;
    qp.recv_cq = srq.xrc.cq.value();
    qp.pd = srq.pd;
    qp.xrc_srq_owner = srq.owner;
    return RequestFailure::None;
}

}  // namespace uroce::engine
