// The RoCEv2 invariant CRC (IBA A17.4.1 and 7.8.1).
//
// CRC-32 (IEEE 802.3, reflected) over: 8 bytes of 0xFF standing in for the
// LRH RoCEv2 does not carry, then the IP header, UDP header, BTH, extension
// headers, payload and pad. Fields a router may change are replaced by ones
// first: IPv4 TOS, TTL and header checksum; IPv6 traffic class, flow label
// and hop limit; the UDP checksum; BTH resv8a. The Ethernet header is not
// covered. The complemented result travels little-endian after the pad.
#pragma once

#include <cstdint>
#include <span>

namespace uroce::wire {

enum class IpVersion : std::uint8_t { V4 = 4, V6 = 6 };

// ICRC of a RoCEv2 packet. `covered` runs from the first byte of the IP
// header up to (not including) the ICRC. It must hold at least the IP, UDP
// and BTH headers (callers guarantee this; the parser does).
[[nodiscard]] std::uint32_t icrc_compute(IpVersion ip, std::span<const std::uint8_t> covered);

// The ICRC as stored on the wire (little-endian) at `p`.
[[nodiscard]] std::uint32_t icrc_load(const std::uint8_t* p);
void icrc_store(std::uint8_t* p, std::uint32_t icrc);

// Plain CRC-32 (IEEE, reflected, zlib convention) over `data`, continuing
// from `crc` (0 to start). Exposed for tests and benchmarks.
[[nodiscard]] std::uint32_t crc32_ieee(std::uint32_t crc, std::span<const std::uint8_t> data);

}  // namespace uroce::wire
