#include "frame_report.h"

#include <fmt/format.h>

#include "cm/codec.h"
#include "cm/qp1.h"
#include "wire/describe.h"

namespace uroce::tools {

namespace {

// tshark prints the ICRC as the wire bytes read big-endian; the stored value
// is little-endian (IBA 7.8.1), so swap.
std::uint32_t as_shown(std::uint32_t icrc) { return __builtin_bswap32(icrc); }

std::string hex(std::uint64_t v) { return fmt::format("0x{:x}", v); }

// The MAD a UD SEND ONLY to QP1 carries, checked as a CM receiver does.
void analyse_mad(FrameReport& r) {
    const wire::Packet& p = r.parsed.packet;
    if (p.opcode() != cm::kUdSendOnly || !cm::is_for_qp1(p)) {
        return;
    }
    const cm::MadParseResult m = cm::parse_mad(p.payload());
    r.cm_status = m.status;
    if (m.ok()) {
        r.cm = cm::summarize(m.mad);
    }
}

nlohmann::ordered_json cm_json(const FrameReport& r) {
    nlohmann::ordered_json j;
    j["status"] = cm::cm_parse_status_info(*r.cm_status).name;
    if (!r.cm) {
        return j;
    }
    const cm::MadSummary& s = *r.cm;
    j["message"] = s.message;
    j["tid"] = fmt::format("0x{:016x}", s.tid);
    j["local_comm_id"] = s.local_comm_id;
    if (s.remote_comm_id) {
        j["remote_comm_id"] = *s.remote_comm_id;
    }
    if (s.service_id) {
        j["service_id"] = fmt::format("0x{:016x}", *s.service_id);
    }
    if (s.qpn) {
        j["qpn"] = *s.qpn;
    }
    if (s.starting_psn) {
        j["starting_psn"] = *s.starting_psn;
    }
    if (s.reject_reason) {
        j["reject_reason"] = *s.reject_reason;
    }
    if (s.sidr_status) {
        j["sidr_status"] = *s.sidr_status;
    }
    return j;
}

}  // namespace

FrameReport analyse_frame(std::size_t index, std::span<const std::uint8_t> frame) {
    FrameReport r;
    r.index = index;
    r.parsed = wire::parse_frame(frame);
    if (r.parsed.ok()) {
        r.cls = FrameClass::Roce;
        r.icrc_carried = as_shown(r.parsed.packet.icrc_carried());
        r.icrc_expected = as_shown(r.parsed.packet.icrc_expected());
        r.icrc_ok = r.icrc_carried == r.icrc_expected;
        analyse_mad(r);
    } else if (wire::reached_roce(r.parsed.status)) {
        r.cls = FrameClass::Dropped;
    } else {
        r.cls = FrameClass::Skipped;
    }
    return r;
}

std::string report_text(const FrameReport& r) {
    const auto& info = wire::parse_status_info(r.parsed.status);
    if (r.cls == FrameClass::Skipped) {
        return fmt::format("{} skipped: {} ({})", r.index, info.name, info.description);
    }
    if (r.cls == FrameClass::Dropped) {
        return fmt::format("{} dropped: {} ({})", r.index, info.name, info.description);
    }
    const wire::Packet& p = r.parsed.packet;
    std::string s = fmt::format("{} {}:{} > {}:{} ", r.index, wire::ip_to_string(p.src_gid()),
                                p.udp().src_port.get(), wire::ip_to_string(p.dst_gid()), p.udp().dst_port.get());
    if (auto tci = p.vlan_tci()) {
        s += fmt::format("vlan={} ", *tci & 0x0FFF);
    }
    s += wire::describe_transport(p);
    s += fmt::format(" payload={}", p.payload().size());
    if (r.cm) {
        s += " " + cm::describe(*r.cm);
    } else if (r.cm_status) {
        s += fmt::format(" mad={}", cm::cm_parse_status_info(*r.cm_status).name);
    }
    if (r.icrc_ok) {
        s += " icrc=ok";
    } else {
        s += fmt::format(" icrc=BAD(expected 0x{:08x} got 0x{:08x})", r.icrc_expected, r.icrc_carried);
    }
    return s;
}

nlohmann::ordered_json report_json(const FrameReport& r) {
    using nlohmann::ordered_json;
    ordered_json j;
    j["index"] = r.index;
    const auto& info = wire::parse_status_info(r.parsed.status);
    if (r.cls != FrameClass::Roce) {
        j["status"] = r.cls == FrameClass::Skipped ? "skipped" : "dropped";
        j["reason"] = info.name;
        j["detail"] = info.description;
        return j;
    }
    const wire::Packet& p = r.parsed.packet;
    const wire::Bth& b = p.bth();
    j["status"] = "roce";
    j["frame_length"] = p.frame().size();
    j["eth_src"] = wire::to_string(p.eth().src);
    j["eth_dst"] = wire::to_string(p.eth().dst);
    if (auto tci = p.vlan_tci()) {
        j["vlan_tci"] = *tci;
    }
    j["ip_version"] = p.ip_version() == wire::IpVersion::V4 ? 4 : 6;
    j["ip_src"] = wire::ip_to_string(p.src_gid());
    j["ip_dst"] = wire::ip_to_string(p.dst_gid());
    j["udp_src_port"] = p.udp().src_port.get();
    j["udp_dst_port"] = p.udp().dst_port.get();
    j["opcode"] = b.opcode;
    j["opcode_name"] = p.info().name_view();
    j["se"] = b.solicited();
    j["mig_req"] = b.mig_req();
    j["pad"] = b.pad_count();
    j["tver"] = b.tver();
    j["pkey"] = b.pkey.get();
    j["dest_qp"] = b.dest_qp.get();
    j["ack_req"] = b.ack_req();
    j["psn"] = b.psn.get();
    if (const auto* h = p.deth()) {
        j["deth"] = {{"qkey", h->qkey.get()}, {"src_qp", h->src_qp.get()}};
    }
    if (const auto* h = p.reth()) {
        j["reth"] = {{"va", hex(h->va.get())}, {"rkey", h->rkey.get()}, {"dma_length", h->dma_length.get()}};
    }
    if (const auto* h = p.atomic_eth()) {
        j["atomiceth"] = {{"va", hex(h->va.get())},
                          {"rkey", h->rkey.get()},
                          {"swap_add", hex(h->swap_add.get())},
                          {"compare", hex(h->compare.get())}};
    }
    if (const auto* h = p.aeth()) {
        j["aeth"] = {{"syndrome", h->syndrome},
                     {"meaning", wire::describe_syndrome(h->syndrome)},
                     {"msn", h->msn.get()}};
    }
    if (const auto* h = p.atomic_ack_eth()) {
        j["atomicacketh"] = {{"original", hex(h->original.get())}};
    }
    if (const auto* h = p.immdt()) {
        j["immdt"] = h->data.get();
    }
    if (const auto* h = p.ieth()) {
        j["ieth"] = {{"rkey", h->rkey.get()}};
    }
    j["payload_length"] = p.payload().size();
    if (r.cm_status) {
        j["cm"] = cm_json(r);
    }
    j["icrc"] = {{"ok", r.icrc_ok}, {"carried", fmt::format("0x{:08x}", r.icrc_carried)},
                 {"expected", fmt::format("0x{:08x}", r.icrc_expected)}};
    return j;
}

}  // namespace uroce::tools
