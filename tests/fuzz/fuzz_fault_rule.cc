// libFuzzer target for the fault-injection rule parser (fault/rule_parse.h)
// and the injector's decisions (fault/injector.h).
//
// The input is a rule's text, optionally followed by a NUL and one frame.
// The parser must never crash; a rule it accepts must come back unchanged
// through format_rule and parse_rule (what `uroce fault list` shows can be
// pasted back); and the injector's decision on the frame must stay inside
// it: a corrupted byte within the frame, a truncation shorter than it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "fault/injector.h"
#include "fault/rule_parse.h"

namespace {

using namespace uroce::fault;

void require(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto* text = reinterpret_cast<const char*>(data);
    const void* nul = std::memchr(data, 0, size);
    const std::size_t text_size = nul != nullptr ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - data) : size;
    const ParsedRule parsed = parse_rule(std::string_view(text, text_size));
    require(parsed.rule.has_value() != !parsed.error.empty());
    if (!parsed.rule) {
        return 0;
    }
    const std::string formatted = format_rule(*parsed.rule);
    const ParsedRule again = parse_rule(formatted);
    require(again.rule.has_value());
    require(format_rule(*again.rule) == formatted);
    if (nul == nullptr) {
        return 0;
    }
    const std::span<const std::uint8_t> frame(data + text_size + 1, size - text_size - 1);
    Injector injector(7);
    injector.add(*parsed.rule, Clock::time_point{});
    for (int i = 0; i < 3; ++i) {
        const Decision d = injector.decide(i % 2 == 0 ? Direction::Rx : Direction::Tx, frame, Clock::time_point{});
        if (d.verdict == Verdict::Corrupt) {
            require(d.corrupt_offset < frame.size() && d.corrupt_xor != 0);
        }
        if (d.verdict == Verdict::Truncate) {
            require(d.keep_bytes < frame.size());
        }
    }
    return 0;
}
