// The connection manager for ids whose peer is on this same daemon (a
// loopback port, or a program connecting to the device's own address): the
// REQ, REP, RTU, REJ, DREQ and DREP a wire CM would send as MADs are handed
// to the other local id instead. Delivery waits for poll(), as a MAD would
// wait for the wire, so the device is never re-entered from its own call.
//
// A REQ for an address that is not the device's own cannot be carried here:
// the id gets UNREACHABLE (-ETIMEDOUT), what a REQ nobody answers ends in.
//
// Timewait: a side that sends or receives the DREP of its connection waits
// one path timeout (cm.c cm_enter_timewait: the REQ's local ACK timeout,
// 2^(t-8) ms) and then reports on_timewait_exit, unless released before.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>

#include "ucma/connection_manager.h"

namespace uroce::ucma {

class LoopbackConnectionManager final : public ConnectionManager {
public:
    // `is_local(gid)`: whether the GID is one of the device's own.
    explicit LoopbackConnectionManager(std::function<bool(const wire::Gid&)> is_local);

    void attach(CmEventSink& sink) override { sink_ = &sink; }
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

    [[nodiscard]] std::size_t connections() const { return peer_.size(); }
    [[nodiscard]] std::size_t in_timewait() const { return timewait_ends_.size(); }

private:
    // A REQ or SIDR_REQ: the device's verdict pairs the ids or answers the sender.
    void deliver_request(ConnectionId active, const ConnectionRequest& req, bool sidr);
    // Queues `deliver(peer)` for the peer of `from`; nothing when it has none
    // (it was released: its messages are lost, as on a wire).
    void to_peer(ConnectionId from, std::function<void(ConnectionId)> deliver);
    // `id` exchanged its DREP: timewait starts now.
    void enter_timewait(ConnectionId id);
    void forget_timewait(ConnectionId id);

    std::function<bool(const wire::Gid&)> is_local_;
    CmEventSink* sink_ = nullptr;
    std::unordered_map<ConnectionId, ConnectionId> peer_;  // both directions
    std::deque<std::function<void()>> pending_;
    // The path timeout (IBA time value) of each paired id's connection.
    std::unordered_map<ConnectionId, std::uint8_t> path_timeout_;
    std::multimap<std::chrono::steady_clock::time_point, ConnectionId> timewait_ends_;
};

}  // namespace uroce::ucma
