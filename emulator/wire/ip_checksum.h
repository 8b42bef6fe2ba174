// The IPv4 header checksum (RFC 791, computed as RFC 1071 describes). Kept
// here rather than taken from DPDK (rte_ipv4_cksum) because the wire layer
// must build and run without DPDK; it is 20 bytes of ones'-complement sum.
#pragma once

#include <cstdint>

#include "headers.h"

namespace uroce::wire {

// The checksum to store in `h` (its checksum field is treated as zero).
[[nodiscard]] inline std::uint16_t ipv4_header_checksum(const Ipv4Hdr& h) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&h);
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < sizeof(Ipv4Hdr); i += 2) {
        if (i == 10) {
            continue;  // the checksum field itself
        }
        sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(~sum);
}

// True when the header's checksum verifies: the ones'-complement sum of all
// ten words, checksum included, is 0xFFFF. This also accepts 0xFFFF stored
// where 0x0000 was computed, the other representation of zero (RFC 1624).
[[nodiscard]] inline bool ipv4_checksum_ok(const Ipv4Hdr& h) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&h);
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < sizeof(Ipv4Hdr); i += 2) {
        sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    }
    while (sum >> 16) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return sum == 0xFFFF;
}

}  // namespace uroce::wire
