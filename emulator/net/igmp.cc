#include "igmp.h"

#include <algorithm>
#include <cstring>

namespace uroce::net {

namespace {

constexpr std::size_t kIpOffset = sizeof(wire::EthHdr);
constexpr std::size_t kIpv4MinHeader = 20;
// Router Alert (RFC 2113 2.1): copied flag, option 20, length 4, value 0.
constexpr std::array<std::uint8_t, 4> kRouterAlertOption = {0x94, 0x04, 0x00, 0x00};
constexpr std::size_t kReportIpHeader = kIpv4MinHeader + kRouterAlertOption.size();
// IGMP message lengths (RFC 3376 7.1): 8 for v1/v2 queries, at least 12 for v3.
constexpr std::size_t kIgmpV2Length = 8;
constexpr std::size_t kIgmpV3QueryMinLength = 12;
// An IGMPv1 query's Max Resp Code is 0 and means 10 s (RFC 3376 7.1).
constexpr std::uint32_t kV1MaxResponseMs = 10'000;
// Precedence "internetwork control" (0xC0), as Linux marks IGMP.
constexpr std::uint8_t kReportTos = 0xC0;
// Reports are never forwarded (RFC 3376 4: TTL 1).
constexpr std::uint8_t kIgmpTtl = 1;

struct Ipv4View {
    const wire::Ipv4Hdr* ip = nullptr;
    std::span<const std::uint8_t> payload;
};

// The IPv4 header and payload of an untagged IGMP frame, without checks
// beyond what finding them needs; ip null when the frame is not IGMP.
Ipv4View igmp_view(std::span<const std::uint8_t> frame) {
    Ipv4View v;
    if (frame.size() < kIpOffset + kIpv4MinHeader) {
        return v;
    }
    const auto* eth = reinterpret_cast<const wire::EthHdr*>(frame.data());
    const auto* ip = reinterpret_cast<const wire::Ipv4Hdr*>(frame.data() + kIpOffset);
    if (eth->ether_type.get() != wire::kEtherTypeIpv4 || ip->version() != 4 || ip->protocol != kIpProtoIgmp) {
        return v;
    }
    v.ip = ip;
    const std::size_t header = ip->header_length();
    const std::size_t total = ip->total_length.get();
    if (header >= kIpv4MinHeader && total >= header && total <= frame.size() - kIpOffset) {
        v.payload = frame.subspan(kIpOffset + header, total - header);
    }
    return v;
}

bool is_ipv4_multicast(const std::array<std::uint8_t, 4>& a) { return (a[0] & 0xF0) == 0xE0; }

// A v3 query's fixed part and source list fit in `igmp` (RFC 3376 4.1).
bool v3_query_fits(std::span<const std::uint8_t> igmp) {
    if (igmp.size() < kIgmpV3QueryMinLength) {
        return false;
    }
    const std::size_t sources = static_cast<std::size_t>(igmp[10] << 8 | igmp[11]);
    return igmp.size() >= kIgmpV3QueryMinLength + 4 * sources;
}

// Ethernet and the IPv4 header with Router Alert of a message of
// `igmp_length` bytes from `src_mac`/`src_ip` to `dst` (as Linux writes
// them: precedence 0xC0, DF, identification 0, TTL 1).
void write_headers(std::span<std::uint8_t> out, const wire::MacAddr& src_mac,
                   const std::array<std::uint8_t, 4>& src_ip, const std::array<std::uint8_t, 4>& dst,
                   std::size_t igmp_length) {
    auto* eth = reinterpret_cast<wire::EthHdr*>(out.data());
    eth->dst = ipv4_multicast_mac(dst);
    eth->src = src_mac;
    eth->ether_type.set(wire::kEtherTypeIpv4);

    auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(out.data() + kIpOffset);
    ip->version_ihl = static_cast<std::uint8_t>(4u << 4 | kReportIpHeader / 4);
    ip->tos = kReportTos;
    ip->total_length.set(static_cast<std::uint16_t>(kReportIpHeader + igmp_length));
    ip->flags_frag.set(wire::Ipv4Hdr::kDontFragment);
    ip->ttl = kIgmpTtl;
    ip->protocol = kIpProtoIgmp;
    ip->src = src_ip;
    ip->dst = dst;
    std::copy(kRouterAlertOption.begin(), kRouterAlertOption.end(), out.begin() + kIpOffset + kIpv4MinHeader);
    ip->checksum.set(internet_checksum(out.subspan(kIpOffset, kReportIpHeader)));
}

void store_checksum(std::span<std::uint8_t> igmp) {
    const std::uint16_t sum = internet_checksum(igmp);
    igmp[2] = static_cast<std::uint8_t>(sum >> 8);
    igmp[3] = static_cast<std::uint8_t>(sum);
}

}  // namespace

std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes) {
    std::uint32_t sum = 0;
    std::size_t i = 0;
    for (; i + 1 < bytes.size(); i += 2) {
        sum += static_cast<std::uint32_t>(bytes[i] << 8 | bytes[i + 1]);
    }
    if (i < bytes.size()) {
        sum += static_cast<std::uint32_t>(bytes[i] << 8);
    }
    while ((sum >> 16) != 0) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(~sum);
}

bool is_igmp_frame(std::span<const std::uint8_t> frame) { return igmp_view(frame).ip != nullptr; }

std::uint32_t igmp_max_response_ms(std::uint8_t code) {
    if (code < 128) {
        return std::uint32_t{code} * 100;
    }
    const std::uint32_t mantissa = code & 0x0Fu;
    const std::uint32_t exponent = (code >> 4) & 0x07u;
    return ((mantissa | 0x10u) << (exponent + 3)) * 100;
}

QueryParseResult parse_igmp_query(std::span<const std::uint8_t> frame) {
    QueryParseResult r;
    const Ipv4View v = igmp_view(frame);
    if (v.ip == nullptr || v.payload.empty() ||
        v.payload[0] != static_cast<std::uint8_t>(IgmpType::MembershipQuery)) {
        if (v.ip != nullptr && v.payload.empty()) {
            r.status = QueryParseStatus::Malformed;  // IGMP whose lengths do not add up
            r.reason = QueryDropReason::Length;
        }
        return r;
    }
    r.status = QueryParseStatus::Malformed;
    const std::span<const std::uint8_t> header = frame.subspan(kIpOffset, v.ip->header_length());
    const bool fragment = (v.ip->flags_frag.get() & (wire::Ipv4Hdr::kMoreFragments | wire::Ipv4Hdr::kFragOffsetMask)) != 0;
    const std::span<const std::uint8_t> igmp = v.payload;
    const bool v1_or_v2 = igmp.size() == kIgmpV2Length;
    if (internet_checksum(header) != 0) {
        r.reason = QueryDropReason::Checksum;
    } else if (v.ip->ttl != kIgmpTtl) {
        r.reason = QueryDropReason::HopLimit;
    } else if (fragment) {
        r.reason = QueryDropReason::Fragment;
    } else if (!v1_or_v2 && !v3_query_fits(igmp)) {
        r.reason = QueryDropReason::Length;
    } else if (internet_checksum(igmp) != 0) {
        r.reason = QueryDropReason::Checksum;
    }
    if (r.reason != QueryDropReason::None) {
        return r;
    }
    std::array<std::uint8_t, 4> group{};
    std::memcpy(group.data(), igmp.data() + 4, group.size());
    const bool general = group == std::array<std::uint8_t, 4>{};
    if (!general && !is_ipv4_multicast(group)) {
        r.reason = QueryDropReason::Group;
        return r;
    }
    const std::uint8_t code = igmp[1];
    r.query.general = general;
    r.query.group = general ? wire::Gid{} : wire::ipv4_mapped(group);
    if (v1_or_v2) {
        // v2: tenths of a second, no floating point (RFC 2236 2.2); v1: 0
        // (RFC 3376 7.1).
        r.query.version = code == 0 ? ProtocolVersion::V1 : ProtocolVersion::V2;
        r.query.max_response_ms = code == 0 ? kV1MaxResponseMs : std::uint32_t{code} * 100;
    } else {
        r.query.version = ProtocolVersion::V3;
        r.query.max_response_ms = igmp_max_response_ms(code);
        // RFC 3376 4.1.6 (QRV: the low 3 bits), 4.1.7 (QQIC: seconds, in
        // the Max Resp Code's form).
        r.query.robustness = static_cast<std::uint8_t>(igmp[8] & 0x07u);
        r.query.query_interval_s = igmp_max_response_ms(igmp[9]) / 100;
    }
    r.status = QueryParseStatus::Ok;
    return r;
}

std::size_t build_igmp_report(std::span<std::uint8_t> out, const wire::MacAddr& src_mac,
                              const std::array<std::uint8_t, 4>& src_ip, GroupRecordType type,
                              std::span<const wire::Gid> groups) {
    const std::size_t igmp_length = 8 + kIgmpRecordSize * groups.size();
    const std::size_t length = kIpOffset + kReportIpHeader + igmp_length;
    std::fill_n(out.begin(), length, std::uint8_t{0});
    write_headers(out, src_mac, src_ip, kIgmpV3RoutersGroup, igmp_length);

    // RFC 3376 4.2: type, reserved, checksum, reserved, number of records.
    const std::span<std::uint8_t> igmp = out.subspan(kIpOffset + kReportIpHeader, igmp_length);
    igmp[0] = static_cast<std::uint8_t>(IgmpType::V3MembershipReport);
    igmp[6] = static_cast<std::uint8_t>(groups.size() >> 8);
    igmp[7] = static_cast<std::uint8_t>(groups.size());
    for (std::size_t i = 0; i < groups.size(); ++i) {
        // Record: type, aux data length 0, number of sources 0, the group.
        std::uint8_t* record = igmp.data() + 8 + kIgmpRecordSize * i;
        record[0] = static_cast<std::uint8_t>(type);
        const std::array<std::uint8_t, 4> g = wire::ipv4_of(groups[i]);
        std::copy(g.begin(), g.end(), record + 4);
    }
    store_checksum(igmp);
    return length;
}

std::size_t build_igmp_v1v2_message(std::span<std::uint8_t> out, const wire::MacAddr& src_mac,
                                    const std::array<std::uint8_t, 4>& src_ip, IgmpType type, const wire::Gid& group) {
    const std::array<std::uint8_t, 4> g = wire::ipv4_of(group);
    const std::array<std::uint8_t, 4> dst = type == IgmpType::V2LeaveGroup ? kAllRoutersGroup : g;
    std::fill_n(out.begin(), kIgmpV2MessageFrameSize, std::uint8_t{0});
    write_headers(out, src_mac, src_ip, dst, kIgmpV2Length);
    // RFC 2236 2: type, Max Resp Time 0 (unused in reports), checksum, group.
    const std::span<std::uint8_t> igmp = out.subspan(kIpOffset + kReportIpHeader, kIgmpV2Length);
    igmp[0] = static_cast<std::uint8_t>(type);
    std::copy(g.begin(), g.end(), igmp.begin() + 4);
    store_checksum(igmp);
    return kIgmpV2MessageFrameSize;
}

}  // namespace uroce::net
