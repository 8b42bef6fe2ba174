// REQ and REP filled as Linux's CM fills them for rdma_cm over RoCE
// (cm.c cm_format_req / cm_format_rep, cma.c): the values a Linux peer
// expects, with the defaults the captures show (docs/ib-cm.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "cma_header.h"
#include "messages.h"

namespace uroce::cm {

// The path rdma_cm resolves for RoCE (one primary path, no alternate).
struct RocePath {
    wire::Gid local_gid{};   // the IPs as GIDs
    wire::Gid remote_gid{};
    std::uint32_t flow_label = 0;  // (sport * 31 + dport) & 0xFFFFF, see roce_flow_label
    std::uint8_t traffic_class = 0;
    std::uint8_t hop_limit = 64;
    std::uint8_t sl = 0;
    std::uint8_t mtu = 3;                // IB MTU code: 3 = 1024 (netdev MTU 1500)
    std::uint8_t packet_life_time = 18;  // rdma_cm's RoCE default
};

// rdma_cm's flow label for a RoCE path between two ports (cma.c).
[[nodiscard]] constexpr std::uint32_t roce_flow_label(std::uint16_t src_port, std::uint16_t dst_port) {
    return (static_cast<std::uint32_t>(src_port) * 31 + dst_port) & 0xFFFFF;
}

constexpr std::uint16_t kPermissiveLid = 0xFFFF;  // RoCE has no LIDs
constexpr std::uint8_t kRxeAckDelay = 15;        // rdma_rxe's local CA ACK delay
constexpr std::uint8_t kCmResponseTimeout = 20;  // rdma_cm's CMA_CM_RESPONSE_TIMEOUT
constexpr std::uint8_t kMaxCmRetries = 15;       // rdma_cm's CMA_MAX_CM_RETRIES

struct ConnectParams {
    std::uint64_t service_id = 0;
    std::uint64_t local_ca_guid = 0;  // node GUID
    std::uint32_t qpn = 0;
    std::uint32_t starting_psn = 0;   // the active side's RECEIVE PSN
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    bool flow_control = false;
    std::uint8_t retry_count = 7;
    std::uint8_t rnr_retry_count = 7;
    bool srq = false;
    TransportType transport = TransportType::Rc;
    std::uint8_t max_cm_retries = kMaxCmRetries;
    std::uint8_t remote_cm_response_timeout = kCmResponseTimeout;
    std::uint8_t local_cm_response_timeout = kCmResponseTimeout;
    std::uint8_t ca_ack_delay = kRxeAckDelay;
    RocePath path;
    PrivateData<kReqPrivateData> private_data{};  // CMA header first (make_req_private_data)
};

struct AcceptParams {
    std::uint32_t qpn = 0;
    std::uint32_t starting_psn = 0;  // the passive side's RECEIVE PSN
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    bool flow_control = false;
    std::uint8_t rnr_retry_count = 7;
    bool srq = false;
    std::uint8_t target_ack_delay = kRxeAckDelay;
    std::uint64_t local_ca_guid = 0;
    PrivateData<kRepPrivateData> private_data{};
};

[[nodiscard]] ReqMsg format_req(const ConnectParams& p, std::uint32_t local_comm_id);
[[nodiscard]] RepMsg format_rep(const AcceptParams& p, std::uint32_t local_comm_id, std::uint32_t remote_comm_id);

// CMA header + the program's bytes, zero padded to the message's size.
// Returns false when the program's bytes do not fit (rdma_cm: EINVAL).
template <std::size_t N>
[[nodiscard]] bool make_cma_private_data(const CmaHeader& h, std::span<const std::uint8_t> user, PrivateData<N>& out) {
    if (user.size() > N - kCmaHeaderSize) {
        return false;
    }
    out.fill(0);
    write_cma_header(h, out);
    std::copy(user.begin(), user.end(), out.begin() + kCmaHeaderSize);
    return true;
}

}  // namespace uroce::cm
