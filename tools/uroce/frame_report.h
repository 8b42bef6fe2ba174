// One frame of a capture as `uroce decode` reports it: a text line or a JSON
// object. The ICRC is shown as tshark shows it: the four bytes on the wire
// read as a big-endian number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "cm/describe.h"
#include "cm/parse_status.h"
#include "wire/parse.h"

namespace uroce::tools {

enum class FrameClass { Roce, Dropped, Skipped };

struct FrameReport {
    std::size_t index = 0;  // 1-based, like tshark's frame numbers
    wire::ParseResult parsed;
    FrameClass cls = FrameClass::Skipped;
    bool icrc_ok = false;                 // Roce only
    std::uint32_t icrc_carried = 0;       // as tshark shows it
    std::uint32_t icrc_expected = 0;
    // A UD SEND ONLY to QP1 carries a MAD: whether it is a well-formed CM
    // MAD, and its main fields when it is.
    std::optional<cm::CmParseStatus> cm_status;
    std::optional<cm::MadSummary> cm;
};

[[nodiscard]] FrameReport analyse_frame(std::size_t index, std::span<const std::uint8_t> frame);
[[nodiscard]] std::string report_text(const FrameReport& r);
[[nodiscard]] nlohmann::ordered_json report_json(const FrameReport& r);

}  // namespace uroce::tools
