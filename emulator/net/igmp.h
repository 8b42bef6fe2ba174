// IGMP (IPv4 group membership) on the wire: the IGMPv3 membership reports a
// host sends (RFC 3376 4.2) and the queries it answers, of every version
// (RFC 3376 4.1, 7.1: IGMPv1 and v2 queries are told apart by length and
// Max Resp Code). Only untagged frames are handled.
//
// Why version 3 reports: they are what Linux sends by default
// (net.ipv4.conf.*.force_igmp_version 0), every IGMPv3 router and snooping
// switch takes them, and one report can carry every group (a v2 report,
// RFC 2236 2.1, names one). A v3 host on a link where a v1/v2 querier is
// heard would fall back to v1/v2 reports (RFC 3376 7.2.1); uroce does not:
// the snooping bridges and switches RoCE runs on understand v3.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/headers.h"

namespace uroce::net {

constexpr std::uint8_t kIpProtoIgmp = 2;

enum class IgmpType : std::uint8_t {
    MembershipQuery = 0x11,   // RFC 3376 4.1 (all versions)
    V3MembershipReport = 0x22,  // RFC 3376 4.2
};

// Group record types of an IGMPv3 report (RFC 3376 4.2.12), the same in an
// MLDv2 report (RFC 3810 5.2.12).
enum class GroupRecordType : std::uint8_t {
    ModeIsExclude = 2,     // current state: answers a query
    ChangeToInclude = 3,   // state change; with no sources: a leave
    ChangeToExclude = 4,   // state change; with no sources: a join
};

// 224.0.0.22, all IGMPv3-capable routers: where v3 reports go (RFC 3376 4.2.14).
constexpr std::array<std::uint8_t, 4> kIgmpV3RoutersGroup = {224, 0, 0, 22};
// 224.0.0.1, all systems: never reported (RFC 3376 5).
constexpr std::array<std::uint8_t, 4> kAllSystemsGroup = {224, 0, 0, 1};

// 01:00:5e and the low 23 bits of an IPv4 group (RFC 1112 6.4).
[[nodiscard]] constexpr wire::MacAddr ipv4_multicast_mac(const std::array<std::uint8_t, 4>& group) {
    return {0x01, 0x00, 0x5E, static_cast<std::uint8_t>(group[1] & 0x7F), group[2], group[3]};
}

// A query as a host acts on it: which group it asks about (all zero: a
// general query) and how long the answer may wait.
struct MembershipQuery {
    wire::Gid group{};  // IPv4-mapped here; all zero for a general query
    bool general = true;
    std::uint32_t max_response_ms = 0;
};

enum class QueryParseStatus {
    Ok,
    NotQuery,   // not an untagged IGMP query (or MLD query for mld.h): not ours
    Malformed,  // a query that fails the checks (lengths, checksum, TTL/hop limit, addresses)
};

struct QueryParseResult {
    QueryParseStatus status = QueryParseStatus::NotQuery;
    MembershipQuery query;
};

// True for an untagged IPv4 frame carrying IGMP (a query, a report of some
// host, anything): the frames the membership code consumes.
[[nodiscard]] bool is_igmp_frame(std::span<const std::uint8_t> frame);

// Parses and checks an IGMP membership query: the IPv4 header (version,
// lengths, header checksum, TTL 1), the IGMP checksum (RFC 3376 4.1.2) and
// the group (0 or a multicast address).
[[nodiscard]] QueryParseResult parse_igmp_query(std::span<const std::uint8_t> frame);

// The Max Resp Code of a v3 query in milliseconds (RFC 3376 4.1.1: tenths
// of a second, the values from 128 on in a floating-point form).
[[nodiscard]] std::uint32_t igmp_max_response_ms(std::uint8_t code);

// The IPv4 part of an IGMPv3 report: 24-byte header with the Router Alert
// option (RFC 2113; RFC 3376 4 requires it), 8-byte IGMP header, then
// 8 bytes per group record (no sources).
constexpr std::size_t kIgmpReportOverhead = sizeof(wire::EthHdr) + 24 + 8;
constexpr std::size_t kIgmpRecordSize = 8;

// Writes an IGMPv3 report with one record of `type` and no sources per
// group in `groups` (IPv4-mapped GIDs) from `src_mac`/`src_ip` into `out`
// (at least kIgmpReportOverhead + 8 * groups.size() bytes); returns its length.
std::size_t build_igmp_report(std::span<std::uint8_t> out, const wire::MacAddr& src_mac,
                              const std::array<std::uint8_t, 4>& src_ip, GroupRecordType type,
                              std::span<const wire::Gid> groups);

// The Internet checksum (RFC 1071) of `bytes`: 0 over a message whose
// stored checksum is right.
[[nodiscard]] std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes);

}  // namespace uroce::net
