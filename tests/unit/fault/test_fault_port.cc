// The port decorator (net/fault_port.h) on the in-process loopback port:
// each action on real frames, held frames released by count and by time,
// the drop observer, and nothing changed without rules.
#include <gtest/gtest.h>

#include <thread>

#include "fault/rule_parse.h"
#include "frames.h"
#include "net/fault_port.h"
#include "net/loopback_port.h"
#include "wire/parse.h"

namespace uroce::net {
namespace {

using namespace std::chrono_literals;
using fault::test::FrameSpec;
using fault::test::roce_frame;

fault::Rule rule(std::string_view text) {
    const fault::ParsedRule p = fault::parse_rule(text);
    EXPECT_TRUE(p.rule) << p.error;
    return p.rule.value_or(fault::Rule{});
}

class FaultPortTest : public testing::Test {
protected:
    FaultPortTest() : loop_(LoopbackConfig{}), port_(loop_, 1) {}

    void send(const std::vector<std::uint8_t>& f) {
        ASSERT_TRUE(port_.send(f));
    }
    // Every frame received now, as copies (released at once).
    std::vector<std::vector<std::uint8_t>> receive_all() {
        std::vector<std::vector<std::uint8_t>> out;
        std::array<RxFrame, 8> rx{};
        for (;;) {
            const std::size_t n = port_.receive(rx);
            for (std::size_t i = 0; i < n; ++i) {
                out.emplace_back(rx[i].bytes.begin(), rx[i].bytes.end());
            }
            port_.release(std::span(rx.data(), n));
            if (n == 0) {
                return out;
            }
        }
    }
    // A frame built in the lent room, as the engine builds its own.
    void send_in_room(const std::vector<std::uint8_t>& f) {
        const std::span<std::uint8_t> room = port_.tx_room();
        ASSERT_GE(room.size(), f.size());
        std::copy(f.begin(), f.end(), room.begin());
        ASSERT_TRUE(port_.send(room.first(f.size())));
    }
    // Whether each frame received now came vouched for (RxFrame::icrc_vouched).
    std::vector<bool> receive_vouches() {
        std::vector<bool> out;
        std::array<RxFrame, 8> rx{};
        for (std::size_t n = port_.receive(rx); n > 0; n = port_.receive(rx)) {
            for (std::size_t i = 0; i < n; ++i) {
                out.push_back(rx[i].icrc_vouched);
            }
            port_.release(std::span(rx.data(), n));
        }
        return out;
    }
    std::vector<std::uint32_t> psns(const std::vector<std::vector<std::uint8_t>>& frames) {
        std::vector<std::uint32_t> out;
        for (const auto& f : frames) {
            const wire::ParseResult r = wire::parse_frame(f);
            EXPECT_TRUE(r.ok());
            out.push_back(r.ok() ? r.packet.psn().value() : 0xFFFFFFFF);
        }
        return out;
    }

    LoopbackPort loop_;
    FaultPort port_;
};

TEST_F(FaultPortTest, WithoutRulesFramesPassUnchanged) {
    const auto f = roce_frame({.psn = 7});
    send(f);
    port_.flush();
    const auto got = receive_all();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], f);
    EXPECT_FALSE(port_.next_deadline().has_value());
}

TEST_F(FaultPortTest, DropTellsTheObserver) {
    port_.add_rule(rule("drop:nth=2,dir=tx"));
    std::vector<std::pair<fault::Direction, std::string>> seen;
    port_.set_drop_observer([&](fault::Direction way, std::span<const std::uint8_t> frame, std::string_view r) {
        EXPECT_EQ(wire::parse_frame(frame).packet.psn().value(), 2u);
        seen.emplace_back(way, std::string(r));
    });
    for (std::uint32_t psn = 1; psn <= 3; ++psn) {
        send(roce_frame({.psn = psn}));
    }
    port_.flush();
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{1, 3}));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].first, fault::Direction::Tx);
    EXPECT_EQ(seen[0].second, "drop:nth=2,dir=tx");
}

TEST_F(FaultPortTest, DropOnReceive) {
    port_.add_rule(rule("drop:nth=1,dir=rx"));
    send(roce_frame({.psn = 1}));
    send(roce_frame({.psn = 2}));
    port_.flush();
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{2}));
}

TEST_F(FaultPortTest, DuplicateBothWays) {
    port_.add_rule(rule("duplicate:nth=1,dir=tx"));
    port_.add_rule(rule("duplicate:nth=1,dir=rx"));
    send(roce_frame({.psn = 1}));
    port_.flush();
    // Sent twice, and the first of the two received twice.
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{1, 1, 1}));
}

TEST_F(FaultPortTest, ReorderReleasesAfterDepthLaterFrames) {
    port_.add_rule(rule("reorder:nth=1,depth=2,dir=tx"));
    for (std::uint32_t psn = 1; psn <= 4; ++psn) {
        send(roce_frame({.psn = psn}));
        port_.flush();
    }
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{2, 3, 1, 4}));
    EXPECT_EQ(port_.held(), 0u);
}

TEST_F(FaultPortTest, ReorderedFrameOnAQuietLinkGoesAfterItsLongestHold) {
    port_.add_rule(rule("reorder:nth=1,depth=8,ms=1,dir=rx"));
    send(roce_frame({.psn = 1}));
    port_.flush();
    EXPECT_TRUE(receive_all().empty());
    ASSERT_TRUE(port_.next_deadline().has_value());
    const auto deadline = fault::Clock::now() + 2s;
    std::vector<std::vector<std::uint8_t>> got;
    while (got.empty() && fault::Clock::now() < deadline) {
        std::this_thread::sleep_until(*port_.next_deadline());
        got = receive_all();
    }
    EXPECT_EQ(psns(got), (std::vector<std::uint32_t>{1}));
}

TEST_F(FaultPortTest, DelayHoldsUntilDue) {
    port_.add_rule(rule("delay:nth=1,ms=5,dir=tx"));
    const auto sent = fault::Clock::now();
    send(roce_frame({.psn = 1}));
    send(roce_frame({.psn = 2}));
    port_.flush();
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{2}));
    ASSERT_TRUE(port_.next_deadline().has_value());
    EXPECT_GE(*port_.next_deadline(), sent + 5ms);
    const auto deadline = fault::Clock::now() + 2s;
    std::vector<std::vector<std::uint8_t>> got;
    while (got.empty() && fault::Clock::now() < deadline) {
        std::this_thread::sleep_until(*port_.next_deadline());
        port_.flush();
        got = receive_all();
    }
    EXPECT_EQ(psns(got), (std::vector<std::uint32_t>{1}));
    EXPECT_GE(fault::Clock::now() - sent, 5ms);
}

TEST_F(FaultPortTest, CorruptedFrameParsesButFailsItsIcrc) {
    port_.add_rule(rule("corrupt:rate=100%,dir=rx"));
    for (std::uint32_t psn = 0; psn < 50; ++psn) {
        send(roce_frame({.psn = psn}));
    }
    port_.flush();
    const auto got = receive_all();
    ASSERT_EQ(got.size(), 50u);
    for (const auto& f : got) {
        const wire::ParseResult r = wire::parse_and_verify(f);
        EXPECT_EQ(r.status, wire::ParseStatus::BadIcrc);
        EXPECT_EQ(wire::parse_frame(f).packet.dest_qp(), 17u);  // still reaches its QP
    }
}

// A frame a rule changed or copied never reaches the engine vouched for, so
// its ICRC is checked (the loopback port vouches only for its untouched room).
TEST_F(FaultPortTest, OnlyUntouchedRoomFramesArriveVouchedFor) {
    send_in_room(roce_frame({.psn = 1}));
    port_.flush();
    EXPECT_EQ(receive_vouches(), std::vector<bool>{true});
    for (const char* text : {"corrupt:rate=100%,dir=tx", "corrupt:rate=100%,dir=rx", "truncate:nth=1,bytes=40,dir=tx",
                             "truncate:nth=1,bytes=40,dir=rx"}) {
        const std::uint32_t id = port_.add_rule(rule(text));
        send_in_room(roce_frame({.psn = 2}));
        port_.flush();
        const std::vector<bool> got = receive_vouches();
        ASSERT_FALSE(got.empty()) << text;
        EXPECT_FALSE(got.back()) << text << ": the rule's copy";
        port_.remove_rule(id);
    }
}

// The ICRC is unread (the engine may leave it out) only while no rule is
// engaged; sealing fills it in for the frames the loopback port holds.
TEST_F(FaultPortTest, TheIcrcIsUnreadOnlyWithoutRulesAndSealingFillsItIn) {
    EXPECT_TRUE(port_.icrc_unread());
    auto f = roce_frame({.psn = 3});
    const std::size_t icrc_at = wire::parse_frame(f).packet.icrc_offset();
    std::fill_n(f.begin() + static_cast<std::ptrdiff_t>(icrc_at), 4, std::uint8_t{0});  // built with Icrc::LeaveOut
    ASSERT_EQ(wire::parse_and_verify(f).status, wire::ParseStatus::BadIcrc);
    send_in_room(f);
    port_.flush();  // now in the receive queue
    const std::uint32_t id = port_.add_rule(rule("drop:nth=1000,dir=tx"));
    EXPECT_FALSE(port_.icrc_unread());
    port_.seal_icrcs();
    const auto got = receive_all();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(wire::parse_and_verify(got[0]).ok());
    port_.remove_rule(id);
    EXPECT_TRUE(port_.icrc_unread());
}

TEST_F(FaultPortTest, TruncatedFrameIsShorter) {
    port_.add_rule(rule("truncate:nth=1,bytes=40,dir=tx"));
    send(roce_frame({.psn = 1}));
    port_.flush();
    const auto got = receive_all();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].size(), 40u);
    EXPECT_FALSE(wire::parse_frame(got[0]).ok());
}

TEST_F(FaultPortTest, ClearingRulesReturnsToTheFastPath) {
    const auto id = port_.add_rule(rule("drop:rate=100%"));
    send(roce_frame({.psn = 1}));
    port_.flush();
    EXPECT_TRUE(receive_all().empty());
    EXPECT_TRUE(port_.remove_rule(id));
    send(roce_frame({.psn = 2}));
    port_.flush();
    EXPECT_EQ(psns(receive_all()), (std::vector<std::uint32_t>{2}));
}

TEST_F(FaultPortTest, LinkDownDropsBothWays) {
    port_.add_rule(rule("down"));
    int dropped = 0;
    port_.set_drop_observer([&](fault::Direction, std::span<const std::uint8_t>, std::string_view) { ++dropped; });
    send(roce_frame({.psn = 1}));
    send(fault::test::arp_frame());
    port_.flush();
    EXPECT_TRUE(receive_all().empty());
    EXPECT_EQ(dropped, 2);
}

}  // namespace
}  // namespace uroce::net
