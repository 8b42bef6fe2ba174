#include "parse.h"

#include "ip_checksum.h"

namespace uroce::wire {

// Fills a Packet's private offsets; a friend so Packet stays read-only.
struct PacketParser {
    static ParseResult parse(std::span<const std::uint8_t> frame);
    static ParseStatus parse_into(std::span<const std::uint8_t> frame, Packet& p);
};

namespace {

constexpr ParseStatus fail(ParseStatus s) { return s; }

template <typename H>
const H* header_at(std::span<const std::uint8_t> frame, std::size_t off) {
    return reinterpret_cast<const H*>(frame.data() + off);
}

}  // namespace

ParseResult PacketParser::parse(std::span<const std::uint8_t> frame) {
    ParseResult r;  // filled in place: copying a Packet into the result cost more than parsing it
    r.status = parse_into(frame, r.packet);
    if (!r.ok()) {
        r.packet = Packet{};
    }
    return r;
}

ParseStatus PacketParser::parse_into(std::span<const std::uint8_t> frame, Packet& p) {
    p.frame_ = frame;
    std::size_t off = sizeof(EthHdr);

    // Ethernet, with at most one 802.1Q tag.
    if (frame.size() < sizeof(EthHdr)) {
        return fail(ParseStatus::EthernetTruncated);
    }
    std::uint16_t ether_type = header_at<EthHdr>(frame, 0)->ether_type.get();
    if (ether_type == kEtherTypeVlan) {
        if (frame.size() < off + sizeof(VlanTag)) {
            return fail(ParseStatus::VlanTruncated);
        }
        const auto* tag = header_at<VlanTag>(frame, off);
        p.vlan_tci_ = tag->tci.get();
        ether_type = tag->ether_type.get();
        off += sizeof(VlanTag);
    }
    p.l3_ = static_cast<std::uint32_t>(off);

    // IP. The packet ends where the IP length says; bytes after it are
    // Ethernet padding and are ignored.
    std::size_t l3_end = 0;
    const Ipv4Hdr* ipv4 = nullptr;
    if (ether_type == kEtherTypeIpv4) {
        if (frame.size() < off + sizeof(Ipv4Hdr)) {
            return fail(ParseStatus::Ipv4Truncated);
        }
        const auto* ip = ipv4 = header_at<Ipv4Hdr>(frame, off);
        if (ip->version() != 4 || ip->header_length() != sizeof(Ipv4Hdr)) {
            return fail(ParseStatus::Ipv4BadHeader);
        }
        if (ip->protocol != kIpProtoUdp) {
            return fail(ParseStatus::NotRoceIpProtocol);
        }
        const std::uint16_t frag = ip->flags_frag.get();
        if ((frag & Ipv4Hdr::kMoreFragments) != 0 || (frag & Ipv4Hdr::kFragOffsetMask) != 0) {
            return fail(ParseStatus::Ipv4Fragment);
        }
        p.ip_version_ = IpVersion::V4;
        off += sizeof(Ipv4Hdr);
        l3_end = p.l3_ + ip->total_length.get();
    } else if (ether_type == kEtherTypeIpv6) {
        if (frame.size() < off + sizeof(Ipv6Hdr)) {
            return fail(ParseStatus::Ipv6Truncated);
        }
        const auto* ip = header_at<Ipv6Hdr>(frame, off);
        if (ip->version() != 6) {
            return fail(ParseStatus::Ipv6BadHeader);
        }
        // RoCEv2 puts UDP straight after the IPv6 header (A17.4.2); anything
        // else, extension headers included, is not a RoCEv2 packet.
        if (ip->next_header != kIpProtoUdp) {
            return fail(ParseStatus::NotRoceIpProtocol);
        }
        p.ip_version_ = IpVersion::V6;
        off += sizeof(Ipv6Hdr);
        l3_end = off + ip->payload_length.get();
    } else {
        return fail(ParseStatus::NotRoceEtherType);
    }
    // UDP. The destination port is read from the frame before the IP length
    // is trusted, so a RoCEv2 frame cut short is still known as RoCEv2 and
    // counted as a drop rather than skipped as someone else's traffic.
    if (frame.size() < off + sizeof(UdpHdr)) {
        return fail(ParseStatus::UdpTruncated);
    }
    const auto* udp = header_at<UdpHdr>(frame, off);
    if (udp->dst_port.get() != kRoceV2Port) {
        return fail(ParseStatus::NotRocePort);
    }
    if (l3_end < off + sizeof(UdpHdr) || l3_end > frame.size()) {
        return fail(ipv4 != nullptr ? ParseStatus::Ipv4BadLength : ParseStatus::Ipv6BadLength);
    }
    if (ipv4 != nullptr && !ipv4_checksum_ok(*ipv4)) {
        return fail(ParseStatus::Ipv4BadChecksum);
    }
    if (udp->length.get() != l3_end - off) {
        return fail(ParseStatus::UdpBadLength);
    }
    p.l3_end_ = static_cast<std::uint32_t>(l3_end);
    p.l4_ = static_cast<std::uint32_t>(off);
    off += sizeof(UdpHdr);

    // BTH and the opcode's extension headers, each followed by the ICRC.
    const std::size_t udp_payload = l3_end - off;
    if (udp_payload < sizeof(Bth) + kIcrcSize) {
        return fail(ParseStatus::BthTruncated);
    }
    p.bth_ = static_cast<std::uint32_t>(off);
    const auto* bth = header_at<Bth>(frame, off);
    const OpcodeInfo& info = opcode_info(bth->opcode);
    if (info.valid && udp_payload < info.header_length + kIcrcSize) {
        return fail(ParseStatus::HeadersTruncated);
    }
    if (bth->tver() != 0) {
        return fail(ParseStatus::BadTver);
    }
    if (!info.valid) {
        return fail(ParseStatus::UnknownOpcode);
    }
    if (!info.supported) {
        return fail(ParseStatus::UnsupportedOpcode);
    }
    p.info_ = &info;

    // Payload and pad (IBA 9.2: PadCnt bytes bring the payload to a multiple of 4).
    const std::size_t after_headers = udp_payload - info.header_length - kIcrcSize;
    const std::size_t pad = bth->pad_count();
    if (pad > after_headers) {
        return fail(ParseStatus::PadBeyondPayload);
    }
    if (!info.payload_allowed && after_headers != 0) {
        return fail(ParseStatus::UnexpectedPayload);
    }
    p.payload_ = static_cast<std::uint32_t>(off + info.header_length);
    p.payload_len_ = static_cast<std::uint32_t>(after_headers - pad);
    p.icrc_ = static_cast<std::uint32_t>(l3_end - kIcrcSize);
    return ParseStatus::Ok;
}

ParseResult parse_frame(std::span<const std::uint8_t> frame) { return PacketParser::parse(frame); }

ParseResult parse_and_verify(std::span<const std::uint8_t> frame) {
    ParseResult r = parse_frame(frame);
    if (r.ok() && !r.packet.icrc_ok()) {
        r.status = ParseStatus::BadIcrc;
    }
    return r;
}

bool seal_icrc(std::span<std::uint8_t> frame) {
    const ParseResult r = parse_frame(frame);
    if (!r.ok()) {
        return false;
    }
    icrc_store(frame.data() + r.packet.icrc_offset(), r.packet.icrc_expected());
    return true;
}

Gid Packet::src_gid() const {
    if (ip_version_ == IpVersion::V4) {
        return ipv4_mapped(at<Ipv4Hdr>(l3_)->src);
    }
    return at<Ipv6Hdr>(l3_)->src;
}

Gid Packet::dst_gid() const {
    if (ip_version_ == IpVersion::V4) {
        return ipv4_mapped(at<Ipv4Hdr>(l3_)->dst);
    }
    return at<Ipv6Hdr>(l3_)->dst;
}

std::uint32_t Packet::icrc_expected() const {
    return icrc_compute(ip_version_, frame_.subspan(l3_, icrc_ - l3_));
}

}  // namespace uroce::wire
