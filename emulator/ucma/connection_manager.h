// The seam between the emulated ucma device (ucma_device.h, which keeps the
// rdma_cm ids as the kernel's ucma.c/cma.c do) and whatever carries the IB
// connection-management protocol (IBA vol. 1 chapter 12) to the peer.
//
// The device calls a ConnectionManager to send the CM messages of a
// connection, and the manager calls the device back (CmEventSink) when the
// peer's messages arrive. Two implementations are meant to exist:
//   LoopbackConnectionManager (loopback_cm.h)  both ends are ids of this
//       daemon: messages are handed across inside the daemon, no MADs;
//   a wire CM (REQ/REP/RTU/DREQ/DREP/REJ/MRA as UD SENDs on QP1)  for peers
//       behind the port, with the protocol's timers and retransmissions.
// docs/rdmacm-device.md says how the wire CM plugs in here.
//
// A connection is named on each side by that side's ConnectionId: the ucma
// handle of the local id it belongs to. The manager maps it to comm IDs,
// TIDs and the peer's address itself. Every callback runs on the daemon's
// control thread, from ConnectionManager::poll(), never from inside a send_*
// call, so the device never sees itself re-entered.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <variant>

#include "ucma/endpoint.h"

namespace uroce::ucma {

using ConnectionId = std::uint32_t;

// Private data as it travels: the kernel's event always reports the whole
// wire field (REQ 56 bytes for the program after the CMA header, REP 196,
// REJ 148: IBA 12.6.5, 12.6.8, 12.6.7), never the length the sender wrote.
struct PrivateData {
    std::array<std::uint8_t, 256> bytes{};
    std::uint8_t length = 0;  // bytes the sender gave
};

// The path both ends use (RoCE: IBA A16/A17 "GRH" fields of the REQ's
// primary path); built from the addresses by route resolution.
struct PathInfo {
    wire::Gid sgid{};  // the active side's GID
    wire::Gid dgid{};  // the passive side's GID
    std::uint32_t flow_label = 0;
    std::uint8_t hop_limit = 64;
    std::uint8_t traffic_class = 0;
    std::uint8_t sl = 0;
    std::uint8_t mtu = 3;               // enum ibv_mtu
    std::uint8_t packet_life_time = 18;  // 4.096 us * 2^n
};

// REQ (IBA 12.6.5) with what rdma_cm puts in its CMA header.
struct ConnectionRequest {
    std::uint16_t port_space = 0;  // enum rdma_ucm_port_space
    std::uint8_t qp_type = 0;      // IBV_QPT_RC
    Endpoint source;               // the active id's address and port
    Endpoint destination;          // the listener's address and port
    std::uint64_t ca_guid = 0;     // big-endian, as node_guid
    std::uint32_t qpn = 0;
    std::uint32_t starting_psn = 0;  // the active side's receive PSN
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t flow_control = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry_count = 0;
    std::uint8_t srq = 0;
    PathInfo path;
    PrivateData private_data;  // the program's bytes, at most 56
};

// REP (IBA 12.6.8).
struct ConnectionReply {
    std::uint64_t ca_guid = 0;
    std::uint32_t qpn = 0;
    std::uint32_t starting_psn = 0;  // the passive side's receive PSN
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t flow_control = 0;
    std::uint8_t rnr_retry_count = 0;
    std::uint8_t srq = 0;
    PrivateData private_data;  // at most 196
};

// REJ reasons rdma_cm uses (IBA table 112).
enum class RejectReason : std::uint16_t {
    Timeout = 4,
    InvalidServiceId = 8,  // nobody listens there
    StaleConnection = 10,
    ConsumerDefined = 28,  // rdma_reject
    VendorOptionNotSupported = 35,  // rdma_reject_ece
};

// SIDR_REP (IBA 12.11.2): the passive side's UD QP, or why not.
enum class SidrStatus : std::uint8_t { Success = 0, Unsupported = 1, Rejected = 2 };
struct SidrReply {
    SidrStatus status = SidrStatus::Success;
    std::uint32_t qpn = 0;
    std::uint32_t qkey = 0;
    PrivateData private_data;  // at most 136
};

// What the device answers a REQ: the id that now owns the passive side, or
// why it is refused. Dropped: no answer at all (a full backlog, trap: the
// peer's retransmission tries again).
struct Accepted {
    ConnectionId passive;
};
struct Refused {
    RejectReason reason;
};
struct Dropped {};
using RequestVerdict = std::variant<Accepted, Refused, Dropped>;

class CmEventSink {
public:
    virtual ~CmEventSink() = default;
    // A REQ for (port space, destination) arrived.
    virtual RequestVerdict on_request(const ConnectionRequest& req) = 0;
    virtual void on_reply(ConnectionId active, const ConnectionReply& rep) = 0;
    // A SIDR_REQ (UD ids, IBA 12.11): answered like a REQ; the fields of a
    // ConnectionRequest that a SIDR_REQ lacks are zero.
    virtual RequestVerdict on_sidr_request(const ConnectionRequest& req) = 0;
    virtual void on_sidr_reply(ConnectionId active, const SidrReply& rep) = 0;
    virtual void on_ready_to_use(ConnectionId passive) = 0;  // RTU
    virtual void on_reject(ConnectionId id, RejectReason reason, const PrivateData& data) = 0;
    virtual void on_disconnect_request(ConnectionId id) = 0;  // DREQ
    virtual void on_disconnect_reply(ConnectionId id) = 0;    // DREP
    // The peer never answered (retries exhausted): status is a negative errno.
    virtual void on_unreachable(ConnectionId id, int status) = 0;
    // The connection's timewait ended (cm.c cm_timewait_handler,
    // IB_CM_TIMEWAIT_EXIT); only for an id not released before.
    virtual void on_timewait_exit(ConnectionId id) = 0;
};

class ConnectionManager {
public:
    virtual ~ConnectionManager() = default;
    // Where incoming messages go (once, before anything is sent).
    virtual void attach(CmEventSink& sink) = 0;
    virtual void send_request(ConnectionId active, const ConnectionRequest& req) = 0;
    virtual void send_reply(ConnectionId passive, const ConnectionReply& rep) = 0;
    virtual void send_sidr_request(ConnectionId active, const ConnectionRequest& req) = 0;
    virtual void send_sidr_reply(ConnectionId passive, const SidrReply& rep) = 0;
    virtual void send_ready_to_use(ConnectionId active) = 0;
    virtual void send_reject(ConnectionId id, RejectReason reason, const PrivateData& data) = 0;
    virtual void send_disconnect_request(ConnectionId id) = 0;
    virtual void send_disconnect_reply(ConnectionId id) = 0;
    // The id is gone: forget the connection (the manager keeps whatever
    // timewait state the protocol needs; no callback names `id` afterwards).
    virtual void release(ConnectionId id) = 0;
    // Delivers what arrived and runs timers; called after every ucma command
    // and on every tick of the daemon's control loop.
    virtual void poll(std::chrono::steady_clock::time_point now) = 0;
};

}  // namespace uroce::ucma
