// Completion queues: CREATE_CQ / DESTROY_CQ, and the data path's reading
// side. The daemon passes the CQ ring (abi/rings.h) as a memfd, mapped here;
// poll_cq and req_notify_cq work on it without a system call
// (completion_ring.h).
//
// Completion channels: ibv_get_cq_event reads 8-byte CQ pointers from the
// channel's fd. The daemon writes them (the cookie, our ibv_cq pointer) into
// the channel's notify fd, which CREATE_CQ passes along. Channels of uroce
// contexts come from the preload library of `uroce exec`
// (comp_channel_preload.c), which exports uroce_comp_channel_notify_fd; it is
// looked up at run time because the plugin also runs without it.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <new>

#include "provider.h"
#include "sanitizer.h"

namespace uroce::provider {

namespace {

// The write end of a uroce completion channel, or -1 with errno set (and
// the reason on stderr: a program otherwise sees only a failed create_cq).
int channel_notify_fd(ibv_comp_channel* channel) {
    using NotifyFd = int (*)(ibv_comp_channel*);
    void* sym = ::dlsym(RTLD_DEFAULT, "uroce_comp_channel_notify_fd");
    if (sym == nullptr) {
        std::fprintf(stderr,
                     "uroce: ibv_create_cq with a completion channel needs liburoce-preload.so "
                     "(run the program under `uroce exec`)\n");
        errno = EOPNOTSUPP;
        return -1;
    }
    const int fd = reinterpret_cast<NotifyFd>(sym)(channel);
    if (fd < 0) {
        std::fprintf(stderr, "uroce: ibv_create_cq: the completion channel is not one of a uroce context\n");
        errno = EINVAL;
    }
    return fd;
}

}  // namespace

void* map_ring(int fd, std::uint64_t bytes) {
    UniqueFd ring_file(fd);  // the mapping keeps the ring; the file is closed either way
    void* mem = MAP_FAILED;
    if (ring_file.valid() && bytes != 0) {
        mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_file.get(), 0);
    }
    const int err = mem == MAP_FAILED ? (ring_file.valid() ? errno : EPROTO) : 0;
    ring_file.reset();
    if (mem == MAP_FAILED) {
        errno = err;
        return nullptr;
    }
    return mem;
}

ibv_cq* create_cq(ibv_context* ctx, int cqe, ibv_comp_channel* channel, int comp_vector) {
    return create_cq_flags(ctx, cqe, channel, comp_vector, 0);
}

ibv_cq* create_cq_flags(ibv_context* ctx, int cqe, ibv_comp_channel* channel, int comp_vector, std::uint32_t flags,
                        ibv_pd* domain) {
    if (cqe <= 0 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
        errno = EINVAL;
        return nullptr;
    }
    const int notify_fd = channel != nullptr ? channel_notify_fd(channel) : -1;
    if (channel != nullptr && notify_fd < 0) {
        return nullptr;
    }
    auto* cq = make_object<Cq>(domain, UROCE_DV_RES_TYPE_CQ);
    if (cq == nullptr) {
        return nullptr;
    }
    auto req = request<uroce_ctrl_create_cq>(UROCE_CTRL_CREATE_CQ);
    req.cqe = static_cast<std::uint32_t>(cqe);
    req.comp_vector = static_cast<std::uint32_t>(comp_vector);
    req.cookie = reinterpret_cast<std::uintptr_t>(&cq->vcq.cq);  // what ibv_get_cq_event reads
    req.has_channel = channel != nullptr ? 1 : 0;
    req.flags = flags;
    uroce_ctrl_cq_reply reply{};
    int ring_fd = -1;
    if (const int err = link_of(ctx).call(&req, sizeof req, &reply, sizeof reply, notify_fd, &ring_fd); err != 0) {
        destroy_object(cq);
        errno = err;
        return nullptr;
    }
    cq->ring = map_ring(ring_fd, reply.ring_bytes);
    int err = cq->ring == nullptr ? errno : cq->completions.attach(cq->ring, reply.ring_bytes);
    if (err == 0 && cq->completions.entries() < reply.cqe) {
        err = EPROTO;
    }
    if (err != 0) {
        if (cq->ring != nullptr) {
            ::munmap(cq->ring, reply.ring_bytes);
        }
        link_of(ctx).call_handle(UROCE_CTRL_DESTROY_CQ, reply.handle);
        destroy_object(cq);
        errno = err;
        return nullptr;
    }
    cq->ring_bytes = reply.ring_bytes;
    cq->channel_notify_fd = notify_fd;
    if (channel != nullptr) {
        // Who wakes a blocked ibv_get_cq_event should the daemon die.
        err = watcher_of(ctx).watch(link_of(ctx), cq);
        if (err != 0) {
            ::munmap(cq->ring, reply.ring_bytes);
            link_of(ctx).call_handle(UROCE_CTRL_DESTROY_CQ, reply.handle);
            destroy_object(cq);
            errno = err;
            return nullptr;
        }
    }
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
    watcher_of(ibcq->context).unwatch(cq);
    ::munmap(cq->ring, cq->ring_bytes);
    destroy_object(cq);
    return 0;
}

int poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
    Cq* cq = to_cq(ibcq);
    int n = cq->completions.poll(num_entries, wc);
    if (n == 0 && num_entries > 0 && loss_of(ibcq->context).device_gone(link_of(ibcq->context))) {
        // The daemon has gone and wrote everything it ever will: what is
        // still outstanding completes flushed (device_loss.cc).
        n = cq->flushed.poll(loss_of(ibcq->context), ibcq, num_entries, wc);
    }
    if (n > 0) {
        cq->yield.found(n);
    } else {
        after_empty_poll(cq->yield);  // empty_poll_yield.h: when a spinning program gives its CPU away
    }
    sanitizer::polled(ibcq, wc, n);
    return n;
}

int resize_cq(ibv_cq* ibcq, int cqe) {
    if (cqe <= 0) {
        return EINVAL;
    }
    Cq* cq = to_cq(ibcq);
    void* new_ring = nullptr;
    std::size_t new_bytes = 0;
    std::uint32_t granted = 0;
    // RESIZE_CQ (abi/control.h) while no one polls: the daemon writes the
    // completions not polled yet into the new ring.
    const int err = cq->completions.resize([&](void*& ring, std::size_t& bytes) {
        auto req = request<uroce_ctrl_resize_cq>(UROCE_CTRL_RESIZE_CQ);
        req.handle = ibcq->handle;
        req.cqe = static_cast<std::uint32_t>(cqe);
        uroce_ctrl_cq_reply reply{};
        int ring_fd = -1;
        if (const int e = link_of(ibcq->context).call(&req, sizeof req, &reply, sizeof reply, -1, &ring_fd); e != 0) {
            return e;
        }
        ring = map_ring(ring_fd, reply.ring_bytes);
        if (ring == nullptr) {
            return errno;
        }
        new_ring = ring;
        new_bytes = bytes = reply.ring_bytes;
        granted = reply.cqe;
        return 0;
    });
    if (err != 0) {
        if (new_ring != nullptr) {
            ::munmap(new_ring, new_bytes);  // mapped, but not a ring we can use
        }
        return err;
    }
    ::munmap(cq->ring, cq->ring_bytes);
    cq->ring = new_ring;
    cq->ring_bytes = new_bytes;
    ibcq->cqe = static_cast<int>(granted);
    return 0;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
    Cq* cq = to_cq(ibcq);
    cq->completions.request_notify(solicited_only != 0);
    // With the daemon gone nobody else will write the event: while flushed
    // completions wait, the channel gets one at once, so a program that
    // arms and then blocks in ibv_get_cq_event wakes to poll them. The
    // socket is looked at every time: arming precedes a blocking wait.
    if (cq->channel_notify_fd >= 0 && link_of(ibcq->context).hung_up() && cq->flushed.pending()) {
        const std::uint64_t cookie = reinterpret_cast<std::uintptr_t>(ibcq);  // what ibv_get_cq_event reads
        [[maybe_unused]] const ssize_t w = ::write(cq->channel_notify_fd, &cookie, sizeof cookie);
    }
    return 0;
}

}  // namespace uroce::provider
