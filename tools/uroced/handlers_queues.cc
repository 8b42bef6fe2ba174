// Control-protocol handlers for completion queues, shared receive queues,
// address handles and the doorbell, and the dispatch of every queue-object
// operation (QP ones go on to handlers_qp.cc). Requests arrive validated for
// size; the values are checked by device::QueueObjects. CQs and SRQs get
// their shared rings here (device/ring_registry.h): the reply passes the
// ring's memfd, the registry keeps the daemon's mapping for the engine.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "control_server.h"
#include "device/ring_memory.h"
#include "log.h"
#include "qp/address_values.h"
#include "messages.h"

namespace uroce::daemon {

// What a queue of `asked` entries is granted: its ring's entries (the next
// power of two) when they stay within `limit`; otherwise `asked` unchanged,
// for QueueObjects to judge (it refuses 0 where 0 is invalid, and anything
// above the limit).
std::uint32_t granted_entries(std::uint32_t asked, std::uint32_t limit) {
    const std::uint32_t entries = device::ring_entries(asked);
    return asked != 0 && entries != 0 && entries <= limit ? entries : asked;
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

// A completion channel's notify end must be a pipe the daemon can write:
// an event is an 8-byte write, which must never block the daemon (the
// descriptor is made non-blocking when adopted) nor reach anything but the
// client's own channel.
int check_channel_fd(int fd) {
    struct stat st {};
    const int flags = ::fcntl(fd, F_GETFL);
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
        return EINVAL;
    }
    return 0;
}

// Keeps a copy of a checked channel fd, non-blocking. The flag is on the
// pipe's open file description, which the client shares but never writes
// through itself (its end for reading is a separate description).
int adopt_channel_fd(int received_fd, int& kept) {
    kept = ::fcntl(received_fd, F_DUPFD_CLOEXEC, 0);
    if (kept < 0) {
        return errno;
    }
    const int flags = ::fcntl(kept, F_GETFL);
    if (flags < 0 || ::fcntl(kept, F_SETFL, flags | O_NONBLOCK) != 0) {
        return errno;
    }
    return 0;
}

}  // namespace

std::size_t ControlServer::create_cq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out, int& reply_fd, int received_fd) {
    const auto req = read_as<uroce_ctrl_create_cq>(msg);
    // One completion vector (num_comp_vectors = 1). A channel comes with its
    // notify fd; an fd without has_channel is ignored (the caller closes it).
    if (req.comp_vector != 0 || req.has_channel > 1 || (req.has_channel == 1 && received_fd < 0) ||
        (req.flags & ~UROCE_CQ_TIMESTAMPS) != 0) {
        return status_only(out, h, EINVAL);
    }
    if (req.has_channel == 1) {
        if (const int err = check_channel_fd(received_fd); err != 0) {
            return status_only(out, h, err);
        }
    }
    device::QueueObjects& q = device_.queues();
    std::uint32_t cqe = granted_entries(req.cqe, q.limits().max_cqe);
    const device::Created cq = q.create_cq(c.client, cqe);
    if (cq.error != 0) {
        return status_only(out, h, cq.error);
    }
    const std::uint32_t entries = device::ring_entries(cqe);
    const Charge charge{1, 1, device::cq_ring_bytes(entries), req.has_channel};
    if (const int err = quota_.admit(c.client, charge); err != 0) {
        q.destroy_cq(c.client, CqHandle{cq.handle});
        return status_only(out, h, err);
    }
    std::shared_ptr<device::CqRings> rings;
    int err = device::make_cq_rings(entries, rings);
    if (err == 0 && req.has_channel == 1) {
        err = adopt_channel_fd(received_fd, rings->channel_fd);
    }
    if (err != 0) {
        q.destroy_cq(c.client, CqHandle{cq.handle});
        log_warn("client {}: cannot make the ring of a {}-entry CQ: {}", c.client, entries, std::strerror(err));
        return status_only(out, h, ENOMEM);
    }
    rings->owner = c.client;
    rings->handle = cq.handle;
    rings->cookie = req.cookie;
    rings->flags = req.flags;
    reply_fd = rings->memory.release_fd();  // closed after sending
    quota_.add(ObjectKind::Cq, cq.handle, c.client, charge);
    uroce_ctrl_cq_reply r{};
    r.handle = cq.handle;
    r.cqe = entries;
    r.ring_bytes = rings->memory.size();
    if (datapath_ != nullptr) {
        datapath_->on_cq(rings);
    }
    rings_.add(std::move(rings));
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::resize_cq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                     std::uint8_t* out, int& reply_fd) {
    const auto req = read_as<uroce_ctrl_resize_cq>(msg);
    const std::shared_ptr<const device::CqRings> old = rings_.cq(req.handle);
    const device::QueueObjects& q = device_.queues();
    if (old == nullptr || old->owner != c.client || req.cqe == 0 || req.cqe > q.limits().max_cqe) {
        return status_only(out, h, EINVAL);
    }
    const std::uint32_t entries = device::ring_entries(granted_entries(req.cqe, q.limits().max_cqe));
    // The new ring is charged instead of the old one.
    const Charge before{1, 1, device::cq_ring_bytes(old->entries), old->channel_fd >= 0 ? 1u : 0u};
    const Charge after{1, 1, device::cq_ring_bytes(entries), before.fds};
    quota_.remove(ObjectKind::Cq, req.handle);
    if (const int err = quota_.admit(c.client, after); err != 0) {
        quota_.add(ObjectKind::Cq, req.handle, c.client, before);
        return status_only(out, h, err);
    }
    std::shared_ptr<device::CqRings> rings;
    int err = device::make_cq_rings(entries, rings);
    if (err == 0 && old->channel_fd >= 0) {
        rings->channel_fd = ::fcntl(old->channel_fd, F_DUPFD_CLOEXEC, 0);
        err = rings->channel_fd < 0 ? errno : 0;
    }
    if (err != 0) {
        quota_.add(ObjectKind::Cq, req.handle, c.client, before);
        log_warn("client {}: cannot make the ring of a {}-entry CQ: {}", c.client, entries, std::strerror(err));
        return status_only(out, h, ENOMEM);
    }
    rings->owner = c.client;
    rings->handle = req.handle;
    rings->cookie = old->cookie;
    rings->flags = old->flags;
    if (datapath_ != nullptr) {
        err = datapath_->on_resize_cq(rings);  // moves the unpolled CQEs over
    }
    if (err != 0) {
        quota_.add(ObjectKind::Cq, req.handle, c.client, before);
        return status_only(out, h, err);
    }
    quota_.add(ObjectKind::Cq, req.handle, c.client, after);
    reply_fd = rings->memory.release_fd();  // closed after sending
    uroce_ctrl_cq_reply r{};
    r.handle = req.handle;
    r.cqe = entries;
    r.ring_bytes = rings->memory.size();
    rings_.add(std::move(rings));  // replaces the old ring, unmapped when the last user lets go
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::create_srq(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                      std::uint8_t* out, int& reply_fd) {
    const auto req = read_as<uroce_ctrl_srq>(msg);
    device::QueueObjects& q = device_.queues();
    device::SrqAttr a{granted_entries(req.max_wr, q.limits().max_srq_wr), req.max_sge, req.srq_limit};
    const device::Created s = q.create_srq(c.client, req.pd, a);
    if (s.error != 0) {
        return status_only(out, h, s.error);
    }
    return finish_srq(c, h, req, s.handle, a, SrqDomain{}, out, reply_fd);
}

std::size_t ControlServer::finish_srq(Connection& c, const uroce_ctrl_hdr& h, const uroce_ctrl_srq& req,
                                      std::uint32_t handle, const device::SrqAttr& a, SrqDomain domain,
                                      std::uint8_t* out, int& reply_fd) {
    device::QueueObjects& q = device_.queues();
    const device::WqGeometry g = device::rq_geometry(a.max_wr, a.max_sge);
    const Charge charge{1, 1, g.bytes(), 0};
    if (const int err = quota_.admit(c.client, charge); err != 0) {
        q.destroy_srq(c.client, SrqHandle{handle});
        return status_only(out, h, err);
    }
    std::shared_ptr<device::SrqRings> rings;
    if (const int err = device::make_srq_rings(g, rings); err != 0) {
        q.destroy_srq(c.client, SrqHandle{handle});
        log_warn("client {}: cannot make the ring of a {}-entry SRQ: {}", c.client, g.entries, std::strerror(err));
        return status_only(out, h, ENOMEM);
    }
    rings->owner = c.client;
    rings->handle = handle;
    rings->pd = req.pd;
    rings->cookie = req.cookie;
    rings->xrc_domain = domain.xrc_domain;
    rings->cq = domain.cq;
    reply_fd = rings->memory.release_fd();
    quota_.add(ObjectKind::Srq, handle, c.client, charge);
    uroce_ctrl_srq r{};
    r.pd = req.pd;
    r.handle = handle;
    r.max_wr = g.entries;
    r.max_sge = a.max_sge;
    r.srq_limit = a.srq_limit;
    r.ring_bytes = rings->memory.size();
    if (datapath_ != nullptr) {
        datapath_->on_srq(rings, a.srq_limit);
    }
    rings_.add(std::move(rings));
    return write_reply(out, h, 0, r);
}

std::size_t ControlServer::dispatch_queues(Connection& c, const uroce_ctrl_hdr& h, const std::uint8_t* msg,
                                           std::uint8_t* out, int& reply_fd) {
    device::QueueObjects& q = device_.queues();
    const std::uint32_t owner = c.client;
    switch (h.op) {
        case UROCE_CTRL_DESTROY_CQ: {
            const std::uint32_t cq = read_as<uroce_ctrl_handle>(msg).handle;
            const int err = q.destroy_cq(owner, CqHandle{cq});
            if (err == 0) {
                if (datapath_ != nullptr) {
                    datapath_->on_destroy_cq(cq);
                }
                rings_.remove_cq(cq);
                quota_.remove(ObjectKind::Cq, cq);
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_MODIFY_SRQ: {
            const auto req = read_as<uroce_ctrl_srq>(msg);
            const device::SrqAttr a{req.max_wr, req.max_sge, req.srq_limit};
            // The ring was sized at creation: max_wr may grow only within it.
            const auto ring = rings_.srq(req.handle);
            if ((req.attr_mask & device::kSrqMaxWr) != 0 && ring != nullptr && ring->owner == owner &&
                req.max_wr > ring->ring.geometry.entries) {
                return status_only(out, h, EINVAL);
            }
            const int err = q.modify_srq(owner, SrqHandle{req.handle}, req.attr_mask, a);
            if (err == 0 && (req.attr_mask & device::kSrqLimit) != 0 && datapath_ != nullptr) {
                datapath_->on_srq_limit(req.handle, req.srq_limit);  // arms IBV_EVENT_SRQ_LIMIT_REACHED
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_QUERY_SRQ: {
            const std::uint32_t srq = read_as<uroce_ctrl_handle>(msg).handle;
            device::SrqAttr a;
            const int err = q.query_srq(owner, SrqHandle{srq}, a);
            uroce_ctrl_srq r{};
            r.handle = srq;
            r.max_wr = a.max_wr;
            r.max_sge = a.max_sge;
            r.srq_limit = a.srq_limit;
            return write_reply(out, h, err, r);
        }
        case UROCE_CTRL_DESTROY_SRQ: {
            const std::uint32_t srq = read_as<uroce_ctrl_handle>(msg).handle;
            const int err = q.destroy_srq(owner, SrqHandle{srq});
            if (err == 0) {
                if (datapath_ != nullptr) {
                    datapath_->on_destroy_srq(srq);
                }
                rings_.remove_srq(srq);
                quota_.remove(ObjectKind::Srq, srq);
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_CREATE_AH: {
            const auto req = read_as<uroce_ctrl_create_ah>(msg);
            if (const int err = quota_.admit(owner, Charge{}); err != 0) {
                return status_only(out, h, err);
            }
            // The engine sends with the AH as the kernel takes it (hop limit
            // of the route, masked flow label and SL), as create_ah keeps it.
            const qp::AhAttr ah = qp::as_kernel_takes(ah_from_wire(req.attr));
            const device::Created a = q.create_ah(owner, req.pd, ah);
            if (a.error == 0) {
                quota_.add(ObjectKind::Ah, a.handle, owner, Charge{});
                if (datapath_ != nullptr) {
                    datapath_->on_ah(a.handle, ah);
                }
            }
            uroce_ctrl_handle r{};
            r.handle = a.handle;
            return write_reply(out, h, a.error, r);
        }
        case UROCE_CTRL_DESTROY_AH: {
            const std::uint32_t ah = read_as<uroce_ctrl_handle>(msg).handle;
            const int err = q.destroy_ah(owner, ah);
            if (err == 0) {
                quota_.remove(ObjectKind::Ah, ah);
                if (datapath_ != nullptr) {
                    datapath_->on_destroy_ah(ah);
                }
            }
            return status_only(out, h, err);
        }
        case UROCE_CTRL_DOORBELL: {
            reply_fd = ::fcntl(doorbell_fd_.get(), F_DUPFD_CLOEXEC, 0);  // closed after sending
            if (reply_fd < 0) {
                log_warn("client {}: cannot pass the doorbell: {}", owner, std::strerror(errno));
                return status_only(out, h, ENOMEM);
            }
            return write_reply(out, h, 0, uroce_ctrl_handle{});
        }
        default:
            return status_only(out, h, EINVAL);  // the table sends only the ops above here
    }
}

}  // namespace uroce::daemon
