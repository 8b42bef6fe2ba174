// Completion queues: CREATE_CQ / DESTROY_CQ. The daemon passes the CQ ring
// (abi/control.h uroce_cq_ring) as a memfd, mapped here. The data path that
// fills the ring is the next step; until then the ring stays empty and
// poll_cq finds no completions.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "provider.h"

namespace uroce::provider {

namespace {

Cq* to_cq(ibv_cq* cq) { return reinterpret_cast<Cq*>(cq); }

}  // namespace

ibv_cq* create_cq(ibv_context* ctx, int cqe, ibv_comp_channel* /*channel*/, int comp_vector) {
    if (cqe <= 0 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
        errno = EINVAL;
        return nullptr;
    }
    auto req = request<uroce_ctrl_create_cq>(UROCE_CTRL_CREATE_CQ);
    req.cqe = static_cast<std::uint32_t>(cqe);
    req.comp_vector = static_cast<std::uint32_t>(comp_vector);
    uroce_ctrl_cq_reply reply{};
    int ring_fd = -1;
    if (const int err = link_of(ctx).call(&req, sizeof req, &reply, sizeof reply, -1, &ring_fd); err != 0) {
        errno = err;
        return nullptr;
    }
    void* ring = MAP_FAILED;
    if (ring_fd >= 0 && reply.ring_bytes >= sizeof(uroce_cq_ring)) {
        ring = ::mmap(nullptr, reply.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
    }
    if (ring_fd >= 0) {
        ::close(ring_fd);
    }
    auto* cq = ring == MAP_FAILED ? nullptr : new (std::nothrow) Cq{};
    if (cq == nullptr) {
        if (ring != MAP_FAILED) {
            ::munmap(ring, reply.ring_bytes);
        }
        link_of(ctx).call_handle(UROCE_CTRL_DESTROY_CQ, reply.handle);
        errno = ENOMEM;
        return nullptr;
    }
    cq->ring = ring;
    cq->ring_bytes = reply.ring_bytes;
    // libibverbs' ibv_create_cq fills context, channel, cq_context, the
    // mutex and cond (verbs_init_cq) after we return.
    ibv_cq& c = cq->vcq.cq;
    c.context = ctx;
    c.handle = reply.handle;
    c.cqe = static_cast<int>(reply.cqe);
    return &c;
}

int destroy_cq(ibv_cq* ibcq) {
    Cq* cq = to_cq(ibcq);
    // EBUSY while a QP uses it.
    if (const int err = link_of(ibcq->context).call_handle(UROCE_CTRL_DESTROY_CQ, ibcq->handle); err != 0) {
        return err;
    }
    ::munmap(cq->ring, cq->ring_bytes);
    delete cq;
    return 0;
}

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* /*wc*/) {
    if (num_entries < 0) {
        return -1;
    }
    // Entries between consumer and producer are completions; the daemon
    // produces none yet (no data path), so there is nothing to return.
    const auto* ring = static_cast<const uroce_cq_ring*>(to_cq(ibcq)->ring);
    (void)ring;
    return 0;
}

int req_notify_cq(ibv_cq* /*cq*/, int /*solicited_only*/) {
    // Nothing will complete until the data path exists; arming is accepted.
    return 0;
}

}  // namespace uroce::provider
