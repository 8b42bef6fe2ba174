// Memory regions: ibv_reg_mr / _iova / _iova2, ibv_reg_dmabuf_mr,
// ibv_rereg_mr, ibv_dereg_mr, each one REG_MR / REREG_MR / DEREG_MR request.
// The daemon applies every rule of ibv_reg_mr(3) (emulator/mr/mr_table.h):
// the provider checks nothing it would check again, so the errno an
// application sees is the daemon's.
#include <cerrno>
#include <cstdint>
#include <new>

#include "provider.h"

namespace uroce::provider {
namespace {

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

ibv_mr* finish(ibv_pd* pd, uroce_ctrl_reg_mr& req, int send_fd, pabi::MrType type, void* addr,
               std::size_t length, int access) {
    uroce_ctrl_mr_reply reply{};
    if (const int err = link_of(pd->context).call(&req, sizeof req, &reply, sizeof reply, send_fd); err != 0) {
        errno = err;
        return nullptr;
    }
    auto* vmr = new (std::nothrow) pabi::verbs_mr{};
    if (vmr == nullptr) {
        link_of(pd->context).call_handle(UROCE_CTRL_DEREG_MR, reply.lkey);
        errno = ENOMEM;
        return nullptr;
    }
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
    return finish(pd, req, -1, pabi::MrType::Mr, addr, length, access);
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
    uroce_ctrl_hdr reply{};
    if (const int err = link_of(mr.context).call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        errno = err;
        return err;
    }
    // libibverbs updates pd, addr and length itself; the access it does not.
    vmr->access = acc;
    return 0;
}

int dereg_mr(pabi::verbs_mr* vmr) {
    // EBUSY while a memory window is bound to it (ibv_dereg_mr(3)).
    if (const int err = link_of(vmr->ibv_mr.context).call_handle(UROCE_CTRL_DEREG_MR, vmr->ibv_mr.lkey); err != 0) {
        return err;
    }
    delete vmr;
    return 0;
}

}  // namespace uroce::provider
