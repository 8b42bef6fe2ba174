// Memory windows: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw (type 1).
// ibv_bind_mw is an inline function of verbs.h that ends in the context's
// bind_mw op, which posts an IBV_WR_BIND_MW on the QP's send queue; the
// engine checks the MR, the range (in the MR's iova space), the access and
// the PD of the QP when the WR's turn comes.
#include <cerrno>
#include <new>

#include "provider.h"

namespace uroce::provider {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    auto req = request<uroce_ctrl_alloc_mw>(UROCE_CTRL_ALLOC_MW);
    req.pd = pd->handle;
    req.type = static_cast<std::uint32_t>(type);
    uroce_ctrl_mr_reply reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* mw = new (std::nothrow) ibv_mw{};
    if (mw == nullptr) {
        link_of(pd->context).call_handle(UROCE_CTRL_DEALLOC_MW, reply.rkey);
        errno = ENOMEM;
        return nullptr;
    }
    mw->context = pd->context;
    mw->pd = pd;
    mw->rkey = reply.rkey;
    mw->handle = reply.rkey;
    mw->type = type;
    return mw;
}

int dealloc_mw(ibv_mw* mw) {
    // The daemon names a window by its current rkey.
    if (const int err = link_of(mw->context).call_handle(UROCE_CTRL_DEALLOC_MW, mw->rkey); err != 0) {
        return err;
    }
    delete mw;
    return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
    if (qp == nullptr || mw == nullptr || bind == nullptr || qp->context != mw->context) {
        return EINVAL;
    }
    const ibv_mw_bind_info& info = bind->bind_info;
    // ibv_bind_mw(3) is for type 1 windows; a type 1 window is never zero
    // based (IBA o10-36.2.2); a length needs an MR (as rdma_rxe and mlx5).
    if (mw->type != IBV_MW_TYPE_1 || (info.mw_access_flags & IBV_ACCESS_ZERO_BASED) != 0 ||
        (info.mr == nullptr && info.length != 0)) {
        return EINVAL;
    }
    // A parent domain is its PD (parent_domain.h): compare the daemon's handles.
    if (info.mr != nullptr && info.mr->pd->handle != mw->pd->handle) {
        return EPERM;  // as mlx5: the MR belongs to another PD
    }
    // The bind is a work request on the send queue: it takes effect in
    // order with the WRs posted before it and completes as IBV_WC_BIND_MW
    // (signaled per send_flags or the QP's sq_sig_all). The window's next
    // rkey is chosen here and is the consumer's at once (ibv_bind_mw(3));
    // the daemon rejects the bind with IBV_WC_MW_BIND_ERR if it is invalid.
    ibv_send_wr wr{};
    wr.wr_id = bind->wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = bind->send_flags;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info = info;
    ibv_send_wr* bad = nullptr;
    if (const int err = post_send(qp, &wr, &bad); err != 0) {
        return err;
    }
    mw->rkey = wr.bind_mw.rkey;
    return 0;
}

}  // namespace uroce::provider
