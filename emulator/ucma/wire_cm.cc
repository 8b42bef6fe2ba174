#include "ucma/wire_cm.h"

#include <endian.h>

#include <algorithm>
#include <cerrno>

#include "cm/cma_header.h"
#include "cm/format.h"
#include "cm/service_id.h"

namespace uroce::ucma {

namespace {

constexpr std::uint8_t kQpTypeRc = 2;  // IB_QPT_RC
constexpr std::uint8_t kQpTypeUc = 3;  // IB_QPT_UC
// The context every REQ goes up with (cm::ConnectionManager::listen_to_every_service).
constexpr std::uint64_t kDeviceListener = 1;

Family family_of(const wire::Gid& ip) { return wire::is_ipv4_mapped(ip) ? Family::Ipv4 : Family::Ipv6; }

wire::IpVersion ip_version_of(const wire::Gid& ip) {
    return wire::is_ipv4_mapped(ip) ? wire::IpVersion::V4 : wire::IpVersion::V6;
}

// The program's bytes after the CMA header of a REQ or SIDR_REQ.
template <std::size_t N>
PrivateData user_part(const cm::PrivateData<N>& wire_bytes) {
    PrivateData d;
    const std::size_t n = std::min(cm::user_private_data_size(N), d.bytes.size());
    std::copy_n(wire_bytes.begin() + cm::kCmaHeaderSize, n, d.bytes.begin());
    d.length = static_cast<std::uint8_t>(n);
    return d;
}

// Private data without a CMA header (REP, REJ, SIDR_REP): all of it.
template <std::size_t N>
PrivateData whole(const cm::PrivateData<N>& wire_bytes) {
    PrivateData d;
    const std::size_t n = std::min(N, d.bytes.size());
    std::copy_n(wire_bytes.begin(), n, d.bytes.begin());
    d.length = static_cast<std::uint8_t>(n);
    return d;
}

template <std::size_t N>
cm::PrivateData<N> to_wire(const PrivateData& d) {
    cm::PrivateData<N> out{};
    std::copy_n(d.bytes.begin(), std::min<std::size_t>(d.length, N), out.begin());
    return out;
}

cm::CmaHeader cma_header_of(const ConnectionRequest& req) {
    cm::CmaHeader h;
    h.ip_version = ip_version_of(req.source.ip);
    h.src_port = req.source.port;
    h.src = req.source.ip;
    h.dst = req.destination.ip;
    return h;
}

cm::PeerAddress peer_of(const ConnectionRequest& req) { return cm::PeerAddress{req.path.sgid, req.path.dgid}; }

// The addresses and ports a REQ or SIDR_REQ names; false when its service
// ID is no rdma_cm IP service or its CMA header is unusable.
bool read_addressing(std::uint64_t service_id, std::span<const std::uint8_t> private_data, ConnectionRequest& req) {
    const auto service = cm::parse_ip_service_id(service_id);
    const cm::CmaParseResult header = cm::parse_cma_header(private_data);
    if (!service || header.status != cm::CmaStatus::Ok) {
        return false;
    }
    req.port_space = static_cast<std::uint16_t>(service->port_space);
    req.source = Endpoint{family_of(header.header.src), header.header.src, header.header.src_port, 0};
    req.destination = Endpoint{family_of(header.header.dst), header.header.dst, service->port, 0};
    return true;
}

ConnectionRequest request_of(const cm::ReqMsg& m) {
    ConnectionRequest req;
    req.qp_type = m.transport_type == cm::TransportType::Uc ? kQpTypeUc : kQpTypeRc;
    req.ca_guid = htobe64(m.local_ca_guid);
    req.qpn = m.local_qpn;
    req.starting_psn = m.starting_psn;
    req.responder_resources = m.responder_resources;
    req.initiator_depth = m.initiator_depth;
    req.flow_control = m.end_to_end_flow_control ? 1 : 0;
    req.retry_count = m.retry_count;
    req.rnr_retry_count = m.rnr_retry_count;
    req.srq = m.srq ? 1 : 0;
    req.path.sgid = m.primary.local_gid;
    req.path.dgid = m.primary.remote_gid;
    req.path.flow_label = m.primary.flow_label;
    req.path.hop_limit = m.primary.hop_limit;
    req.path.traffic_class = m.primary.traffic_class;
    req.path.sl = m.primary.sl;
    req.path.mtu = m.path_mtu;
    // IBA 12.7.27: the REQ's local ACK timeout is the packet life time plus one.
    req.path.packet_life_time =
        static_cast<std::uint8_t>(m.primary.local_ack_timeout > 0 ? m.primary.local_ack_timeout - 1 : 0);
    req.private_data = user_part(m.private_data);
    return req;
}

ConnectionReply reply_of(const cm::RepMsg& m) {
    ConnectionReply rep;
    rep.ca_guid = htobe64(m.local_ca_guid);
    rep.qpn = m.local_qpn;
    rep.starting_psn = m.starting_psn;
    rep.responder_resources = m.responder_resources;
    rep.initiator_depth = m.initiator_depth;
    rep.flow_control = m.end_to_end_flow_control ? 1 : 0;
    rep.rnr_retry_count = m.rnr_retry_count;
    rep.srq = m.srq ? 1 : 0;
    rep.private_data = whole(m.private_data);
    return rep;
}

SidrReply sidr_reply_of(const cm::SidrRepMsg& m) {
    SidrReply rep;
    switch (static_cast<cm::SidrStatus>(m.status)) {
    case cm::SidrStatus::Success: rep.status = SidrStatus::Success; break;
    case cm::SidrStatus::Unsupported: rep.status = SidrStatus::Unsupported; break;
    default: rep.status = SidrStatus::Rejected; break;
    }
    rep.qpn = m.qpn;
    rep.qkey = m.qkey;
    rep.private_data = whole(m.private_data);
    return rep;
}

}  // namespace

WireConnectionManager::WireConnectionManager(std::uint64_t node_guid) : framer_(*this) {
    cm::CmConfig config;
    config.ca_guid = node_guid;
    config.random_seed = static_cast<std::uint32_t>(node_guid ^ (node_guid >> 32)) | 1U;
    cm_ = std::make_unique<cm::ConnectionManager>(config, *this, framer_, *this);
    cm_->listen_to_every_service(kDeviceListener);
    framer_.attach(*cm_);
}

WireConnectionManager::~WireConnectionManager() = default;

// ---- the daemon's side -----------------------------------------------------

void WireConnectionManager::receive_frame(std::span<const std::uint8_t> frame) {
    ++counters_.frames_received;
    if (framer_.receive_frame(frame) != cm::CmParseStatus::Ok) {
        ++counters_.frames_dropped;
    }
}

void WireConnectionManager::run_timers(std::chrono::steady_clock::time_point /*now*/) {
    const auto due = cm_->next_deadline();
    if (due && *due <= now()) {
        cm_->on_timer();
    }
}

std::optional<std::chrono::steady_clock::time_point> WireConnectionManager::next_deadline() const {
    if (!pending_.empty()) {
        return std::chrono::steady_clock::now();
    }
    const auto due = cm_->next_deadline();
    if (!due) {
        return std::nullopt;
    }
    return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(*due));
}

cm::CmTime WireConnectionManager::now() const {
    return std::chrono::duration_cast<cm::CmTime>(std::chrono::steady_clock::now().time_since_epoch());
}

std::optional<wire::EthFields> WireConnectionManager::ethernet_to(const wire::Gid& peer) {
    if (port_ == nullptr) {
        return std::nullopt;
    }
    framing_for_ = peer;
    wire::EthFields eth;
    eth.src = port_->our_mac();  // the destination is the neighbour table's to fill in
    return eth;
}

void WireConnectionManager::send_frame(std::span<const std::uint8_t> frame) {
    // The framer has just built the frame for the peer it asked ethernet_to
    // about; the port reads the destination back from the IP header.
    if (port_ != nullptr) {
        port_->send_to(frame, framing_for_);
    }
}

// ---- ids and comm IDs ------------------------------------------------------

void WireConnectionManager::bind(ConnectionId id, cm::CommId comm) {
    // Handles are reused at once (lowest free): a connection the id still
    // named is finished by the CM alone, and its events no longer reach the id.
    if (const auto old = comm_of(id); old && *old != comm) {
        id_by_comm_.erase(*old);
        cm_->destroy(*old);
    }
    comm_by_id_[id] = comm;
    id_by_comm_[comm] = id;
}

std::optional<cm::CommId> WireConnectionManager::comm_of(ConnectionId id) const {
    const auto it = comm_by_id_.find(id);
    return it == comm_by_id_.end() ? std::nullopt : std::optional(it->second);
}

std::optional<ConnectionId> WireConnectionManager::connection_of(cm::CommId comm) const {
    const auto it = id_by_comm_.find(comm);
    return it == id_by_comm_.end() ? std::nullopt : std::optional(it->second);
}

// ---- the device's calls ----------------------------------------------------

void WireConnectionManager::send_request(ConnectionId active, const ConnectionRequest& req) {
    cm::ConnectParams p;
    p.service_id = cm::ip_service_id(static_cast<cm::PortSpace>(req.port_space), req.destination.port);
    p.qpn = req.qpn;
    p.starting_psn = req.starting_psn;
    p.responder_resources = req.responder_resources;
    p.initiator_depth = req.initiator_depth;
    p.flow_control = req.flow_control != 0;
    p.retry_count = req.retry_count;
    p.rnr_retry_count = req.rnr_retry_count;
    p.srq = req.srq != 0;
    p.transport = req.qp_type == kQpTypeUc ? cm::TransportType::Uc : cm::TransportType::Rc;
    p.path.local_gid = req.path.sgid;
    p.path.remote_gid = req.path.dgid;
    p.path.flow_label = req.path.flow_label;
    p.path.traffic_class = req.path.traffic_class;
    p.path.hop_limit = req.path.hop_limit;
    p.path.sl = req.path.sl;
    p.path.mtu = req.path.mtu;
    p.path.packet_life_time = req.path.packet_life_time;
    const auto user = std::span(req.private_data.bytes.data(), req.private_data.length);
    const auto comm = cm::make_cma_private_data(cma_header_of(req), user, p.private_data)
                          ? cm_->connect(peer_of(req), p)
                          : std::nullopt;
    if (!comm) {
        later([this, active] { sink_->on_unreachable(active, -ENOMEM); });
        return;
    }
    bind(active, *comm);
}

void WireConnectionManager::send_sidr_request(ConnectionId active, const ConnectionRequest& req) {
    cm::SidrRequestParams p;
    p.service_id = cm::ip_service_id(static_cast<cm::PortSpace>(req.port_space), req.destination.port);
    const auto user = std::span(req.private_data.bytes.data(), req.private_data.length);
    const auto comm = cm::make_cma_private_data(cma_header_of(req), user, p.private_data)
                          ? cm_->sidr_request(peer_of(req), p)
                          : std::nullopt;
    if (!comm) {
        later([this, active] { sink_->on_unreachable(active, -ENOMEM); });
        return;
    }
    bind(active, *comm);
}

void WireConnectionManager::send_reply(ConnectionId passive, const ConnectionReply& rep) {
    const auto comm = comm_of(passive);
    if (!comm) {
        return;
    }
    cm::AcceptParams p;
    p.qpn = rep.qpn;
    p.starting_psn = rep.starting_psn;
    p.responder_resources = rep.responder_resources;
    p.initiator_depth = rep.initiator_depth;
    p.flow_control = rep.flow_control != 0;
    p.rnr_retry_count = rep.rnr_retry_count;
    p.srq = rep.srq != 0;
    p.private_data = to_wire<cm::kRepPrivateData>(rep.private_data);
    (void)cm_->accept(*comm, p);
}

void WireConnectionManager::send_sidr_reply(ConnectionId passive, const SidrReply& rep) {
    const auto comm = comm_of(passive);
    if (!comm) {
        return;
    }
    cm::SidrReplyParams p;
    switch (rep.status) {
    case SidrStatus::Success: p.status = cm::SidrStatus::Success; break;
    case SidrStatus::Unsupported: p.status = cm::SidrStatus::Unsupported; break;
    case SidrStatus::Rejected: p.status = cm::SidrStatus::Reject; break;
    }
    p.qpn = rep.qpn;
    p.qkey = rep.qkey;
    p.private_data = to_wire<cm::kSidrRepPrivateData>(rep.private_data);
    (void)cm_->sidr_reply(*comm, p);
}

void WireConnectionManager::send_ready_to_use(ConnectionId active) {
    if (const auto comm = comm_of(active)) {
        (void)cm_->confirm(*comm);
    }
}

void WireConnectionManager::send_reject(ConnectionId id, RejectReason reason, const PrivateData& data) {
    if (const auto comm = comm_of(id)) {
        const std::size_t n = std::min<std::size_t>(data.length, cm::kRejPrivateData);
        (void)cm_->reject(*comm, static_cast<cm::RejReason>(reason), {}, std::span(data.bytes.data(), n));
    }
}

void WireConnectionManager::send_disconnect_request(ConnectionId id) {
    if (const auto comm = comm_of(id)) {
        (void)cm_->disconnect(*comm);  // ESTABLISHED: DREQ
    }
}

void WireConnectionManager::send_disconnect_reply(ConnectionId id) {
    if (const auto comm = comm_of(id)) {
        (void)cm_->disconnect(*comm);  // DREQ_RCVD: DREP
    }
}

void WireConnectionManager::release(ConnectionId id) {
    const auto comm = comm_of(id);
    if (!comm) {
        return;
    }
    comm_by_id_.erase(id);
    id_by_comm_.erase(*comm);
    cm_->destroy(*comm);  // sends what the state needs; timewait stays in the CM
}

void WireConnectionManager::poll(std::chrono::steady_clock::time_point now) {
    while (!pending_.empty()) {
        auto next = std::move(pending_.front());
        pending_.pop_front();
        next();
    }
    run_timers(now);
}

// ---- the CM's events -------------------------------------------------------

cm::Verdict WireConnectionManager::on_request(const cm::CmEvent& event, bool sidr) {
    ConnectionRequest req;
    bool addressed = false;
    if (sidr) {
        const auto& m = std::get<cm::SidrReqMsg>(*event.message);
        addressed = read_addressing(m.service_id, m.private_data, req);
        req.qp_type = 4;  // IB_QPT_UD
        req.private_data = user_part(m.private_data);
        req.path.sgid = event.peer.remote;
        req.path.dgid = event.peer.local;
    } else {
        const auto& m = std::get<cm::ReqMsg>(*event.message);
        const ConnectionRequest fields = request_of(m);
        addressed = read_addressing(m.service_id, m.private_data, req);
        req = ConnectionRequest{req.port_space, fields.qp_type, req.source, req.destination, fields.ca_guid,
                                fields.qpn, fields.starting_psn, fields.responder_resources,
                                fields.initiator_depth, fields.flow_control, fields.retry_count,
                                fields.rnr_retry_count, fields.srq, fields.path, fields.private_data};
    }
    if (!addressed || sink_ == nullptr) {
        ++counters_.requests_dropped;
        // cma.c rejects a REQ whose CMA header it cannot read (REJ 28).
        return cm::Verdict::reject(cm::RejReason::ConsumerDefined);
    }
    const RequestVerdict verdict = sidr ? sink_->on_sidr_request(req) : sink_->on_request(req);
    if (const auto* accepted = std::get_if<Accepted>(&verdict)) {
        bind(accepted->passive, event.id);
        return cm::Verdict::keep();
    }
    if (const auto* refused = std::get_if<Refused>(&verdict)) {
        ++counters_.requests_refused;
        return cm::Verdict::reject(static_cast<cm::RejReason>(refused->reason));
    }
    ++counters_.requests_dropped;
    return cm::Verdict::drop();
}

cm::Verdict WireConnectionManager::on_cm_event(const cm::CmEvent& event) {
    using T = cm::CmEventType;
    if (event.type == T::ReqReceived || event.type == T::SidrReqReceived) {
        return on_request(event, event.type == T::SidrReqReceived);
    }
    const auto id = connection_of(event.id);
    if (!id || sink_ == nullptr) {
        return cm::Verdict::keep();  // released: the CM finishes the protocol alone
    }
    switch (event.type) {
    case T::RepReceived: sink_->on_reply(*id, reply_of(std::get<cm::RepMsg>(*event.message))); break;
    case T::RtuReceived:
    case T::UserEstablished: sink_->on_ready_to_use(*id); break;
    case T::RejReceived: {
        const auto& rej = std::get<cm::RejMsg>(*event.message);
        sink_->on_reject(*id, static_cast<RejectReason>(rej.reason), whole(rej.private_data));
        break;
    }
    case T::DreqReceived: sink_->on_disconnect_request(*id); break;
    case T::DrepReceived:
    case T::DreqError: sink_->on_disconnect_reply(*id); break;
    case T::SidrRepReceived: sink_->on_sidr_reply(*id, sidr_reply_of(std::get<cm::SidrRepMsg>(*event.message))); break;
    case T::ReqError:
    case T::RepError:
    case T::SidrReqError: sink_->on_unreachable(*id, -ETIMEDOUT); break;
    case T::TimewaitExit: sink_->on_timewait_exit(*id); break;
    case T::ReqReceived:
    case T::SidrReqReceived: break;
    }
    return cm::Verdict::keep();
}

}  // namespace uroce::ucma
