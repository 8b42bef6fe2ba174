// CM MAD codec: 256 bytes <-> Mad (header + one of the nine messages).
//
// parse_mad checks the header in the order Linux's MAD layer and CM do
// (version, class, class version, method, attribute) and then the fields a
// receiver cannot act on; it never reads outside the span and never throws.
// build_mad writes every field, zeroes reserved bits, and is the inverse:
// build_mad(parse_mad(build_mad(m))) == build_mad(m).
#pragma once

#include <cstdint>
#include <span>

#include "messages.h"
#include "parse_status.h"

namespace uroce::cm {

struct MadParseResult {
    CmParseStatus status = CmParseStatus::Ok;
    Mad mad;  // meaningful only when status == Ok

    [[nodiscard]] bool ok() const { return status == CmParseStatus::Ok; }
};

[[nodiscard]] MadParseResult parse_mad(std::span<const std::uint8_t> bytes);

// The header's attribute ID is taken from the message; the rest of the
// header (TID, method, versions) is written as given.
[[nodiscard]] MadBytes build_mad(const Mad& mad);

// A header as Linux sends every CM message: version 1, class 0x07, class
// version 2, method Send, status 0, attribute modifier 0.
[[nodiscard]] MadHeader cm_header(std::uint64_t tid);

}  // namespace uroce::cm
