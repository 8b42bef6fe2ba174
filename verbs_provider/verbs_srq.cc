// Shared receive queues: CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ.
#include <pthread.h>

#include <cerrno>
#include <new>

#include "provider.h"

namespace uroce::provider {

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    auto req = request<uroce_ctrl_srq>(UROCE_CTRL_CREATE_SRQ);
    req.pd = pd->handle;
    req.max_wr = attr->attr.max_wr;
    req.max_sge = attr->attr.max_sge;
    req.srq_limit = attr->attr.srq_limit;
    uroce_ctrl_srq reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* srq = new (std::nothrow) ibv_srq{};
    if (srq == nullptr) {
        link_of(pd->context).call_handle(UROCE_CTRL_DESTROY_SRQ, reply.handle);
        errno = ENOMEM;
        return nullptr;
    }
    srq->context = pd->context;
    srq->srq_context = attr->srq_context;
    srq->pd = pd;
    srq->handle = reply.handle;
    pthread_mutex_init(&srq->mutex, nullptr);
    pthread_cond_init(&srq->cond, nullptr);
    // ibv_create_srq(3): the actual values are returned.
    attr->attr.max_wr = reply.max_wr;
    attr->attr.max_sge = reply.max_sge;
    return srq;
}

int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask) {
    auto req = request<uroce_ctrl_srq>(UROCE_CTRL_MODIFY_SRQ);
    req.handle = srq->handle;
    req.attr_mask = static_cast<std::uint32_t>(attr_mask);
    req.max_wr = attr->max_wr;
    req.srq_limit = attr->srq_limit;
    uroce_ctrl_hdr reply{};
    return link_of(srq->context).call(&req, sizeof req, &reply, sizeof reply);
}

int query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    auto req = request<uroce_ctrl_handle>(UROCE_CTRL_QUERY_SRQ);
    req.handle = srq->handle;
    uroce_ctrl_srq reply{};
    if (const int err = link_of(srq->context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return err;
    }
    attr->max_wr = reply.max_wr;
    attr->max_sge = reply.max_sge;
    attr->srq_limit = reply.srq_limit;
    return 0;
}

int destroy_srq(ibv_srq* srq) {
    // EBUSY while a QP uses it.
    if (const int err = link_of(srq->context).call_handle(UROCE_CTRL_DESTROY_SRQ, srq->handle); err != 0) {
        return err;
    }
    pthread_mutex_destroy(&srq->mutex);
    pthread_cond_destroy(&srq->cond);
    delete srq;
    return 0;
}

int post_srq_recv(ibv_srq* /*srq*/, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    // Receive buffers are accepted; with no data path yet nothing arrives
    // to consume them.
    (void)wr;
    *bad_wr = nullptr;
    return 0;
}

}  // namespace uroce::provider
