// The rule text syntax (fault/rule_parse.h): what it accepts, what each key
// sets, and the error for each kind of bad input.
#include <gtest/gtest.h>

#include "fault/rule_parse.h"

namespace uroce::fault {
namespace {

Rule must_parse(std::string_view text) {
    const ParsedRule p = parse_rule(text);
    EXPECT_TRUE(p.rule.has_value()) << text << ": " << p.error;
    return p.rule.value_or(Rule{});
}

std::string error_of(std::string_view text) {
    const ParsedRule p = parse_rule(text);
    EXPECT_FALSE(p.rule.has_value()) << text << " was accepted";
    return p.error;
}

TEST(RuleParse, DropAtARateBothWays) {
    const Rule r = must_parse("drop:rate=5%,dir=both");
    EXPECT_EQ(r.action, Action::Drop);
    EXPECT_EQ(r.trigger.kind, TriggerKind::Rate);
    EXPECT_EQ(r.trigger.ppm, 50'000u);
    EXPECT_EQ(r.filter.directions, Directions::Both);
}

TEST(RuleParse, NthWithEveryFilter) {
    const Rule r = must_parse("drop:nth=2,count=3,qp=5,src_qp=1,class=response,opcode=read_response,peer=10.0.0.2,dir=rx");
    EXPECT_EQ(r.trigger.kind, TriggerKind::Nth);
    EXPECT_EQ(r.trigger.nth, 2u);
    EXPECT_EQ(r.trigger.count, 3u);
    EXPECT_EQ(r.filter.dest_qp, 5u);
    EXPECT_EQ(r.filter.src_qp, 1u);
    EXPECT_EQ(r.filter.frame_class, FrameClass::Response);
    EXPECT_EQ(r.filter.operation, wire::Operation::RdmaReadResponse);
    EXPECT_EQ(r.filter.peer, wire::ipv4_mapped({10, 0, 0, 2}));
    EXPECT_EQ(r.filter.directions, Directions::Rx);
}

TEST(RuleParse, EachActionWithItsParameters) {
    EXPECT_EQ(must_parse("reorder:rate=2%,depth=8").depth, 8u);
    const Rule d = must_parse("delay:rate=10%,ms=2,jitter=0.5");
    EXPECT_EQ(d.delay, std::chrono::milliseconds(2));
    EXPECT_EQ(d.jitter, std::chrono::microseconds(500));
    EXPECT_EQ(must_parse("corrupt:rate=1%").action, Action::Corrupt);
    EXPECT_EQ(must_parse("truncate:nth=1,bytes=60").keep_bytes, 60u);
    EXPECT_EQ(must_parse("duplicate:rate=0.5").trigger.ppm, 5'000u);  // the % sign is optional
    const Rule down = must_parse("down:ms=500");
    EXPECT_EQ(down.trigger.kind, TriggerKind::Window);
    EXPECT_EQ(down.window, std::chrono::milliseconds(500));
    EXPECT_FALSE(must_parse("down").window.has_value());  // until removed
    const Rule silent = must_parse("silent:peer=2001:db8::2,ms=3000");
    EXPECT_EQ(silent.action, Action::PeerSilent);
    EXPECT_TRUE(silent.filter.peer.has_value());
}

TEST(RuleParse, FormatParsesBackToTheSameRule) {
    for (const char* text : {"drop:rate=5%", "drop:nth=2,count=3,dir=rx,class=response,qp=5,opcode=read_response",
                             "reorder:rate=2%,depth=8", "delay:rate=10%,ms=2,jitter=1", "corrupt:rate=1%",
                             "truncate:nth=3,bytes=60", "down:ms=500", "silent:peer=10.0.0.2,ms=3000",
                             "duplicate:rate=0.0001%,src_qp=1,peer=2001:db8::1", "down:ms=56666666",
                             "delay:rate=12.3456%,ms=0.000001,jitter=0.000001"}) {
        const std::string once = format_rule(must_parse(text));
        EXPECT_EQ(format_rule(must_parse(once)), once) << text;
    }
    EXPECT_EQ(format_rule(must_parse("drop:dir=both,rate=5")), "drop:rate=5%");
    EXPECT_EQ(format_rule(must_parse("down:ms=56666666")), "down:ms=56666666");  // no exponent: it would not parse back
    EXPECT_EQ(format_rule(must_parse("delay:rate=0.25,ms=1.5")), "delay:rate=0.25%,ms=1.5");
}

struct BadRule {
    const char* text;
    const char* error_part;  // what the error must say
};

class RuleParseErrors : public testing::TestWithParam<BadRule> {};

TEST_P(RuleParseErrors, NamesTheProblem) {
    const std::string e = error_of(GetParam().text);
    EXPECT_NE(e.find(GetParam().error_part), std::string::npos) << GetParam().text << " -> " << e;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, RuleParseErrors,
    testing::Values(BadRule{"", "empty rule"}, BadRule{"explode:rate=1%", "'explode': not an action"},
                    BadRule{"drop", "exactly one trigger"}, BadRule{"drop:rate=1%,nth=2", "exactly one trigger"},
                    BadRule{"drop:rate=150%", "at most 100"}, BadRule{"drop:rate=0", "above 0"},
                    BadRule{"drop:rate=abc", "percentage"}, BadRule{"drop:rate=-1%", "percentage"},
                    BadRule{"drop:nth=0", "counting from 1"}, BadRule{"drop:nth=1x", "counting from 1"},
                    BadRule{"drop:rate=1%,count=0", "at least 1"}, BadRule{"drop:rate=1%,dir=up", "rx, tx, both"},
                    BadRule{"drop:rate=1%,class=data", "request, response"},
                    BadRule{"drop:rate=1%,qp=16777216", "QP number"}, BadRule{"drop:rate=1%,opcode=jump", "read_response"},
                    BadRule{"drop:rate=1%,peer=10.0.0", "IPv4 or IPv6"}, BadRule{"drop:rate=1%,colour=red", "not a key"},
                    BadRule{"drop:rate=1%,rate=2%", "given twice"}, BadRule{"drop:rate=1%,qp", "KEY=VALUE"},
                    BadRule{"reorder:rate=1%", "needs depth"}, BadRule{"reorder:rate=1%,depth=0", "from 1 to 4096"},
                    BadRule{"drop:rate=1%,depth=3", "reorder only"}, BadRule{"delay:rate=1%", "needs ms"},
                    BadRule{"delay:rate=1%,ms=1,jitter=2", "larger than ms"}, BadRule{"delay:rate=1%,ms=nan", "milliseconds"},
                    BadRule{"delay:rate=1%,ms=1e9", "milliseconds"}, BadRule{"drop:rate=1%,jitter=1", "delay only"},
                    BadRule{"drop:rate=1%,bytes=10", "truncate only"}, BadRule{"truncate:rate=1%,bytes=0", "from 1"},
                    BadRule{"down:rate=1%", "does not apply"}, BadRule{"down:peer=10.0.0.1", "silent:peer"},
                    BadRule{"silent:ms=10", "needs peer"}, BadRule{"corrupt:rate=1%,ms=3", "ms= applies"}));

TEST(RuleParse, RefusesOverlongText) {
    const std::string rule = "drop:rate=1%" + std::string(kMaxRuleText, ' ');
    EXPECT_NE(error_of(rule).find("at most"), std::string::npos);
}

}  // namespace
}  // namespace uroce::fault
