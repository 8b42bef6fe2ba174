// The text form of a rule (docs/fault-injection.md):
//
//   ACTION[:KEY=VALUE[,KEY=VALUE...]]
//
//   drop:rate=5%,dir=both             drop:nth=2,qp=17,class=response,opcode=read_response
//   duplicate:rate=2%                 reorder:rate=2%,depth=8
//   delay:rate=10%,ms=2,jitter=1      corrupt:rate=1%        truncate:nth=3,bytes=60
//   down:ms=500                       silent:peer=10.0.0.2,ms=3000
//
// parse_rule never throws and reads only the text it is given; an error
// names the part of the text that is wrong and what was expected.
// format_rule writes a rule back in the same syntax (parse_rule of its
// output gives the same rule).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rule.h"

namespace uroce::fault {

// Longest rule text accepted (the control message carries this many bytes).
constexpr std::size_t kMaxRuleText = 240;

struct ParsedRule {
    std::optional<Rule> rule;
    std::string error;  // when !rule: what is wrong, e.g. "rate=150%: a percentage from 0 to 100"
};

[[nodiscard]] ParsedRule parse_rule(std::string_view text);

[[nodiscard]] std::string format_rule(const Rule& rule);

}  // namespace uroce::fault
