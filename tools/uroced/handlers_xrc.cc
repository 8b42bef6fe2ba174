// Control-protocol handlers for XRC (ops 120-129): opening and closing
// domains, XRC SRQs and XRC target QPs. The objects' rules live in
// device::QueueObjects (queue_objects_xrc.cc); here they get their rings and
// reach the data path. An XRC initiator QP is made by CREATE_QP
// (handlers_qp.cc) with qp_type IBV_QPT_XRC_SEND.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "control_server.h"
#include "device/ring_memory.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

std::size_t ControlServer::open_xrcd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out, int received_fd) {
    const auto req = read_as<uroce_ctrl_open_xrcd>(msg);
    if (req.has_inode > 1 || req.create > 1 || req.exclusive > 1) {
        return status_only(out, h, EINVAL);
    }
    device::XrcdOpen how;
    if (req.has_inode == 1) {
        // The file itself comes with the request: a client shares a domain
        // only by holding the file, never by naming its inode (as the
        // kernel's ib_uverbs_open_xrcd takes an fd).
        struct stat st {};
        if (received_fd < 0 || ::fstat(received_fd, &st) != 0) {
            return status_only(out, h, EBADF);
        }
        how.inode = device::XrcdOpen::Inode{static_cast<std::uint64_t>(st.st_dev),
                                            static_cast<std::uint64_t>(st.st_ino)};
    }
    how.create = req.create == 1;
    how.exclusive = req.exclusive == 1;
    const device::Created made = device_.queues().open_xrcd(c.client, how);
    uroce_ctrl_handle r{};
    r.handle = made.handle;
    return write_reply(out, h, made.error, r);
}

std::size_t ControlServer::close_xrcd(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                      std::uint8_t* out) {
    return status_only(out, h, device_.queues().close_xrcd(c.client, read_as<uroce_ctrl_handle>(msg).handle));
}

std::size_t ControlServer::create_xrc_srq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                          std::uint8_t* out, int& reply_fd) {
    const auto req = read_as<uroce_ctrl_create_xrc_srq>(msg);
    device::QueueObjects& q = device_.queues();
    // srq_limit 0: no limit event is armed at creation.
    device::SrqAttr a{granted_entries(req.srq.max_wr, q.limits().max_srq_wr), req.srq.max_sge, 0};
    const device::Created s = q.create_xrc_srq(c.client, req.srq.pd, req.xrcd, CqHandle{req.cq}, a);
    if (s.error != 0) {
        return status_only(out, h, s.error);
    }
    return finish_srq(c, h, req.srq, s.handle, a, SrqDomain{q.xrc_domain(c.client, req.xrcd), req.cq}, out,
                      reply_fd);
}

std::size_t ControlServer::create_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                          std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_create_xrc_tgt>(msg);
    device::QueueObjects& q = device_.queues();
    const device::Created made = q.create_xrc_tgt(c.client, req.xrcd, req.cookie);
    if (made.error != 0) {
        return status_only(out, h, made.error);
    }
    // No work queues: the engine's QP gets a one-entry send ring no one
    // posts to, so that it is made and removed as every other QP is.
    const device::WqGeometry sq = device::sq_geometry(1, 1, 0);
    const Charge charge{1, 1, sq.bytes(), 0};
    if (const int err = quota_.admit(c.client, charge); err != 0) {
        q.destroy_qp(c.client, Qpn{made.handle});
        return status_only(out, h, err);
    }
    std::shared_ptr<device::QpRings> rings;
    if (const int err = device::make_qp_rings(sq, nullptr, rings); err != 0) {
        q.destroy_qp(c.client, Qpn{made.handle});
        return status_only(out, h, ENOMEM);
    }
    rings->owner = device::kNoClient;  // shared by its handles (QueueObjects::open_xrc_tgt)
    rings->qpn = made.handle;
    // Its engine cookie is its QPN: the engine raises its async events for
    // owner kNoClient, and ControlServer::attach hands them to every handle
    // (each with its own cookie, kept by QueueObjects).
    rings->cookie = made.handle;
    rings->type = qp::QpType::XrcTgt;
    rings->xrc_domain = q.xrc_domain(c.client, req.xrcd);
    quota_.add(ObjectKind::Qp, made.handle, c.client, charge);
    if (datapath_ != nullptr) {
        datapath_->on_qp(rings);
    }
    rings_.add(std::move(rings));
    uroce_ctrl_handle r{};
    r.handle = made.handle;
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::open_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                        std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_open_xrc_tgt>(msg);
    uroce_ctrl_handle r{};
    r.handle = req.qpn;
    return write_reply(out, h, device_.queues().open_xrc_tgt(c.client, req.xrcd, Qpn{req.qpn}, req.cookie), r);
}

std::size_t ControlServer::close_xrc_tgt(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                         std::uint8_t* out) {
    const auto req = read_as<uroce_ctrl_close_xrc_tgt>(msg);
    device::QueueObjects& q = device_.queues();
    const int err = q.close_xrc_tgt(c.client, Qpn{req.qpn}, req.cookie);
    if (err == 0 && !q.qp_exists(Qpn{req.qpn})) {
        forget_qp(req.qpn);  // that was its last handle
    }
    return status_only(out, h, err);
}

void ControlServer::forget_qp(std::uint32_t qpn) {
    if (datapath_ != nullptr) {
        datapath_->on_destroy_qp(qpn);
    }
    rings_.remove_qp(qpn);
    quota_.remove(ObjectKind::Qp, qpn);
}

}  // namespace uroce::daemon
