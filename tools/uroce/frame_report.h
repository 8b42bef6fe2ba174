// One frame of a capture as `uroce decode` reports it: a text line or a JSON
// object. The ICRC is shown as tshark shows it: the four bytes on the wire
// read as a big-endian number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

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
};

[[nodiscard]] FrameReport analyse_frame(std::size_t index, std::span<const std::uint8_t> frame);
[[nodiscard]] std::string report_text(const FrameReport& r);
[[nodiscard]] nlohmann::ordered_json report_json(const FrameReport& r);

}  // namespace uroce::tools
