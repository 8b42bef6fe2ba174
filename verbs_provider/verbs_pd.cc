// Protection domains: ALLOC_PD / DEALLOC_PD. The daemon's PD handle is
// ibv_pd.handle; every object created in the PD names it. Parent domains
// over a PD: parent_domain.cc.
#include <cerrno>
#include <new>

#include "parent_domain.h"
#include "provider.h"

namespace uroce::provider {

ibv_pd* alloc_pd(ibv_context* ctx) {
    uroce_ctrl_hdr req{};
    req.op = UROCE_CTRL_ALLOC_PD;
    uroce_ctrl_handle reply{};
    if (const int err = link_of(ctx).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* pd = new (std::nothrow) Pd{};
    if (pd == nullptr) {
        link_of(ctx).call_handle(UROCE_CTRL_DEALLOC_PD, reply.handle);
        errno = ENOMEM;
        return nullptr;
    }
    pd->pd.context = ctx;
    pd->pd.handle = reply.handle;
    return &pd->pd;
}

int dealloc_pd(ibv_pd* ibpd) {
    Pd* pd = to_pd(ibpd);
    if (pd->kind == PdKind::Parent) {
        return dealloc_parent_domain(pd);
    }
    if (pd->users.load() != 0) {
        return EBUSY;  // a parent domain is over it
    }
    // EBUSY while MRs, windows, QPs, SRQs or AHs still use it.
    if (const int err = link_of(ibpd->context).call_handle(UROCE_CTRL_DEALLOC_PD, ibpd->handle); err != 0) {
        return err;
    }
    delete pd;
    return 0;
}

}  // namespace uroce::provider
