#include "ucma/routing_cm.h"

namespace uroce::ucma {

RoutingConnectionManager::RoutingConnectionManager(ConnectionManager& local, ConnectionManager& wire,
                                                   std::function<bool(const wire::Gid&)> goes_over_wire)
    : local_(local),
      wire_(wire),
      goes_over_wire_(std::move(goes_over_wire)),
      local_upcalls_(*this, local),
      wire_upcalls_(*this, wire) {}

void RoutingConnectionManager::attach(CmEventSink& sink) {
    sink_ = &sink;
    local_.attach(local_upcalls_);
    wire_.attach(wire_upcalls_);
}

ConnectionManager& RoutingConnectionManager::route_of(ConnectionId id) {
    const auto it = route_.find(id);
    return it == route_.end() ? local_ : *it->second;
}

ConnectionManager& RoutingConnectionManager::route_for(ConnectionId active, const wire::Gid& dgid) {
    ConnectionManager& cm = goes_over_wire_(dgid) ? wire_ : local_;
    route_[active] = &cm;
    return cm;
}

void RoutingConnectionManager::send_request(ConnectionId active, const ConnectionRequest& req) {
    route_for(active, req.path.dgid).send_request(active, req);
}

void RoutingConnectionManager::send_sidr_request(ConnectionId active, const ConnectionRequest& req) {
    route_for(active, req.path.dgid).send_sidr_request(active, req);
}

void RoutingConnectionManager::send_reply(ConnectionId passive, const ConnectionReply& rep) {
    route_of(passive).send_reply(passive, rep);
}

void RoutingConnectionManager::send_sidr_reply(ConnectionId passive, const SidrReply& rep) {
    route_of(passive).send_sidr_reply(passive, rep);
}

void RoutingConnectionManager::send_ready_to_use(ConnectionId active) { route_of(active).send_ready_to_use(active); }

void RoutingConnectionManager::send_reject(ConnectionId id, RejectReason reason, const PrivateData& data) {
    route_of(id).send_reject(id, reason, data);
}

void RoutingConnectionManager::send_disconnect_request(ConnectionId id) { route_of(id).send_disconnect_request(id); }

void RoutingConnectionManager::send_disconnect_reply(ConnectionId id) { route_of(id).send_disconnect_reply(id); }

void RoutingConnectionManager::release(ConnectionId id) {
    route_of(id).release(id);
    route_.erase(id);
}

void RoutingConnectionManager::poll(std::chrono::steady_clock::time_point now) {
    local_.poll(now);
    wire_.poll(now);
}

// ---- upcalls ---------------------------------------------------------------

RequestVerdict RoutingConnectionManager::Upcalls::note(RequestVerdict v) {
    if (const auto* accepted = std::get_if<Accepted>(&v)) {
        router_.route_[accepted->passive] = &from_;
    }
    return v;
}

RequestVerdict RoutingConnectionManager::Upcalls::on_request(const ConnectionRequest& req) {
    return note(router_.sink_->on_request(req));
}

RequestVerdict RoutingConnectionManager::Upcalls::on_sidr_request(const ConnectionRequest& req) {
    return note(router_.sink_->on_sidr_request(req));
}

void RoutingConnectionManager::Upcalls::on_reply(ConnectionId active, const ConnectionReply& rep) {
    router_.sink_->on_reply(active, rep);
}

void RoutingConnectionManager::Upcalls::on_sidr_reply(ConnectionId active, const SidrReply& rep) {
    router_.sink_->on_sidr_reply(active, rep);
}

void RoutingConnectionManager::Upcalls::on_ready_to_use(ConnectionId passive) {
    router_.sink_->on_ready_to_use(passive);
}

void RoutingConnectionManager::Upcalls::on_reject(ConnectionId id, RejectReason reason, const PrivateData& data) {
    router_.sink_->on_reject(id, reason, data);
}

void RoutingConnectionManager::Upcalls::on_disconnect_request(ConnectionId id) {
    router_.sink_->on_disconnect_request(id);
}

void RoutingConnectionManager::Upcalls::on_disconnect_reply(ConnectionId id) {
    router_.sink_->on_disconnect_reply(id);
}

void RoutingConnectionManager::Upcalls::on_unreachable(ConnectionId id, int status) {
    router_.sink_->on_unreachable(id, status);
}

void RoutingConnectionManager::Upcalls::on_timewait_exit(ConnectionId id) {
    router_.sink_->on_timewait_exit(id);
}

}  // namespace uroce::ucma
