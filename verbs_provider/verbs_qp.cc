// Queue pairs: CREATE_QP, MODIFY_QP, QUERY_QP, DESTROY_QP. The daemon runs
// the IBTA state machine and the per-transition attribute masks
// (emulator/qp/qp_state_machine.h): an illegal transition or a wrong mask
// fails with EINVAL as on hardware. ibv_create_qp fills in nothing itself,
// so every generic field of the ibv_qp is set here.
//
// CREATE_QP's reply passes one memfd with the QP's SQ ring and (without an
// SRQ) its RQ ring; post_send and post_recv write WQEs there
// (work_queue.h) and only make a system call to wake a sleeping daemon.
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "provider.h"
#include "sanitizer.h"

namespace uroce::provider {
namespace {

Qp* to_qp(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }

uroce_ctrl_qp_cap cap_to_wire(const ibv_qp_cap& c) {
    uroce_ctrl_qp_cap w{};
    w.max_send_wr = c.max_send_wr;
    w.max_recv_wr = c.max_recv_wr;
    w.max_send_sge = c.max_send_sge;
    w.max_recv_sge = c.max_recv_sge;
    w.max_inline_data = c.max_inline_data;
    return w;
}

ibv_qp_cap cap_from_wire(const uroce_ctrl_qp_cap& w) {
    ibv_qp_cap c{};
    c.max_send_wr = w.max_send_wr;
    c.max_recv_wr = w.max_recv_wr;
    c.max_send_sge = w.max_send_sge;
    c.max_recv_sge = w.max_recv_sge;
    c.max_inline_data = w.max_inline_data;
    return c;
}

uroce_ctrl_qp_attr attr_to_wire(const ibv_qp_attr& a) {
    uroce_ctrl_qp_attr w{};
    w.qp_state = a.qp_state;
    w.cur_qp_state = a.cur_qp_state;
    w.path_mtu = a.path_mtu;
    w.path_mig_state = a.path_mig_state;
    w.qkey = a.qkey;
    w.rq_psn = a.rq_psn;
    w.sq_psn = a.sq_psn;
    w.dest_qp_num = a.dest_qp_num;
    w.qp_access_flags = static_cast<std::uint32_t>(a.qp_access_flags);
    w.rate_limit = a.rate_limit;
    w.pkey_index = a.pkey_index;
    w.en_sqd_async_notify = a.en_sqd_async_notify;
    w.max_rd_atomic = a.max_rd_atomic;
    w.max_dest_rd_atomic = a.max_dest_rd_atomic;
    w.min_rnr_timer = a.min_rnr_timer;
    w.port_num = a.port_num;
    w.timeout = a.timeout;
    w.retry_cnt = a.retry_cnt;
    w.rnr_retry = a.rnr_retry;
    w.cap = cap_to_wire(a.cap);
    const ibv_ah_attr& ah = a.ah_attr;
    std::memcpy(w.ah_attr.dgid, ah.grh.dgid.raw, sizeof w.ah_attr.dgid);
    w.ah_attr.flow_label = ah.grh.flow_label;
    w.ah_attr.sgid_index = ah.grh.sgid_index;
    w.ah_attr.hop_limit = ah.grh.hop_limit;
    w.ah_attr.traffic_class = ah.grh.traffic_class;
    w.ah_attr.is_global = ah.is_global;
    w.ah_attr.dlid = ah.dlid;
    w.ah_attr.sl = ah.sl;
    w.ah_attr.src_path_bits = ah.src_path_bits;
    w.ah_attr.static_rate = ah.static_rate;
    w.ah_attr.port_num = ah.port_num;
    return w;
}

void attr_from_wire(const uroce_ctrl_qp_attr& w, ibv_qp_attr& a) {
    a = ibv_qp_attr{};
    a.qp_state = static_cast<ibv_qp_state>(w.qp_state);
    a.cur_qp_state = static_cast<ibv_qp_state>(w.cur_qp_state);
    a.path_mtu = static_cast<ibv_mtu>(w.path_mtu);
    a.path_mig_state = static_cast<ibv_mig_state>(w.path_mig_state);
    a.qkey = w.qkey;
    a.rq_psn = w.rq_psn;
    a.sq_psn = w.sq_psn;
    a.dest_qp_num = w.dest_qp_num;
    a.qp_access_flags = static_cast<unsigned int>(w.qp_access_flags);
    a.rate_limit = w.rate_limit;
    a.pkey_index = w.pkey_index;
    a.en_sqd_async_notify = w.en_sqd_async_notify;
    a.sq_draining = w.sq_draining;
    a.max_rd_atomic = w.max_rd_atomic;
    a.max_dest_rd_atomic = w.max_dest_rd_atomic;
    a.min_rnr_timer = w.min_rnr_timer;
    a.port_num = w.port_num;
    a.timeout = w.timeout;
    a.retry_cnt = w.retry_cnt;
    a.rnr_retry = w.rnr_retry;
    a.cap = cap_from_wire(w.cap);
    ibv_ah_attr& ah = a.ah_attr;
    std::memcpy(ah.grh.dgid.raw, w.ah_attr.dgid, sizeof w.ah_attr.dgid);
    ah.grh.flow_label = w.ah_attr.flow_label;
    ah.grh.sgid_index = w.ah_attr.sgid_index;
    ah.grh.hop_limit = w.ah_attr.hop_limit;
    ah.grh.traffic_class = w.ah_attr.traffic_class;
    ah.is_global = w.ah_attr.is_global;
    ah.dlid = w.ah_attr.dlid;
    ah.sl = w.ah_attr.sl;
    ah.src_path_bits = w.ah_attr.src_path_bits;
    ah.static_rate = w.ah_attr.static_rate;
    ah.port_num = w.ah_attr.port_num;
}

// Maps the QP's rings and attaches its work queues; 0 or an errno.
int attach_rings(Qp& qp, int fd, const uroce_ctrl_create_qp_reply& reply, bool has_rq) {
    qp.rings = map_ring(fd, reply.ring_bytes);
    if (qp.rings == nullptr) {
        return errno;
    }
    qp.ring_bytes = reply.ring_bytes;
    auto* base = static_cast<std::uint8_t*>(qp.rings);
    if (reply.sq_offset >= reply.ring_bytes || (has_rq && (reply.rq_offset == 0 || reply.rq_offset >= reply.ring_bytes))) {
        return EPROTO;
    }
    int err = qp.sq.attach(base + reply.sq_offset, reply.ring_bytes - reply.sq_offset, WorkQueue::Kind::Send);
    if (err == 0 && has_rq) {
        err = qp.rq.attach(base + reply.rq_offset, reply.ring_bytes - reply.rq_offset, WorkQueue::Kind::Receive);
    }
    // The rings must hold what the reply grants.
    if (err == 0 && (qp.sq.entries() < reply.cap.max_send_wr || qp.sq.max_sge() < reply.cap.max_send_sge ||
                     qp.sq.max_inline() < reply.cap.max_inline_data ||
                     (has_rq && (qp.rq.entries() < reply.cap.max_recv_wr || qp.rq.max_sge() < reply.cap.max_recv_sge)))) {
        err = EPROTO;
    }
    return err;
}

}  // namespace

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
    // An XRC send QP has no receive side: no SRQ, and its recv_cq is
    // ignored (the daemon is given the send CQ for it).
    const bool xrc_send = attr->qp_type == IBV_QPT_XRC_SEND;
    ibv_cq* recv_cq = xrc_send ? attr->send_cq : attr->recv_cq;
    if (attr->send_cq == nullptr || recv_cq == nullptr || attr->send_cq->context != pd->context ||
        recv_cq->context != pd->context || (attr->srq != nullptr && attr->srq->context != pd->context) ||
        (xrc_send && attr->srq != nullptr)) {
        errno = EINVAL;
        return nullptr;
    }
    if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD && !xrc_send) {
        errno = EOPNOTSUPP;  // RAW_PACKET: not offered; XRC_RECV: create_qp_ex (verbs_xrc.cc)
        return nullptr;
    }
    auto* qp = make_object<Qp>(pd, UROCE_DV_RES_TYPE_QP);
    if (qp == nullptr) {
        return nullptr;
    }
    auto req = request<uroce_ctrl_create_qp>(UROCE_CTRL_CREATE_QP);
    req.pd = pd->handle;
    req.send_cq = attr->send_cq->handle;
    req.recv_cq = recv_cq->handle;
    req.srq = attr->srq != nullptr ? attr->srq->handle : 0;
    req.qp_type = static_cast<std::uint8_t>(attr->qp_type);
    req.sq_sig_all = attr->sq_sig_all != 0 ? 1 : 0;
    req.cap = cap_to_wire(attr->cap);
    req.cookie = reinterpret_cast<std::uintptr_t>(&qp->vqp.qp);  // what async events name
    uroce_ctrl_create_qp_reply reply{};
    int ring_fd = -1;
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply, -1, &ring_fd); err != 0) {
        destroy_object(qp);
        errno = err;
        return nullptr;
    }
    if (const int err = attach_rings(*qp, ring_fd, reply, attr->srq == nullptr && !xrc_send); err != 0) {
        if (qp->rings != nullptr) {
            ::munmap(qp->rings, qp->ring_bytes);
        }
        link_of(pd->context).call_handle(UROCE_CTRL_DESTROY_QP, reply.qpn);
        destroy_object(qp);
        errno = err;
        return nullptr;
    }
    qp->cap = cap_from_wire(reply.cap);
    qp->sq_sig_all = attr->sq_sig_all;
    qp->vqp.comp_mask = 0;  // no ibv_qp_ex work-request API
    ibv_qp& q = qp->vqp.qp;
    q.context = pd->context;
    q.qp_context = attr->qp_context;
    q.pd = pd;
    q.send_cq = attr->send_cq;
    q.recv_cq = recv_cq;
    q.srq = attr->srq;
    q.handle = reply.qpn;
    q.qp_num = reply.qpn;
    q.state = IBV_QPS_RESET;
    q.qp_type = attr->qp_type;
    pthread_mutex_init(&q.mutex, nullptr);
    pthread_cond_init(&q.cond, nullptr);
    q.events_completed = 0;
    attr->cap = qp->cap;  // ibv_create_qp(3): the actual values are returned
    loss_of(pd->context).add(qp);
    return &q;
}

int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    auto req = request<uroce_ctrl_modify_qp>(UROCE_CTRL_MODIFY_QP);
    req.qpn = qp->qp_num;
    req.attr_mask = static_cast<std::uint32_t>(attr_mask);
    req.attr = attr_to_wire(*attr);
    uroce_ctrl_hdr reply{};
    // libibverbs records the new state in qp->state on success.
    const int err = link_of(qp->context).call(&req, sizeof req, &reply, sizeof reply);
    if (err == 0 && (attr_mask & IBV_QP_STATE) != 0 && attr->qp_state == IBV_QPS_RESET && qp->send_cq != nullptr) {
        // The daemon has reset the QP: none of its completions can follow.
        to_cq(qp->send_cq)->completions.discard_qp(qp->qp_num);
        if (qp->recv_cq != qp->send_cq) {
            to_cq(qp->recv_cq)->completions.discard_qp(qp->qp_num);
        }
    }
    return err;
}

int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int /*attr_mask*/, ibv_qp_init_attr* init_attr) {
    auto req = request<uroce_ctrl_handle>(UROCE_CTRL_QUERY_QP);
    req.handle = qp->qp_num;
    uroce_ctrl_query_qp_reply reply{};
    if (const int err = link_of(qp->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return err;
    }
    // Every attribute, whatever the mask asked for (ibv_query_qp(3) allows it).
    attr_from_wire(reply.attr, *attr);
    const Qp* q = to_qp(qp);
    attr->cap = q->cap;
    *init_attr = ibv_qp_init_attr{};
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = q->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = q->sq_sig_all;
    return 0;
}

int destroy_qp(ibv_qp* qp) {
    // A context may hold several handles on one XRC target QP: name this one.
    const int err = qp->qp_type == IBV_QPT_XRC_RECV ? close_xrc_target(qp)
                                                    : link_of(qp->context).call_handle(UROCE_CTRL_DESTROY_QP, qp->qp_num);
    if (err != 0) {
        return err;
    }
    sanitizer::qp_destroyed(qp->qp_num);
    Qp* q = to_qp(qp);
    loss_of(qp->context).remove(q);
    if (q->rings != nullptr) {  // an XRC target QP has none
        ::munmap(q->rings, q->ring_bytes);
    }
    pthread_mutex_destroy(&qp->mutex);
    pthread_cond_destroy(&qp->cond);
    destroy_object(q);
    return 0;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    // qp->state is what libibverbs recorded at the last successful
    // ibv_modify_qp; a QP the daemon moved to an error state still takes
    // work, which then completes flushed. Once the daemon has gone, posts
    // fail with EIO (device_loss.cc).
    if (link_of(qp->context).gone()) {
        *bad_wr = wr;
        return EIO;
    }
    if (qp->qp_type == IBV_QPT_XRC_RECV) {
        *bad_wr = wr;
        return EINVAL;  // an XRC target QP has no send queue
    }
    Qp* q = to_qp(qp);
    const int err = q->sq.post_send(qp->qp_type, qp->state, doorbell_of(qp->context), wr, bad_wr);
    sanitizer::posted_sends(qp, q->sq_sig_all != 0, wr, err != 0 ? *bad_wr : nullptr);
    return err;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    // A QP with an SRQ has no receive queue of its own; before INIT the
    // receive queue does not take work (IBA 10.3.1; rdma_rxe refuses both
    // with EINVAL).
    if (qp->srq != nullptr || qp->state == IBV_QPS_RESET || qp->qp_type == IBV_QPT_XRC_SEND ||
        qp->qp_type == IBV_QPT_XRC_RECV) {  // XRC: receives go to XRC SRQs
        *bad_wr = wr;
        return EINVAL;
    }
    if (link_of(qp->context).gone()) {
        *bad_wr = wr;
        return EIO;
    }
    const int err = to_qp(qp)->rq.post_recv(doorbell_of(qp->context), wr, bad_wr);
    sanitizer::posted_receives(qp, nullptr, wr, err != 0 ? *bad_wr : nullptr);
    return err;
}

}  // namespace uroce::provider
