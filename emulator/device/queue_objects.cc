#include "queue_objects.h"

#include <cerrno>

#include "qp/address_values.h"

namespace uroce::device {

QueueObjects::QueueObjects(mr::PdTable& pds, QueueLimits limits, qp::PortLimits port)
    : pds_(pds), limits_(limits), port_(port) {}

Created QueueObjects::create_cq(std::uint32_t owner, std::uint32_t& cqe) {
    std::lock_guard lock(mutex_);
    if (cqe == 0 || cqe > limits_.max_cqe) {
        return {EINVAL, 0};
    }
    if (cqs_.size() >= limits_.max_cq) {
        return {ENOMEM, 0};
    }
    const std::uint32_t h = next_handle_++;
    cqs_[h] = Cq{owner, cqe, 0};
    return {0, h};
}

int QueueObjects::destroy_cq(std::uint32_t owner, CqHandle cq) {
    std::lock_guard lock(mutex_);
    auto it = cqs_.find(cq.value());
    if (it == cqs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    if (it->second.users != 0) {
        return EBUSY;
    }
    cqs_.erase(it);
    return 0;
}

Created QueueObjects::create_srq(std::uint32_t owner, std::uint32_t pd, SrqAttr& attr) {
    std::lock_guard lock(mutex_);
    if (!pds_.owned_by(pd, owner)) {
        return {EINVAL, 0};
    }
    // ibv_create_srq(3): max_wr and max_sge must be within the device's
    // limits; srq_limit is ignored at creation.
    if (attr.max_wr == 0 || attr.max_wr > limits_.max_srq_wr || attr.max_sge > limits_.max_srq_sge) {
        return {EINVAL, 0};
    }
    if (srqs_.size() >= limits_.max_srq) {
        return {ENOMEM, 0};
    }
    attr.srq_limit = 0;
    const std::uint32_t h = next_handle_++;
    srqs_[h] = Srq{owner, pd, attr, 0};
    pds_.ref(pd);
    return {0, h};
}

int QueueObjects::modify_srq(std::uint32_t owner, SrqHandle srq, std::uint32_t mask, const SrqAttr& attr) {
    std::lock_guard lock(mutex_);
    auto it = srqs_.find(srq.value());
    if (it == srqs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    if ((mask & ~(kSrqMaxWr | kSrqLimit)) != 0) {
        return EINVAL;
    }
    SrqAttr next = it->second.attr;
    if ((mask & kSrqMaxWr) != 0) {
        // Resizing is optional in IBTA; a device that cannot refuses it.
        // uroce's queues are sized at creation, as rdma_rxe's are not: refuse
        // shrinking and beyond-limit sizes, accept growth.
        if (attr.max_wr < next.max_wr || attr.max_wr > limits_.max_srq_wr) {
            return EINVAL;
        }
        next.max_wr = attr.max_wr;
    }
    if ((mask & kSrqLimit) != 0) {
        if (attr.srq_limit > next.max_wr) {
            return EINVAL;
        }
        next.srq_limit = attr.srq_limit;
    }
    it->second.attr = next;
    return 0;
}

int QueueObjects::query_srq(std::uint32_t owner, SrqHandle srq, SrqAttr& attr) const {
    std::lock_guard lock(mutex_);
    auto it = srqs_.find(srq.value());
    if (it == srqs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    attr = it->second.attr;
    return 0;
}

int QueueObjects::destroy_srq(std::uint32_t owner, SrqHandle srq) {
    std::lock_guard lock(mutex_);
    auto it = srqs_.find(srq.value());
    if (it == srqs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    if (it->second.users != 0) {
        return EBUSY;
    }
    release_srq_refs(it->second);
    srqs_.erase(it);
    return 0;
}

int QueueObjects::check_ah(const qp::AhAttr& a) const {
    // RoCE addresses by GID: every AH carries a GRH. flow_label and sl are
    // masked, not refused, and static_rate is not checked, as on the kernel
    // (qp/address_values.h).
    if (!a.is_global || a.port_num != qp::kPortNum || a.sgid_index >= port_.gid_table_len) {
        return EINVAL;
    }
    return 0;
}

Created QueueObjects::create_ah(std::uint32_t owner, std::uint32_t pd, const qp::AhAttr& attr) {
    std::lock_guard lock(mutex_);
    if (!pds_.owned_by(pd, owner)) {
        return {EINVAL, 0};
    }
    if (const int err = check_ah(attr); err != 0) {
        return {err, 0};
    }
    if (ahs_.size() >= limits_.max_ah) {
        return {ENOMEM, 0};
    }
    const std::uint32_t h = next_handle_++;
    ahs_[h] = Ah{owner, pd, qp::as_kernel_takes(attr)};
    pds_.ref(pd);
    return {0, h};
}

int QueueObjects::destroy_ah(std::uint32_t owner, std::uint32_t ah) {
    std::lock_guard lock(mutex_);
    auto it = ahs_.find(ah);
    if (it == ahs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    pds_.unref(it->second.pd);
    ahs_.erase(it);
    return 0;
}

std::uint32_t QueueObjects::next_qpn() {
    // 24-bit QPNs, never 0 or 1, never one in use.
    for (;;) {
        const std::uint32_t qpn = next_qpn_;
        next_qpn_ = (next_qpn_ + 1) & qp::kQpnMask;
        if (next_qpn_ < 2) {
            next_qpn_ = 2;
        }
        if (qpn >= 2 && !qps_.contains(qpn)) {
            return qpn;
        }
    }
}

Created QueueObjects::create_qp(std::uint32_t owner, QpCreate& c) {
    std::lock_guard lock(mutex_);
    // A target QP comes only from create_xrc_tgt; an initiator has no
    // receive side (no SRQ, no receive queue: recv_cq is the send CQ).
    if (!qp::is_valid(c.type) || c.type == qp::QpType::XrcTgt || !pds_.owned_by(c.pd, owner) ||
        (c.type == qp::QpType::XrcIni && c.srq != 0)) {
        return {EINVAL, 0};
    }
    if (c.type == qp::QpType::XrcIni) {
        c.cap.max_recv_wr = 0;
        c.cap.max_recv_sge = 0;
    }
    auto scq = cqs_.find(c.send_cq);
    auto rcq = cqs_.find(c.recv_cq);
    if (scq == cqs_.end() || scq->second.owner != owner || rcq == cqs_.end() || rcq->second.owner != owner) {
        return {EINVAL, 0};
    }
    Srq* srq = nullptr;
    if (c.srq != 0) {
        auto s = srqs_.find(c.srq);
        // An XRC SRQ serves XRC target QPs only (through XRCETH).
        if (s == srqs_.end() || s->second.owner != owner || s->second.pd != c.pd || s->second.xrc_domain != 0) {
            return {EINVAL, 0};
        }
        srq = &s->second;
        c.cap.max_recv_wr = 0;  // ibv_create_qp(3): ignored with an SRQ
        c.cap.max_recv_sge = 0;
    }
    const qp::QpCap& cap = c.cap;
    if (cap.max_send_wr > limits_.max_qp_wr || cap.max_recv_wr > limits_.max_qp_wr ||
        cap.max_send_sge > limits_.max_sge || cap.max_recv_sge > limits_.max_sge ||
        cap.max_inline_data > limits_.max_inline_data) {
        return {EINVAL, 0};
    }
    if (qps_.size() >= limits_.max_qp) {
        return {ENOMEM, 0};
    }
    Qp q;
    q.owner = owner;
    q.pd = c.pd;
    q.type = c.type;
    q.send_cq = c.send_cq;
    q.recv_cq = c.recv_cq;
    q.srq = c.srq;
    q.sq_sig_all = c.sq_sig_all;
    q.attr.cap = cap;
    const std::uint32_t qpn = next_qpn();
    ++scq->second.users;
    ++rcq->second.users;
    if (srq != nullptr) {
        ++srq->users;
    }
    pds_.ref(c.pd);
    qps_[qpn] = q;
    return {0, qpn};
}

int QueueObjects::modify_qp(std::uint32_t owner, Qpn qpn, std::uint32_t mask, const qp::QpAttr& attr,
                            const char*& reason) {
    std::lock_guard lock(mutex_);
    auto it = qps_.find(qpn.value());
    if (it == qps_.end() || !may_use(it->second, owner)) {
        reason = "no such QP of this client";
        return EINVAL;
    }
    Qp& q = it->second;
    mask = qp::mask_as_kernel_takes(q.type, mask);
    const qp::ModifyCheck check = qp::check_modify(q.type, q.attr, mask, attr, port_);
    if (check.error != 0) {
        reason = check.reason;
        return check.error;
    }
    qp::apply_modify(q.attr, mask, attr, check.next);
    // The engine stops taking new send WQEs in SQD; what it has in flight
    // completes, and the QP counts as drained (no SQ_DRAINED event yet).
    q.attr.sq_draining = false;
    return 0;
}

void QueueObjects::set_state_from_engine(Qpn qpn, qp::QpState state) {
    std::lock_guard lock(mutex_);
    if (auto it = qps_.find(qpn.value()); it != qps_.end()) {
        it->second.attr.state = state;
        it->second.attr.cur_state = state;
    }
}

std::optional<qp::QpAttr> QueueObjects::query_qp(std::uint32_t owner, Qpn qpn) const {
    std::lock_guard lock(mutex_);
    auto it = qps_.find(qpn.value());
    if (it == qps_.end() || !may_use(it->second, owner)) {
        return std::nullopt;
    }
    return it->second.attr;
}

void QueueObjects::release_qp_refs(const Qp& q) {
    if (auto s = cqs_.find(q.send_cq); s != cqs_.end() && s->second.users > 0) {
        --s->second.users;
    }
    if (auto r = cqs_.find(q.recv_cq); r != cqs_.end() && r->second.users > 0) {
        --r->second.users;
    }
    if (auto s = srqs_.find(q.srq); q.srq != 0 && s != srqs_.end() && s->second.users > 0) {
        --s->second.users;
    }
    if (q.type == qp::QpType::XrcTgt) {
        unref_domain(q.xrc_domain);  // a target QP has no PD
        return;
    }
    pds_.unref(q.pd);
}

int QueueObjects::destroy_qp(std::uint32_t owner, Qpn qpn) {
    std::lock_guard lock(mutex_);
    auto it = qps_.find(qpn.value());
    if (it == qps_.end() || !may_use(it->second, owner)) {
        return EINVAL;
    }
    if (it->second.type == qp::QpType::XrcTgt) {
        close_tgt_handle(it, owner);  // the QP goes with its last handle
        return 0;
    }
    release_qp_refs(it->second);
    qps_.erase(it);
    return 0;
}

std::size_t QueueObjects::destroy_owner(std::uint32_t owner) {
    std::size_t n = close_xrc_tgts_of(owner).size();
    std::lock_guard lock(mutex_);
    for (auto it = qps_.begin(); it != qps_.end();) {
        if (it->second.owner == owner) {
            release_qp_refs(it->second);
            it = qps_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    for (auto it = ahs_.begin(); it != ahs_.end();) {
        if (it->second.owner == owner) {
            pds_.unref(it->second.pd);
            it = ahs_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    for (auto it = srqs_.begin(); it != srqs_.end();) {
        if (it->second.owner == owner) {
            release_srq_refs(it->second);
            it = srqs_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    for (auto it = xrcd_refs_.begin(); it != xrcd_refs_.end();) {
        if (it->second.owner == owner) {
            unref_domain(it->second.domain);
            it = xrcd_refs_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    n += static_cast<std::size_t>(std::erase_if(cqs_, [owner](const auto& kv) { return kv.second.owner == owner; }));
    return n;
}

QueueCounts QueueObjects::counts() const {
    std::lock_guard lock(mutex_);
    return {cqs_.size(), qps_.size(), srqs_.size(), ahs_.size()};
}

}  // namespace uroce::device
