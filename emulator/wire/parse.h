// The frame parser: Ethernet (optional 802.1Q tag) / IPv4 or IPv6 / UDP 4791
// / BTH / extension headers / payload / pad / ICRC.
//
// It checks structure in the order a compatible receiver does (see
// docs/wire.md): lengths first, then the BTH version, then the opcode, then
// pad and payload. It never reads a byte outside the frame it is given, and
// never throws. The ICRC is checked separately (parse_and_verify does both)
// because a receiver checks the destination GID and QP between the two, and
// because tools want to show packets whose ICRC is wrong.
#pragma once

#include <cstdint>
#include <span>

#include "packet.h"
#include "parse_status.h"

namespace uroce::wire {

struct ParseResult {
    ParseStatus status = ParseStatus::Ok;
    Packet packet;  // meaningful only when status == Ok

    [[nodiscard]] bool ok() const { return status == ParseStatus::Ok; }
};

[[nodiscard]] ParseResult parse_frame(std::span<const std::uint8_t> frame);

// parse_frame, then the ICRC: BadIcrc when it does not verify.
[[nodiscard]] ParseResult parse_and_verify(std::span<const std::uint8_t> frame);

// Computes and stores the ICRC of a RoCEv2 frame in place (one built with
// Icrc::LeaveOut, build.h); false, changing nothing, when `frame` does not
// parse as one.
bool seal_icrc(std::span<std::uint8_t> frame);

}  // namespace uroce::wire
