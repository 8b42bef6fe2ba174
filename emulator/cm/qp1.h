// A CM MAD on the wire: RoCE v2 carries MADs to the GSI QP (QP1) as a UD
// SEND ONLY whose payload is the 256-byte MAD (IBA 13.5.1, annex A17), with
// the GSI Q_Key and the default P_Key. Source QP is 1 as well. rdma_rxe sets
// AckReq and counts QP1's PSN per MAD; receivers ignore both.
#pragma once

#include <cstdint>
#include <span>

#include "codec.h"
#include "wire/build.h"
#include "wire/packet.h"
#include "wire/parse_status.h"

namespace uroce::cm {

constexpr std::uint32_t kGsiQpn = 1;
constexpr std::uint32_t kGsiQkey = 0x80010000;  // IBA 13.5.1.1: the well-known GSI Q_Key
constexpr std::uint16_t kDefaultPkey = 0xFFFF;
constexpr std::uint8_t kUdSendOnly = 0x64;

// Everything about a CM frame that is not the MAD: where it goes and the
// sender's choices (UDP source port, QP1's PSN).
struct CmFrameAddress {
    wire::EthFields eth;
    wire::IpFields ip;  // version, src, dst; TTL 64, DSCP 0, flow label 0 by default
    std::uint16_t udp_src_port = 0xC000;
    std::uint32_t psn = 0;
};

// The frame's fields, ready for wire::build_frame (payload = the MAD).
[[nodiscard]] wire::PacketFields cm_frame_fields(const CmFrameAddress& a, std::span<const std::uint8_t, kMadSize> mad);

[[nodiscard]] wire::BuildResult build_cm_frame(const CmFrameAddress& a, std::span<const std::uint8_t, kMadSize> mad,
                                               std::span<std::uint8_t> out);

// Bytes a CM frame occupies (the same for every MAD; IPv6 is 20 more).
[[nodiscard]] std::size_t cm_frame_length(const CmFrameAddress& a);

struct CmFrameResult {
    CmParseStatus status = CmParseStatus::Ok;
    wire::ParseStatus wire_status = wire::ParseStatus::Ok;  // why, when FrameMalformed
    wire::Packet packet;  // valid from NotUdSendOnly on
    Mad mad;              // valid when Ok

    [[nodiscard]] bool ok() const { return status == CmParseStatus::Ok; }
};

// The frame must parse with a good ICRC, be a UD SEND ONLY to QP1 with the
// GSI Q_Key and the default P_Key, carry exactly one MAD, and that MAD must
// parse (codec.h).
[[nodiscard]] CmFrameResult parse_cm_frame(std::span<const std::uint8_t> frame);

// True when an already parsed packet is addressed to QP1 (a receive path can
// route on this before handing the frame to parse_cm_frame).
[[nodiscard]] inline bool is_for_qp1(const wire::Packet& p) { return p.dest_qp() == kGsiQpn; }

}  // namespace uroce::cm
