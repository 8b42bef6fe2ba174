#include "fields.h"

namespace uroce::wire {

PacketFields fields_of(const Packet& p) {
    PacketFields f;
    f.eth.dst = p.eth().dst;
    f.eth.src = p.eth().src;
    f.eth.vlan_tci = p.vlan_tci();

    f.ip.version = p.ip_version();
    f.ip.src = p.src_gid();
    f.ip.dst = p.dst_gid();
    if (const auto* v4 = p.ipv4()) {
        f.ip.traffic_class = v4->tos;
        f.ip.ttl = v4->ttl;
        f.ip.ipv4_id = v4->id.get();
        f.ip.dont_fragment = (v4->flags_frag.get() & Ipv4Hdr::kDontFragment) != 0;
    } else if (const auto* v6 = p.ipv6()) {
        f.ip.traffic_class = v6->traffic_class();
        f.ip.ttl = v6->hop_limit;
        f.ip.flow_label = v6->flow_label();
    }

    f.udp.src_port = p.udp().src_port.get();
    f.udp.checksum = p.udp().checksum.get();

    const Bth& bth = p.bth();
    f.bth.opcode = bth.opcode;
    f.bth.solicited = bth.solicited();
    f.bth.mig_req = bth.mig_req();
    f.bth.tver = static_cast<std::uint8_t>(bth.tver());
    f.bth.pkey = bth.pkey.get();
    f.bth.resv8a = bth.resv8a;
    f.bth.dest_qp = bth.dest_qp.get();
    f.bth.ack_req = bth.ack_req();
    f.bth.resv7 = static_cast<std::uint8_t>(bth.resv7());
    f.bth.psn = p.psn();

    if (const auto* h = p.reth()) {
        f.ext.reth = {h->va.get(), h->rkey.get(), h->dma_length.get()};
    }
    if (const auto* h = p.atomic_eth()) {
        f.ext.atomic_eth = {h->va.get(), h->rkey.get(), h->swap_add.get(), h->compare.get()};
    }
    if (const auto* h = p.aeth()) {
        f.ext.aeth = {h->syndrome, h->msn.get()};
    }
    if (const auto* h = p.atomic_ack_eth()) {
        f.ext.atomic_ack_original = h->original.get();
    }
    if (const auto* h = p.immdt()) {
        f.ext.immediate = h->data.get();
    }
    if (const auto* h = p.ieth()) {
        f.ext.invalidate_rkey = h->rkey.get();
    }
    if (const auto* h = p.deth()) {
        f.ext.deth = {h->qkey.get(), h->src_qp.get()};
    }
    if (const auto* h = p.xrceth()) {
        f.ext.xrc_srq = h->xrc_srq.get();
    }
    f.payload = p.payload();
    return f;
}

}  // namespace uroce::wire
