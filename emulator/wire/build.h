// The frame builder: from header fields and a payload to a complete frame
// (Ethernet, optional 802.1Q tag, IPv4 with its checksum or IPv6, UDP to
// port 4791, BTH with PadCnt, extension headers, payload, zero pad, ICRC).
//
// Fields the IBA leaves to the sender (IPv4 identification, TTL, DSCP, flow
// label, UDP source port, UDP checksum) are inputs with the values rdma_rxe
// uses as defaults, so a decoded frame can be rebuilt byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "headers.h"
#include "icrc.h"
#include "psn.h"

namespace uroce::wire {

struct EthFields {
    MacAddr dst{};
    MacAddr src{};
    std::optional<std::uint16_t> vlan_tci;
};

struct IpFields {
    IpVersion version = IpVersion::V4;
    Gid src{};  // IPv4 as IPv4-mapped GID
    Gid dst{};
    std::uint8_t traffic_class = 0;  // IPv4 TOS (DSCP+ECN) or IPv6 traffic class
    std::uint8_t ttl = 64;           // IPv4 TTL or IPv6 hop limit (rdma_rxe: 64)
    std::uint16_t ipv4_id = 0;
    bool dont_fragment = true;       // rdma_rxe sets DF
    std::uint32_t flow_label = 0;    // IPv6 only, 20 bits
};

struct UdpFields {
    std::uint16_t src_port = 0xC000;  // flow entropy; RoCEv2 uses 0xC000-0xFFFF (A17.5.2.1)
    std::uint16_t checksum = 0;       // RoCEv2 sends 0 (A17.4.3)
};

struct BthFields {
    std::uint8_t opcode = 0;
    bool solicited = false;
    bool mig_req = false;
    std::uint8_t tver = 0;
    std::uint16_t pkey = 0xFFFF;  // default partition
    std::uint8_t resv8a = 0;
    std::uint32_t dest_qp = 0;
    bool ack_req = false;
    std::uint8_t resv7 = 0;
    Psn psn{};
};

struct RethFields {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t dma_length = 0;
};

struct AtomicEthFields {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint64_t swap_add = 0;
    std::uint64_t compare = 0;
};

struct AethFields {
    std::uint8_t syndrome = 0;
    std::uint32_t msn = 0;
};

struct DethFields {
    std::uint32_t qkey = 0;
    std::uint32_t src_qp = 0;
};

// Extension header values; only those the opcode carries are written.
struct ExtFields {
    RethFields reth;
    AtomicEthFields atomic_eth;
    AethFields aeth;
    std::uint64_t atomic_ack_original = 0;
    std::uint32_t immediate = 0;  // ImmDt, as the 32 bits on the wire
    std::uint32_t invalidate_rkey = 0;
    DethFields deth;
    std::uint32_t xrc_srq = 0;  // XRCETH (24 bits)
};

struct PacketFields {
    EthFields eth;
    IpFields ip;
    UdpFields udp;
    BthFields bth;
    ExtFields ext;
    std::span<const std::uint8_t> payload;
};

enum class BuildStatus : std::uint8_t {
    Ok,
    UnsupportedOpcode,   // unknown or RD
    PayloadNotAllowed,   // the opcode carries no payload
    TooLarge,            // would exceed the IP length field
    BufferTooSmall,
};

struct BuildResult {
    BuildStatus status = BuildStatus::Ok;
    std::size_t length = 0;  // bytes written when Ok
};

// Bytes the frame for `f` occupies.
[[nodiscard]] std::size_t frame_length(const PacketFields& f);

// Where the payload starts in the frame for `f`. A caller may put the payload
// there first (DMA straight into the frame) and pass that same memory as
// f.payload: build_frame then leaves it in place instead of copying.
[[nodiscard]] std::size_t payload_offset(const PacketFields& f);

// Whether build_frame computes the ICRC (IBA 9.8.3) or leaves its four
// bytes zero for a frame nobody will check (the loopback port's, with no
// capture or fault rule watching: net::Port::icrc_unread). A frame built
// with LeaveOut gets its ICRC from seal_icrc (parse.h) before anything
// else may read it.
enum class Icrc : std::uint8_t { Compute, LeaveOut };

[[nodiscard]] BuildResult build_frame(const PacketFields& f, std::span<std::uint8_t> out, Icrc icrc = Icrc::Compute);

}  // namespace uroce::wire
