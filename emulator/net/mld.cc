#include "mld.h"

#include <algorithm>

#include "net/nd.h"

namespace uroce::net {

namespace {

constexpr std::size_t kIpv6Offset = sizeof(wire::EthHdr);
constexpr std::size_t kAfterIpv6 = kIpv6Offset + sizeof(wire::Ipv6Hdr);
constexpr std::uint8_t kNextHeaderHopByHop = 0;
constexpr std::size_t kHopByHopSize = 8;
// Hop-by-hop options of a report: Router Alert (RFC 2711 2.1: type 5,
// length 2, value 0 = MLD), then PadN filling the header to 8 bytes.
constexpr std::array<std::uint8_t, 6> kRouterAlertAndPad = {0x05, 0x02, 0x00, 0x00, 0x01, 0x00};
// MLD message lengths (RFC 3810 8.1): 24 for v1 queries, at least 28 for v2.
constexpr std::size_t kMldV1Length = 24;
constexpr std::size_t kMldV2QueryMinLength = 28;
// Never forwarded (RFC 3810 5).
constexpr std::uint8_t kMldHopLimit = 1;

struct MldView {
    const wire::Ipv6Hdr* ip = nullptr;
    std::span<const std::uint8_t> icmp;  // empty when the lengths do not add up
};

// The IPv6 header and ICMPv6 message of an untagged MLD frame; ip null when
// the frame is no ICMPv6 of an MLD type (after at most one hop-by-hop header).
MldView mld_view(std::span<const std::uint8_t> frame) {
    MldView v;
    if (frame.size() < kAfterIpv6 + 2) {
        return v;
    }
    const auto* eth = reinterpret_cast<const wire::EthHdr*>(frame.data());
    const auto* ip = reinterpret_cast<const wire::Ipv6Hdr*>(frame.data() + kIpv6Offset);
    if (eth->ether_type.get() != wire::kEtherTypeIpv6 || ip->version() != 6) {
        return v;
    }
    const std::size_t payload = ip->payload_length.get();
    const bool lengths_fit = payload <= frame.size() - kAfterIpv6;
    std::size_t icmp_at = kAfterIpv6;
    std::uint8_t next = ip->next_header;
    if (next == kNextHeaderHopByHop) {
        next = frame[kAfterIpv6];
        icmp_at += (std::size_t{frame[kAfterIpv6 + 1]} + 1) * 8;
    }
    if (next != kIpProtoIcmpv6 || icmp_at >= frame.size()) {
        return v;
    }
    const std::uint8_t type = frame[icmp_at];
    if (type != static_cast<std::uint8_t>(MldType::Query) && type != static_cast<std::uint8_t>(MldType::V1Report) &&
        type != static_cast<std::uint8_t>(MldType::V1Done) && type != static_cast<std::uint8_t>(MldType::V2Report)) {
        return v;
    }
    v.ip = ip;
    const std::size_t end = kAfterIpv6 + payload;
    if (lengths_fit && icmp_at < end) {
        v.icmp = frame.subspan(icmp_at, end - icmp_at);
    }
    return v;
}

bool is_link_local(const wire::Gid& a) { return a[0] == 0xFE && (a[1] & 0xC0) == 0x80; }

// An MLDv2 query's fixed part and source list fit in `icmp` (RFC 3810 5.1).
bool v2_query_fits(std::span<const std::uint8_t> icmp) {
    if (icmp.size() < kMldV2QueryMinLength) {
        return false;
    }
    const std::size_t sources = static_cast<std::size_t>(icmp[26] << 8 | icmp[27]);
    return icmp.size() >= kMldV2QueryMinLength + 16 * sources;
}

// Ethernet, IPv6 (hop limit 1) and the hop-by-hop header with Router Alert
// of an MLD message of `icmp_length` bytes from `src_mac`/`src_ip` to `dst`.
void write_headers(std::span<std::uint8_t> out, const wire::MacAddr& src_mac, const wire::Gid& src_ip,
                   const wire::Gid& dst, std::size_t icmp_length) {
    auto* eth = reinterpret_cast<wire::EthHdr*>(out.data());
    eth->dst = ipv6_multicast_mac(dst);
    eth->src = src_mac;
    eth->ether_type.set(wire::kEtherTypeIpv6);

    auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(out.data() + kIpv6Offset);
    ip->vtc_flow.set(6u << 28);
    ip->payload_length.set(static_cast<std::uint16_t>(kHopByHopSize + icmp_length));
    ip->next_header = kNextHeaderHopByHop;
    ip->hop_limit = kMldHopLimit;
    ip->src = src_ip;
    ip->dst = dst;

    std::uint8_t* hop_by_hop = out.data() + kAfterIpv6;
    hop_by_hop[0] = kIpProtoIcmpv6;
    hop_by_hop[1] = 0;  // (0 + 1) * 8 bytes
    std::copy(kRouterAlertAndPad.begin(), kRouterAlertAndPad.end(), hop_by_hop + 2);
}

void store_checksum(std::span<std::uint8_t> icmp, const wire::Gid& src, const wire::Gid& dst) {
    const std::uint16_t sum = icmpv6_checksum(src, dst, icmp);
    icmp[2] = static_cast<std::uint8_t>(sum >> 8);
    icmp[3] = static_cast<std::uint8_t>(sum);
}

}  // namespace

bool is_mld_frame(std::span<const std::uint8_t> frame) { return mld_view(frame).ip != nullptr; }

std::uint32_t mld_max_response_ms(std::uint16_t code) {
    if (code < 32768) {
        return code;
    }
    const std::uint32_t mantissa = code & 0x0FFFu;
    const std::uint32_t exponent = (code >> 12) & 0x07u;
    return (mantissa | 0x1000u) << (exponent + 3);
}

QueryParseResult parse_mld_query(std::span<const std::uint8_t> frame) {
    QueryParseResult r;
    const MldView v = mld_view(frame);
    if (v.ip == nullptr) {
        return r;
    }
    if (v.icmp.empty()) {
        r.status = QueryParseStatus::Malformed;
        r.reason = QueryDropReason::Length;
        return r;
    }
    if (v.icmp[0] != static_cast<std::uint8_t>(MldType::Query)) {
        return r;  // another host's report or done: nothing to answer
    }
    r.status = QueryParseStatus::Malformed;
    const std::span<const std::uint8_t> icmp = v.icmp;
    const bool v1 = icmp.size() == kMldV1Length;
    if (!v1 && !v2_query_fits(icmp)) {
        r.reason = QueryDropReason::Length;
    } else if (v.ip->hop_limit != kMldHopLimit) {
        r.reason = QueryDropReason::HopLimit;
    } else if (!is_link_local(v.ip->src)) {
        r.reason = QueryDropReason::Source;
    } else if (icmpv6_checksum(v.ip->src, v.ip->dst, icmp) != 0) {
        r.reason = QueryDropReason::Checksum;
    }
    if (r.reason != QueryDropReason::None) {
        return r;
    }
    wire::Gid group{};
    std::copy_n(icmp.begin() + 8, group.size(), group.begin());
    const bool general = is_unspecified(group);
    if (!general && !is_ipv6_multicast(group)) {
        r.reason = QueryDropReason::Group;
        return r;
    }
    const auto code = static_cast<std::uint16_t>(icmp[4] << 8 | icmp[5]);
    r.query.general = general;
    r.query.group = group;
    if (v1) {
        r.query.version = ProtocolVersion::V1;
        r.query.max_response_ms = code;  // milliseconds (RFC 2710 3.4)
    } else {
        r.query.version = ProtocolVersion::V2;
        r.query.max_response_ms = mld_max_response_ms(code);
        // RFC 3810 5.1.8 (QRV: the low 3 bits), 5.1.9 (QQIC: seconds, in
        // IGMPv3's floating-point form).
        r.query.robustness = static_cast<std::uint8_t>(icmp[24] & 0x07u);
        r.query.query_interval_s = igmp_max_response_ms(icmp[25]) / 100;
    }
    r.status = QueryParseStatus::Ok;
    return r;
}

std::size_t build_mld_report(std::span<std::uint8_t> out, const wire::MacAddr& src_mac, const wire::Gid& src_ip,
                             GroupRecordType type, std::span<const wire::Gid> groups) {
    const std::size_t icmp_length = 8 + kMldRecordSize * groups.size();
    const std::size_t length = kMldReportOverhead + kMldRecordSize * groups.size();
    std::fill_n(out.begin(), length, std::uint8_t{0});
    write_headers(out, src_mac, src_ip, kMldV2RoutersGroup, icmp_length);

    // RFC 3810 5.2: type, reserved, checksum, reserved, number of records.
    const std::span<std::uint8_t> icmp = out.subspan(kAfterIpv6 + kHopByHopSize, icmp_length);
    icmp[0] = static_cast<std::uint8_t>(MldType::V2Report);
    icmp[6] = static_cast<std::uint8_t>(groups.size() >> 8);
    icmp[7] = static_cast<std::uint8_t>(groups.size());
    for (std::size_t i = 0; i < groups.size(); ++i) {
        // Record: type, aux data length 0, number of sources 0, the address.
        std::uint8_t* record = icmp.data() + 8 + kMldRecordSize * i;
        record[0] = static_cast<std::uint8_t>(type);
        std::copy(groups[i].begin(), groups[i].end(), record + 4);
    }
    store_checksum(icmp, src_ip, kMldV2RoutersGroup);
    return length;
}

std::size_t build_mldv1_message(std::span<std::uint8_t> out, const wire::MacAddr& src_mac, const wire::Gid& src_ip,
                                MldType type, const wire::Gid& group) {
    const wire::Gid& dst = type == MldType::V1Done ? kAllRoutersMulticast : group;
    std::fill_n(out.begin(), kMldV1MessageFrameSize, std::uint8_t{0});
    write_headers(out, src_mac, src_ip, dst, kMldV1Length);
    // RFC 2710 3: type, code 0, checksum, Maximum Response Delay 0 (unused
    // in reports and dones), reserved, the address.
    const std::span<std::uint8_t> icmp = out.subspan(kAfterIpv6 + kHopByHopSize, kMldV1Length);
    icmp[0] = static_cast<std::uint8_t>(type);
    std::copy(group.begin(), group.end(), icmp.begin() + 8);
    store_checksum(icmp, src_ip, dst);
    return kMldV1MessageFrameSize;
}

}  // namespace uroce::net
