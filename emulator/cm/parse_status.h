// Outcomes of taking a CM MAD off the wire: from a RoCE v2 frame on QP1, or
// from the 256 MAD bytes alone. Every way a frame or MAD can be refused has
// its own name so that it can have its own counter; uroce drops them all
// silently, as Linux's MAD layer does (no reply to a malformed MAD).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::cm {

enum class CmParseStatus : std::uint8_t {
    Ok,
    // The frame around the MAD (parse_cm_frame only).
    FrameMalformed,     // wire::parse_and_verify refused it (structure or ICRC)
    NotUdSendOnly,      // MADs travel as UD SEND ONLY (IBA 13.5.1)
    NotQp1,             // destination QP is not the GSI QP
    BadQkey,            // QP1 takes only the GSI Q_Key 0x80010000 (IBA 13.5.1.1)
    BadPkey,            // RoCE uses the default partition 0xFFFF only
    BadMadLength,       // the UD payload is not exactly 256 bytes
    // The MAD header.
    BadBaseVersion,     // not 1
    NotCmClass,         // management class is not 0x07 (CM)
    BadClassVersion,    // not 2, the only version Linux's CM accepts
    BadMethod,          // CM messages are Send (0x03) only
    UnknownAttribute,   // attribute ID the CM class does not define
    UnsupportedAttribute, // ClassPortInfo, LAP, APR: defined, not used on RoCE
    // Fields of one message.
    ReqBadTransportType,  // RD, or an extended type other than XRC
    ReqBadMtu,            // path MTU code outside 1..5
    ReservedMessageRef,   // MRA/REJ names message 3 (reserved)
    RejBadInfoLength,     // reject info length above the 72-byte ARI
    SidrRepBadInfoLength, // additional info length above its 72 bytes
    Count,
};

constexpr std::size_t kCmParseStatusCount = static_cast<std::size_t>(CmParseStatus::Count);

struct CmParseStatusInfo {
    std::string_view name;
    std::string_view description;
};

constexpr std::array<CmParseStatusInfo, kCmParseStatusCount> kCmParseStatusInfo = {{
    {"ok", "well-formed CM MAD"},
    {"frame_malformed", "frame is not a well-formed RoCEv2 packet with a good ICRC"},
    {"not_ud_send_only", "MADs travel as UD SEND ONLY"},
    {"not_qp1", "destination QP is not QP1"},
    {"bad_qkey", "Q_Key is not the GSI Q_Key 0x80010000"},
    {"bad_pkey", "P_Key is not the default partition 0xffff"},
    {"bad_mad_length", "UD payload is not a 256-byte MAD"},
    {"bad_base_version", "MAD base version is not 1"},
    {"not_cm_class", "management class is not CM (0x07)"},
    {"bad_class_version", "CM class version is not 2"},
    {"bad_method", "CM method is not Send (0x03)"},
    {"unknown_attribute", "attribute ID is not a CM message"},
    {"unsupported_attribute", "ClassPortInfo, LAP and APR are not used on RoCE"},
    {"req_bad_transport_type", "REQ transport type is neither RC, UC nor XRC"},
    {"req_bad_mtu", "REQ path MTU code is not 1..5"},
    {"reserved_message_ref", "MRA or REJ refers to the reserved message code 3"},
    {"rej_bad_info_length", "REJ reject info length exceeds the 72-byte ARI"},
    {"sidr_rep_bad_info_length", "SIDR_REP additional info length exceeds 72 bytes"},
}};

[[nodiscard]] constexpr const CmParseStatusInfo& cm_parse_status_info(CmParseStatus s) {
    return kCmParseStatusInfo[static_cast<std::size_t>(s)];
}

}  // namespace uroce::cm
