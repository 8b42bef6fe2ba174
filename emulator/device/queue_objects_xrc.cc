// XRC objects of QueueObjects (queue_objects.h): domains shared through a
// file (ibv_open_xrcd(3)), XRC SRQs and XRC target QPs. Same mutex and
// ownership rules as the other queue objects, except that a domain belongs
// to no client: each open is a reference its client owns.
#include <algorithm>
#include <cerrno>

#include "queue_objects.h"

namespace uroce::device {

void QueueObjects::unref_domain(std::uint32_t domain) {
    auto it = domains_.find(domain);
    if (it != domains_.end() && --it->second.users == 0) {
        domains_.erase(it);
    }
}

void QueueObjects::unref_xrcd_ref(std::uint32_t ref) {
    if (auto it = xrcd_refs_.find(ref); it != xrcd_refs_.end() && it->second.users > 0) {
        --it->second.users;
    }
}

bool QueueObjects::may_use(const Qp& q, std::uint32_t owner) {
    if (q.type != qp::QpType::XrcTgt) {
        return q.owner == owner;
    }
    return std::ranges::any_of(q.handles, [owner](const XrcTgtHandle& h) { return h.owner == owner; });
}

bool QueueObjects::close_tgt_handle(std::unordered_map<std::uint32_t, Qp>::iterator it, std::uint32_t owner,
                                    std::optional<std::uint64_t> cookie) {
    auto& handles = it->second.handles;
    const auto mine = std::ranges::find_if(handles, [owner, cookie](const XrcTgtHandle& h) {
        return h.owner == owner && (!cookie || h.cookie == *cookie);
    });
    if (mine == handles.end()) {
        return false;
    }
    unref_xrcd_ref(mine->xrcd_ref);
    handles.erase(mine);
    if (!handles.empty()) {
        return false;
    }
    release_qp_refs(it->second);
    qps_.erase(it);
    return true;
}

void QueueObjects::release_srq_refs(const Srq& s) {
    if (s.xrc_domain != 0) {
        unref_xrcd_ref(s.xrcd_ref);
        unref_domain(s.xrc_domain);
        if (auto c = cqs_.find(s.cq); c != cqs_.end() && c->second.users > 0) {
            --c->second.users;
        }
    }
    pds_.unref(s.pd);
}

Created QueueObjects::open_xrcd(std::uint32_t owner, const XrcdOpen& how) {
    std::lock_guard lock(mutex_);
    std::uint32_t domain = 0;
    if (how.inode) {
        for (const auto& [id, d] : domains_) {
            if (d.inode == how.inode) {
                domain = id;
            }
        }
    }
    // ibv_open_xrcd(3): O_CREAT makes the file's domain when it has none,
    // O_EXCL with it fails when it has one; without O_CREAT the domain must
    // exist. Without a file (fd -1) the domain is new and private (O_CREAT
    // is then required, as the kernel's ib_uverbs_open_xrcd requires it).
    if (domain != 0 && how.create && how.exclusive) {
        return {EEXIST, 0};
    }
    if (domain == 0 && !how.create) {
        return {how.inode ? ENOENT : EINVAL, 0};
    }
    if (domain == 0) {
        domain = next_domain_++;
        domains_[domain] = XrcDomain{how.inode, 0};
    }
    ++domains_[domain].users;
    const std::uint32_t h = next_handle_++;
    xrcd_refs_[h] = XrcdRef{owner, domain};
    return {0, h};
}

int QueueObjects::close_xrcd(std::uint32_t owner, std::uint32_t xrcd) {
    std::lock_guard lock(mutex_);
    auto it = xrcd_refs_.find(xrcd);
    if (it == xrcd_refs_.end() || it->second.owner != owner) {
        return EINVAL;
    }
    if (it->second.users != 0) {
        return EBUSY;
    }
    unref_domain(it->second.domain);
    xrcd_refs_.erase(it);
    return 0;
}

std::uint32_t QueueObjects::xrc_domain(std::uint32_t owner, std::uint32_t xrcd) const {
    std::lock_guard lock(mutex_);
    auto it = xrcd_refs_.find(xrcd);
    return it == xrcd_refs_.end() || it->second.owner != owner ? 0 : it->second.domain;
}

Created QueueObjects::create_xrc_srq(std::uint32_t owner, std::uint32_t pd, std::uint32_t xrcd, CqHandle cq,
                                     SrqAttr& attr) {
    std::uint32_t domain = xrc_domain(owner, xrcd);
    Created made = create_srq(owner, pd, attr);
    if (made.error != 0) {
        return made;
    }
    std::lock_guard lock(mutex_);
    auto c = cqs_.find(cq.value());
    auto d = domains_.find(domain);
    if (c == cqs_.end() || c->second.owner != owner || domain == 0 || d == domains_.end()) {
        auto s = srqs_.find(made.handle);
        pds_.unref(s->second.pd);
        srqs_.erase(s);
        return {EINVAL, 0};
    }
    ++c->second.users;
    ++d->second.users;
    ++xrcd_refs_[xrcd].users;
    Srq& s = srqs_[made.handle];
    s.xrc_domain = domain;
    s.xrcd_ref = xrcd;
    s.cq = cq.value();
    return made;
}

Created QueueObjects::create_xrc_tgt(std::uint32_t owner, std::uint32_t xrcd, std::uint64_t cookie) {
    std::lock_guard lock(mutex_);
    auto r = xrcd_refs_.find(xrcd);
    if (r == xrcd_refs_.end() || r->second.owner != owner) {
        return {EINVAL, 0};
    }
    if (qps_.size() >= limits_.max_qp) {
        return {ENOMEM, 0};
    }
    Qp q;
    q.owner = kNoClient;
    q.type = qp::QpType::XrcTgt;
    q.xrc_domain = r->second.domain;
    q.handles.push_back(XrcTgtHandle{owner, xrcd, cookie});
    ++r->second.users;
    const std::uint32_t qpn = next_qpn();
    ++domains_[q.xrc_domain].users;
    qps_[qpn] = q;
    return {0, qpn};
}

int QueueObjects::open_xrc_tgt(std::uint32_t owner, std::uint32_t xrcd, Qpn qpn, std::uint64_t cookie) {
    std::lock_guard lock(mutex_);
    auto r = xrcd_refs_.find(xrcd);
    auto q = qps_.find(qpn.value());
    // ib_open_qp: the QPN must name a target QP of this very domain.
    if (r == xrcd_refs_.end() || r->second.owner != owner || q == qps_.end() ||
        q->second.type != qp::QpType::XrcTgt || q->second.xrc_domain != r->second.domain) {
        return EINVAL;
    }
    q->second.handles.push_back(XrcTgtHandle{owner, xrcd, cookie});
    ++r->second.users;
    return 0;
}

int QueueObjects::close_xrc_tgt(std::uint32_t owner, Qpn qpn, std::uint64_t cookie) {
    std::lock_guard lock(mutex_);
    auto it = qps_.find(qpn.value());
    if (it == qps_.end() || it->second.type != qp::QpType::XrcTgt ||
        std::ranges::none_of(it->second.handles,
                             [owner, cookie](const XrcTgtHandle& h) { return h.owner == owner && h.cookie == cookie; })) {
        return EINVAL;
    }
    close_tgt_handle(it, owner, cookie);
    return 0;
}

std::vector<std::uint32_t> QueueObjects::close_xrc_tgts_of(std::uint32_t owner) {
    std::lock_guard lock(mutex_);
    std::vector<std::uint32_t> candidates;
    for (const auto& [qpn, q] : qps_) {
        if (q.type == qp::QpType::XrcTgt && may_use(q, owner)) {
            candidates.push_back(qpn);
        }
    }
    std::vector<std::uint32_t> destroyed;
    for (const std::uint32_t qpn : candidates) {
        auto it = qps_.find(qpn);
        while (it != qps_.end() && may_use(it->second, owner)) {
            if (close_tgt_handle(it, owner)) {
                destroyed.push_back(qpn);
                break;
            }
        }
    }
    return destroyed;
}

std::vector<SharedQpHandle> QueueObjects::xrc_tgt_handles(std::uint32_t qpn) const {
    std::lock_guard lock(mutex_);
    std::vector<SharedQpHandle> out;
    if (auto q = qps_.find(qpn); q != qps_.end() && q->second.type == qp::QpType::XrcTgt) {
        for (const XrcTgtHandle& h : q->second.handles) {
            out.push_back(SharedQpHandle{h.owner, h.cookie});
        }
    }
    return out;
}

bool QueueObjects::qp_exists(Qpn qpn) const {
    std::lock_guard lock(mutex_);
    return qps_.contains(qpn.value());
}

}  // namespace uroce::device
