// The nine CM messages uroce speaks on RoCE v2, every field in host form
// (IBA vol. 1, 12.6.5-12.6.11, tables 106-120). Reserved bits are not kept:
// the builder writes them as zero and the parser ignores them, as Linux does.
// Private data has the message's fixed wire size; a receiver always sees
// all of it (rdma_cm reports the wire size, not what the sender wrote).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "mad.h"
#include "wire/headers.h"

namespace uroce::cm {

// Private data sizes (IBA 12.6: what is left of the 232-byte MAD data).
constexpr std::size_t kReqPrivateData = 92;
constexpr std::size_t kMraPrivateData = 222;
constexpr std::size_t kRejPrivateData = 148;
constexpr std::size_t kRejAriSize = 72;
constexpr std::size_t kRepPrivateData = 196;
constexpr std::size_t kRtuPrivateData = 224;
constexpr std::size_t kDreqPrivateData = 220;
constexpr std::size_t kDrepPrivateData = 224;
constexpr std::size_t kSidrReqPrivateData = 216;
constexpr std::size_t kSidrRepPrivateData = 136;
constexpr std::size_t kSidrRepInfoSize = 72;

template <std::size_t N>
using PrivateData = std::array<std::uint8_t, N>;

// REQ transport service type (IBA 12.6.5 table 106).
enum class TransportType : std::uint8_t { Rc = 0, Uc = 1, Rd = 2, Extended = 3 };

// One path as a REQ carries it (primary or alternate). On RoCE the LIDs are
// the permissive LID 0xFFFF and the GIDs are the IP addresses.
struct PathInfo {
    std::uint16_t local_lid = 0;
    std::uint16_t remote_lid = 0;
    wire::Gid local_gid{};
    wire::Gid remote_gid{};
    std::uint32_t flow_label = 0;    // 20 bits
    std::uint8_t packet_rate = 0;    // 6 bits
    std::uint8_t traffic_class = 0;
    std::uint8_t hop_limit = 0;
    std::uint8_t sl = 0;             // 4 bits
    bool subnet_local = false;
    std::uint8_t local_ack_timeout = 0;  // 5 bits, 4.096 us * 2^n

    friend bool operator==(const PathInfo&, const PathInfo&) = default;
};

struct ReqMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t vendor_id = 0;  // 24 bits
    std::uint64_t service_id = 0;
    std::uint64_t local_ca_guid = 0;
    std::uint32_t local_qkey = 0;
    std::uint32_t local_qpn = 0;  // 24 bits
    std::uint8_t responder_resources = 0;
    std::uint32_t local_eecn = 0;  // 24 bits
    std::uint8_t initiator_depth = 0;
    std::uint32_t remote_eecn = 0;  // 24 bits
    std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
    TransportType transport_type = TransportType::Rc;
    bool end_to_end_flow_control = false;
    std::uint32_t starting_psn = 0;  // 24 bits
    std::uint8_t local_cm_response_timeout = 0;  // 5 bits
    std::uint8_t retry_count = 0;      // 3 bits
    std::uint16_t partition_key = 0;
    std::uint8_t path_mtu = 0;         // 4 bits, IB MTU code (3 = 1024)
    bool rdc_exists = false;
    std::uint8_t rnr_retry_count = 0;  // 3 bits
    std::uint8_t max_cm_retries = 0;   // 4 bits
    bool srq = false;
    std::uint8_t extended_transport_type = 0;  // 3 bits
    PathInfo primary;
    PathInfo alternate;
    bool sap_supported = false;
    PrivateData<kReqPrivateData> private_data{};

    friend bool operator==(const ReqMsg&, const ReqMsg&) = default;
};

// Which message an MRA or a REJ answers (IBA 12.6.6, 12.6.7).
enum class MsgRef : std::uint8_t { Req = 0, Rep = 1, Other = 2 };  // 3 is reserved

struct MraMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    MsgRef message_mraed = MsgRef::Req;
    std::uint8_t service_timeout = 0;  // 5 bits
    PrivateData<kMraPrivateData> private_data{};

    friend bool operator==(const MraMsg&, const MraMsg&) = default;
};

struct RejMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    MsgRef message_rejected = MsgRef::Req;
    std::uint8_t reject_info_length = 0;  // 7 bits, bytes of ari used
    std::uint16_t reason = 0;             // RejReason
    std::array<std::uint8_t, kRejAriSize> ari{};
    PrivateData<kRejPrivateData> private_data{};

    friend bool operator==(const RejMsg&, const RejMsg&) = default;
};

struct RepMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::uint32_t local_qkey = 0;
    std::uint32_t local_qpn = 0;  // 24 bits
    std::uint32_t local_eecn = 0;  // 24 bits
    std::uint32_t starting_psn = 0;  // 24 bits
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
    std::uint8_t target_ack_delay = 0;  // 5 bits
    std::uint8_t failover_accepted = 0; // 2 bits
    bool end_to_end_flow_control = false;
    std::uint8_t rnr_retry_count = 0;  // 3 bits
    bool srq = false;
    std::uint64_t local_ca_guid = 0;
    std::uint32_t vendor_id = 0;  // 24 bits, stored in three separate bytes
    PrivateData<kRepPrivateData> private_data{};

    friend bool operator==(const RepMsg&, const RepMsg&) = default;
};

struct RtuMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    PrivateData<kRtuPrivateData> private_data{};

    friend bool operator==(const RtuMsg&, const RtuMsg&) = default;
};

struct DreqMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::uint32_t remote_qpn = 0;  // 24 bits: the receiver's QPN
    PrivateData<kDreqPrivateData> private_data{};

    friend bool operator==(const DreqMsg&, const DreqMsg&) = default;
};

struct DrepMsg {
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    PrivateData<kDrepPrivateData> private_data{};

    friend bool operator==(const DrepMsg&, const DrepMsg&) = default;
};

struct SidrReqMsg {
    std::uint32_t request_id = 0;
    std::uint16_t partition_key = 0;
    std::uint64_t service_id = 0;
    PrivateData<kSidrReqPrivateData> private_data{};

    friend bool operator==(const SidrReqMsg&, const SidrReqMsg&) = default;
};

// SIDR_REP status (IBA 12.11.2 table 120).
enum class SidrStatus : std::uint8_t {
    Success = 0,
    Unsupported = 1,  // no service with that ID (Linux: no listener)
    Reject = 2,
    NoQp = 3,
    Redirect = 4,
    UnsupportedVersion = 5,
};

struct SidrRepMsg {
    std::uint32_t request_id = 0;
    std::uint8_t status = 0;  // SidrStatus
    std::uint8_t info_length = 0;
    std::uint32_t vendor_id = 0;  // 24 bits, split in two places
    std::uint32_t qpn = 0;        // 24 bits
    std::uint64_t service_id = 0;
    std::uint32_t qkey = 0;
    std::array<std::uint8_t, kSidrRepInfoSize> info{};  // ClassPortInfo on redirect
    PrivateData<kSidrRepPrivateData> private_data{};

    friend bool operator==(const SidrRepMsg&, const SidrRepMsg&) = default;
};

// REJ reasons uroce sends or acts on (IBA 12.6.7.2 table 108).
enum class RejReason : std::uint16_t {
    NoQp = 1,
    NoEec = 2,
    NoResources = 3,
    Timeout = 4,
    UnsupportedReq = 5,
    InvalidCommId = 6,
    InvalidCommInstance = 7,
    InvalidServiceId = 8,  // no listener
    InvalidTransportType = 9,
    StaleConnection = 10,
    RdcNotExist = 11,
    InvalidGid = 12,
    InvalidLid = 13,
    InvalidSl = 14,
    InvalidTrafficClass = 15,
    InvalidHopLimit = 16,
    InvalidPacketRate = 17,
    InvalidAltGid = 18,
    InvalidAltLid = 19,
    InvalidAltSl = 20,
    InvalidAltTrafficClass = 21,
    InvalidAltHopLimit = 22,
    InvalidAltPacketRate = 23,
    PortCmRedirect = 24,
    PortRedirect = 25,
    InvalidMtu = 26,
    InsufficientRespResources = 27,
    ConsumerDefined = 28,  // rdma_reject
    InvalidRnrRetry = 29,
    DuplicateLocalCommId = 30,
    InvalidClassVersion = 31,
    InvalidFlowLabel = 32,
    InvalidAltFlowLabel = 33,
    VendorOptionNotSupported = 35,  // rdma_reject_ece
};

using Message = std::variant<ReqMsg, MraMsg, RejMsg, RepMsg, RtuMsg, DreqMsg, DrepMsg, SidrReqMsg, SidrRepMsg>;

[[nodiscard]] AttrId attr_of(const Message& m);

// A whole CM MAD: the common header and one message.
struct Mad {
    MadHeader header;
    Message message;
};

}  // namespace uroce::cm
