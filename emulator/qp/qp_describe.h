// Names for QP types, states, transitions and attribute masks, for logs,
// traces and test messages. State names are those rdma_rxe logs ("RESET",
// "RTS", ...); mask bits are verbs.h's IBV_QP_* names without the prefix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qp_types.h"

namespace uroce::qp {

[[nodiscard]] std::string_view describe(QpState s);  // "UNKNOWN" outside the enum
[[nodiscard]] std::string_view describe(QpType t);   // "RC", "UC", "UD"; "UNKNOWN" otherwise
[[nodiscard]] std::string_view describe(Mtu m);      // "256" .. "4096"; "UNKNOWN" otherwise

// "RESET->INIT".
[[nodiscard]] std::string transition_name(QpState from, QpState to);

// The name of one mask bit ("PKEY_INDEX"), or "" for a value that is not
// exactly one named bit.
[[nodiscard]] std::string_view attr_mask_bit_name(std::uint32_t bit);

// "STATE|PKEY_INDEX|PORT|ACCESS_FLAGS"; unnamed bits as one trailing hex
// term ("STATE|0x3000000"); "0" for an empty mask.
[[nodiscard]] std::string describe_attr_mask(std::uint32_t mask);

}  // namespace uroce::qp
