// Memory windows: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw (type 1).
// ibv_bind_mw is an inline function of verbs.h that ends in the context's
// bind_mw op; the bind itself is the daemon's BIND_MW, which checks the MR,
// the range (in the MR's iova space), the access and the PD of the QP the
// bind is posted on, and gives the window a new rkey.
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
    auto req = request<uroce_ctrl_bind_mw>(UROCE_CTRL_BIND_MW);
    req.mw_rkey = mw->rkey;
    const ibv_mw_bind_info& info = bind->bind_info;
    req.mr_lkey = info.mr != nullptr ? info.mr->lkey : 0;  // no MR, length 0: unbind
    req.addr = info.addr;
    req.length = info.length;
    req.access = info.mw_access_flags;
    req.qp_pd = qp->pd->handle;
    uroce_ctrl_mr_reply reply{};
    if (const int err = link_of(qp->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return err;
    }
    // The bind took effect at once. Its completion (for a signaled bind)
    // comes with the data path; the window's new key is already usable.
    mw->rkey = reply.rkey;
    return 0;
}

}  // namespace uroce::provider
