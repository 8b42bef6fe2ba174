// MemifRedial (dpdk_port/memif_redial.h): when a memif client port whose
// link is down restarts to dial its server again.
#include "memif_redial.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

namespace uroce::port {
namespace {

using namespace std::chrono_literals;
using Clock = MemifRedial::Clock;

TEST(MemifRedial, AStartThatConnectsNeedsNoDial) {
    const Clock::time_point t0{};
    MemifRedial r(t0);
    EXPECT_EQ(r.check(false, t0 + 10ms), RedialAction::None);  // handshake under way
    EXPECT_EQ(r.check(true, t0 + 20ms), RedialAction::None);   // up: nothing to log
    EXPECT_EQ(r.state(), RedialState::Connected);
    EXPECT_EQ(r.check(true, t0 + 10s), RedialAction::None);
}

TEST(MemifRedial, DialsWithADoublingBoundedDelay) {
    const Clock::time_point t0{};
    MemifRedial r(t0);
    EXPECT_EQ(r.check(false, t0 + MemifRedial::kFirstDelay - 1ms), RedialAction::None);
    Clock::time_point now = t0 + MemifRedial::kFirstDelay;
    std::chrono::milliseconds expected = MemifRedial::kFirstDelay;
    for (unsigned dial = 1; dial <= 10; ++dial) {
        ASSERT_EQ(r.check(false, now), RedialAction::Dial) << "dial " << dial;
        EXPECT_EQ(r.dials(), dial);
        expected = std::min<std::chrono::milliseconds>(expected * 2, MemifRedial::kMaxDelay);
        EXPECT_EQ(r.delay(), expected);
        EXPECT_EQ(r.check(false, now + r.delay() - 1ms), RedialAction::None) << "too early after dial " << dial;
        now += r.delay();
    }
    EXPECT_EQ(r.delay(), MemifRedial::kMaxDelay);  // bounded: at most one dial every 2 s
}

TEST(MemifRedial, ReportsTheReconnectionAndStartsAfresh) {
    const Clock::time_point t0{};
    MemifRedial r(t0);
    ASSERT_EQ(r.check(false, t0 + 50ms), RedialAction::Dial);
    ASSERT_EQ(r.check(false, t0 + 150ms), RedialAction::Dial);
    EXPECT_EQ(r.check(true, t0 + 160ms), RedialAction::Reconnected);
    EXPECT_EQ(r.dials(), 0u);
    EXPECT_EQ(r.delay(), MemifRedial::kFirstDelay);
    EXPECT_EQ(r.check(true, t0 + 170ms), RedialAction::None);  // reported once
}

TEST(MemifRedial, AServerThatWentAwayGetsTheFirstDelayToComeBack) {
    const Clock::time_point t0{};
    MemifRedial r(t0);
    ASSERT_EQ(r.check(true, t0 + 10ms), RedialAction::None);
    const Clock::time_point lost = t0 + 5s;
    EXPECT_EQ(r.check(false, lost), RedialAction::None);
    EXPECT_EQ(r.state(), RedialState::Waiting);
    EXPECT_EQ(r.check(false, lost + MemifRedial::kFirstDelay - 1ms), RedialAction::None);
    EXPECT_EQ(r.check(false, lost + MemifRedial::kFirstDelay), RedialAction::Dial);
    EXPECT_EQ(r.check(true, lost + 1s), RedialAction::Reconnected);
}

}  // namespace
}  // namespace uroce::port
