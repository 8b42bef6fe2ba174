// Independent reference implementations the wire layer is checked against:
// a bit-by-bit CRC-32, the RoCEv2 ICRC written straight from IBA A17.4.1,
// the RFC 1071 Internet checksum, and a frame crafter that lays out bytes by
// hand (it does not use the builder, so it can build frames the builder
// refuses to).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace uroce::test {

inline constexpr std::size_t kEthLen = 14;
inline constexpr std::size_t kVlanLen = 4;
inline constexpr std::size_t kIpv4Len = 20;
inline constexpr std::size_t kIpv6Len = 40;
inline constexpr std::size_t kUdpLen = 8;
inline constexpr std::size_t kBthLen = 12;
inline constexpr std::size_t kIcrcLen = 4;

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), one bit at a time,
// in the zlib convention: start with 0, feed the previous result to continue.
[[nodiscard]] std::uint32_t crc32_ref(std::uint32_t crc, std::span<const std::uint8_t> data);

// Bits of byte `i` of the ICRC-covered region (counted from the first byte of
// the IP header) that are replaced by ones before the CRC is taken.
[[nodiscard]] std::uint8_t icrc_mask_bits(bool ipv6, std::size_t i);

// The ICRC over `covered` (IP header up to, not including, the ICRC): CRC-32
// of eight 0xFF bytes followed by a copy of `covered` with the masked bits set.
[[nodiscard]] std::uint32_t icrc_ref(bool ipv6, std::span<const std::uint8_t> covered);

// RFC 1071 ones'-complement sum of 16-bit big-endian words, folded, not complemented.
[[nodiscard]] std::uint16_t ones_complement_sum(std::span<const std::uint8_t> data);

struct RawFrameSpec {
    std::optional<std::uint16_t> vlan_tci;
    bool ipv6 = false;
    std::uint8_t ip_protocol = 17;
    std::uint16_t udp_dst_port = 4791;
    std::uint16_t udp_src_port = 0xC123;
    std::vector<std::uint8_t> transport;  // BTH, extension headers, payload and pad
};

// Ethernet, optional 802.1Q tag, IPv4 (DF, TTL 64, checksum set) or IPv6,
// UDP, the transport bytes and the reference ICRC, every length consistent.
[[nodiscard]] std::vector<std::uint8_t> craft_frame(const RawFrameSpec& spec);

// The 12 BTH bytes, laid out by hand from IBA 9.2 figure 99.
[[nodiscard]] std::vector<std::uint8_t> bth_bytes(std::uint8_t opcode, std::uint8_t flags, std::uint16_t pkey,
                                                  std::uint32_t dest_qp, bool ack_req, std::uint32_t psn);

// Rewrites the IPv4 header checksum at `l3`.
void fix_ipv4_checksum(std::vector<std::uint8_t>& frame, std::size_t l3);

// Rewrites the ICRC that ends at `l3_end` (the end of the IP packet).
void fix_icrc(std::vector<std::uint8_t>& frame, bool ipv6, std::size_t l3, std::size_t l3_end);

[[nodiscard]] std::uint16_t get16(std::span<const std::uint8_t> p, std::size_t off);
void put16(std::span<std::uint8_t> p, std::size_t off, std::uint16_t v);

}  // namespace uroce::test
