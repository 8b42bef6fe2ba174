// IGMP (IPv4 group membership) on the wire: the IGMPv3 membership reports a
// host sends (RFC 3376 4.2), the IGMPv1 and v2 reports and the v2 leave it
// sends while an older querier is present (RFC 3376 7.2.1; RFC 1112
// appendix I, RFC 2236 2), and the queries it answers, of every version
// (RFC 3376 4.1, 7.1: IGMPv1 and v2 queries are told apart by length and
// Max Resp Code). Only untagged frames are handled.
//
// Why version 3 reports by default: they are what Linux sends
// (net.ipv4.conf.*.force_igmp_version 0), every IGMPv3 router and snooping
// switch takes them, and one report can carry every group (a v2 report,
// RFC 2236 2.1, names one). net/group_membership.h picks the version.
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
    V1MembershipReport = 0x12,  // RFC 1112 appendix I
    V2MembershipReport = 0x16,  // RFC 2236 2.1
    V2LeaveGroup = 0x17,        // RFC 2236 2.1
    V3MembershipReport = 0x22,  // RFC 3376 4.2
};

// The version of a query heard, or of the reports a host sends: IGMPv1, v2,
// v3 for IPv4; MLDv1 (V1) and MLDv2 (V2) for IPv6 (net/mld.h).
enum class ProtocolVersion : std::uint8_t { V1 = 1, V2 = 2, V3 = 3 };

// Group record types of an IGMPv3 report (RFC 3376 4.2.12), the same in an
// MLDv2 report (RFC 3810 5.2.12).
enum class GroupRecordType : std::uint8_t {
    ModeIsExclude = 2,     // current state: answers a query
    ChangeToInclude = 3,   // state change; with no sources: a leave
    ChangeToExclude = 4,   // state change; with no sources: a join
};

// 224.0.0.22, all IGMPv3-capable routers: where v3 reports go (RFC 3376 4.2.14).
constexpr std::array<std::uint8_t, 4> kIgmpV3RoutersGroup = {224, 0, 0, 22};
// 224.0.0.2, all routers: where v2 leaves go (RFC 2236 3).
constexpr std::array<std::uint8_t, 4> kAllRoutersGroup = {224, 0, 0, 2};
// 224.0.0.1, all systems: never reported (RFC 3376 5).
constexpr std::array<std::uint8_t, 4> kAllSystemsGroup = {224, 0, 0, 1};

// 01:00:5e and the low 23 bits of an IPv4 group (RFC 1112 6.4).
[[nodiscard]] constexpr wire::MacAddr ipv4_multicast_mac(const std::array<std::uint8_t, 4>& group) {
    return {0x01, 0x00, 0x5E, static_cast<std::uint8_t>(group[1] & 0x7F), group[2], group[3]};
}

// A query as a host acts on it: which group it asks about (all zero: a
// general query), how long the answer may wait, its version and, from a
// v3 (MLDv2) query, the querier's Robustness Variable and Query Interval
// (RFC 3376 4.1.6, 4.1.7; RFC 3810 5.1.8, 5.1.9), 0 when not carried.
struct MembershipQuery {
    wire::Gid group{};  // IPv4-mapped here; all zero for a general query
    bool general = true;
    std::uint32_t max_response_ms = 0;
    ProtocolVersion version = ProtocolVersion::V3;
    std::uint8_t robustness = 0;
    std::uint32_t query_interval_s = 0;
};

enum class QueryParseStatus {
    Ok,
    NotQuery,   // not an untagged IGMP query (or MLD query for mld.h): not ours
    Malformed,  // a query that fails the checks (QueryDropReason says which)
};

// Why a query was dropped: the checks of parse_igmp_query / parse_mld_query.
enum class QueryDropReason : std::uint8_t {
    None,
    Length,    // IP or IGMP/MLD lengths that do not add up, a truncated source list
    Checksum,  // IPv4 header, IGMP or ICMPv6 checksum
    HopLimit,  // IPv4 TTL or IPv6 hop limit other than 1: not from this link
    Fragment,  // an IPv4 fragment
    Source,    // an MLD query from no link-local address (RFC 3810 5.1.14)
    Group,     // a group address that is neither 0 (::) nor multicast
};
constexpr std::size_t kQueryDropReasonCount = 7;

struct QueryParseResult {
    QueryParseStatus status = QueryParseStatus::NotQuery;
    QueryDropReason reason = QueryDropReason::None;  // when Malformed
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

// An IGMPv1/v2 message (RFC 2236 2): the same IPv4 header with Router
// Alert as a v3 report, then type, 0, checksum, group.
constexpr std::size_t kIgmpV2MessageFrameSize = kIgmpReportOverhead;

// Writes an IGMPv1 or v2 report or a v2 leave (`type`) about `group`
// (IPv4-mapped) into `out` (at least kIgmpV2MessageFrameSize bytes):
// reports go to the group itself, leaves to 224.0.0.2 (RFC 2236 3, 9).
// Returns its length.
std::size_t build_igmp_v1v2_message(std::span<std::uint8_t> out, const wire::MacAddr& src_mac,
                                    const std::array<std::uint8_t, 4>& src_ip, IgmpType type, const wire::Gid& group);

// The Internet checksum (RFC 1071) of `bytes`: 0 over a message whose
// stored checksum is right.
[[nodiscard]] std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes);

}  // namespace uroce::net
