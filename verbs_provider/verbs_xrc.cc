// XRC (ibv_open_xrcd(3), ibv_create_srq_ex(3), ibv_create_qp_ex(3)): domains,
// XRC SRQs and XRC target QPs. An XRC send QP is an ordinary create_qp with
// qp_type IBV_QPT_XRC_SEND (verbs_qp.cc), its WRs carrying the remote SRQ
// number (work_queue.cc, send_batch.cc).
//
// A domain opened with a file is shared by every process that opens the
// same file on this device: the file travels with OPEN_XRCD and the daemon
// keys the domain by its st_dev and st_ino, as the kernel keys it by inode.
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include <cerrno>
#include <new>

#include "provider.h"

namespace uroce::provider {

ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) {
    // IBV_XRCD_INIT_ATTR_FD and _OFLAGS are required (ibv_open_xrcd(3)).
    constexpr std::uint32_t kRequired = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    if ((attr->comp_mask & kRequired) != kRequired || (attr->comp_mask & ~kRequired) != 0 ||
        (attr->oflags & ~(O_CREAT | O_EXCL)) != 0) {
        errno = (attr->comp_mask & ~kRequired) != 0 ? EOPNOTSUPP : EINVAL;
        return nullptr;
    }
    auto req = request<uroce_ctrl_open_xrcd>(UROCE_CTRL_OPEN_XRCD);
    if (attr->fd >= 0) {
        struct stat st {};
        if (::fstat(attr->fd, &st) != 0) {
            return nullptr;  // EBADF
        }
        req.has_inode = 1;
        req.dev = st.st_dev;
        req.ino = st.st_ino;
    }
    req.create = (attr->oflags & O_CREAT) != 0 ? 1 : 0;
    req.exclusive = (attr->oflags & O_EXCL) != 0 ? 1 : 0;
    auto* x = new (std::nothrow) Xrcd{};
    if (x == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    uroce_ctrl_handle reply{};
    // The file goes along (SCM_RIGHTS): the daemon takes its inode itself.
    if (const int err = link_of(ctx).call(&req, sizeof req, &reply, sizeof reply, attr->fd >= 0 ? attr->fd : -1);
        err != 0) {
        delete x;
        errno = err;
        return nullptr;
    }
    x->xrcd.context = ctx;
    x->handle = reply.handle;
    return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
    auto* x = reinterpret_cast<Xrcd*>(xrcd);
    if (const int err = link_of(xrcd->context).call_handle(UROCE_CTRL_CLOSE_XRCD, x->handle); err != 0) {
        return err;
    }
    delete x;
    return 0;
}

ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr) {
    constexpr std::uint32_t kOffered =
        IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    if ((attr->comp_mask & ~kOffered) != 0) {
        errno = EOPNOTSUPP;  // tag matching
        return nullptr;
    }
    const bool typed = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) != 0;
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr || attr->pd->context != ctx ||
        (typed && attr->srq_type != IBV_SRQT_BASIC && attr->srq_type != IBV_SRQT_XRC)) {
        errno = typed && attr->srq_type == IBV_SRQT_TM ? EOPNOTSUPP : EINVAL;
        return nullptr;
    }
    ibv_srq_init_attr basic{};
    basic.srq_context = attr->srq_context;
    basic.attr = attr->attr;
    if (!typed || attr->srq_type == IBV_SRQT_BASIC) {
        ibv_srq* srq = create_srq(attr->pd, &basic);
        attr->attr = basic.attr;
        return srq;
    }
    // An XRC SRQ needs its domain and the CQ its receives complete into.
    constexpr std::uint32_t kXrc = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    if ((attr->comp_mask & kXrc) != kXrc || attr->xrcd == nullptr || attr->cq == nullptr ||
        attr->xrcd->context != ctx || attr->cq->context != ctx) {
        errno = EINVAL;
        return nullptr;
    }
    auto* srq = new (std::nothrow) Srq{};
    if (srq == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    uroce_ctrl_create_xrc_srq req{};
    req.srq = request<uroce_ctrl_srq>(UROCE_CTRL_CREATE_XRC_SRQ);  // its header leads the message
    req.srq.pd = attr->pd->handle;
    req.srq.max_wr = attr->attr.max_wr;
    req.srq.max_sge = attr->attr.max_sge;
    req.srq.cookie = reinterpret_cast<std::uintptr_t>(&srq->srq);
    req.xrcd = reinterpret_cast<Xrcd*>(attr->xrcd)->handle;
    req.cq = attr->cq->handle;
    ibv_srq* made = finish_srq(srq, attr->pd, &req, sizeof req, &basic);
    attr->attr = basic.attr;
    return made;
}

int get_srq_num(ibv_srq* srq, std::uint32_t* srq_num) {
    *srq_num = srq->handle;  // the daemon's SRQ handle is the number XRCETH carries
    return 0;
}

namespace {

// A handle on an XRC target QP, made (CREATE_XRC_TGT) or opened
// (OPEN_XRC_TGT) by `req`, whose cookie is set here.
template <typename Request>
ibv_qp* xrc_target_handle(ibv_context* ctx, Request& req, void* qp_context) {
    auto* qp = new (std::nothrow) Qp{};
    if (qp == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    req.cookie = reinterpret_cast<std::uintptr_t>(&qp->vqp.qp);
    uroce_ctrl_handle reply{};
    if (const int err = link_of(ctx).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        delete qp;
        errno = err;
        return nullptr;
    }
    // No queues, no CQs, no PD: the QP only receives, into XRC SRQs.
    qp->cap = ibv_qp_cap{};
    qp->vqp.comp_mask = 0;
    ibv_qp& q = qp->vqp.qp;
    q.context = ctx;
    q.qp_context = qp_context;
    q.handle = reply.handle;
    q.qp_num = reply.handle;
    q.state = IBV_QPS_RESET;
    q.qp_type = IBV_QPT_XRC_RECV;
    pthread_mutex_init(&q.mutex, nullptr);
    pthread_cond_init(&q.cond, nullptr);
    return &q;
}

}  // namespace

ibv_qp* create_xrc_target(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
    if (attr->xrcd->context != ctx) {
        errno = EINVAL;
        return nullptr;
    }
    auto req = request<uroce_ctrl_create_xrc_tgt>(UROCE_CTRL_CREATE_XRC_TGT);
    req.xrcd = reinterpret_cast<Xrcd*>(attr->xrcd)->handle;
    ibv_qp* q = xrc_target_handle(ctx, req, attr->qp_context);
    if (q != nullptr) {
        attr->cap = ibv_qp_cap{};
    }
    return q;
}

ibv_qp* open_qp(ibv_context* ctx, ibv_qp_open_attr* attr) {
    // ibv_open_qp(3): the QP number, its XRC domain and its type are
    // required, and only an XRC target QP can be opened (as the kernel's
    // ib_uverbs_open_qp and ib_open_qp refuse anything else with EINVAL).
    constexpr std::uint32_t kRequired = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    if ((attr->comp_mask & kRequired) != kRequired || attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED ||
        attr->qp_type != IBV_QPT_XRC_RECV || attr->xrcd == nullptr || attr->xrcd->context != ctx) {
        errno = EINVAL;
        return nullptr;
    }
    auto req = request<uroce_ctrl_open_xrc_tgt>(UROCE_CTRL_OPEN_XRC_TGT);
    req.xrcd = reinterpret_cast<Xrcd*>(attr->xrcd)->handle;
    req.qpn = attr->qp_num;
    const std::uint32_t mask = attr->comp_mask;
    return xrc_target_handle(ctx, req, (mask & IBV_QP_OPEN_ATTR_CONTEXT) != 0 ? attr->qp_context : nullptr);
}

int close_xrc_target(ibv_qp* qp) {
    auto req = request<uroce_ctrl_close_xrc_tgt>(UROCE_CTRL_CLOSE_XRC_TGT);
    req.qpn = qp->qp_num;
    req.cookie = reinterpret_cast<std::uintptr_t>(qp);  // as xrc_target_handle set it
    uroce_ctrl_hdr reply{};
    return link_of(qp->context).call(&req, sizeof req, &reply, sizeof reply);
}

}  // namespace uroce::provider
