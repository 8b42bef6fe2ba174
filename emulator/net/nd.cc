#include "nd.h"

#include <algorithm>

namespace uroce::net {

namespace {

constexpr std::size_t kIpv6Offset = sizeof(wire::EthHdr);
constexpr std::size_t kIcmpOffset = kIpv6Offset + sizeof(wire::Ipv6Hdr);

// Ones'-complement sum of big-endian 16-bit words (RFC 1071); an odd last
// byte is padded with zero.
std::uint32_t sum_words(std::span<const std::uint8_t> bytes, std::uint32_t sum) {
    std::size_t i = 0;
    for (; i + 1 < bytes.size(); i += 2) {
        sum += static_cast<std::uint32_t>(bytes[i] << 8 | bytes[i + 1]);
    }
    if (i < bytes.size()) {
        sum += static_cast<std::uint32_t>(bytes[i] << 8);
    }
    return sum;
}

// ff02::1:ff00:0/104 (RFC 4291 2.7.1).
bool is_solicited_node_multicast(const wire::Gid& a) {
    const wire::Gid prefix = solicited_node_multicast(wire::Gid{});
    return std::equal(a.begin(), a.begin() + 13, prefix.begin());
}

}  // namespace

std::uint16_t icmpv6_checksum(const wire::Gid& src, const wire::Gid& dst, std::span<const std::uint8_t> message) {
    // Pseudo-header: source, destination, 32-bit upper-layer length, three
    // zero bytes and the next-header value.
    std::uint32_t sum = sum_words(src, 0);
    sum = sum_words(dst, sum);
    const auto length = static_cast<std::uint32_t>(message.size());
    sum += length >> 16;
    sum += length & 0xFFFF;
    sum += kIpProtoIcmpv6;
    sum = sum_words(message, sum);
    while ((sum >> 16) != 0) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(~sum);
}

NdParseResult parse_nd(std::span<const std::uint8_t> frame) {
    NdParseResult r;
    if (frame.size() < kIcmpOffset + 1) {
        return r;
    }
    const auto* eth = reinterpret_cast<const wire::EthHdr*>(frame.data());
    const auto* ip = reinterpret_cast<const wire::Ipv6Hdr*>(frame.data() + kIpv6Offset);
    if (eth->ether_type.get() != wire::kEtherTypeIpv6 || ip->version() != 6 || ip->next_header != kIpProtoIcmpv6) {
        return r;
    }
    const std::uint8_t type = frame[kIcmpOffset];
    if (type != static_cast<std::uint8_t>(NdType::NeighborSolicitation) &&
        type != static_cast<std::uint8_t>(NdType::NeighborAdvertisement)) {
        return r;
    }

    // From here on the frame is ND; failing a check makes it malformed.
    r.status = NdParseStatus::Malformed;
    const std::size_t icmp_length = ip->payload_length.get();
    if (icmp_length < sizeof(NdHdr) || icmp_length > frame.size() - kIcmpOffset) {
        return r;
    }
    const auto icmp = frame.subspan(kIcmpOffset, icmp_length);
    const auto* nd = reinterpret_cast<const NdHdr*>(icmp.data());
    if (ip->hop_limit != kNdHopLimit || nd->code != 0 || icmpv6_checksum(ip->src, ip->dst, icmp) != 0 ||
        is_ipv6_multicast(nd->target)) {
        return r;
    }

    NdMessage& m = r.message;
    m.type = static_cast<NdType>(type);
    const std::uint8_t wanted_option = m.type == NdType::NeighborSolicitation ? NdLinkAddrOption::kSourceLinkAddr
                                                                               : NdLinkAddrOption::kTargetLinkAddr;
    // Options: type, length in 8-byte units (never 0), contents (RFC 4861 4.6).
    for (std::size_t off = sizeof(NdHdr); off < icmp.size();) {
        if (icmp.size() - off < 2) {
            return r;
        }
        const std::size_t option_length = std::size_t{icmp[off + 1]} * 8;
        if (option_length == 0 || option_length > icmp.size() - off) {
            return r;
        }
        if (icmp[off] == wanted_option && option_length >= sizeof(NdLinkAddrOption)) {
            m.link_addr = reinterpret_cast<const NdLinkAddrOption*>(icmp.data() + off)->mac;
        }
        off += option_length;
    }

    m.eth_dst = eth->dst;
    m.eth_src = eth->src;
    m.ip_src = ip->src;
    m.ip_dst = ip->dst;
    m.target = nd->target;
    m.router = (nd->flags & NdHdr::kRouter) != 0;
    m.solicited = (nd->flags & NdHdr::kSolicited) != 0;
    m.override_entry = (nd->flags & NdHdr::kOverride) != 0;

    if (m.type == NdType::NeighborSolicitation && is_unspecified(m.ip_src) &&
        (!is_solicited_node_multicast(m.ip_dst) || m.link_addr.has_value())) {
        return r;  // RFC 4861 7.1.1: duplicate address detection comes without SLLA, to a solicited-node group
    }
    if (m.type == NdType::NeighborAdvertisement && is_ipv6_multicast(m.ip_dst) && m.solicited) {
        return r;  // RFC 4861 7.1.2
    }
    r.status = NdParseStatus::Ok;
    return r;
}

std::size_t build_nd(std::span<std::uint8_t> out, const NdMessage& m) {
    std::fill_n(out.begin(), kNdFrameSize, std::uint8_t{0});
    auto* eth = reinterpret_cast<wire::EthHdr*>(out.data());
    eth->dst = m.eth_dst;
    eth->src = m.eth_src;
    eth->ether_type.set(wire::kEtherTypeIpv6);

    constexpr std::size_t icmp_length = sizeof(NdHdr) + sizeof(NdLinkAddrOption);
    auto* ip = reinterpret_cast<wire::Ipv6Hdr*>(out.data() + kIpv6Offset);
    ip->vtc_flow.set(6u << 28);
    ip->payload_length.set(static_cast<std::uint16_t>(icmp_length));
    ip->next_header = kIpProtoIcmpv6;
    ip->hop_limit = kNdHopLimit;
    ip->src = m.ip_src;
    ip->dst = m.ip_dst;

    auto* nd = reinterpret_cast<NdHdr*>(out.data() + kIcmpOffset);
    nd->type = static_cast<std::uint8_t>(m.type);
    nd->target = m.target;
    if (m.type == NdType::NeighborAdvertisement) {
        nd->flags = static_cast<std::uint8_t>((m.router ? NdHdr::kRouter : 0) | (m.solicited ? NdHdr::kSolicited : 0) |
                                              (m.override_entry ? NdHdr::kOverride : 0));
    }
    auto* option = reinterpret_cast<NdLinkAddrOption*>(out.data() + kIcmpOffset + sizeof(NdHdr));
    option->type = m.type == NdType::NeighborSolicitation ? NdLinkAddrOption::kSourceLinkAddr
                                                          : NdLinkAddrOption::kTargetLinkAddr;
    option->length = 1;
    option->mac = m.link_addr.value_or(m.eth_src);
    nd->checksum.set(icmpv6_checksum(m.ip_src, m.ip_dst, out.subspan(kIcmpOffset, icmp_length)));
    return kNdFrameSize;
}

}  // namespace uroce::net
