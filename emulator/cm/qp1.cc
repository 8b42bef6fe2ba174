#include "qp1.h"

#include "wire/parse.h"

namespace uroce::cm {

wire::PacketFields cm_frame_fields(const CmFrameAddress& a, std::span<const std::uint8_t, kMadSize> mad) {
    wire::PacketFields f;
    f.eth = a.eth;
    f.ip = a.ip;
    f.udp.src_port = a.udp_src_port;
    f.bth.opcode = kUdSendOnly;
    f.bth.pkey = kDefaultPkey;
    f.bth.dest_qp = kGsiQpn;
    f.bth.ack_req = true;  // as rdma_rxe sends them
    f.bth.psn = wire::Psn(a.psn);
    f.ext.deth.qkey = kGsiQkey;
    f.ext.deth.src_qp = kGsiQpn;
    f.payload = mad;
    return f;
}

wire::BuildResult build_cm_frame(const CmFrameAddress& a, std::span<const std::uint8_t, kMadSize> mad,
                                 std::span<std::uint8_t> out) {
    return wire::build_frame(cm_frame_fields(a, mad), out);
}

std::size_t cm_frame_length(const CmFrameAddress& a) {
    static constexpr MadBytes kZero{};
    return wire::frame_length(cm_frame_fields(a, kZero));
}

CmFrameResult parse_cm_frame(std::span<const std::uint8_t> frame) {
    CmFrameResult r;
    const wire::ParseResult parsed = wire::parse_and_verify(frame);
    if (!parsed.ok()) {
        r.status = CmParseStatus::FrameMalformed;
        r.wire_status = parsed.status;
        return r;
    }
    r.packet = parsed.packet;
    const wire::Packet& p = r.packet;
    if (p.opcode() != kUdSendOnly) {
        r.status = CmParseStatus::NotUdSendOnly;
    } else if (p.dest_qp() != kGsiQpn) {
        r.status = CmParseStatus::NotQp1;
    } else if (p.deth()->qkey.get() != kGsiQkey) {
        r.status = CmParseStatus::BadQkey;
    } else if (p.bth().pkey.get() != kDefaultPkey) {
        r.status = CmParseStatus::BadPkey;
    } else if (p.payload().size() != kMadSize) {
        r.status = CmParseStatus::BadMadLength;
    }
    if (r.status != CmParseStatus::Ok) {
        return r;
    }
    MadParseResult m = parse_mad(p.payload());
    r.status = m.status;
    r.mad = std::move(m.mad);
    return r;
}

}  // namespace uroce::cm
