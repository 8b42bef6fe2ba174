// Outcomes of parsing one Ethernet frame. A frame is either a well-formed
// RoCEv2 packet (Ok), something else that is not ours to judge (NotRoce*:
// ARP, TCP, other UDP ports...), or a RoCEv2 frame dropped for the stated
// reason. Every drop reason has its own name so it can have its own counter.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::wire {

enum class ParseStatus : std::uint8_t {
    Ok,
    // Not RoCEv2: skipped, never counted as a drop.
    NotRoceEtherType,  // neither IPv4 nor IPv6
    NotRoceIpProtocol, // IP, but not UDP
    NotRocePort,       // UDP, but not to port 4791
    // Dropped, in the order the checks are applied. Up to UdpTruncated the
    // frame cannot yet be told to be RoCEv2; from Ipv4BadLength on it is UDP
    // to port 4791 and so a RoCEv2 frame (see reached_roce).
    EthernetTruncated,
    VlanTruncated,
    Ipv4Truncated,
    Ipv4BadHeader,      // version is not 4 or IHL is not 5 (RoCEv2 carries no IP options)
    Ipv4Fragment,       // RoCEv2 packets are never fragmented (A17.4.3)
    Ipv6Truncated,
    Ipv6BadHeader,      // version is not 6
    UdpTruncated,       // frame ends inside the UDP header
    Ipv4BadLength,      // total length shorter than the IP+UDP headers or longer than the frame
    Ipv6BadLength,      // payload length shorter than a UDP header or longer than the frame
    Ipv4BadChecksum,
    UdpBadLength,       // UDP length disagrees with the IP length
    BthTruncated,       // shorter than a BTH plus ICRC
    HeadersTruncated,   // shorter than the opcode's headers plus ICRC
    BadTver,            // BTH transport header version is not 0
    UnknownOpcode,      // an opcode the IBA does not define
    UnsupportedOpcode,  // defined, but RD
    PadBeyondPayload,   // PadCnt larger than what follows the headers
    UnexpectedPayload,  // opcode carries no payload, but bytes follow its headers
    BadIcrc,
    Count,
};

constexpr std::size_t kParseStatusCount = static_cast<std::size_t>(ParseStatus::Count);

struct ParseStatusInfo {
    std::string_view name;
    std::string_view description;
};

constexpr std::array<ParseStatusInfo, kParseStatusCount> kParseStatusInfo = {{
    {"ok", "well-formed RoCEv2 packet"},
    {"not_roce_ethertype", "EtherType is neither IPv4 nor IPv6"},
    {"not_roce_ip_protocol", "IP protocol is not UDP"},
    {"not_roce_port", "UDP destination port is not 4791"},
    {"eth_truncated", "frame shorter than an Ethernet header"},
    {"vlan_truncated", "frame ends inside the 802.1Q tag"},
    {"ipv4_truncated", "frame ends inside the IPv4 header"},
    {"ipv4_bad_header", "IPv4 version is not 4 or header carries options"},
    {"ipv4_fragment", "IPv4 fragment (RoCEv2 is never fragmented)"},
    {"ipv6_truncated", "frame ends inside the IPv6 header"},
    {"ipv6_bad_header", "IPv6 version is not 6"},
    {"udp_truncated", "frame ends inside the UDP header"},
    {"ipv4_bad_length", "IPv4 total length does not fit the frame"},
    {"ipv6_bad_length", "IPv6 payload length does not fit the frame"},
    {"ipv4_bad_checksum", "IPv4 header checksum does not verify"},
    {"udp_bad_length", "UDP length disagrees with the IP length"},
    {"bth_truncated", "UDP payload shorter than a BTH plus ICRC"},
    {"headers_truncated", "UDP payload shorter than the opcode's headers plus ICRC"},
    {"bad_tver", "BTH transport version is not 0"},
    {"unknown_opcode", "BTH opcode is not defined by the IBA"},
    {"unsupported_opcode", "RD opcodes are not supported"},
    {"pad_beyond_payload", "BTH pad count exceeds the bytes after the headers"},
    {"unexpected_payload", "opcode carries no payload but bytes follow its headers"},
    {"bad_icrc", "invariant CRC does not verify"},
}};

[[nodiscard]] constexpr const ParseStatusInfo& parse_status_info(ParseStatus s) {
    return kParseStatusInfo[static_cast<std::size_t>(s)];
}

[[nodiscard]] constexpr bool is_not_roce(ParseStatus s) {
    return s == ParseStatus::NotRoceEtherType || s == ParseStatus::NotRoceIpProtocol ||
           s == ParseStatus::NotRocePort;
}

[[nodiscard]] constexpr bool is_drop(ParseStatus s) { return s != ParseStatus::Ok && !is_not_roce(s); }

// True when the frame got far enough to be known as meant for RoCEv2 (UDP to
// port 4791): accepted, or dropped at a check after the port. Earlier drops
// (a truncated Ethernet or IP header) cannot tell whose frame it was.
[[nodiscard]] constexpr bool reached_roce(ParseStatus s) {
    return s == ParseStatus::Ok || static_cast<std::uint8_t>(s) >= static_cast<std::uint8_t>(ParseStatus::Ipv4BadLength);
}

}  // namespace uroce::wire
