// MLD (IPv6 group membership) on the wire: the MLDv2 reports a host sends
// (RFC 3810 5.2), the MLDv1 reports and dones it sends while an MLDv1
// querier is present (RFC 3810 8.2.1, RFC 2710 3), and the queries it
// answers, MLDv1 (RFC 2710 3) and v2 (RFC 3810 5.1), told apart by length
// (RFC 3810 8.1). Version 2 by default for the reason igmp.h gives for
// IGMPv3: Linux's default (force_mld_version 0).
// Messages carry a hop-by-hop Router Alert (RFC 2711, value 0: MLD), come
// from a link-local source and have hop limit 1 (RFC 3810 5). Only untagged
// frames whose only extension header is a hop-by-hop one are handled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "net/igmp.h"
#include "wire/headers.h"

namespace uroce::net {

enum class MldType : std::uint8_t {
    Query = 130,       // RFC 2710 3.6, RFC 3810 5.1
    V1Report = 131,    // RFC 2710
    V1Done = 132,      // RFC 2710
    V2Report = 143,    // RFC 3810 5.2
};

// ff02::16, all MLDv2-capable routers (RFC 3810 5.2.14).
constexpr wire::Gid kMldV2RoutersGroup = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16};

// ff02::2, all routers: where MLDv1 dones go (RFC 2710 4).
constexpr wire::Gid kAllRoutersMulticast = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};

// Ethernet, IPv6, the 8-byte hop-by-hop header, the 8-byte report header;
// then 20 bytes per address record (no sources).
constexpr std::size_t kMldReportOverhead = sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr) + 8 + 8;
constexpr std::size_t kMldRecordSize = 20;

// True for an untagged IPv6 frame carrying an MLD message (a query, a report
// of some host): the frames the membership code consumes.
[[nodiscard]] bool is_mld_frame(std::span<const std::uint8_t> frame);

// Parses and checks an MLD query: hop limit 1, a link-local source
// (RFC 3810 5.1.14), lengths, the ICMPv6 checksum, the address (:: or a
// multicast one).
[[nodiscard]] QueryParseResult parse_mld_query(std::span<const std::uint8_t> frame);

// The Maximum Response Code of an MLDv2 query in milliseconds (RFC 3810
// 5.1.3: milliseconds, from 32768 on in a floating-point form).
[[nodiscard]] std::uint32_t mld_max_response_ms(std::uint16_t code);

// Writes an MLDv2 report from `src_mac`/`src_ip` (link-local) with one
// record of `type` and no sources per group in `groups` into `out` (at least
// kMldReportOverhead + 20 * groups.size() bytes); returns its length.
std::size_t build_mld_report(std::span<std::uint8_t> out, const wire::MacAddr& src_mac, const wire::Gid& src_ip,
                             GroupRecordType type, std::span<const wire::Gid> groups);

// An MLDv1 message (RFC 2710 3): the same IPv6 and hop-by-hop headers as a
// v2 report, then 24 bytes: type, code, checksum, Maximum Response Delay,
// reserved, the multicast address.
constexpr std::size_t kMldV1MessageFrameSize = kMldReportOverhead - 8 + 24;

// Writes an MLDv1 report or done (`type`: V1Report or V1Done) about `group`
// into `out` (at least kMldV1MessageFrameSize bytes): reports go to the
// group itself, dones to ff02::2 (RFC 2710 4). Returns its length.
std::size_t build_mldv1_message(std::span<std::uint8_t> out, const wire::MacAddr& src_mac, const wire::Gid& src_ip,
                                MldType type, const wire::Gid& group);

}  // namespace uroce::net
