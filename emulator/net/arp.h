// ARP for IPv4 over Ethernet (RFC 826): the packet layout and the frames the
// neighbour table reads and writes. Only untagged frames are handled.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/headers.h"

namespace uroce::net {

using Ipv4Addr = std::array<std::uint8_t, 4>;

constexpr std::uint16_t kEtherTypeArp = 0x0806;

// RFC 826 "Packet format", with the sizes Ethernet (hardware type 1) and
// IPv4 (protocol type 0x0800) give it.
struct ArpHdr {
    wire::be16 hardware_type;
    wire::be16 protocol_type;
    std::uint8_t hardware_length;
    std::uint8_t protocol_length;
    wire::be16 operation;
    wire::MacAddr sender_mac;
    Ipv4Addr sender_ip;
    wire::MacAddr target_mac;
    Ipv4Addr target_ip;

    static constexpr std::uint16_t kHardwareEthernet = 1;
};
static_assert(sizeof(ArpHdr) == 28);

// Operation codes (RFC 826; IANA "ARP Parameters").
enum class ArpOp : std::uint16_t { Request = 1, Reply = 2 };

struct ArpMessage {
    wire::MacAddr eth_dst{};
    wire::MacAddr eth_src{};
    ArpOp op = ArpOp::Request;
    wire::MacAddr sender_mac{};
    Ipv4Addr sender_ip{};
    wire::MacAddr target_mac{};
    Ipv4Addr target_ip{};
};

// An ARP frame padded to the 60-byte Ethernet minimum (IEEE 802.3 minimum of
// 64 bytes less the 4-byte FCS the NIC appends).
constexpr std::size_t kArpFrameSize = 60;

// The message in an untagged ARP frame; nothing when the frame is not ARP for
// Ethernet/IPv4, is truncated, or has an unknown operation.
[[nodiscard]] std::optional<ArpMessage> parse_arp(std::span<const std::uint8_t> frame);

// Writes `m` as a frame into `out` (at least kArpFrameSize bytes) and returns
// its length, kArpFrameSize.
std::size_t build_arp(std::span<std::uint8_t> out, const ArpMessage& m);

}  // namespace uroce::net
