#include "describe.h"

#include <arpa/inet.h>
#include <fmt/format.h>

namespace uroce::wire {

std::string to_string(const MacAddr& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string ip_to_string(const Gid& gid) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (is_ipv4_mapped(gid)) {
        ::inet_ntop(AF_INET, gid.data() + 12, buf, sizeof(buf));
    } else {
        ::inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf));
    }
    return buf;
}

std::string describe_syndrome(std::uint8_t syndrome) {
    const std::uint8_t v = syndrome_value(syndrome);
    switch (ack_kind(syndrome)) {
        case AckKind::Ack:
            return fmt::format("ack(credits={})", v);
        case AckKind::RnrNak:
            return fmt::format("rnr_nak(timer={})", v);
        case AckKind::Nak: {
            static constexpr const char* kNames[] = {"psn_sequence_error", "invalid_request", "remote_access_error",
                                                     "remote_operational_error", "invalid_rd_request"};
            return v < std::size(kNames) ? fmt::format("nak({})", kNames[v]) : fmt::format("nak(reserved_{})", v);
        }
        case AckKind::Reserved:
            break;
    }
    return fmt::format("reserved(0x{:02x})", syndrome);
}

std::string to_string(const Bth& h) {
    return fmt::format("bth(opcode=0x{:02x} se={} m={} pad={} tver={} pkey=0x{:04x} qp=0x{:06x} a={} psn={})",
                       h.opcode, int(h.solicited()), int(h.mig_req()), h.pad_count(), h.tver(), h.pkey.get(),
                       h.dest_qp.get(), int(h.ack_req()), h.psn.get());
}

std::string to_string(const Reth& h) {
    return fmt::format("reth(va=0x{:x} rkey=0x{:08x} len={})", h.va.get(), h.rkey.get(), h.dma_length.get());
}

std::string to_string(const AtomicEth& h) {
    return fmt::format("atomiceth(va=0x{:x} rkey=0x{:08x} swap_add=0x{:x} compare=0x{:x})", h.va.get(), h.rkey.get(),
                       h.swap_add.get(), h.compare.get());
}

std::string to_string(const Aeth& h) {
    return fmt::format("aeth(syndrome=0x{:02x} {} msn={})", h.syndrome, describe_syndrome(h.syndrome), h.msn.get());
}

std::string to_string(const AtomicAckEth& h) { return fmt::format("atomicacketh(orig=0x{:x})", h.original.get()); }

std::string to_string(const ImmDt& h) { return fmt::format("immdt(0x{:08x})", h.data.get()); }

std::string to_string(const Ieth& h) { return fmt::format("ieth(rkey=0x{:08x})", h.rkey.get()); }

std::string to_string(const Deth& h) {
    return fmt::format("deth(qkey=0x{:08x} src_qp=0x{:06x})", h.qkey.get(), h.src_qp.get());
}

std::string to_string(const XrcEth& h) { return fmt::format("xrceth(srq=0x{:06x})", h.xrc_srq.get()); }

std::string describe_transport(const Packet& p) {
    const Bth& b = p.bth();
    std::string s = fmt::format("{} qp=0x{:06x} psn={}", p.info().name_view(), b.dest_qp.get(), b.psn.get());
    if (b.solicited()) {
        s += " se";
    }
    if (b.ack_req()) {
        s += " ackreq";
    }
    auto add = [&s](const auto* h) {
        if (h != nullptr) {
            s += ' ';
            s += to_string(*h);
        }
    };
    add(p.xrceth());
    add(p.deth());
    add(p.reth());
    add(p.atomic_eth());
    add(p.aeth());
    add(p.atomic_ack_eth());
    add(p.immdt());
    add(p.ieth());
    return s;
}

}  // namespace uroce::wire
