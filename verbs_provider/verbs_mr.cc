// Memory regions: ibv_reg_mr / _iova / _iova2, ibv_reg_dmabuf_mr,
// ibv_rereg_mr, ibv_dereg_mr, each one REG_MR / REREG_MR / DEREG_MR request.
// The daemon applies every rule of ibv_reg_mr(3) (emulator/mr/mr_table.h):
// the provider checks nothing it would check again, so the errno an
// application sees is the daemon's.
//
// Memory is shared with the daemon where it can be (memory_sharing.h): a
// REG_MR then carries the memfd (UROCE_REG_SHARED) and the MR holds a
// reference on the shared range until it is deregistered.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "memory_sharing.h"
#include "provider.h"
#include "sanitizer.h"

namespace uroce::provider {
namespace {

// What reg_mr hands libibverbs: the verbs_mr, and the MR's reference on a
// shared range (0: none). Only this file allocates and frees these; the
// daemon refuses DEREG_MR and REREG_MR for the relaxed MRs relaxed_mr.cc
// makes (plain verbs_mr), so those never reach the token.
struct Mr {
    pabi::verbs_mr vmr;  // first: libibverbs converts ibv_mr* back by cast
    std::uint64_t share_token;
};
static_assert(std::is_standard_layout_v<Mr> && offsetof(Mr, vmr) == 0);

Mr* to_mr(pabi::verbs_mr* vmr) { return reinterpret_cast<Mr*>(vmr); }

// On-demand-paging MRs may cover memory that is not mapped yet: copy.
SharedMemory share_range(void* addr, std::size_t length, int access) {
    if ((access & IBV_ACCESS_ON_DEMAND) != 0) {
        return {};
    }
    // libibverbs madvise(MADV_DONTFORK)s the range before calling us when
    // ibv_fork_init is on; a new mapping must get that again.
    const bool keep_from_fork = ibv_is_fork_initialized() == IBV_FORK_ENABLED;
    return process_memory_sharing().share(addr, length, keep_from_fork);
}

void attach(uroce_ctrl_reg_mr& req, const SharedMemory& shared) {
    if (shared.shared()) {
        req.flags |= UROCE_REG_SHARED;
        req.shared_addr = shared.addr;
        req.shared_length = shared.length;
        req.shared_offset = shared.offset;
    }
}

void release_share(std::uint64_t token) {
    if (token != 0) {
        const int saved = errno;
        process_memory_sharing().release(token);
        errno = saved;
    }
}

// libibverbs hands every registration an iova: ibv_reg_mr passes the
// address itself. Only a different one is an explicit iova, so that
// ZERO_BASED (keys from 0) keeps working for plain ibv_reg_mr.
uroce_ctrl_reg_mr reg_request(std::uint16_t op, ibv_pd* pd, std::uint64_t addr, std::size_t length,
                              std::uint64_t iova, int access) {
    auto req = request<uroce_ctrl_reg_mr>(op);
    req.pd = pd->handle;
    req.access = static_cast<std::uint32_t>(access);
    req.addr = addr;
    req.length = length;
    if (iova != addr) {
        req.flags |= UROCE_REG_HAS_IOVA;
        req.iova = iova;
    }
    return req;
}

// `share_token`: the reference the MR takes over (released on failure).
ibv_mr* finish(ibv_pd* pd, uroce_ctrl_reg_mr& req, int send_fd, pabi::MrType type, void* addr,
               std::size_t length, int access, std::uint64_t share_token = 0) {
    uroce_ctrl_mr_reply reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply, send_fd); err != 0) {
        release_share(share_token);
        errno = err;
        return nullptr;
    }
    auto* m = new (std::nothrow) Mr{};
    if (m == nullptr) {
        link_of(pd->context).call_handle(UROCE_CTRL_DEREG_MR, reply.lkey);
        release_share(share_token);
        errno = ENOMEM;
        return nullptr;
    }
    m->share_token = share_token;
    pabi::verbs_mr* vmr = &m->vmr;
    ibv_mr& mr = vmr->ibv_mr;
    mr.context = pd->context;
    mr.pd = pd;
    mr.addr = addr;
    mr.length = length;
    mr.handle = reply.lkey;  // the daemon names an MR by its lkey
    mr.lkey = reply.lkey;
    mr.rkey = reply.rkey;
    vmr->mr_type = type;
    vmr->access = access;  // ibv_dereg_mr reads it (ON_DEMAND: no fork protection to undo)
    return &mr;
}

}  // namespace

ibv_mr* reg_mr(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t hca_va, int access) {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    auto req = reg_request(UROCE_CTRL_REG_MR, pd, a, length, hca_va, access);
    const SharedMemory shared = share_range(addr, length, access);
    attach(req, shared);
    return finish(pd, req, shared.fd, pabi::MrType::Mr, addr, length, access, shared.token);
}

ibv_mr* reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd, int access) {
    if (fd < 0) {
        errno = EBADF;
        return nullptr;
    }
    // The fd travels by SCM_RIGHTS; addr is the offset into it. A dma-buf
    // MR always has an explicit iova.
    auto req = reg_request(UROCE_CTRL_REG_MR, pd, offset, length, iova, access);
    req.flags |= UROCE_REG_DMABUF | UROCE_REG_HAS_IOVA;
    req.iova = iova;
    // libibverbs sets addr to the offset itself; keep that view.
    return finish(pd, req, fd, pabi::MrType::DmabufMr, reinterpret_cast<void*>(static_cast<std::uintptr_t>(offset)),
                  length, access);
}

int rereg_mr(pabi::verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access) {
    ibv_mr& mr = vmr->ibv_mr;
    // The daemon takes each part from the request only when `flags` says
    // so; fill the rest from the MR as it is.
    ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) != 0 ? pd : mr.pd;
    const auto a = reinterpret_cast<std::uintptr_t>((flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0 ? addr : mr.addr);
    const std::size_t len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0 ? length : mr.length;
    const int acc = (flags & IBV_REREG_MR_CHANGE_ACCESS) != 0 ? access : vmr->access;
    auto req = reg_request(UROCE_CTRL_REREG_MR, new_pd, a, len, a, acc);
    req.rereg_flags = static_cast<std::uint32_t>(flags);
    req.lkey = mr.lkey;
    // A new translation is new memory to share; the old range's reference
    // goes once the daemon has moved the MR.
    const bool new_translation = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
    const SharedMemory shared = new_translation ? share_range(addr, length, acc) : SharedMemory{};
    attach(req, shared);
    uroce_ctrl_hdr reply{};
    if (const int err = link_of(mr.context).call(&req, sizeof req, &reply, sizeof reply, shared.fd); err != 0) {
        release_share(shared.token);
        errno = err;
        return err;
    }
    if (new_translation) {
        Mr* m = to_mr(vmr);
        release_share(m->share_token);
        m->share_token = shared.token;
    }
    // libibverbs updates pd, addr and length itself; the access it does not.
    vmr->access = acc;
    return 0;
}

int dereg_mr(pabi::verbs_mr* vmr) {
    sanitizer::deregistering(vmr->ibv_mr.lkey);
    // EBUSY while a memory window is bound to it (ibv_dereg_mr(3)).
    if (const int err = link_of(vmr->ibv_mr.context).call_handle(UROCE_CTRL_DEREG_MR, vmr->ibv_mr.lkey); err != 0) {
        return err;
    }
    Mr* m = to_mr(vmr);
    release_share(m->share_token);
    delete m;
    return 0;
}

}  // namespace uroce::provider
