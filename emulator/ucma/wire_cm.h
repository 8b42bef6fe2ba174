// The connection manager for ids whose peer is behind the port: the ucma
// device's ConnectionManager seam (connection_manager.h) on top of the IB
// CM state machine (cm/manager.h), whose MADs travel as RoCE v2 UD SENDs to
// QP1 (cm/framer.h). It translates both ways:
//   ConnectionRequest/Reply/SidrReply  <->  REQ/REP/SIDR_REQ/SIDR_REP
//     (the CMA header, cm/cma_header.h, carries the addresses and the
//     active port; the service ID the port space and listening port),
//   ConnectionId (the ucma handle)     <->  the local comm ID.
// The owner (the daemon's datapath) gives it the QP1 frames it receives and
// runs its timers at next_deadline(); frames it sends go to a WireCmPort,
// which resolves the peer's MAC (ARP/ND) and queues until then.
//
// Every REQ reaches the device, whatever its service ID: the device knows
// the listeners and refuses (REJ 8, "invalid service ID") when none fits.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

#include "cm/framer.h"
#include "cm/manager.h"
#include "ucma/connection_manager.h"

namespace uroce::ucma {

// Where the wire CM's frames go (the daemon's port and neighbour table).
class WireCmPort {
public:
    virtual ~WireCmPort() = default;
    [[nodiscard]] virtual wire::MacAddr our_mac() const = 0;
    // A whole frame to `peer`; the Ethernet destination is filled in once
    // the peer's MAC is known. Must not call back into the manager.
    virtual void send_to(std::span<const std::uint8_t> frame, const wire::Gid& peer) = 0;
};

// What happened to received QP1 frames and MADs, for the daemon's log.
struct WireCmCounters {
    std::uint64_t frames_received = 0;
    std::uint64_t frames_dropped = 0;  // not a well-formed CM MAD (see cm::FramerCounters::rx_status)
    std::uint64_t requests_refused = 0;  // REQ/SIDR_REQ the device refused (no listener...)
    std::uint64_t requests_dropped = 0;  // REQ/SIDR_REQ dropped (backlog full, bad header)
};

class WireConnectionManager final : public ConnectionManager,
                                    public cm::CmEventSink,
                                    public cm::FramePort,
                                    public cm::CmClock {
public:
    // `node_guid`: the device's, host order (sysfs node_guid).
    explicit WireConnectionManager(std::uint64_t node_guid);
    ~WireConnectionManager() override;

    // Where frames go; until set, MADs are dropped (counted by the framer).
    void set_port(WireCmPort* port) { port_ = port; }

    // A QP1 frame from the wire.
    void receive_frame(std::span<const std::uint8_t> frame);
    // Runs the CM's timers due at `now` (retransmissions, timewait).
    void run_timers(std::chrono::steady_clock::time_point now);
    [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

    // ucma::ConnectionManager
    void attach(ucma::CmEventSink& sink) override { sink_ = &sink; }
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

    [[nodiscard]] const WireCmCounters& counters() const { return counters_; }
    [[nodiscard]] const cm::CmCounters& cm_counters() const { return cm_->counters(); }
    [[nodiscard]] const cm::FramerCounters& framer_counters() const { return framer_.counters(); }

private:
    // cm::CmEventSink
    cm::Verdict on_cm_event(const cm::CmEvent& event) override;
    // cm::FramePort
    std::optional<wire::EthFields> ethernet_to(const wire::Gid& peer) override;
    void send_frame(std::span<const std::uint8_t> frame) override;
    // cm::CmClock
    [[nodiscard]] cm::CmTime now() const override;

    cm::Verdict on_request(const cm::CmEvent& event, bool sidr);
    void bind(ConnectionId id, cm::CommId comm);
    [[nodiscard]] std::optional<cm::CommId> comm_of(ConnectionId id) const;
    [[nodiscard]] std::optional<ConnectionId> connection_of(cm::CommId comm) const;
    // An event for the device that must wait for poll() (a send_* call
    // cannot be answered from inside itself).
    void later(std::function<void()> deliver) { pending_.push_back(std::move(deliver)); }

    ucma::CmEventSink* sink_ = nullptr;
    WireCmPort* port_ = nullptr;
    wire::Gid framing_for_{};  // the peer of the frame being built (ethernet_to, then send_frame)
    cm::CmFramer framer_;
    std::unique_ptr<cm::ConnectionManager> cm_;
    std::unordered_map<ConnectionId, cm::CommId> comm_by_id_;
    std::unordered_map<cm::CommId, ConnectionId> id_by_comm_;
    std::deque<std::function<void()>> pending_;
    WireCmCounters counters_;
};

}  // namespace uroce::ucma
