#include "manager.h"

#include <algorithm>

namespace uroce::cm {

namespace {

template <std::size_t N>
void copy_private(std::span<const std::uint8_t> in, PrivateData<N>& out) {
    out.fill(0);
    std::copy_n(in.begin(), std::min(in.size(), N), out.begin());
}

// The SIDR_REP status (IBA 12.11.2, table 120) that says what a refusal
// with REJ reason `reason` says: nobody takes the service ID (REJ 8) is
// status 1, as Linux's cm.c answers a SIDR_REQ no listener takes; any other
// refusal is status 2.
SidrStatus sidr_status_for(RejReason reason) {
    return reason == RejReason::InvalidServiceId ? SidrStatus::Unsupported : SidrStatus::Reject;
}

}  // namespace

ConnectionManager::ConnectionManager(const CmConfig& config, const CmClock& clock, MadSender& sender,
                                     CmEventSink& sink)
    : config_(config), clock_(clock), sender_(sender), sink_(sink), ids_(config.random_seed) {}

// ---- listeners -------------------------------------------------------------

bool ConnectionManager::listen(std::uint64_t service_id, std::uint64_t listener_context) {
    return listeners_.emplace(service_id, listener_context).second;
}

void ConnectionManager::stop_listening(std::uint64_t service_id) { listeners_.erase(service_id); }

std::optional<std::uint64_t> ConnectionManager::listener_for(std::uint64_t service_id) const {
    if (const auto it = listeners_.find(service_id); it != listeners_.end()) {
        return it->second;
    }
    return any_service_;
}

// ---- lookups ---------------------------------------------------------------

ConnectionManager::Connection* ConnectionManager::find(CommId id) {
    auto it = conns_.find(id);
    return it == conns_.end() || it->second.destroyed ? nullptr : &it->second;
}

const ConnectionManager::Connection* ConnectionManager::find(CommId id) const {
    auto it = conns_.find(id);
    return it == conns_.end() || it->second.destroyed ? nullptr : &it->second;
}

ConnectionManager::Connection* ConnectionManager::match(CommId ours, CommId theirs) {
    auto it = conns_.find(ours);
    if (it == conns_.end()) {
        return nullptr;
    }
    Connection& c = it->second;
    // Until the peer's comm ID is known (REQ_SENT) any value is accepted.
    if (c.remote_id != 0 && theirs != 0 && c.remote_id != theirs) {
        return nullptr;
    }
    return &c;
}

ConnectionManager::Connection& ConnectionManager::create(CommId id) {
    Connection& c = conns_[id];
    c.local_id = id;
    return c;
}

std::optional<ConnectionView> ConnectionManager::view(CommId id) const {
    const Connection* c = find(id);
    if (c == nullptr) {
        return std::nullopt;
    }
    return ConnectionView{c->state, c->remote_id, c->remote_ca_guid, c->remote_qpn, c->local_qpn, c->service_id,
                          c->peer};
}

std::optional<CmState> ConnectionManager::state(CommId id) const {
    const Connection* c = find(id);
    return c == nullptr ? std::nullopt : std::optional<CmState>(c->state);
}

// ---- sending ---------------------------------------------------------------

void ConnectionManager::send(const PeerAddress& to, const Mad& mad) {
    ++counters_.sent;
    sender_.send_mad(to, build_mad(mad));
}

void ConnectionManager::send_with_retries(Connection& c, const Mad& mad, Millis interval, std::uint8_t retries) {
    Outstanding o;
    o.mad = build_mad(mad);
    o.interval = interval;
    o.retries_left = retries;
    ++counters_.sent;
    sender_.send_mad(c.peer, o.mad);
    c.outstanding = o;
    set_deadline(c, clock_.now() + interval);
}

void ConnectionManager::send_rej(Connection& c, RejReason reason, MsgRef which, std::span<const std::uint8_t> ari,
                                 std::span<const std::uint8_t> private_data) {
    RejMsg rej;
    rej.local_comm_id = c.local_id;
    rej.remote_comm_id = c.remote_id;
    rej.message_rejected = which;
    rej.reason = static_cast<std::uint16_t>(reason);
    rej.reject_info_length = static_cast<std::uint8_t>(std::min(ari.size(), kRejAriSize));
    copy_private(ari, rej.ari);
    copy_private(private_data, rej.private_data);
    send(c.peer, Mad{cm_header(c.tid), rej});
}

void ConnectionManager::send_mra(Connection& c, MsgRef which) {
    MraMsg mra;
    mra.local_comm_id = c.local_id;
    mra.remote_comm_id = c.remote_id;
    mra.message_mraed = which;
    mra.service_timeout = config_.lazy_mra_service_timeout.value_or(0);
    send(c.peer, Mad{cm_header(c.tid), mra});
}

void ConnectionManager::send_dreq_once(Connection& c) {
    c.tid = make_tid(config_.tid_high, c.local_id);  // a DREQ starts its own transaction
    send(c.peer, Mad{cm_header(c.tid), DreqMsg{c.local_id, c.remote_id, c.remote_qpn, {}}});
}

void ConnectionManager::send_drep(Connection& c, std::span<const std::uint8_t> private_data) {
    DrepMsg drep{c.local_id, c.remote_id, {}};
    copy_private(private_data, drep.private_data);
    const Mad mad{cm_header(c.tid), drep};
    c.last_answer = build_mad(mad);
    send(c.peer, mad);
}

void ConnectionManager::issue_rej(const PeerAddress& from, const MadHeader& h, CommId their_id, RejReason reason,
                                  MsgRef which) {
    RejMsg rej;
    rej.remote_comm_id = their_id;
    rej.message_rejected = which;
    rej.reason = static_cast<std::uint16_t>(reason);
    send(PeerAddress{from.local, from.remote}, Mad{cm_header(h.tid), rej});
}

void ConnectionManager::issue_drep(const PeerAddress& from, const MadHeader& h, const DreqMsg& m) {
    send(from, Mad{cm_header(h.tid), DrepMsg{m.remote_comm_id, m.local_comm_id, {}}});
}

// ---- timers and state changes -----------------------------------------------

void ConnectionManager::set_deadline(Connection& c, std::optional<CmTime> when) {
    if (c.deadline) {
        timers_.erase({*c.deadline, c.local_id});
    }
    c.deadline = when;
    if (when) {
        timers_.insert({*when, c.local_id});
    }
}

void ConnectionManager::cancel_outstanding(Connection& c) {
    c.outstanding.reset();
    set_deadline(c, std::nullopt);
}

void ConnectionManager::hold_remote_keys(Connection& c) {
    remote_ids_[{c.remote_id, c.remote_ca_guid}] = c.local_id;
    remote_qpns_[{c.remote_qpn, c.remote_ca_guid}] = c.local_id;
    c.remote_keys_held = true;
}

void ConnectionManager::release_remote_keys(Connection& c) {
    if (c.remote_keys_held) {
        auto erase_if_ours = [&c](std::map<RemoteKey, CommId>& table, RemoteKey key) {
            auto it = table.find(key);
            if (it != table.end() && it->second == c.local_id) {
                table.erase(it);
            }
        };
        erase_if_ours(remote_ids_, {c.remote_id, c.remote_ca_guid});
        erase_if_ours(remote_qpns_, {c.remote_qpn, c.remote_ca_guid});
        c.remote_keys_held = false;
    }
    if (c.sidr_key) {
        remote_sidr_.erase(*c.sidr_key);
        c.sidr_key.reset();
    }
}

void ConnectionManager::enter_timewait(Connection& c) {
    cancel_outstanding(c);
    c.state = CmState::Timewait;
    // The remote keys stay held: a REQ reusing them is stale (12.9.8.3).
    set_deadline(c, clock_.now() + iba_time_to_ms(c.path_timeout));
}

void ConnectionManager::reset_to_idle(Connection& c) {
    cancel_outstanding(c);
    release_remote_keys(c);
    c.state = CmState::Idle;
}

void ConnectionManager::forget(CommId id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) {
        return;
    }
    set_deadline(it->second, std::nullopt);
    release_remote_keys(it->second);
    conns_.erase(it);
    ids_.release(id);
}

Verdict ConnectionManager::deliver(CmEventType type, const Connection& c, std::optional<Message> message) {
    if (c.destroyed) {
        return Verdict::keep();
    }
    CmEvent e;
    e.type = type;
    e.id = c.local_id;
    e.peer = c.peer;
    e.listener_context = c.listener_context;
    e.message = std::move(message);
    return sink_.on_cm_event(e);
}

std::optional<CmTime> ConnectionManager::next_deadline() const {
    if (timers_.empty()) {
        return std::nullopt;
    }
    return timers_.begin()->first;
}

void ConnectionManager::on_timer() {
    const CmTime now = clock_.now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
        const CommId id = timers_.begin()->second;
        timers_.erase(timers_.begin());
        auto it = conns_.find(id);
        if (it == conns_.end()) {
            continue;
        }
        it->second.deadline.reset();
        on_deadline(it->second);
    }
}

void ConnectionManager::on_deadline(Connection& c) {
    if (c.state == CmState::Timewait) {
        const CommId id = c.local_id;
        if (c.destroyed) {
            forget(id);
            return;
        }
        reset_to_idle(c);
        deliver(CmEventType::TimewaitExit, c, std::nullopt);
        return;
    }
    if (!c.outstanding) {
        return;
    }
    if (c.outstanding->retries_left == 0) {
        retries_exhausted(c);
        return;
    }
    --c.outstanding->retries_left;
    ++counters_.retransmits;
    ++counters_.sent;
    sender_.send_mad(c.peer, c.outstanding->mad);
    set_deadline(c, clock_.now() + c.outstanding->interval);
}

void ConnectionManager::retries_exhausted(Connection& c) {
    ++counters_.timeouts;
    c.outstanding.reset();
    CmEventType type = CmEventType::ReqError;
    switch (c.state) {
    case CmState::ReqSent:
    case CmState::MraReqRcvd:
        reset_to_idle(c);
        type = CmEventType::ReqError;
        break;
    case CmState::RepSent:
    case CmState::MraRepRcvd:
        reset_to_idle(c);
        type = CmEventType::RepError;
        break;
    case CmState::DreqSent:
        enter_timewait(c);
        type = CmEventType::DreqError;
        break;
    case CmState::SidrReqSent:
        reset_to_idle(c);
        type = CmEventType::SidrReqError;
        break;
    default: return;
    }
    deliver(type, c, std::nullopt);
}

// ---- calls from above ------------------------------------------------------

std::optional<CommId> ConnectionManager::connect(const PeerAddress& peer, const ConnectParams& params) {
    const auto id = ids_.allocate();
    if (!id) {
        return std::nullopt;
    }
    Connection& c = create(*id);
    c.peer = peer;
    c.service_id = params.service_id;
    c.local_qpn = params.qpn;
    c.tid = make_tid(config_.tid_high, *id);
    c.max_cm_retries = params.max_cm_retries;
    c.packet_life_time = params.path.packet_life_time;
    c.path_timeout = static_cast<std::uint8_t>(params.path.packet_life_time + 1);
    c.response_timeout = req_timeout(params.path.packet_life_time, params.remote_cm_response_timeout);
    c.state = CmState::ReqSent;
    ConnectParams p = params;
    p.local_ca_guid = config_.ca_guid;  // the device's, whatever the caller filled in
    send_with_retries(c, Mad{cm_header(c.tid), format_req(p, *id)}, c.response_timeout, c.max_cm_retries);
    return id;
}

CallStatus ConnectionManager::confirm(CommId id, const PrivateData<kRtuPrivateData>& private_data) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    if (c->state != CmState::RepRcvd && c->state != CmState::MraRepSent) {
        return CallStatus::WrongState;
    }
    const Mad mad{cm_header(c->tid), RtuMsg{c->local_id, c->remote_id, private_data}};
    c->last_answer = build_mad(mad);
    c->state = CmState::Established;
    send(c->peer, mad);
    return CallStatus::Ok;
}

CallStatus ConnectionManager::accept(CommId id, const AcceptParams& params) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    if (c->state != CmState::ReqRcvd && c->state != CmState::MraReqSent) {
        return CallStatus::WrongState;
    }
    c->local_qpn = params.qpn;
    c->state = CmState::RepSent;
    AcceptParams p = params;
    p.local_ca_guid = config_.ca_guid;
    send_with_retries(*c, Mad{cm_header(c->tid), format_rep(p, c->local_id, c->remote_id)},
                      c->response_timeout, c->max_cm_retries);
    return CallStatus::Ok;
}

CallStatus ConnectionManager::establish(CommId id) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    if (c->state != CmState::RepSent && c->state != CmState::MraRepRcvd) {
        return CallStatus::WrongState;
    }
    cancel_outstanding(*c);
    c->state = CmState::Established;
    deliver(CmEventType::UserEstablished, *c, std::nullopt);
    return CallStatus::Ok;
}

CallStatus ConnectionManager::reject(CommId id, RejReason reason, std::span<const std::uint8_t> ari,
                                     std::span<const std::uint8_t> private_data) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    switch (c->state) {
    case CmState::ReqSent:
    case CmState::MraReqRcvd:
        send_rej(*c, reason, MsgRef::Other, ari, private_data);
        reset_to_idle(*c);
        return CallStatus::Ok;
    case CmState::ReqRcvd:
    case CmState::MraReqSent:
        send_rej(*c, reason, MsgRef::Req, ari, private_data);
        reset_to_idle(*c);
        return CallStatus::Ok;
    case CmState::RepRcvd:
    case CmState::MraRepSent:
        send_rej(*c, reason, MsgRef::Rep, ari, private_data);
        reset_to_idle(*c);
        return CallStatus::Ok;
    case CmState::RepSent:
    case CmState::MraRepRcvd:
        send_rej(*c, reason, MsgRef::Other, ari, private_data);
        enter_timewait(*c);
        return CallStatus::Ok;
    default: return CallStatus::WrongState;
    }
}

CallStatus ConnectionManager::disconnect(CommId id, std::span<const std::uint8_t> private_data) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    if (c->state == CmState::Established) {
        c->tid = make_tid(config_.tid_high, c->local_id);
        DreqMsg dreq{c->local_id, c->remote_id, c->remote_qpn, {}};
        copy_private(private_data, dreq.private_data);
        c->state = CmState::DreqSent;
        send_with_retries(*c, Mad{cm_header(c->tid), dreq}, c->response_timeout, c->max_cm_retries);
        return CallStatus::Ok;
    }
    if (c->state == CmState::DreqRcvd) {
        send_drep(*c, private_data);
        enter_timewait(*c);
        return CallStatus::Ok;
    }
    return CallStatus::WrongState;
}

void ConnectionManager::destroy(CommId id) {
    Connection* c = find(id);
    if (c == nullptr) {
        return;
    }
    switch (c->state) {
    case CmState::ReqSent:
    case CmState::MraReqRcvd: {
        // Linux: REJ "timeout" naming our own CA GUID in the ARI.
        std::array<std::uint8_t, 8> guid{};
        for (std::size_t i = 0; i < guid.size(); ++i) {
            guid[i] = static_cast<std::uint8_t>(config_.ca_guid >> (56 - 8 * i));
        }
        send_rej(*c, RejReason::Timeout, MsgRef::Other, guid, {});
        break;
    }
    case CmState::ReqRcvd:
    case CmState::MraReqSent:
        send_rej(*c, RejReason::ConsumerDefined, MsgRef::Req, {}, {});
        break;
    case CmState::RepRcvd:
    case CmState::MraRepSent:
        send_rej(*c, RejReason::ConsumerDefined, MsgRef::Rep, {}, {});
        break;
    case CmState::RepSent:
    case CmState::MraRepRcvd:
        send_rej(*c, RejReason::ConsumerDefined, MsgRef::Other, {}, {});
        enter_timewait(*c);
        break;
    case CmState::Established:
        send_dreq_once(*c);  // no retries: the ID is going away
        enter_timewait(*c);
        break;
    case CmState::DreqSent: enter_timewait(*c); break;
    case CmState::DreqRcvd:
        send_drep(*c, {});
        enter_timewait(*c);
        break;
    case CmState::SidrReqRcvd: {
        SidrRepMsg rep;
        rep.request_id = c->remote_id;
        rep.status = static_cast<std::uint8_t>(SidrStatus::Reject);
        rep.service_id = c->service_id;
        send(c->peer, Mad{cm_header(c->tid), rep});
        break;
    }
    case CmState::Timewait:
    case CmState::Idle:
    case CmState::SidrReqSent: break;
    }
    if (c->state == CmState::Timewait) {
        c->destroyed = true;  // forgotten when timewait ends
    } else {
        forget(id);
    }
}

std::optional<CommId> ConnectionManager::sidr_request(const PeerAddress& peer, const SidrRequestParams& params) {
    const auto id = ids_.allocate();
    if (!id) {
        return std::nullopt;
    }
    Connection& c = create(*id);
    c.peer = peer;
    c.service_id = params.service_id;
    c.tid = make_tid(config_.tid_high, *id);
    c.state = CmState::SidrReqSent;
    const SidrReqMsg req{*id, params.partition_key, params.service_id, params.private_data};
    send_with_retries(c, Mad{cm_header(c.tid), req}, config_.sidr_timeout, config_.sidr_max_retries);
    return id;
}

CallStatus ConnectionManager::sidr_reply(CommId id, const SidrReplyParams& params) {
    Connection* c = find(id);
    if (c == nullptr) {
        return CallStatus::NoSuchId;
    }
    if (c->state != CmState::SidrReqRcvd) {
        return CallStatus::WrongState;
    }
    SidrRepMsg rep;
    rep.request_id = c->remote_id;
    rep.status = static_cast<std::uint8_t>(params.status);
    rep.qpn = params.qpn;
    rep.service_id = c->service_id;
    rep.qkey = params.qkey;
    rep.private_data = params.private_data;
    send(c->peer, Mad{cm_header(c->tid), rep});
    reset_to_idle(*c);
    return CallStatus::Ok;
}

// ---- receiving -------------------------------------------------------------

CmParseStatus ConnectionManager::receive(const PeerAddress& from, std::span<const std::uint8_t> bytes) {
    const MadParseResult r = parse_mad(bytes);
    ++counters_.rx_status[static_cast<std::size_t>(r.status)];
    if (!r.ok()) {
        return r.status;
    }
    const MadHeader& h = r.mad.header;
    struct Dispatch {
        ConnectionManager& self;
        const PeerAddress& from;
        const MadHeader& h;
        void operator()(const ReqMsg& m) const { self.on_req(from, h, m); }
        void operator()(const RepMsg& m) const { self.on_rep(h, m); }
        void operator()(const RtuMsg& m) const { self.on_rtu(m); }
        void operator()(const DreqMsg& m) const { self.on_dreq(from, h, m); }
        void operator()(const DrepMsg& m) const { self.on_drep(m); }
        void operator()(const RejMsg& m) const { self.on_rej(m); }
        void operator()(const MraMsg& m) const { self.on_mra(m); }
        void operator()(const SidrReqMsg& m) const { self.on_sidr_req(from, h, m); }
        void operator()(const SidrRepMsg& m) const { self.on_sidr_rep(m); }
    };
    std::visit(Dispatch{*this, from, h}, r.mad.message);
    return r.status;
}

void ConnectionManager::on_duplicate_req(Connection& c, const MadHeader& h) {
    ++counters_.duplicates;
    if (c.state == CmState::MraReqSent) {
        c.tid = h.tid;
        send_mra(c, MsgRef::Req);
    } else if (c.state == CmState::Timewait) {
        send_rej(c, RejReason::StaleConnection, MsgRef::Req, {}, {});
    }
}

void ConnectionManager::on_req(const PeerAddress& from, const MadHeader& h, const ReqMsg& m) {
    if (auto it = remote_ids_.find({m.local_comm_id, m.local_ca_guid}); it != remote_ids_.end()) {
        on_duplicate_req(conns_.at(it->second), h);
        return;
    }
    if (auto it = remote_qpns_.find({m.local_qpn, m.local_ca_guid}); it != remote_qpns_.end()) {
        // The peer reuses a QPN we still associate with a connection: stale.
        ++counters_.stale;
        issue_rej(from, h, m.local_comm_id, RejReason::StaleConnection, MsgRef::Req);
        // The old connection is torn down as if its program had asked:
        // DREQ, resent; the peer's DREP (or the timeout) reports it upwards.
        const CommId old = it->second;
        if (conns_.at(old).state == CmState::Established) {
            disconnect(old);
        }
        return;
    }
    const auto listener = listener_for(m.service_id);
    if (!listener) {
        ++counters_.no_listener;
        issue_rej(from, h, m.local_comm_id, RejReason::InvalidServiceId, MsgRef::Req);
        return;
    }
    const auto id = ids_.allocate();
    if (!id) {
        issue_rej(from, h, m.local_comm_id, RejReason::NoResources, MsgRef::Req);
        return;
    }
    Connection& c = create(*id);
    c.peer = from;
    c.listener_context = *listener;
    c.service_id = m.service_id;
    c.remote_id = m.local_comm_id;
    c.remote_ca_guid = m.local_ca_guid;
    c.remote_qpn = m.local_qpn;
    c.tid = h.tid;
    c.max_cm_retries = m.max_cm_retries;
    c.response_timeout = iba_time_to_ms(m.local_cm_response_timeout);
    // The path's packet lifetime is the REQ's local ACK timeout less one.
    c.packet_life_time = static_cast<std::uint8_t>(m.primary.local_ack_timeout > 0 ? m.primary.local_ack_timeout - 1 : 0);
    c.path_timeout = static_cast<std::uint8_t>(c.packet_life_time + 1);
    c.state = CmState::ReqRcvd;
    hold_remote_keys(c);
    const Verdict v = deliver(CmEventType::ReqReceived, c, m);
    after_request_upcall(*id, v, false);
}

void ConnectionManager::after_request_upcall(CommId id, const Verdict& v, bool sidr) {
    Connection* c = find(id);
    if (c == nullptr) {
        return;  // destroyed from inside the upcall
    }
    const CmState waiting = sidr ? CmState::SidrReqRcvd : CmState::ReqRcvd;
    if (c->state != waiting) {
        return;  // answered from inside the upcall
    }
    switch (v.kind) {
    case Verdict::Kind::Drop: forget(id); return;
    case Verdict::Kind::Reject:
        if (sidr) {
            SidrReplyParams p;
            p.status = sidr_status_for(v.reason);
            sidr_reply(id, p);
        } else {
            send_rej(*c, v.reason, MsgRef::Req, {}, {});
        }
        forget(id);
        return;
    case Verdict::Kind::Keep:
        if (!sidr && config_.lazy_mra_service_timeout) {
            c->state = CmState::MraReqSent;  // armed; sent only for a duplicate REQ
        }
        return;
    }
}

void ConnectionManager::on_duplicate_rep(Connection& c) {
    ++counters_.duplicates;
    if (c.state == CmState::Established && c.last_answer) {
        ++counters_.sent;
        sender_.send_mad(c.peer, *c.last_answer);  // the RTU again
    } else if (c.state == CmState::MraRepSent) {
        send_mra(c, MsgRef::Rep);
    }
}

void ConnectionManager::on_rep(const MadHeader& h, const RepMsg& m) {
    Connection* c = match(m.remote_comm_id, m.local_comm_id);
    if (c == nullptr || c->destroyed) {
        ++counters_.unmatched;
        return;
    }
    if (c->state != CmState::ReqSent && c->state != CmState::MraReqRcvd) {
        if (c->remote_id == m.local_comm_id) {
            on_duplicate_rep(*c);
        } else {
            ++counters_.unmatched;
        }
        return;
    }
    if (remote_ids_.contains({m.local_comm_id, m.local_ca_guid})) {
        ++counters_.duplicates;
        return;
    }
    if (remote_qpns_.contains({m.local_qpn, m.local_ca_guid})) {
        ++counters_.stale;
        issue_rej(c->peer, h, m.local_comm_id, RejReason::StaleConnection, MsgRef::Rep);
        return;
    }
    cancel_outstanding(*c);
    c->remote_id = m.local_comm_id;
    c->remote_ca_guid = m.local_ca_guid;
    c->remote_qpn = m.local_qpn;
    c->path_timeout = local_ack_timeout(m.target_ack_delay, static_cast<std::uint8_t>(c->path_timeout - 1));
    c->state = CmState::RepRcvd;
    hold_remote_keys(*c);
    const CommId id = c->local_id;
    deliver(CmEventType::RepReceived, *c, m);
    c = find(id);
    if (c != nullptr && c->state == CmState::RepRcvd && config_.lazy_mra_service_timeout) {
        c->state = CmState::MraRepSent;
    }
}

void ConnectionManager::on_rtu(const RtuMsg& m) {
    Connection* c = match(m.remote_comm_id, m.local_comm_id);
    if (c == nullptr || c->destroyed || (c->state != CmState::RepSent && c->state != CmState::MraRepRcvd)) {
        ++counters_.unmatched;
        return;
    }
    cancel_outstanding(*c);
    c->state = CmState::Established;
    deliver(CmEventType::RtuReceived, *c, m);
}

void ConnectionManager::on_dreq(const PeerAddress& from, const MadHeader& h, const DreqMsg& m) {
    Connection* c = match(m.remote_comm_id, m.local_comm_id);
    if (c == nullptr || c->remote_id == 0) {
        // Linux answers a DREQ nobody owns with a DREP, so the peer stops.
        ++counters_.unmatched;
        issue_drep(from, h, m);
        return;
    }
    if (m.remote_qpn != c->local_qpn) {
        ++counters_.unmatched;
        return;
    }
    switch (c->state) {
    case CmState::RepSent:
    case CmState::MraRepRcvd:
    case CmState::DreqSent:
    case CmState::Established:
        cancel_outstanding(*c);
        c->tid = h.tid;
        c->state = CmState::DreqRcvd;
        deliver(CmEventType::DreqReceived, *c, m);
        return;
    case CmState::Timewait:
        ++counters_.duplicates;
        c->tid = h.tid;
        send_drep(*c, {});
        return;
    default: ++counters_.duplicates; return;
    }
}

void ConnectionManager::on_drep(const DrepMsg& m) {
    Connection* c = match(m.remote_comm_id, m.local_comm_id);
    if (c == nullptr || c->destroyed || (c->state != CmState::DreqSent && c->state != CmState::DreqRcvd)) {
        ++counters_.unmatched;
        return;
    }
    enter_timewait(*c);
    deliver(CmEventType::DrepReceived, *c, m);
}

ConnectionManager::Connection* ConnectionManager::rejected(const RejMsg& m) {
    if (m.remote_comm_id != 0) {
        return match(m.remote_comm_id, m.local_comm_id);
    }
    // A REJ "timeout" from an active side that never learnt our comm ID
    // names itself by its comm ID and, in the ARI, its CA GUID (12.6.7.2).
    if (m.reason != static_cast<std::uint16_t>(RejReason::Timeout) || m.reject_info_length < 8) {
        return nullptr;
    }
    std::uint64_t guid = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        guid = (guid << 8) | m.ari[i];
    }
    auto it = remote_ids_.find({m.local_comm_id, guid});
    return it == remote_ids_.end() ? nullptr : find(it->second);
}

void ConnectionManager::on_rej(const RejMsg& m) {
    Connection* c = rejected(m);
    if (c == nullptr || c->destroyed) {
        ++counters_.unmatched;
        return;
    }
    const bool stale = m.reason == static_cast<std::uint16_t>(RejReason::StaleConnection);
    switch (c->state) {
    case CmState::ReqSent:
    case CmState::MraReqRcvd:
    case CmState::RepSent:
    case CmState::MraRepRcvd:
    case CmState::ReqRcvd:
    case CmState::MraReqSent:
        if (stale) {
            enter_timewait(*c);
        } else {
            reset_to_idle(*c);
        }
        break;
    case CmState::DreqSent:
    case CmState::RepRcvd:
    case CmState::MraRepSent:
    case CmState::Established: enter_timewait(*c); break;
    default: ++counters_.unmatched; return;
    }
    deliver(CmEventType::RejReceived, *c, m);
}

void ConnectionManager::on_mra(const MraMsg& m) {
    Connection* c = match(m.remote_comm_id, m.local_comm_id);
    if (c == nullptr || c->destroyed || !c->outstanding) {
        ++counters_.unmatched;
        return;
    }
    if (c->state == CmState::ReqSent && m.message_mraed == MsgRef::Req) {
        c->state = CmState::MraReqRcvd;
    } else if (c->state == CmState::RepSent && m.message_mraed == MsgRef::Rep) {
        c->state = CmState::MraRepRcvd;
    } else {
        ++counters_.duplicates;
        return;
    }
    // The peer needs longer: wait its service time before resending.
    const Millis wait = mra_timeout(m.service_timeout, c->packet_life_time);
    c->outstanding->interval = wait;
    set_deadline(*c, clock_.now() + wait);
}

void ConnectionManager::on_sidr_req(const PeerAddress& from, const MadHeader& h, const SidrReqMsg& m) {
    const SidrKey key{m.request_id, from.remote};
    if (remote_sidr_.contains(key)) {
        ++counters_.duplicates;
        return;
    }
    const auto listener = listener_for(m.service_id);
    const auto id = !listener ? std::nullopt : ids_.allocate();
    if (!id) {
        ++counters_.no_listener;
        SidrRepMsg rep;
        rep.request_id = m.request_id;
        rep.status = static_cast<std::uint8_t>(SidrStatus::Unsupported);
        rep.service_id = m.service_id;
        send(from, Mad{cm_header(h.tid), rep});
        return;
    }
    Connection& c = create(*id);
    c.peer = from;
    c.listener_context = *listener;
    c.service_id = m.service_id;
    c.remote_id = m.request_id;
    c.tid = h.tid;
    c.state = CmState::SidrReqRcvd;
    c.sidr_key = key;
    remote_sidr_[key] = *id;
    const Verdict v = deliver(CmEventType::SidrReqReceived, c, m);
    after_request_upcall(*id, v, true);
}

void ConnectionManager::on_sidr_rep(const SidrRepMsg& m) {
    Connection* c = find(m.request_id);
    if (c == nullptr || c->state != CmState::SidrReqSent) {
        ++counters_.unmatched;
        return;
    }
    reset_to_idle(*c);
    deliver(CmEventType::SidrRepReceived, *c, m);
}

}  // namespace uroce::cm
