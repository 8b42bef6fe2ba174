// Chooses, per connection, the connection manager that carries it: ids
// whose peer is one of the device's own addresses (or any peer, on a port
// without a wire) stay inside the daemon (LoopbackConnectionManager); the
// rest go over the wire as CM MADs (WireConnectionManager). The active side
// is routed by the REQ's destination; a passive id by the manager its REQ
// came from. Both managers see the device through this router, which notes
// the passive ids they create.
#pragma once

#include <functional>
#include <unordered_map>

#include "ucma/connection_manager.h"

namespace uroce::ucma {

class RoutingConnectionManager final : public ConnectionManager {
public:
    // `goes_over_wire(dgid)`: whether a connection to dgid uses `wire`.
    RoutingConnectionManager(ConnectionManager& local, ConnectionManager& wire,
                             std::function<bool(const wire::Gid&)> goes_over_wire);

    void attach(CmEventSink& sink) override;
    void send_request(ConnectionId active, const ConnectionRequest& req) override;
    void send_reply(ConnectionId passive, const ConnectionReply& rep) override;
    void send_sidr_request(ConnectionId active, const ConnectionRequest& req) override;
    void send_sidr_reply(ConnectionId passive, const SidrReply& rep) override;
    void send_ready_to_use(ConnectionId active) override;
    void send_reject(ConnectionId id, RejectReason reason, const PrivateData& data) override;
    void send_disconnect_request(ConnectionId id) override;
    void send_disconnect_reply(ConnectionId id) override;
    void release(ConnectionId id) override;
    void poll(std::chrono::steady_clock::time_point now) override;

private:
    // Forwards one manager's events to the device, noting the passive ids
    // its requests create.
    class Upcalls final : public CmEventSink {
    public:
        Upcalls(RoutingConnectionManager& router, ConnectionManager& from) : router_(router), from_(from) {}
        RequestVerdict on_request(const ConnectionRequest& req) override;
        void on_reply(ConnectionId active, const ConnectionReply& rep) override;
        RequestVerdict on_sidr_request(const ConnectionRequest& req) override;
        void on_sidr_reply(ConnectionId active, const SidrReply& rep) override;
        void on_ready_to_use(ConnectionId passive) override;
        void on_reject(ConnectionId id, RejectReason reason, const PrivateData& data) override;
        void on_disconnect_request(ConnectionId id) override;
        void on_disconnect_reply(ConnectionId id) override;
        void on_unreachable(ConnectionId id, int status) override;
        void on_timewait_exit(ConnectionId id) override;

    private:
        RequestVerdict note(RequestVerdict v);
        RoutingConnectionManager& router_;
        ConnectionManager& from_;
    };

    ConnectionManager& route_of(ConnectionId id);
    ConnectionManager& route_for(ConnectionId active, const wire::Gid& dgid);

    ConnectionManager& local_;
    ConnectionManager& wire_;
    std::function<bool(const wire::Gid&)> goes_over_wire_;
    CmEventSink* sink_ = nullptr;
    Upcalls local_upcalls_;
    Upcalls wire_upcalls_;
    std::unordered_map<ConnectionId, ConnectionManager*> route_;
};

}  // namespace uroce::ucma
