// The main fields of a CM MAD, for traces and `uroce decode`: which message,
// its comm IDs, and the service ID, QPN and starting PSN where it has them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages.h"

namespace uroce::cm {

struct MadSummary {
    std::string_view message;  // "REQ", "REP", ...
    std::uint64_t tid = 0;
    std::uint32_t local_comm_id = 0;  // SIDR: the request ID
    std::optional<std::uint32_t> remote_comm_id;
    std::optional<std::uint64_t> service_id;
    std::optional<std::uint32_t> qpn;  // the sender's QPN (DREQ: the receiver's)
    std::optional<std::uint32_t> starting_psn;
    std::optional<std::uint16_t> reject_reason;  // REJ
    std::optional<std::uint8_t> sidr_status;     // SIDR_REP
};

[[nodiscard]] MadSummary summarize(const Mad& mad);

// e.g. "CM REQ local_comm_id=0x1a2b3c4d service_id=0x0000000001061c06 qpn=0x11 psn=0x5e7b1"
[[nodiscard]] std::string describe(const MadSummary& s);

}  // namespace uroce::cm
