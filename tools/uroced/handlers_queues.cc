// Control-protocol handlers for completion queues, shared receive queues and
// address handles, and the dispatch of every queue-object operation (QP ones
// go on to handlers_qp.cc). Requests arrive validated for size; the values
// are checked by device::QueueObjects.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control_server.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

std::size_t queue_request_size(std::uint16_t op) {
    switch (op) {
        case UROCE_CTRL_CREATE_CQ:
            return sizeof(uroce_ctrl_create_cq);
        case UROCE_CTRL_DESTROY_CQ:
        case UROCE_CTRL_QUERY_QP:
        case UROCE_CTRL_DESTROY_QP:
        case UROCE_CTRL_QUERY_SRQ:
        case UROCE_CTRL_DESTROY_SRQ:
        case UROCE_CTRL_DESTROY_AH:
            return sizeof(uroce_ctrl_handle);
        case UROCE_CTRL_CREATE_QP:
            return sizeof(uroce_ctrl_create_qp);
        case UROCE_CTRL_MODIFY_QP:
            return sizeof(uroce_ctrl_modify_qp);
        case UROCE_CTRL_CREATE_SRQ:
        case UROCE_CTRL_MODIFY_SRQ:
            return sizeof(uroce_ctrl_srq);
        case UROCE_CTRL_CREATE_AH:
            return sizeof(uroce_ctrl_create_ah);
        default:
            return 0;
    }
}

namespace {

qp::AhAttr ah_from_wire(const uroce_ctrl_ah_attr& w) {
    qp::AhAttr a;
    std::memcpy(a.dgid.data(), w.dgid, sizeof(w.dgid));
    a.flow_label = w.flow_label;
    a.sgid_index = w.sgid_index;
    a.hop_limit = w.hop_limit;
    a.traffic_class = w.traffic_class;
    a.is_global = w.is_global != 0;
    a.dlid = w.dlid;
    a.sl = w.sl;
    a.src_path_bits = w.src_path_bits;
    a.static_rate = w.static_rate;
    a.port_num = w.port_num;
    return a;
}

}  // namespace

std::size_t ControlServer::create_cq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out, int& reply_fd) {
    const auto req = read_as<uroce_ctrl_create_cq>(msg);
    // One completion vector (num_comp_vectors = 1).
    if (req.comp_vector != 0) {
        return status_only(out, h, EINVAL);
    }
    std::uint32_t cqe = req.cqe;
    const device::Created cq = device_.queues().create_cq(c.client, cqe);
    if (cq.error != 0) {
        return status_only(out, h, cq.error);
    }
    const std::size_t bytes = sizeof(uroce_cq_ring) + std::size_t{cqe} * UROCE_CQE_BYTES;
    const int mfd = ::memfd_create("uroce-cq", MFD_CLOEXEC);
    void* mem = MAP_FAILED;
    if (mfd >= 0 && ::ftruncate(mfd, static_cast<off_t>(bytes)) == 0) {
        mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    }
    if (mem == MAP_FAILED) {
        const int err = errno;
        if (mfd >= 0) {
            ::close(mfd);
        }
        device_.queues().destroy_cq(c.client, cq.handle);
        log_warn("client {}: cannot make a {}-byte CQ ring: {}", c.client, bytes, std::strerror(err));
        return status_only(out, h, ENOMEM);
    }
    auto* ring = static_cast<uroce_cq_ring*>(mem);
    ring->version = UROCE_CQ_RING_VERSION;
    ring->entries = cqe;
    cq_rings_[cq.handle] = RingMapping{c.client, mem, bytes};
    reply_fd = mfd;  // closed after sending
    uroce_ctrl_cq_reply r{};
    r.handle = cq.handle;
    r.cqe = cqe;
    r.ring_bytes = bytes;
    return write_reply(out, h, 0, r);
}

void ControlServer::release_cq_ring(std::uint32_t cq) {
    if (auto it = cq_rings_.find(cq); it != cq_rings_.end()) {
        ::munmap(it->second.memory, it->second.bytes);
        cq_rings_.erase(it);
    }
}

void ControlServer::release_cq_rings(std::uint32_t client) {
    for (auto it = cq_rings_.begin(); it != cq_rings_.end();) {
        if (it->second.client == client) {
            ::munmap(it->second.memory, it->second.bytes);
            it = cq_rings_.erase(it);
        } else {
            ++it;
        }
    }
}

std::size_t ControlServer::dispatch_queues(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                           std::uint8_t* out, int& reply_fd) {
    device::QueueObjects& q = device_.queues();
    const std::uint32_t owner = c.client;
    switch (h.op) {
        case UROCE_CTRL_CREATE_CQ:
            return create_cq(c, h, msg, out, reply_fd);
        case UROCE_CTRL_DESTROY_CQ: {
            const std::uint32_t cq = read_as<uroce_ctrl_handle>(msg).handle;
            const int err = q.destroy_cq(owner, cq);
            if (err == 0) {
                release_cq_ring(cq);
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_CREATE_SRQ: {
            const auto req = read_as<uroce_ctrl_srq>(msg);
            device::SrqAttr a{req.max_wr, req.max_sge, req.srq_limit};
            const device::Created s = q.create_srq(owner, req.pd, a);
            uroce_ctrl_srq r{};
            r.pd = req.pd;
            r.handle = s.handle;
            r.max_wr = a.max_wr;
            r.max_sge = a.max_sge;
            r.srq_limit = a.srq_limit;
            return write_reply(out, h, s.error, r);
        }
        case UROCE_CTRL_MODIFY_SRQ: {
            const auto req = read_as<uroce_ctrl_srq>(msg);
            const device::SrqAttr a{req.max_wr, req.max_sge, req.srq_limit};
            return status_only(out, h, q.modify_srq(owner, req.handle, req.attr_mask, a));
        }
        case UROCE_CTRL_QUERY_SRQ: {
            const std::uint32_t srq = read_as<uroce_ctrl_handle>(msg).handle;
            device::SrqAttr a;
            const int err = q.query_srq(owner, srq, a);
            uroce_ctrl_srq r{};
            r.handle = srq;
            r.max_wr = a.max_wr;
            r.max_sge = a.max_sge;
            r.srq_limit = a.srq_limit;
            return write_reply(out, h, err, r);
        }
        case UROCE_CTRL_DESTROY_SRQ:
            return status_only(out, h, q.destroy_srq(owner, read_as<uroce_ctrl_handle>(msg).handle));
        case UROCE_CTRL_CREATE_AH: {
            const auto req = read_as<uroce_ctrl_create_ah>(msg);
            const device::Created a = q.create_ah(owner, req.pd, ah_from_wire(req.attr));
            uroce_ctrl_handle r{};
            r.handle = a.handle;
            return write_reply(out, h, a.error, r);
        }
        case UROCE_CTRL_DESTROY_AH:
            return status_only(out, h, q.destroy_ah(owner, read_as<uroce_ctrl_handle>(msg).handle));
        default:
            return handle_qp(c, h, msg, out);
    }
}

}  // namespace uroce::daemon
