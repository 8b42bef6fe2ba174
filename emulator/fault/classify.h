// What the rules can tell about a frame, read with the wire parser
// (wire/parse.h) and the opcode table (wire/opcode.h): whether it is RoCE,
// its class, operation, QPs and addresses. Frames the parser does not accept
// (ARP, ND, malformed RoCE) are of class Any only and have no QPs or
// addresses: only rules that filter nothing (down) reach them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "rule.h"

namespace uroce::fault {

struct FrameFacts {
    bool roce = false;  // parsed as a RoCEv2 packet
    FrameClass frame_class = FrameClass::Any;
    wire::Operation operation = wire::Operation::None;
    std::uint32_t dest_qp = 0;
    std::optional<std::uint32_t> src_qp;  // from the DETH, when there is one
    wire::Gid src{};
    wire::Gid dst{};
    // Where a corrupting byte may go: after the BTH's variant byte and its
    // destination QP (so the packet still reaches its QP), before the ICRC.
    std::uint32_t corrupt_first = 0;
    std::uint32_t corrupt_end = 0;
};

[[nodiscard]] FrameFacts classify(std::span<const std::uint8_t> frame);

// Whether `filter` admits a frame with `facts` travelling `way`.
[[nodiscard]] bool admits(const Filter& filter, const FrameFacts& facts, Direction way);

}  // namespace uroce::fault
