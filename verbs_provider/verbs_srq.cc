// Shared receive queues: CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ.
// CREATE_SRQ's reply passes the SRQ ring's memfd; post_srq_recv writes
// receive WQEs there (work_queue.h).
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <new>

#include "provider.h"
#include "sanitizer.h"

namespace uroce::provider {

namespace {

Srq* to_srq(ibv_srq* srq) { return reinterpret_cast<Srq*>(srq); }

}  // namespace

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    auto* srq = new (std::nothrow) Srq{};
    if (srq == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    auto req = request<uroce_ctrl_srq>(UROCE_CTRL_CREATE_SRQ);
    req.pd = pd->handle;
    req.max_wr = attr->attr.max_wr;
    req.max_sge = attr->attr.max_sge;
    req.srq_limit = attr->attr.srq_limit;
    req.cookie = reinterpret_cast<std::uintptr_t>(&srq->srq);  // what async events name
    return finish_srq(srq, pd, &req, sizeof req, attr);
}

ibv_srq* finish_srq(Srq* srq, ibv_pd* pd, void* req, std::size_t req_len, ibv_srq_init_attr* attr) {
    uroce_ctrl_srq reply{};
    int ring_fd = -1;
    if (const int err = link_of(pd->context).call(req, req_len, &reply, sizeof reply, -1, &ring_fd); err != 0) {
        delete srq;
        errno = err;
        return nullptr;
    }
    srq->ring = map_ring(ring_fd, reply.ring_bytes);
    int err = srq->ring == nullptr ? errno : srq->rq.attach(srq->ring, reply.ring_bytes, WorkQueue::Kind::Receive);
    if (err == 0 && (srq->rq.entries() < reply.max_wr || srq->rq.max_sge() < reply.max_sge)) {
        err = EPROTO;
    }
    if (err != 0) {
        if (srq->ring != nullptr) {
            ::munmap(srq->ring, reply.ring_bytes);
        }
        link_of(pd->context).call_handle(UROCE_CTRL_DESTROY_SRQ, reply.handle);
        delete srq;
        errno = err;
        return nullptr;
    }
    srq->ring_bytes = reply.ring_bytes;
    ibv_srq& s = srq->srq;
    s.context = pd->context;
    s.srq_context = attr->srq_context;
    s.pd = pd;
    s.handle = reply.handle;
    pthread_mutex_init(&s.mutex, nullptr);
    pthread_cond_init(&s.cond, nullptr);
    // ibv_create_srq(3): the actual values are returned.
    attr->attr.max_wr = reply.max_wr;
    attr->attr.max_sge = reply.max_sge;
    loss_of(pd->context).add(srq);
    return &s;
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
    sanitizer::srq_destroyed(srq);
    Srq* s = to_srq(srq);
    loss_of(srq->context).remove(s);
    ::munmap(s->ring, s->ring_bytes);
    pthread_mutex_destroy(&srq->mutex);
    pthread_cond_destroy(&srq->cond);
    delete s;
    return 0;
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (link_of(srq->context).gone()) {
        *bad_wr = wr;
        return EIO;  // device_loss.cc
    }
    const int err = to_srq(srq)->rq.post_recv(doorbell_of(srq->context), wr, bad_wr);
    sanitizer::posted_receives(nullptr, srq, wr, err != 0 ? *bad_wr : nullptr);
    return err;
}

}  // namespace uroce::provider
