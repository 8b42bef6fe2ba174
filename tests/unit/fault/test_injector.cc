// The injector's decisions (fault/injector.h): each action, the triggers,
// the filters, windows, and that a seed reproduces every decision.
#include <gtest/gtest.h>

#include "fault/injector.h"
#include "fault/rule_parse.h"
#include "frames.h"

namespace uroce::fault {
namespace {

using namespace std::chrono_literals;
using test::FrameSpec;
using test::roce_frame;

const Clock::time_point kStart{};

Rule rule(std::string_view text) {
    const ParsedRule p = parse_rule(text);
    EXPECT_TRUE(p.rule) << p.error;
    return p.rule.value_or(Rule{});
}

std::vector<Verdict> verdicts(Injector& in, const std::vector<std::uint8_t>& frame, int n,
                              Direction way = Direction::Rx) {
    std::vector<Verdict> out;
    for (int i = 0; i < n; ++i) {
        out.push_back(in.decide(way, frame, kStart).verdict);
    }
    return out;
}

TEST(Injector, NoRulesPassesEverything) {
    Injector in;
    EXPECT_FALSE(in.armed());
    EXPECT_EQ(in.decide(Direction::Rx, roce_frame({}), kStart).verdict, Verdict::Pass);
}

TEST(Injector, TheSameSeedGivesTheSameDecisions) {
    const auto frame = roce_frame({});
    auto run = [&](std::uint64_t seed) {
        Injector in(seed);
        in.add(rule("drop:rate=30%"), kStart);
        in.add(rule("duplicate:rate=30%"), kStart);
        return verdicts(in, frame, 2000);
    };
    const auto a = run(42);
    EXPECT_EQ(run(42), a);
    EXPECT_NE(run(43), a);
    const auto drops = std::count(a.begin(), a.end(), Verdict::Drop);
    EXPECT_GT(drops, 2000 * 0.25);  // 30% of 2000 is 600; SplitMix64 is uniform enough
    EXPECT_LT(drops, 2000 * 0.35);
}

TEST(Injector, ReseedReplaysTheSameDecisions) {
    const auto frame = roce_frame({});
    Injector in(5);
    in.add(rule("drop:rate=50%"), kStart);
    const auto first = verdicts(in, frame, 100);
    in.reseed(5);
    EXPECT_EQ(in.rules()[0].counters.seen, 0u);
    EXPECT_EQ(verdicts(in, frame, 100), first);
}

TEST(Injector, AddingARuleDoesNotChangeAnotherRulesStream) {
    const auto tx = roce_frame({});
    Injector alone(9);
    alone.add(rule("drop:rate=50%,dir=tx"), kStart);
    Injector with_other(9);
    with_other.add(rule("drop:rate=50%,dir=tx"), kStart);
    with_other.add(rule("duplicate:rate=50%,dir=rx"), kStart);  // sees only rx frames
    EXPECT_EQ(verdicts(alone, tx, 200, Direction::Tx), verdicts(with_other, tx, 200, Direction::Tx));
}

TEST(Injector, NthActsOnTheNthMatchingFrameOnly) {
    Injector in;
    in.add(rule("drop:nth=3,qp=5"), kStart);
    const auto qp5 = roce_frame({.dest_qp = 5});
    const auto qp6 = roce_frame({.dest_qp = 6});
    EXPECT_EQ(in.decide(Direction::Rx, qp6, kStart).verdict, Verdict::Pass);  // not counted
    EXPECT_EQ(verdicts(in, qp5, 5),
              (std::vector<Verdict>{Verdict::Pass, Verdict::Pass, Verdict::Drop, Verdict::Pass, Verdict::Pass}));
    EXPECT_EQ(in.rules()[0].counters.seen, 3u);  // done after its one frame: sees no more
    EXPECT_EQ(in.rules()[0].counters.injected, 1u);
    EXPECT_EQ(in.rules()[0].state, RuleState::Done);
}

TEST(Injector, NthWithACountActsOnConsecutiveFrames) {
    Injector in;
    in.add(rule("drop:nth=2,count=2"), kStart);
    EXPECT_EQ(verdicts(in, roce_frame({}), 5),
              (std::vector<Verdict>{Verdict::Pass, Verdict::Drop, Verdict::Drop, Verdict::Pass, Verdict::Pass}));
}

TEST(Injector, RateWithACountStopsAfterIt) {
    Injector in;
    in.add(rule("drop:rate=100%,count=4"), kStart);
    const auto v = verdicts(in, roce_frame({}), 10);
    EXPECT_EQ(std::count(v.begin(), v.end(), Verdict::Drop), 4);
    EXPECT_EQ(in.totals()[static_cast<std::size_t>(Action::Drop)], 4u);
}

TEST(Injector, DirectionFilter) {
    Injector in;
    in.add(rule("drop:rate=100%,dir=tx"), kStart);
    EXPECT_EQ(in.decide(Direction::Rx, roce_frame({}), kStart).verdict, Verdict::Pass);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({}), kStart).verdict, Verdict::Drop);
}

TEST(Injector, ClassesComeFromTheOpcodeTableAndTheAeth) {
    struct Case {
        FrameSpec spec;
        FrameClass expected;
    };
    const std::uint8_t ack = wire::make_syndrome(wire::AckKind::Ack, 0x1F);
    const std::uint8_t nak = wire::make_syndrome(wire::AckKind::Nak, 0);
    const std::uint8_t rnr = wire::make_syndrome(wire::AckKind::RnrNak, 3);
    const Case cases[] = {
        {{.opcode = wire::opcode::kRcSendOnly}, FrameClass::Request},
        {{.opcode = wire::opcode::kRcRdmaReadRequest}, FrameClass::Request},
        {{.opcode = wire::opcode::kRcFetchAdd}, FrameClass::Request},
        {{.opcode = wire::opcode::kRcRdmaReadResponseFirst, .syndrome = ack}, FrameClass::Response},
        {{.opcode = wire::opcode::kRcAtomicAcknowledge, .syndrome = ack}, FrameClass::Response},
        {{.opcode = wire::opcode::kRcAcknowledge, .syndrome = ack}, FrameClass::Ack},
        {{.opcode = wire::opcode::kRcAcknowledge, .syndrome = nak}, FrameClass::Nak},
        {{.opcode = wire::opcode::kRcAcknowledge, .syndrome = rnr}, FrameClass::Nak},
        {{.opcode = wire::opcode::kUdSendOnly, .dest_qp = 1}, FrameClass::Cm},
    };
    for (const Case& c : cases) {
        const FrameFacts f = classify(roce_frame(c.spec));
        EXPECT_TRUE(f.roce);
        EXPECT_EQ(f.frame_class, c.expected) << wire::opcode_info(c.spec.opcode).name_view();
    }
    EXPECT_FALSE(classify(test::arp_frame()).roce);
}

TEST(Injector, OpcodeAndPeerFilters) {
    Injector in;
    in.add(rule("drop:rate=100%,opcode=read,peer=10.0.0.9"), kStart);
    const auto read_from_9 = roce_frame({.opcode = wire::opcode::kRcRdmaReadRequest, .src = test::ip4(10, 0, 0, 9)});
    const auto read_from_1 = roce_frame({.opcode = wire::opcode::kRcRdmaReadRequest});
    const auto send_from_9 = roce_frame({.src = test::ip4(10, 0, 0, 9)});
    EXPECT_EQ(in.decide(Direction::Rx, read_from_9, kStart).verdict, Verdict::Drop);
    EXPECT_EQ(in.decide(Direction::Rx, read_from_1, kStart).verdict, Verdict::Pass);
    EXPECT_EQ(in.decide(Direction::Rx, send_from_9, kStart).verdict, Verdict::Pass);
    // tx: the peer is the destination
    const auto read_to_9 = roce_frame({.opcode = wire::opcode::kRcRdmaReadRequest, .dst = test::ip4(10, 0, 0, 9)});
    EXPECT_EQ(in.decide(Direction::Tx, read_to_9, kStart).verdict, Verdict::Drop);
}

TEST(Injector, CorruptChangesOneByteUnderTheIcrcAfterTheDestinationQp) {
    Injector in(3);
    in.add(rule("corrupt:rate=100%"), kStart);
    const auto frame = roce_frame({});
    const FrameFacts facts = classify(frame);
    for (int i = 0; i < 200; ++i) {
        const Decision d = in.decide(Direction::Rx, frame, kStart);
        ASSERT_EQ(d.verdict, Verdict::Corrupt);
        EXPECT_GE(d.corrupt_offset, facts.corrupt_first);
        EXPECT_LT(d.corrupt_offset, facts.corrupt_end);
        EXPECT_NE(d.corrupt_xor, 0);
    }
}

TEST(Injector, TruncateKeepsTheGivenBytesOrHalf) {
    Injector in;
    in.add(rule("truncate:nth=1,bytes=60"), kStart);
    in.add(rule("truncate:rate=100%"), kStart);
    const auto frame = roce_frame({});
    EXPECT_EQ(in.decide(Direction::Rx, frame, kStart).keep_bytes, 60u);
    EXPECT_EQ(in.decide(Direction::Rx, frame, kStart).keep_bytes, frame.size() / 2);
}

TEST(Injector, DelayAndReorderHold) {
    Injector in(11);
    in.add(rule("delay:nth=1,ms=2,jitter=1"), kStart);
    in.add(rule("reorder:nth=1,depth=8"), kStart);  // its first frame is the second: the delay took the first
    const auto frame = roce_frame({});
    const Decision delay = in.decide(Direction::Rx, frame, kStart);
    EXPECT_EQ(delay.verdict, Verdict::Hold);
    EXPECT_EQ(delay.hold_frames, 0u);
    EXPECT_GE(delay.hold_until, kStart + 1ms);
    EXPECT_LE(delay.hold_until, kStart + 3ms);
    const Decision reorder = in.decide(Direction::Rx, frame, kStart);
    EXPECT_EQ(reorder.verdict, Verdict::Hold);
    EXPECT_EQ(reorder.hold_frames, 8u);
    EXPECT_EQ(reorder.hold_until, kStart + kDefaultReorderHold);
}

TEST(Injector, DuplicateVerdict) {
    Injector in;
    in.add(rule("duplicate:nth=1"), kStart);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({}), kStart).verdict, Verdict::Duplicate);
}

TEST(Injector, DownDropsEverythingForItsWindowThenEnds) {
    Injector in;
    in.add(rule("down:ms=500"), kStart);
    EXPECT_EQ(in.decide(Direction::Rx, test::arp_frame(), kStart + 100ms).verdict, Verdict::Drop);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({}), kStart + 499ms).verdict, Verdict::Drop);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({}), kStart + 500ms).verdict, Verdict::Pass);
    EXPECT_EQ(in.rules()[0].state, RuleState::Done);
    EXPECT_EQ(in.rules()[0].counters.injected, 2u);
}

TEST(Injector, SilentDropsOnlyThePeersFrames) {
    Injector in;
    in.add(rule("silent:peer=10.0.0.2"), kStart);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({.dst = test::ip4(10, 0, 0, 2)}), kStart).verdict, Verdict::Drop);
    EXPECT_EQ(in.decide(Direction::Rx, roce_frame({.src = test::ip4(10, 0, 0, 2)}), kStart).verdict, Verdict::Drop);
    EXPECT_EQ(in.decide(Direction::Tx, roce_frame({.dst = test::ip4(10, 0, 0, 3)}), kStart).verdict, Verdict::Pass);
    EXPECT_EQ(in.decide(Direction::Rx, test::arp_frame(), kStart).verdict, Verdict::Pass);
}

TEST(Injector, OnlyDownActsOnFramesThatAreNotRoce) {
    Injector in;
    in.add(rule("drop:rate=100%"), kStart);
    EXPECT_EQ(in.decide(Direction::Rx, test::arp_frame(), kStart).verdict, Verdict::Pass);
}

TEST(Injector, TheFirstRuleThatFiresDecides) {
    Injector in;
    in.add(rule("duplicate:nth=1"), kStart);
    in.add(rule("drop:rate=100%"), kStart);
    const auto frame = roce_frame({});
    EXPECT_EQ(in.decide(Direction::Rx, frame, kStart).verdict, Verdict::Duplicate);
    EXPECT_EQ(in.rules()[1].counters.seen, 0u);
    EXPECT_EQ(in.decide(Direction::Rx, frame, kStart).verdict, Verdict::Drop);
}

TEST(Injector, RemoveAndClear) {
    Injector in;
    const auto a = in.add(rule("drop:rate=1%"), kStart);
    const auto b = in.add(rule("drop:rate=2%"), kStart);
    EXPECT_NE(a, b);
    EXPECT_TRUE(in.remove(a));
    EXPECT_FALSE(in.remove(a));
    EXPECT_EQ(in.rules().size(), 1u);
    in.clear();
    EXPECT_FALSE(in.armed());
}

}  // namespace
}  // namespace uroce::fault
