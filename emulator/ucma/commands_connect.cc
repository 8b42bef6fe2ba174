// ucma commands that connect ids, and the device's side of the CM messages
// (cma.c rdma_connect, rdma_listen, rdma_accept, rdma_reject,
// rdma_disconnect, rdma_notify, cma_ib_handler, cma_ib_req_handler).
#include <cerrno>
#include <cstring>

#include "ucma/ucma_device.h"

namespace uroce::ucma {

namespace {

// Private data the program may give (IBA 12.6: REQ 92 - 36 bytes of CMA
// header, REP 196, REJ 148), and what the receiving event reports.
constexpr std::uint8_t kReqPrivateData = 56;
constexpr std::uint8_t kRepPrivateData = 196;
constexpr std::uint8_t kRejPrivateData = 148;
// sysctl net/rdma_ucm/max_backlog.
constexpr std::int32_t kMaxBacklog = 1024;
constexpr std::uint8_t kQpTypeUd = 4;

template <typename T>
T read_body(const std::uint8_t* body) {
    T v;
    std::memcpy(&v, body, sizeof(T));
    return v;
}

PrivateData private_data_of(const rdma_ucm_conn_param& p) {
    PrivateData d;
    d.length = p.private_data_len;
    std::memcpy(d.bytes.data(), p.private_data, p.private_data_len);
    return d;
}

void copy_private_data(rdma_ucm_conn_param& to, const PrivateData& d, std::uint8_t wire_size) {
    std::memcpy(to.private_data, d.bytes.data(), wire_size);
    to.private_data_len = wire_size;
}

PathInfo reversed(const PathInfo& p) {
    PathInfo r = p;
    r.sgid = p.dgid;
    r.dgid = p.sgid;
    return r;
}

// Whether a listener bound to `bound` takes a request for `wanted` (cma.c
// cma_match_private_data + the AFONLY rule for IPv6 wildcards).
bool listener_takes(const CmId& listener, const Endpoint& wanted) {
    const Endpoint& bound = listener.source;
    if (bound.port != wanted.port) {
        return false;
    }
    if (bound.family != wanted.family) {
        return bound.family == Family::Ipv6 && bound.is_any() && !listener.options.ipv6_only;
    }
    return bound.is_any() || bound.ip == wanted.ip;
}

}  // namespace

int UcmaDevice::connect(ChannelId ch, const std::uint8_t* body, std::uint16_t in) {
    if (in < offsetof(rdma_ucm_connect, reserved) + sizeof(std::uint32_t)) {
        return EINVAL;
    }
    const auto cmd = read_body<rdma_ucm_connect>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (!cmd.conn_param.valid) {
        return EINVAL;
    }
    if (id->state != IdState::RouteResolved) {
        return EINVAL;
    }
    if (id->qp_type == kQpTypeUd) {
        return connect_ud(*id, cmd.conn_param);
    }
    if (cmd.conn_param.private_data_len > kReqPrivateData) {
        return EINVAL;
    }
    ConnectionState& c = id->conn;
    c.local_qpn = cmd.conn_param.qp_num;
    c.responder_resources = cmd.conn_param.responder_resources;
    c.initiator_depth = cmd.conn_param.initiator_depth;
    c.retry_count = cmd.conn_param.retry_count;
    c.rnr_retry_count = cmd.conn_param.rnr_retry_count;
    c.path = path_for(*id);
    ConnectionRequest req;
    req.port_space = id->port_space;
    req.qp_type = id->qp_type;
    req.source = id->source;
    req.destination = id->destination;
    req.ca_guid = htobe64(device_.node_guid);
    req.qpn = c.local_qpn;
    req.starting_psn = c.own_psn;
    req.responder_resources = c.responder_resources;
    req.initiator_depth = c.initiator_depth;
    req.flow_control = cmd.conn_param.flow_control;
    req.retry_count = c.retry_count;
    req.rnr_retry_count = c.rnr_retry_count;
    req.srq = cmd.conn_param.srq;
    req.path = c.path;
    req.private_data = private_data_of(cmd.conn_param);
    id->state = IdState::Connect;
    id->phase = CmPhase::ReqSent;
    cm_.send_request(id->handle, req);
    return 0;
}

int UcmaDevice::listen(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_listen>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    const std::int32_t backlog = static_cast<std::int32_t>(cmd.backlog);
    if (id->state == IdState::Listen) {
        id->backlog = backlog <= 0 || backlog > kMaxBacklog ? kMaxBacklog : backlog;
        return 0;  // rdma_listen on a listener only changes the backlog
    }
    if (id->state == IdState::Idle) {
        Endpoint any;  // cma.c binds an unbound listener to the IPv4 wildcard
        any.family = Family::Ipv4;
        if (const int e = bind_endpoint(*id, any); e != 0) {
            return e;
        }
    }
    if (id->state != IdState::AddrBound) {
        return EINVAL;
    }
    id->backlog = backlog <= 0 || backlog > kMaxBacklog ? kMaxBacklog : backlog;
    id->state = IdState::Listen;
    return 0;
}

int UcmaDevice::accept(ChannelId ch, const std::uint8_t* body, std::uint16_t in) {
    if (in < offsetof(rdma_ucm_accept, reserved) + sizeof(std::uint32_t)) {
        return EINVAL;
    }
    const auto cmd = read_body<rdma_ucm_accept>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (id->state != IdState::Connect) {
        return EINVAL;
    }
    if (!cmd.conn_param.valid) {
        // The active side's "accept": its QP is at RTS, send the RTU
        // (cma.c cma_rep_recv).
        if (id->phase != CmPhase::RepReceived) {
            return EINVAL;
        }
        id->phase = CmPhase::Established;
        id->state = IdState::Connected;
        cm_.send_ready_to_use(id->handle);
        return 0;
    }
    if (id->phase != CmPhase::ReqReceived) {
        return EINVAL;
    }
    if (id->qp_type == kQpTypeUd) {
        return accept_ud(*id, cmd.conn_param, cmd.uid);
    }
    if (cmd.conn_param.private_data_len > kRepPrivateData) {
        return EINVAL;
    }
    id->uid = cmd.uid;
    ConnectionState& c = id->conn;
    c.local_qpn = cmd.conn_param.qp_num;
    c.responder_resources = cmd.conn_param.responder_resources;
    c.initiator_depth = cmd.conn_param.initiator_depth;
    ConnectionReply rep;
    rep.ca_guid = htobe64(device_.node_guid);
    rep.qpn = c.local_qpn;
    rep.starting_psn = c.own_psn;
    rep.responder_resources = c.responder_resources;
    rep.initiator_depth = c.initiator_depth;
    rep.flow_control = cmd.conn_param.flow_control;
    rep.rnr_retry_count = cmd.conn_param.rnr_retry_count;
    rep.srq = cmd.conn_param.srq;
    rep.private_data = private_data_of(cmd.conn_param);
    id->phase = CmPhase::RepSent;
    cm_.send_reply(id->handle, rep);
    return 0;
}

int UcmaDevice::reject(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_reject>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    // ucma_reject: 0 means the consumer-defined reason.
    std::uint8_t reason = cmd.reason == 0 ? static_cast<std::uint8_t>(RejectReason::ConsumerDefined) : cmd.reason;
    if (reason != static_cast<std::uint8_t>(RejectReason::ConsumerDefined) &&
        reason != static_cast<std::uint8_t>(RejectReason::VendorOptionNotSupported)) {
        return EINVAL;
    }
    if (cmd.private_data_len > kRejPrivateData) {
        return EINVAL;
    }
    if (id->phase != CmPhase::ReqReceived && id->phase != CmPhase::RepReceived) {
        return EINVAL;
    }
    PrivateData d;
    d.length = cmd.private_data_len;
    std::memcpy(d.bytes.data(), cmd.private_data, cmd.private_data_len);
    if (id->qp_type == kQpTypeUd) {
        SidrReply rep;  // cma.c: rdma_reject on a UD id answers the SIDR_REQ
        rep.status = SidrStatus::Rejected;
        rep.private_data = d;
        cm_.send_sidr_reply(id->handle, rep);
    } else {
        cm_.send_reject(id->handle, static_cast<RejectReason>(reason), d);
    }
    id->phase = CmPhase::Timewait;
    id->state = IdState::Disconnected;
    return 0;
}

int UcmaDevice::disconnect(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_disconnect>(body);
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    switch (id->phase) {
        case CmPhase::None:
            return EINVAL;  // no CM id: rdma_disconnect fails
        case CmPhase::Established:
            id->phase = CmPhase::DreqSent;
            cm_.send_disconnect_request(id->handle);
            return 0;
        case CmPhase::DreqReceived:
            id->phase = CmPhase::Timewait;
            cm_.send_disconnect_reply(id->handle);
            return 0;
        default:
            return 0;  // nothing to send, and still no error (trap 14)
    }
}

int UcmaDevice::notify(ChannelId ch, const std::uint8_t* body) {
    const auto cmd = read_body<rdma_ucm_notify>(body);
    constexpr std::uint32_t kEventCommEst = 3;  // IB_EVENT_COMM_EST
    int err = 0;
    CmId* id = find(ch, cmd.id, err);
    if (id == nullptr) {
        return err;
    }
    if (id->phase == CmPhase::None || cmd.event != kEventCommEst) {
        return EINVAL;
    }
    if (id->phase == CmPhase::Established) {
        return EISCONN;
    }
    if (id->phase != CmPhase::RepSent) {
        return EINVAL;
    }
    // The QP saw traffic before the RTU: established now (cm.c cm_establish).
    id->phase = CmPhase::Established;
    id->state = IdState::Connected;
    queue_event(*id, RDMA_CM_EVENT_ESTABLISHED, 0, id->handle);
    return 0;
}

RequestVerdict UcmaDevice::admit_request(const ConnectionRequest& req, CmId*& passive) {
    passive = nullptr;
    CmId* listener = nullptr;
    for (auto& [handle, id] : ids_) {
        if (id.state == IdState::Listen && id.port_space == req.port_space && listener_takes(id, req.destination)) {
            // A listener on the exact address wins over a wildcard one.
            if (listener == nullptr || listener->source.is_any()) {
                listener = &id;
            }
        }
    }
    if (listener == nullptr) {
        return Refused{RejectReason::InvalidServiceId};
    }
    if (listener->backlog <= 0) {
        return Dropped{};
    }
    --listener->backlog;
    // std::map keeps `listener` valid across the insertion.
    CmId& id = add_id(listener->channel, 0, req.port_space, listener->qp_type);
    id.visible = false;
    id.has_listener = true;
    id.listener = listener->handle;
    id.source = req.destination;
    id.destination = req.source;
    id.bound_to_device = true;
    id.state = IdState::Connect;
    id.phase = CmPhase::ReqReceived;
    id.conn.path = reversed(req.path);
    passive = &id;
    return Accepted{id.handle};
}

RequestVerdict UcmaDevice::on_request(const ConnectionRequest& req) {
    CmId* passive = nullptr;
    const RequestVerdict verdict = admit_request(req, passive);
    if (passive == nullptr) {
        return verdict;
    }
    CmId& id = *passive;
    const CmId& listener = *find_any(id.listener);
    ConnectionState& c = id.conn;
    c.remote_qpn = req.qpn;
    c.peer_psn = req.starting_psn;
    // The REQ's resources seen from this side (cm.c cm_format_req_event).
    c.responder_resources = req.initiator_depth;
    c.initiator_depth = req.responder_resources;
    c.retry_count = req.retry_count;
    c.rnr_retry_count = req.rnr_retry_count;

    rdma_ucm_event_resp resp{};
    resp.uid = listener.uid;
    resp.id = id.handle;
    resp.event = RDMA_CM_EVENT_CONNECT_REQUEST;
    auto& p = resp.param.conn;
    p.qp_num = req.qpn;
    copy_private_data(p, req.private_data, kReqPrivateData);
    p.responder_resources = c.responder_resources;
    p.initiator_depth = c.initiator_depth;
    p.flow_control = req.flow_control;
    p.retry_count = req.retry_count;
    p.rnr_retry_count = req.rnr_retry_count;
    p.srq = req.srq;
    queue_event(id, resp, listener.handle);
    return verdict;
}

void UcmaDevice::on_reply(ConnectionId active, const ConnectionReply& rep) {
    CmId* id = find_any(active);
    if (id == nullptr || id->phase != CmPhase::ReqSent) {
        return;
    }
    ConnectionState& c = id->conn;
    c.remote_qpn = rep.qpn;
    c.peer_psn = rep.starting_psn;
    // cm.c cm_rep_handler: the peer's resources seen from this side.
    c.responder_resources = rep.initiator_depth;
    c.initiator_depth = rep.responder_resources;
    c.rnr_retry_count = rep.rnr_retry_count;
    id->phase = CmPhase::RepReceived;
    rdma_ucm_event_resp resp{};
    resp.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
    auto& p = resp.param.conn;
    p.qp_num = rep.qpn;
    copy_private_data(p, rep.private_data, kRepPrivateData);
    p.responder_resources = c.responder_resources;
    p.initiator_depth = c.initiator_depth;
    p.flow_control = rep.flow_control;
    p.rnr_retry_count = rep.rnr_retry_count;
    p.srq = rep.srq;
    queue_event(*id, resp, id->handle);
}

void UcmaDevice::on_ready_to_use(ConnectionId passive) {
    CmId* id = find_any(passive);
    if (id == nullptr || id->phase != CmPhase::RepSent) {
        return;  // already established through NOTIFY, or gone
    }
    id->phase = CmPhase::Established;
    id->state = IdState::Connected;
    queue_event(*id, RDMA_CM_EVENT_ESTABLISHED, 0, id->handle);
}

void UcmaDevice::on_reject(ConnectionId handle, RejectReason reason, const PrivateData& data) {
    CmId* id = find_any(handle);
    if (id == nullptr || id->phase == CmPhase::None || id->phase == CmPhase::Timewait) {
        return;
    }
    id->phase = CmPhase::Timewait;
    id->state = IdState::Disconnected;
    rdma_ucm_event_resp resp{};
    resp.event = RDMA_CM_EVENT_REJECTED;
    resp.status = static_cast<std::uint32_t>(reason);  // the REJ reason, positive
    copy_private_data(resp.param.conn, data, kRejPrivateData);
    queue_event(*id, resp, id->handle);
}

void UcmaDevice::on_disconnect_request(ConnectionId handle) {
    CmId* id = find_any(handle);
    if (id == nullptr) {
        return;
    }
    if (id->phase == CmPhase::Established || id->phase == CmPhase::RepSent) {
        id->phase = CmPhase::DreqReceived;
    } else if (id->phase == CmPhase::DreqSent) {
        // Both sides disconnected at once: answer and be done (cm.c cm_dreq_handler).
        id->phase = CmPhase::Timewait;
        cm_.send_disconnect_reply(handle);
    } else {
        return;
    }
    id->state = IdState::Disconnected;
    id->disconnect_reported = true;
    queue_event(*id, RDMA_CM_EVENT_DISCONNECTED, 0, id->handle);
}

void UcmaDevice::on_disconnect_reply(ConnectionId handle) {
    CmId* id = find_any(handle);
    if (id == nullptr || id->phase != CmPhase::DreqSent) {
        return;
    }
    id->phase = CmPhase::Timewait;
    id->state = IdState::Disconnected;
    id->disconnect_reported = true;
    queue_event(*id, RDMA_CM_EVENT_DISCONNECTED, 0, id->handle);
}

void UcmaDevice::on_unreachable(ConnectionId handle, int status) {
    CmId* id = find_any(handle);
    if (id == nullptr || id->phase == CmPhase::None || id->phase == CmPhase::Timewait) {
        return;
    }
    const bool was_connected = id->phase == CmPhase::Established || id->phase == CmPhase::DreqSent;
    id->phase = CmPhase::Timewait;
    id->state = IdState::Disconnected;
    id->disconnect_reported = was_connected;
    queue_event(*id, was_connected ? RDMA_CM_EVENT_DISCONNECTED : RDMA_CM_EVENT_UNREACHABLE, status, id->handle);
}

void UcmaDevice::on_timewait_exit(ConnectionId handle) {
    // cma.c cma_ib_handler: IB_CM_TIMEWAIT_EXIT reaches the program only in
    // RDMA_CM_DISCONNECT (a rejected or unreachable id stays in CONNECT).
    const CmId* id = find_any(handle);
    if (id == nullptr || !id->disconnect_reported) {
        return;
    }
    queue_event(*id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, id->handle);
}

}  // namespace uroce::ucma
