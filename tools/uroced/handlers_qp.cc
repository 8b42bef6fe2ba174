// Control-protocol handlers for queue pairs: create (with the QP's shared
// rings, device/ring_registry.h: one memfd, SQ then RQ), modify (through the
// IBTA state machine of qp/qp_state_machine.h, in device::QueueObjects),
// query and destroy. Converts between the wire layout (abi/control.h) and
// the engine's qp::QpAttr.
#include <cerrno>
#include <cstring>
#include <memory>

#include "control_server.h"
#include "device/ring_memory.h"
#include "log.h"
#include "messages.h"

namespace uroce::daemon {

namespace {

qp::QpCap cap_from_wire(const uroce_ctrl_qp_cap& w) {
    return {w.max_send_wr, w.max_recv_wr, w.max_send_sge, w.max_recv_sge, w.max_inline_data};
}

// A work queue of `asked` WRs gets its ring's entries (the next power of
// two, at least 1) when they stay within `limit`; otherwise `asked`
// unchanged, for QueueObjects to refuse.
std::uint32_t granted_wr(std::uint32_t asked, std::uint32_t limit) {
    const std::uint32_t entries = device::ring_entries(asked);
    return asked <= limit && entries != 0 && entries <= limit ? entries : asked;
}

uroce_ctrl_qp_cap cap_to_wire(const qp::QpCap& c) {
    uroce_ctrl_qp_cap w{};
    w.max_send_wr = c.max_send_wr;
    w.max_recv_wr = c.max_recv_wr;
    w.max_send_sge = c.max_send_sge;
    w.max_recv_sge = c.max_recv_sge;
    w.max_inline_data = c.max_inline_data;
    return w;
}

// Enum fields arrive as 32-bit numbers; values out of the enum's range are
// kept out of range (255) so that the state machine's checks refuse them
// rather than a narrowing conversion turning them into valid ones.
template <typename E>
E enum_from_wire(std::uint32_t v) {
    return static_cast<E>(v > 254 ? 255 : v);
}

qp::QpAttr attr_from_wire(const uroce_ctrl_qp_attr& w) {
    qp::QpAttr a;
    a.state = enum_from_wire<qp::QpState>(w.qp_state);
    a.cur_state = enum_from_wire<qp::QpState>(w.cur_qp_state);
    a.path_mtu = enum_from_wire<qp::Mtu>(w.path_mtu);
    a.path_mig_state = enum_from_wire<qp::MigState>(w.path_mig_state);
    a.qkey = w.qkey;
    a.rq_psn = w.rq_psn;
    a.sq_psn = w.sq_psn;
    a.dest_qp_num = w.dest_qp_num;
    a.qp_access_flags = w.qp_access_flags;
    a.rate_limit = w.rate_limit;
    a.pkey_index = w.pkey_index;
    a.en_sqd_async_notify = w.en_sqd_async_notify != 0;
    a.max_rd_atomic = w.max_rd_atomic;
    a.max_dest_rd_atomic = w.max_dest_rd_atomic;
    a.min_rnr_timer = w.min_rnr_timer;
    a.port_num = w.port_num;
    a.timeout = w.timeout;
    a.retry_cnt = w.retry_cnt;
    a.rnr_retry = w.rnr_retry;
    a.cap = cap_from_wire(w.cap);
    const uroce_ctrl_ah_attr& ah = w.ah_attr;
    std::memcpy(a.ah_attr.dgid.data(), ah.dgid, sizeof(ah.dgid));
    a.ah_attr.flow_label = ah.flow_label;
    a.ah_attr.sgid_index = ah.sgid_index;
    a.ah_attr.hop_limit = ah.hop_limit;
    a.ah_attr.traffic_class = ah.traffic_class;
    a.ah_attr.is_global = ah.is_global != 0;
    a.ah_attr.dlid = ah.dlid;
    a.ah_attr.sl = ah.sl;
    a.ah_attr.src_path_bits = ah.src_path_bits;
    a.ah_attr.static_rate = ah.static_rate;
    a.ah_attr.port_num = ah.port_num;
    return a;
}

uroce_ctrl_qp_attr attr_to_wire(const qp::QpAttr& a) {
    uroce_ctrl_qp_attr w{};
    w.qp_state = static_cast<std::uint32_t>(a.state);
    w.cur_qp_state = static_cast<std::uint32_t>(a.cur_state);
    w.path_mtu = static_cast<std::uint32_t>(a.path_mtu);
    w.path_mig_state = static_cast<std::uint32_t>(a.path_mig_state);
    w.qkey = a.qkey;
    w.rq_psn = a.rq_psn;
    w.sq_psn = a.sq_psn;
    w.dest_qp_num = a.dest_qp_num;
    w.qp_access_flags = a.qp_access_flags;
    w.rate_limit = a.rate_limit;
    w.pkey_index = a.pkey_index;
    w.en_sqd_async_notify = a.en_sqd_async_notify ? 1 : 0;
    w.sq_draining = a.sq_draining ? 1 : 0;
    w.max_rd_atomic = a.max_rd_atomic;
    w.max_dest_rd_atomic = a.max_dest_rd_atomic;
    w.min_rnr_timer = a.min_rnr_timer;
    w.port_num = a.port_num;
    w.timeout = a.timeout;
    w.retry_cnt = a.retry_cnt;
    w.rnr_retry = a.rnr_retry;
    w.cap = cap_to_wire(a.cap);
    uroce_ctrl_ah_attr& ah = w.ah_attr;
    std::memcpy(ah.dgid, a.ah_attr.dgid.data(), sizeof(ah.dgid));
    ah.flow_label = a.ah_attr.flow_label;
    ah.sgid_index = a.ah_attr.sgid_index;
    ah.hop_limit = a.ah_attr.hop_limit;
    ah.traffic_class = a.ah_attr.traffic_class;
    ah.is_global = a.ah_attr.is_global ? 1 : 0;
    ah.dlid = a.ah_attr.dlid;
    ah.sl = a.ah_attr.sl;
    ah.src_path_bits = a.ah_attr.src_path_bits;
    ah.static_rate = a.ah_attr.static_rate;
    ah.port_num = a.ah_attr.port_num;
    return w;
}

}  // namespace

std::size_t ControlServer::create_qp(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out, int& reply_fd) {
    const auto req = read_as<uroce_ctrl_create_qp>(msg);
    device::QueueObjects& q = device_.queues();
    device::QpCreate cr;
    cr.pd = req.pd;
    cr.type = static_cast<qp::QpType>(req.qp_type);
    cr.send_cq = req.send_cq;
    cr.recv_cq = req.recv_cq;
    cr.srq = req.srq;
    cr.sq_sig_all = req.sq_sig_all != 0;
    cr.cap = cap_from_wire(req.cap);
    // ibv_create_qp(3): at least what was asked; the rings hold a power of two.
    cr.cap.max_send_wr = granted_wr(cr.cap.max_send_wr, q.limits().max_qp_wr);
    cr.cap.max_recv_wr = granted_wr(cr.cap.max_recv_wr, q.limits().max_qp_wr);
    const device::Created made = q.create_qp(c.client, cr);  // with an SRQ, clears the receive caps
    if (made.error != 0) {
        return status_only(out, h, made.error);
    }
    const device::WqGeometry sq = device::sq_geometry(cr.cap.max_send_wr, cr.cap.max_send_sge, cr.cap.max_inline_data);
    const device::WqGeometry rq = device::rq_geometry(cr.cap.max_recv_wr, cr.cap.max_recv_sge);
    const bool has_rq = cr.srq == 0 && cr.type != qp::QpType::XrcIni;  // an XRC initiator has no receive side
    const Charge charge{1, 1, sq.bytes() + (has_rq ? rq.bytes() + 64 : 0), 0};
    if (const int err = quota_.admit(c.client, charge); err != 0) {
        q.destroy_qp(c.client, Qpn{made.handle});
        return status_only(out, h, err);
    }
    std::shared_ptr<device::QpRings> rings;
    if (const int err = device::make_qp_rings(sq, has_rq ? &rq : nullptr, rings); err != 0) {
        q.destroy_qp(c.client, Qpn{made.handle});
        log_warn("client {}: cannot make the rings of a QP ({} + {} entries): {}", c.client, sq.entries,
                 has_rq ? rq.entries : 0, std::strerror(err));
        return status_only(out, h, ENOMEM);
    }
    rings->owner = c.client;
    rings->qpn = made.handle;
    rings->cookie = req.cookie;
    rings->type = cr.type;
    rings->pd = cr.pd;
    rings->send_cq = cr.send_cq;
    rings->recv_cq = cr.recv_cq;
    rings->srq = cr.srq;
    rings->sq_sig_all = cr.sq_sig_all;
    reply_fd = rings->memory.release_fd();  // closed after sending
    quota_.add(ObjectKind::Qp, made.handle, c.client, charge);
    uroce_ctrl_create_qp_reply r{};
    r.qpn = made.handle;
    qp::QpCap granted = cr.cap;
    granted.max_send_wr = sq.entries;
    granted.max_recv_wr = has_rq ? rq.entries : 0;
    r.cap = cap_to_wire(granted);
    r.ring_bytes = rings->memory.size();
    r.sq_offset = 0;
    r.rq_offset = rings->rq_offset;
    if (datapath_ != nullptr) {
        datapath_->on_qp(rings);
    }
    rings_.add(std::move(rings));
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::handle_qp(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out) {
    device::QueueObjects& q = device_.queues();
    const std::uint32_t owner = c.client;
    switch (h.op) {
        case UROCE_CTRL_MODIFY_QP: {
            const auto req = read_as<uroce_ctrl_modify_qp>(msg);
            const char* reason = nullptr;
            // The engine may have moved the QP to ERR by itself since.
            if (datapath_ != nullptr) {
                if (const auto s = datapath_->qp_state(req.qpn); s == qp::QpState::Err) {
                    q.set_state_from_engine(Qpn{req.qpn}, *s);
                }
            }
            const int err = q.modify_qp(owner, Qpn{req.qpn}, req.attr_mask, attr_from_wire(req.attr), reason);
            if (err != 0) {
                // The application sees only EINVAL: say here which rule refused it.
                log_warn("client {}: modify of QP {:#x} (attr_mask {:#x}) refused: {}", owner, req.qpn,
                         req.attr_mask, reason != nullptr ? reason : std::strerror(err));
            }
            if (err == 0 && datapath_ != nullptr) {
                if (const auto now = q.query_qp(owner, Qpn{req.qpn})) {
                    datapath_->on_modify_qp(req.qpn, *now, req.attr_mask);
                }
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_QUERY_QP: {
            const std::uint32_t qpn = read_as<uroce_ctrl_handle>(msg).handle;
            auto attr = q.query_qp(owner, Qpn{qpn});
            uroce_ctrl_query_qp_reply r{};
            if (attr) {
                if (datapath_ != nullptr) {
                    if (const auto s = datapath_->qp_state(qpn); s == qp::QpState::Err) {
                        attr->state = attr->cur_state = *s;  // the engine's word on the state
                    }
                }
                r.attr = attr_to_wire(*attr);
            }
            return write_reply(out, h, attr ? 0 : EINVAL, r);
        }
        case UROCE_CTRL_DESTROY_QP: {
            const std::uint32_t qpn = read_as<uroce_ctrl_handle>(msg).handle;
            if (datapath_ != nullptr && datapath_->engine().multicast().groups_of(qpn) != 0 &&
                q.query_qp(owner, Qpn{qpn})) {
                return status_only(out, h, EBUSY);  // still attached to a group (uverbs_free_qp)
            }
            const int err = q.destroy_qp(owner, Qpn{qpn});
            if (err == 0 && q.qp_exists(Qpn{qpn})) {
                return status_only(out, h, 0);  // a handle on a shared XRC target QP closed; others remain
            }
            if (err == 0) {
                forget_qp(qpn);  // engine, rings, quota (handlers_xrc.cc)
            }
            return status_only(out, h, err);
        }
        default:
            return status_only(out, h, EINVAL);  // the table (control_ops.cc) sends only the ops above here
    }
}

}  // namespace uroce::daemon
