// ibv_create_qp_ex and the extended QP's work-request API (ibv_wr_post(3)).
// The QP itself is made as ibv_create_qp makes it (verbs_qp.cc); with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS it also gets the ibv_qp_ex function table
// (qp_ex_ops.h) and VERBS_QP_EX, so ibv_qp_to_qp_ex returns it. Its
// ibv_wr_* batches go into the same send ring as ibv_post_send, through
// WorkQueue::post_send_all.
#include <cerrno>

#include "extended_rules.h"
#include "provider.h"
#include "qp_ex_ops.h"
#include "sanitizer.h"

namespace uroce::provider {

SendBatch& batch_of(ibv_qp_ex* qp) { return reinterpret_cast<Qp*>(qp)->batch; }

int post_batch(ibv_qp_ex* qpx, ibv_send_wr* wr) {
    ibv_qp* qp = &qpx->qp_base;
    if (link_of(qp->context).gone()) {
        return EIO;  // as post_send
    }
    Qp* q = reinterpret_cast<Qp*>(qp);
    const int err = q->sq.post_send_all(qp->qp_type, qp->state, doorbell_of(qp->context), wr);
    if (err == 0) {
        sanitizer::posted_sends(qp, q->sq_sig_all != 0, wr, nullptr);
    }
    return err;
}

ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
    if (const int err = check_qp_init_attr_ex(*attr); err != 0) {
        errno = err;
        return nullptr;
    }
    if (attr->qp_type == IBV_QPT_XRC_RECV) {
        return create_xrc_target(ctx, attr);
    }
    if (attr->pd->context != ctx) {
        errno = EINVAL;
        return nullptr;
    }
    ibv_qp_init_attr basic{};
    basic.qp_context = attr->qp_context;
    basic.send_cq = attr->send_cq;
    basic.recv_cq = attr->recv_cq;
    basic.srq = attr->srq;
    basic.cap = attr->cap;
    basic.qp_type = attr->qp_type;
    basic.sq_sig_all = attr->sq_sig_all;
    ibv_qp* qp = create_qp(attr->pd, &basic);
    if (qp == nullptr) {
        return nullptr;
    }
    attr->cap = basic.cap;  // the granted values, as ibv_create_qp returns them
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0) {
        Qp* q = reinterpret_cast<Qp*>(qp);
        q->batch.configure(attr->qp_type, attr->send_ops_flags, q->sq.max_sge(), q->sq.max_inline());
        install_send_ops(q->vqp.qp_ex);
        q->vqp.comp_mask |= pabi::VERBS_QP_EX;
    }
    return qp;
}

}  // namespace uroce::provider
