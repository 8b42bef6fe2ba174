#include "classify.h"

#include "cm/qp1.h"
#include "wire/parse.h"

namespace uroce::fault {

namespace {

// The BTH bytes before the PSN word: opcode, flags, P_Key, the variant
// FECN/BECN byte (masked out of the ICRC, IBA A17.8.2) and the destination QP
// (changing it would send the packet elsewhere instead of failing its ICRC).
constexpr std::uint32_t kBthBytesKept = 8;

FrameClass class_of(const wire::Packet& p) {
    if (cm::is_for_qp1(p)) {
        return FrameClass::Cm;
    }
    const wire::OpcodeInfo& info = p.info();
    if (info.is_request) {
        return FrameClass::Request;
    }
    if (info.operation == wire::Operation::Acknowledge) {
        const wire::Aeth* aeth = p.aeth();
        return aeth != nullptr && wire::ack_kind(aeth->syndrome) == wire::AckKind::Ack ? FrameClass::Ack
                                                                                       : FrameClass::Nak;
    }
    if (info.operation == wire::Operation::RdmaReadResponse || info.operation == wire::Operation::AtomicAcknowledge) {
        return FrameClass::Response;
    }
    return FrameClass::Any;  // CNP
}

bool class_admits(FrameClass wanted, FrameClass actual) { return wanted == FrameClass::Any || wanted == actual; }

bool way_admits(Directions d, Direction way) {
    return d == Directions::Both || (d == Directions::Rx) == (way == Direction::Rx);
}

}  // namespace

FrameFacts classify(std::span<const std::uint8_t> frame) {
    FrameFacts f;
    const wire::ParseResult r = wire::parse_frame(frame);
    if (!r.ok()) {
        return f;
    }
    const wire::Packet& p = r.packet;
    f.roce = true;
    f.frame_class = class_of(p);
    f.operation = p.info().operation;
    f.dest_qp = p.dest_qp();
    if (const wire::Deth* deth = p.deth()) {
        f.src_qp = deth->src_qp.get();
    }
    f.src = p.src_gid();
    f.dst = p.dst_gid();
    f.corrupt_first = static_cast<std::uint32_t>(p.bth_offset() + kBthBytesKept);
    f.corrupt_end = static_cast<std::uint32_t>(p.icrc_offset());
    return f;
}

bool admits(const Filter& filter, const FrameFacts& facts, Direction way) {
    if (!way_admits(filter.directions, way) || !class_admits(filter.frame_class, facts.frame_class)) {
        return false;
    }
    const bool needs_roce = filter.frame_class != FrameClass::Any || filter.dest_qp || filter.src_qp ||
                            filter.operation || filter.peer;
    if (!needs_roce) {
        return true;
    }
    if (!facts.roce) {
        return false;
    }
    if (filter.dest_qp && *filter.dest_qp != facts.dest_qp) {
        return false;
    }
    if (filter.src_qp && (!facts.src_qp || *filter.src_qp != *facts.src_qp)) {
        return false;
    }
    if (filter.operation && *filter.operation != facts.operation) {
        return false;
    }
    if (filter.peer && *filter.peer != (way == Direction::Rx ? facts.src : facts.dst)) {
        return false;
    }
    return true;
}

}  // namespace uroce::fault
