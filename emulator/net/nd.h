// IPv6 Neighbor Discovery address resolution (RFC 4861): Neighbor
// Solicitation and Neighbor Advertisement frames with their link-layer
// address options, the ICMPv6 checksum (RFC 4443 2.3), and the multicast
// addresses resolution uses. Only untagged frames without IPv6 extension
// headers are handled.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/headers.h"

namespace uroce::net {

constexpr std::uint8_t kIpProtoIcmpv6 = 58;

enum class NdType : std::uint8_t {
    NeighborSolicitation = 135,  // RFC 4861 4.3
    NeighborAdvertisement = 136,  // RFC 4861 4.4
};

// The ICMPv6 part shared by NS and NA: type, code, checksum, 32 bits of
// flags/reserved, the target address; options follow.
struct NdHdr {
    std::uint8_t type;
    std::uint8_t code;
    wire::be16 checksum;
    std::uint8_t flags;  // NA: Router, Solicited, Override; NS: reserved
    std::array<std::uint8_t, 3> reserved;
    wire::Gid target;

    static constexpr std::uint8_t kRouter = 0x80;
    static constexpr std::uint8_t kSolicited = 0x40;
    static constexpr std::uint8_t kOverride = 0x20;
};
static_assert(sizeof(NdHdr) == 24);

// Source/Target Link-Layer Address option for Ethernet (RFC 4861 4.6.1):
// length is in units of 8 bytes.
struct NdLinkAddrOption {
    std::uint8_t type;
    std::uint8_t length;
    wire::MacAddr mac;

    static constexpr std::uint8_t kSourceLinkAddr = 1;
    static constexpr std::uint8_t kTargetLinkAddr = 2;
};
static_assert(sizeof(NdLinkAddrOption) == 8);

// Hop limit every ND message must carry, proof it was not forwarded
// (RFC 4861 7.1.1, 7.1.2).
constexpr std::uint8_t kNdHopLimit = 255;

// Frame length of the NS/NA this code builds: Ethernet, IPv6, NdHdr and one
// link-layer address option.
constexpr std::size_t kNdFrameSize =
    sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr) + sizeof(NdHdr) + sizeof(NdLinkAddrOption);

struct NdMessage {
    NdType type = NdType::NeighborSolicitation;
    wire::MacAddr eth_dst{};
    wire::MacAddr eth_src{};
    wire::Gid ip_src{};
    wire::Gid ip_dst{};
    wire::Gid target{};
    // NS: the Source Link-Layer Address option; NA: the Target one.
    std::optional<wire::MacAddr> link_addr{};
    // NA flags.
    bool router = false;
    bool solicited = false;
    bool override_entry = false;
};

enum class NdParseStatus {
    Ok,
    NotNd,      // not an untagged ICMPv6 NS or NA frame
    Malformed,  // NS/NA that fails the validity checks of RFC 4861 7.1
};

struct NdParseResult {
    NdParseStatus status = NdParseStatus::NotNd;
    NdMessage message;
};

// Parses and validates (RFC 4861 7.1.1 for NS, 7.1.2 for NA) an NS or NA.
[[nodiscard]] NdParseResult parse_nd(std::span<const std::uint8_t> frame);

// Writes `m` (with its link-layer option, which must be present) as a frame
// into `out` (at least kNdFrameSize bytes), checksum included, and returns
// its length.
std::size_t build_nd(std::span<std::uint8_t> out, const NdMessage& m);

// The ICMPv6 checksum over the IPv6 pseudo-header (RFC 8200 8.1) and
// `message`, whose own checksum field is summed as it stands: over a message
// holding zero there it gives the value to store, over a received message
// it gives 0 when the stored checksum is right.
[[nodiscard]] std::uint16_t icmpv6_checksum(const wire::Gid& src, const wire::Gid& dst,
                                            std::span<const std::uint8_t> message);

[[nodiscard]] constexpr bool is_ipv6_multicast(const wire::Gid& a) { return a[0] == 0xFF; }
[[nodiscard]] constexpr bool is_unspecified(const wire::Gid& a) {
    for (auto b : a) {
        if (b != 0) {
            return false;
        }
    }
    return true;
}

// ff02::1:ffXX:XXXX, the solicited-node multicast address of `target`
// (RFC 4291 2.7.1).
[[nodiscard]] constexpr wire::Gid solicited_node_multicast(const wire::Gid& target) {
    wire::Gid g{};
    g[0] = 0xFF;
    g[1] = 0x02;
    g[11] = 0x01;
    g[12] = 0xFF;
    g[13] = target[13];
    g[14] = target[14];
    g[15] = target[15];
    return g;
}

// ff02::1, all nodes on the link (RFC 4291 2.7.1).
constexpr wire::Gid kAllNodesMulticast = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};

// 33:33 followed by the last four bytes of an IPv6 multicast address
// (RFC 2464 7).
[[nodiscard]] constexpr wire::MacAddr ipv6_multicast_mac(const wire::Gid& group) {
    return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

}  // namespace uroce::net
