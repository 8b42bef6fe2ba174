// One rdma_cm id as the emulated ucma device keeps it (the kernel's
// ucma_context + rdma_id_private + the ib_cm_id's connection state).
#pragma once

#include <cstdint>
#include <optional>

#include "ucma/connection_manager.h"
#include "ucma/endpoint.h"

namespace uroce::ucma {

using ChannelId = std::uint32_t;

// Event numbers of the ucma ABI (the kernel's and librdmacm's enum
// rdma_cm_event_type; the uapi header does not carry them).
enum CmEventType : std::uint32_t {
    RDMA_CM_EVENT_ADDR_RESOLVED = 0,
    RDMA_CM_EVENT_ADDR_ERROR = 1,
    RDMA_CM_EVENT_ROUTE_RESOLVED = 2,
    RDMA_CM_EVENT_ROUTE_ERROR = 3,
    RDMA_CM_EVENT_CONNECT_REQUEST = 4,
    RDMA_CM_EVENT_CONNECT_RESPONSE = 5,
    RDMA_CM_EVENT_CONNECT_ERROR = 6,
    RDMA_CM_EVENT_UNREACHABLE = 7,
    RDMA_CM_EVENT_REJECTED = 8,
    RDMA_CM_EVENT_ESTABLISHED = 9,
    RDMA_CM_EVENT_DISCONNECTED = 10,
    RDMA_CM_EVENT_DEVICE_REMOVAL = 11,
    RDMA_CM_EVENT_MULTICAST_JOIN = 12,
    RDMA_CM_EVENT_MULTICAST_ERROR = 13,
    RDMA_CM_EVENT_ADDR_CHANGE = 14,
    RDMA_CM_EVENT_TIMEWAIT_EXIT = 15,
};

// The rdma_cm side (cma.c enum rdma_cm_state).
enum class IdState : std::uint8_t {
    Idle,           // created
    AddrBound,      // BIND_IP / BIND
    AddrQuery,      // RESOLVE_IP issued, ADDR_RESOLVED not yet queued
    AddrResolved,
    RouteQuery,
    RouteResolved,
    Listen,
    Connect,        // CONNECT issued (active) or REQ received (passive)
    Connected,      // ESTABLISHED (passive) / RTU sent (active)
    Disconnected,   // DREQ or DREP exchanged, or rejected
};

// The IB CM side (cm.c enum ib_cm_state), only what INIT_QP_ATTR and
// DISCONNECT look at.
enum class CmPhase : std::uint8_t {
    None,         // no CM exchange yet
    ReqSent,      // active, waiting for REP
    ReqReceived,  // passive, not accepted
    RepReceived,  // active, REP in hand, RTU not sent
    RepSent,      // passive, waiting for RTU
    Established,
    DreqSent,
    DreqReceived,
    Timewait,     // the exchange is over (DREP, REJ, or unreachable)
};

struct ConnectionState {
    std::uint32_t local_qpn = 0;
    std::uint32_t remote_qpn = 0;
    std::uint32_t own_psn = 0;   // this id's receive PSN (rdma_cm's seq_num)
    std::uint32_t peer_psn = 0;  // the PSN the peer receives at: our send PSN
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry_count = 0;
    PathInfo path;  // from this side's point of view: sgid = ours
};

struct IdOptions {
    std::uint8_t tos = 0;
    bool reuse_address = false;
    bool ipv6_only = false;
    std::uint8_t ack_timeout = 0;  // 0: not set
};

struct CmId {
    std::uint32_t handle = 0;
    std::uint64_t uid = 0;
    ChannelId channel = 0;
    std::uint16_t port_space = 0;
    std::uint8_t qp_type = 0;
    IdState state = IdState::Idle;
    CmPhase phase = CmPhase::None;
    // A passive id exists from the REQ on, but commands reach it only once
    // its CONNECT_REQUEST was handed out (ucma.c ucma_finish_ctx).
    bool visible = true;
    bool bound_to_device = false;  // a specific address, or resolved
    Endpoint source;
    Endpoint destination;
    std::uint32_t events_reported = 0;
    std::uint32_t listener = 0;  // passive ids: the listener's handle
    bool has_listener = false;
    std::int32_t backlog = 0;    // listeners: CONNECT_REQUESTs it may still take
    IdOptions options;
    ConnectionState conn;
    // DISCONNECTED was queued (DREQ or DREP received, DREQ timed out): cma.c's
    // state RDMA_CM_DISCONNECT, the only one TIMEWAIT_EXIT is reported in.
    bool disconnect_reported = false;
    // SET_OPTION IB_PATH: the program's path record replaces route resolution.
    std::optional<PathInfo> given_path;
};

}  // namespace uroce::ucma
