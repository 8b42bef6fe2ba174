#include "ucma/loopback_cm.h"

#include <algorithm>
#include <cerrno>

#include "cm/format.h"
#include "cm/timers.h"

namespace uroce::ucma {

LoopbackConnectionManager::LoopbackConnectionManager(std::function<bool(const wire::Gid&)> is_local)
    : is_local_(std::move(is_local)) {}

void LoopbackConnectionManager::send_request(ConnectionId active, const ConnectionRequest& req) {
    pending_.emplace_back([this, active, req] { deliver_request(active, req, false); });
}

void LoopbackConnectionManager::send_sidr_request(ConnectionId active, const ConnectionRequest& req) {
    pending_.emplace_back([this, active, req] { deliver_request(active, req, true); });
}

void LoopbackConnectionManager::deliver_request(ConnectionId active, const ConnectionRequest& req, bool sidr) {
    if (!is_local_(req.path.dgid)) {
        sink_->on_unreachable(active, -ETIMEDOUT);
        return;
    }
    const RequestVerdict verdict = sidr ? sink_->on_sidr_request(req) : sink_->on_request(req);
    if (const auto* accepted = std::get_if<Accepted>(&verdict)) {
        peer_[active] = accepted->passive;
        peer_[accepted->passive] = active;
        // Both sides' path timeout is the REQ's local ACK timeout (cm.c
        // cm_format_req; the active side's REP handling arrives at the same).
        const std::uint8_t timeout = cm::local_ack_timeout(cm::kRxeAckDelay, req.path.packet_life_time);
        path_timeout_[active] = timeout;
        path_timeout_[accepted->passive] = timeout;
    } else if (const auto* refused = std::get_if<Refused>(&verdict)) {
        if (sidr) {
            SidrReply rep;  // no listener: SIDR status 1, "service ID not supported"
            rep.status = SidrStatus::Unsupported;
            sink_->on_sidr_reply(active, rep);
        } else {
            sink_->on_reject(active, refused->reason, PrivateData{});
        }
    } else {
        // Dropped (full backlog): a wire peer would resend and give up
        // after 15 tries; here nothing will ever answer.
        sink_->on_unreachable(active, -ETIMEDOUT);
    }
}

void LoopbackConnectionManager::send_sidr_reply(ConnectionId passive, const SidrReply& rep) {
    to_peer(passive, [this, rep](ConnectionId active) { sink_->on_sidr_reply(active, rep); });
}

void LoopbackConnectionManager::to_peer(ConnectionId from, std::function<void(ConnectionId)> deliver) {
    pending_.emplace_back([this, from, deliver = std::move(deliver)] {
        const auto it = peer_.find(from);
        if (it != peer_.end()) {
            deliver(it->second);
        }
    });
}

void LoopbackConnectionManager::send_reply(ConnectionId passive, const ConnectionReply& rep) {
    to_peer(passive, [this, rep](ConnectionId active) { sink_->on_reply(active, rep); });
}

void LoopbackConnectionManager::send_ready_to_use(ConnectionId active) {
    to_peer(active, [this](ConnectionId passive) { sink_->on_ready_to_use(passive); });
}

void LoopbackConnectionManager::send_reject(ConnectionId id, RejectReason reason, const PrivateData& data) {
    to_peer(id, [this, reason, data](ConnectionId peer) { sink_->on_reject(peer, reason, data); });
}

void LoopbackConnectionManager::send_disconnect_request(ConnectionId id) {
    to_peer(id, [this](ConnectionId peer) { sink_->on_disconnect_request(peer); });
}

void LoopbackConnectionManager::send_disconnect_reply(ConnectionId id) {
    enter_timewait(id);
    to_peer(id, [this](ConnectionId peer) {
        enter_timewait(peer);
        sink_->on_disconnect_reply(peer);
    });
}

void LoopbackConnectionManager::enter_timewait(ConnectionId id) {
    const auto timeout = path_timeout_.find(id);
    if (timeout == path_timeout_.end()) {
        return;  // never paired: no connection to wait for
    }
    forget_timewait(id);
    timewait_ends_.emplace(std::chrono::steady_clock::now() + cm::iba_time_to_ms(timeout->second), id);
}

void LoopbackConnectionManager::forget_timewait(ConnectionId id) {
    std::erase_if(timewait_ends_, [id](const auto& entry) { return entry.second == id; });
}

void LoopbackConnectionManager::release(ConnectionId id) {
    // Messages already queued from `id` still reach its peer (they are "on
    // the wire"); nothing reaches `id` any more.
    pending_.emplace_back([this, id] {
        path_timeout_.erase(id);
        forget_timewait(id);
        const auto it = peer_.find(id);
        if (it == peer_.end()) {
            return;
        }
        const ConnectionId peer = it->second;
        peer_.erase(it);
        if (auto back = peer_.find(peer); back != peer_.end() && back->second == id) {
            peer_.erase(back);
        }
    });
}

void LoopbackConnectionManager::poll(std::chrono::steady_clock::time_point now) {
    // A delivery may queue more (a REQ refused queues nothing, but the
    // device answering may send): run until quiet, in order.
    while (!pending_.empty()) {
        auto next = std::move(pending_.front());
        pending_.pop_front();
        next();
    }
    while (!timewait_ends_.empty() && timewait_ends_.begin()->first <= now) {
        const ConnectionId id = timewait_ends_.begin()->second;
        timewait_ends_.erase(timewait_ends_.begin());
        sink_->on_timewait_exit(id);
    }
}

}  // namespace uroce::ucma
