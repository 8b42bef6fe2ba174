#include "build.h"

#include <cstring>

#include "ip_checksum.h"
#include "opcode.h"

namespace uroce::wire {

namespace {

template <typename H>
H* header_at(std::span<std::uint8_t> out, std::size_t off) {
    return reinterpret_cast<H*>(out.data() + off);
}

std::size_t pad_for(std::size_t payload) { return (4 - (payload & 3)) & 3; }

std::size_t l2_length(const PacketFields& f) {
    return sizeof(EthHdr) + (f.eth.vlan_tci ? sizeof(VlanTag) : 0);
}

std::size_t ip_header_length(const PacketFields& f) {
    return f.ip.version == IpVersion::V4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
}

std::size_t udp_length(const PacketFields& f) {
    const OpcodeInfo& info = opcode_info(f.bth.opcode);
    return sizeof(UdpHdr) + info.header_length + f.payload.size() + pad_for(f.payload.size()) + kIcrcSize;
}

void write_extensions(const PacketFields& f, const OpcodeInfo& info, std::span<std::uint8_t> out,
                      std::size_t bth_off) {
    auto at = [&](Ext e) { return bth_off + info.offset[static_cast<std::size_t>(e)]; };
    const ExtFields& x = f.ext;
    if (info.has(Ext::XrcEth)) {
        auto* h = header_at<XrcEth>(out, at(Ext::XrcEth));
        h->reserved = 0;
        h->xrc_srq.set(x.xrc_srq);
    }
    if (info.has(Ext::Deth)) {
        auto* h = header_at<Deth>(out, at(Ext::Deth));
        h->qkey.set(x.deth.qkey);
        h->reserved = 0;
        h->src_qp.set(x.deth.src_qp);
    }
    if (info.has(Ext::Reth)) {
        auto* h = header_at<Reth>(out, at(Ext::Reth));
        h->va.set(x.reth.va);
        h->rkey.set(x.reth.rkey);
        h->dma_length.set(x.reth.dma_length);
    }
    if (info.has(Ext::AtomicEth)) {
        auto* h = header_at<AtomicEth>(out, at(Ext::AtomicEth));
        h->va.set(x.atomic_eth.va);
        h->rkey.set(x.atomic_eth.rkey);
        h->swap_add.set(x.atomic_eth.swap_add);
        h->compare.set(x.atomic_eth.compare);
    }
    if (info.has(Ext::Aeth)) {
        auto* h = header_at<Aeth>(out, at(Ext::Aeth));
        h->syndrome = x.aeth.syndrome;
        h->msn.set(x.aeth.msn);
    }
    if (info.has(Ext::AtomicAckEth)) {
        header_at<AtomicAckEth>(out, at(Ext::AtomicAckEth))->original.set(x.atomic_ack_original);
    }
    if (info.has(Ext::ImmDt)) {
        header_at<ImmDt>(out, at(Ext::ImmDt))->data.set(x.immediate);
    }
    if (info.has(Ext::Ieth)) {
        header_at<Ieth>(out, at(Ext::Ieth))->rkey.set(x.invalidate_rkey);
    }
    if (info.has(Ext::CnpReserved)) {
        std::memset(out.data() + at(Ext::CnpReserved), 0, sizeof(CnpReserved));
    }
}

}  // namespace

std::size_t frame_length(const PacketFields& f) { return l2_length(f) + ip_header_length(f) + udp_length(f); }

std::size_t payload_offset(const PacketFields& f) {
    return l2_length(f) + ip_header_length(f) + sizeof(UdpHdr) + opcode_info(f.bth.opcode).header_length;
}

BuildResult build_frame(const PacketFields& f, std::span<std::uint8_t> out, Icrc icrc) {
    const OpcodeInfo& info = opcode_info(f.bth.opcode);
    if (!info.valid || !info.supported) {
        return {BuildStatus::UnsupportedOpcode, 0};
    }
    if (!info.payload_allowed && !f.payload.empty()) {
        return {BuildStatus::PayloadNotAllowed, 0};
    }
    const std::size_t udp_len = udp_length(f);
    const std::size_t ip_len = ip_header_length(f);
    // Both IPv4 total length and IPv6 payload length are 16-bit fields.
    if ((f.ip.version == IpVersion::V4 ? ip_len : 0) + udp_len > 0xFFFF) {
        return {BuildStatus::TooLarge, 0};
    }
    const std::size_t total = frame_length(f);
    if (out.size() < total) {
        return {BuildStatus::BufferTooSmall, 0};
    }

    // Ethernet and 802.1Q.
    std::size_t off = 0;
    auto* eth = header_at<EthHdr>(out, 0);
    eth->dst = f.eth.dst;
    eth->src = f.eth.src;
    const std::uint16_t l3_type = f.ip.version == IpVersion::V4 ? kEtherTypeIpv4 : kEtherTypeIpv6;
    off += sizeof(EthHdr);
    if (f.eth.vlan_tci) {
        eth->ether_type.set(kEtherTypeVlan);
        auto* tag = header_at<VlanTag>(out, off);
        tag->tci.set(*f.eth.vlan_tci);
        tag->ether_type.set(l3_type);
        off += sizeof(VlanTag);
    } else {
        eth->ether_type.set(l3_type);
    }

    // IP.
    const std::size_t l3 = off;
    if (f.ip.version == IpVersion::V4) {
        auto* ip = header_at<Ipv4Hdr>(out, off);
        ip->version_ihl = 0x45;
        ip->tos = f.ip.traffic_class;
        ip->total_length.set(static_cast<std::uint16_t>(sizeof(Ipv4Hdr) + udp_len));
        ip->id.set(f.ip.ipv4_id);
        ip->flags_frag.set(f.ip.dont_fragment ? Ipv4Hdr::kDontFragment : 0);
        ip->ttl = f.ip.ttl;
        ip->protocol = kIpProtoUdp;
        ip->src = ipv4_of(f.ip.src);
        ip->dst = ipv4_of(f.ip.dst);
        ip->checksum.set(0);
        ip->checksum.set(ipv4_header_checksum(*ip));
    } else {
        auto* ip = header_at<Ipv6Hdr>(out, off);
        ip->vtc_flow.set(6u << 28 | static_cast<std::uint32_t>(f.ip.traffic_class) << 20 |
                         (f.ip.flow_label & 0xFFFFF));
        ip->payload_length.set(static_cast<std::uint16_t>(udp_len));
        ip->next_header = kIpProtoUdp;
        ip->hop_limit = f.ip.ttl;
        ip->src = f.ip.src;
        ip->dst = f.ip.dst;
    }
    off += ip_len;

    // UDP.
    auto* udp = header_at<UdpHdr>(out, off);
    udp->src_port.set(f.udp.src_port);
    udp->dst_port.set(kRoceV2Port);
    udp->length.set(static_cast<std::uint16_t>(udp_len));
    udp->checksum.set(f.udp.checksum);
    off += sizeof(UdpHdr);

    // BTH.
    const std::size_t pad = pad_for(f.payload.size());
    auto* bth = header_at<Bth>(out, off);
    bth->opcode = f.bth.opcode;
    bth->flags = static_cast<std::uint8_t>((f.bth.solicited ? Bth::kSolicitedBit : 0) |
                                           (f.bth.mig_req ? Bth::kMigReqBit : 0) | (pad << Bth::kPadShift) |
                                           (f.bth.tver & Bth::kTverMask));
    bth->pkey.set(f.bth.pkey);
    bth->resv8a = f.bth.resv8a;
    bth->dest_qp.set(f.bth.dest_qp);
    bth->ack_req_resv7 = static_cast<std::uint8_t>((f.bth.ack_req ? Bth::kAckReqBit : 0) | (f.bth.resv7 & 0x7F));
    bth->psn.set(f.bth.psn.value());
    write_extensions(f, info, out, off);
    off += info.header_length;

    // Payload, zero pad, ICRC.
    if (!f.payload.empty()) {
        if (f.payload.data() != out.data() + off) {  // else already in place (payload_offset)
            std::memmove(out.data() + off, f.payload.data(), f.payload.size());
        }
        off += f.payload.size();
    }
    std::memset(out.data() + off, 0, pad);
    off += pad;
    icrc_store(out.data() + off, icrc == Icrc::Compute ? icrc_compute(f.ip.version, out.subspan(l3, off - l3)) : 0);
    off += kIcrcSize;
    return {BuildStatus::Ok, off};
}

}  // namespace uroce::wire
