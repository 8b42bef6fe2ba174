// Control-protocol handlers for memory regions, memory windows and
// relaxed-MR pools (abi/control.h ops 6-13). Requests arrive validated for
// size; the values are checked by mr::MrTable. An MR's table entry, shared
// mapping and quota charge change together in MrRegistrations.
#include <cerrno>
#include <cstring>
#include <optional>

#include "control_server.h"
#include "log.h"
#include "messages.h"
#include "mr/relaxed_pool.h"

namespace uroce::daemon {

std::size_t ControlServer::reg_mr(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg, std::uint8_t* out,
                                  int received_fd) {
    const std::uint32_t owner = c.client;
    const auto req = read_as<uroce_ctrl_reg_mr>(msg);
    mr::RegRequest r;
    r.pd = req.pd;
    r.owner = owner;
    r.addr = req.addr;
    r.length = req.length;
    r.access = req.access;
    if ((req.flags & UROCE_REG_HAS_IOVA) != 0) {
        r.iova = req.iova;
    }
    if ((req.flags & UROCE_REG_DMABUF) != 0) {
        if (received_fd < 0) {
            return status_only(out, h, EINVAL);
        }
        r.backing = mr::Backing::DmaBuf;
        r.dmabuf_handle = received_fd;  // identity; reg_dmabuf maps it
    } else {
        r.address_space = device_.address_space(owner);
    }
    // A shared mapping of the range (UROCE_REG_SHARED): the engine reaches
    // these bytes with memcpy instead of copying through the client's mem
    // file. If it cannot be mapped the MR still works, through the copying
    // path (mr_registrations.h).
    std::optional<SharedMemory> shared;
    if ((req.flags & UROCE_REG_SHARED) != 0 && (req.flags & UROCE_REG_DMABUF) == 0) {
        if (received_fd < 0) {
            return status_only(out, h, EINVAL);
        }
        shared = SharedMemory{req.shared_addr, req.shared_length, req.shared_offset, received_fd};
    }
    if (h.op == UROCE_CTRL_REREG_MR) {
        return status_only(out, h, mr_registrations_.rereg(req.lkey, req.rereg_flags, r, shared));
    }
    const bool dmabuf = (req.flags & UROCE_REG_DMABUF) != 0;
    const mr::Registered reg = dmabuf ? mr_registrations_.reg_dmabuf(r, received_fd) : mr_registrations_.reg(r, shared);
    uroce_ctrl_mr_reply rep{};
    rep.lkey = reg.lkey;
    rep.rkey = reg.rkey;
    return write_reply(out, h, reg.error, rep);
}

std::size_t ControlServer::dereg_mr(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                    std::uint8_t* out) {
    const std::uint32_t lkey = read_as<uroce_ctrl_handle>(msg).handle;
    return status_only(out, h, mr_registrations_.dereg(lkey, c.client));
}

std::size_t ControlServer::alloc_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                    std::uint8_t* out) {
    const std::uint32_t owner = c.client;
    const auto req = read_as<uroce_ctrl_alloc_mw>(msg);
    if (req.type != 1 && req.type != 2) {
        return status_only(out, h, EINVAL);
    }
    if (const int err = quota_.admit(owner, Charge{}); err != 0) {
        return status_only(out, h, err);
    }
    const auto k = device_.mrs().alloc_mw(req.pd, owner, req.type == 1 ? mr::MwType::Type1 : mr::MwType::Type2);
    if (k.error == 0) {
        quota_.add(ObjectKind::Mw, k.key, owner, Charge{});
    }
    uroce_ctrl_mr_reply rep{};
    rep.rkey = k.key;
    return write_reply(out, h, k.error, rep);
}

std::size_t ControlServer::dealloc_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                      std::uint8_t* out) {
    const std::uint32_t mw = read_as<uroce_ctrl_handle>(msg).handle;
    const int err = device_.mrs().dealloc_mw(mw, c.client);
    if (err == 0) {
        quota_.remove(ObjectKind::Mw, mw);
    }
    return status_only(out, h, err);
}

std::size_t ControlServer::bind_mw(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                   std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_bind_mw>(msg);
    mr::BindRequest b;
    b.owner = c.client;
    b.mw_key = req.mw_rkey;
    b.mr_lkey = req.mr_lkey;
    b.addr = req.addr;
    b.length = req.length;
    b.access = req.access;
    b.qp_pd = req.qp_pd;
    const auto k = device_.mrs().bind_mw_type1(b);
    uroce_ctrl_mr_reply rep{};
    rep.rkey = k.key;
    return write_reply(out, h, k.error, rep);
}

std::size_t ControlServer::create_relaxed_pool(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                               std::uint8_t* out, int& reply_fd) {
    const std::uint32_t owner = c.client;
    const auto req = read_as<uroce_ctrl_relaxed_pool>(msg);
    mr::RelaxedPoolConfig cfg;
    cfg.capacity = req.capacity;
    cfg.dirty_watermark = req.dirty_watermark;
    cfg.invalidate_after = std::chrono::microseconds(req.invalidate_after_us);
    if (req.capacity == 0 || req.capacity > (1u << 20) || req.dirty_watermark == 0) {
        return status_only(out, h, EINVAL);
    }
    const Charge charge{req.capacity, 1, mr::relaxed_pool_bytes(req.capacity), 0};  // a key per slot
    if (const int err = quota_.admit(owner, charge); err != 0) {
        return status_only(out, h, err);
    }
    device::RingMemory memory;
    if (device::RingMemory::create("uroce-relaxed-pool", mr::relaxed_pool_bytes(req.capacity), memory) != 0) {
        return status_only(out, h, ENOMEM);
    }
    int err = 0;
    mr::RelaxedPool* pool = device_.mrs().create_relaxed_pool(
        req.pd, owner, cfg, reinterpret_cast<uroce_relaxed_pool_header*>(memory.data()), err);
    if (pool == nullptr) {
        return status_only(out, h, err);
    }
    reply_fd = memory.release_fd();  // closed after sending
    pools_[pool->base_index()] = PoolMapping{owner, pool, std::move(memory)};
    quota_.add(ObjectKind::RelaxedPool, pool->base_index(), owner, charge);
    uroce_ctrl_handle r{};
    r.handle = pool->base_index();
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::flush_relaxed(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                         std::uint8_t* out) {
    auto p = pools_.find(read_as<uroce_ctrl_handle>(msg).handle);
    if (p == pools_.end() || p->second.client != c.client) {
        return status_only(out, h, EINVAL);
    }
    p->second.pool->flush();
    return status_only(out, h, 0);
}

}  // namespace uroce::daemon
