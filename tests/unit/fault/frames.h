// RoCE frames for the fault-injection tests, made with the wire builder.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/build.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace uroce::fault::test {

inline wire::Gid ip4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    return wire::ipv4_mapped({a, b, c, d});
}

struct FrameSpec {
    std::uint8_t opcode = wire::opcode::kRcSendOnly;
    std::uint32_t dest_qp = 17;
    std::uint32_t psn = 0;
    wire::Gid src = ip4(10, 0, 0, 1);
    wire::Gid dst = ip4(10, 0, 0, 2);
    std::uint8_t syndrome = 0;  // AETH
    std::size_t payload = 64;
};

inline std::vector<std::uint8_t> roce_frame(const FrameSpec& s) {
    wire::PacketFields f;
    f.eth.src = {0x02, 0, 0, 0, 0, 1};
    f.eth.dst = {0x02, 0, 0, 0, 0, 2};
    f.ip.src = s.src;
    f.ip.dst = s.dst;
    f.bth.opcode = s.opcode;
    f.bth.dest_qp = s.dest_qp;
    f.bth.psn = wire::Psn(s.psn);
    f.ext.aeth.syndrome = s.syndrome;
    std::vector<std::uint8_t> payload(wire::opcode_info(s.opcode).payload_allowed ? s.payload : 0, 0xA5);
    f.payload = payload;
    std::vector<std::uint8_t> out(wire::frame_length(f));
    const wire::BuildResult r = wire::build_frame(f, out);
    out.resize(r.status == wire::BuildStatus::Ok ? r.length : 0);
    return out;
}

// An ARP request's bytes (not RoCE): only down rules act on it.
inline std::vector<std::uint8_t> arp_frame() {
    std::vector<std::uint8_t> f(42, 0);
    f[12] = 0x08;
    f[13] = 0x06;  // EtherType ARP
    return f;
}

}  // namespace uroce::fault::test
