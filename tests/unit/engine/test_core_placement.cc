// QP placement and frame steering over engine threads (engine/core_placement.h):
// every QP on exactly one thread, consecutive QPNs spread evenly, CM and
// multicast frames to the control thread, one thread for all of a QP's frames.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "engine/core_placement.h"

namespace uroce::engine::test {
namespace {

TEST(CorePlacement, OneCoreOwnsEveryQp) {
    for (std::uint32_t qpn : {2u, 17u, 0x123456u, 0xFFFFFEu}) {
        EXPECT_EQ(core_of(Qpn{qpn}, 1), 0u);
        EXPECT_EQ(steer_roce(qpn, 1), (Steering{FrameOwner::Engine, 0}));
    }
}

TEST(CorePlacement, EightConsecutiveQpsSpreadEvenlyOverTwoAndFourCores) {
    for (std::uint32_t cores : {2u, 4u}) {
        std::array<std::uint32_t, kMaxEngineCores> per_core{};
        for (std::uint32_t qpn = 0x11; qpn < 0x11 + 8; ++qpn) {
            const std::uint32_t core = core_of(Qpn{qpn}, cores);
            ASSERT_LT(core, cores);
            ++per_core[core];
        }
        for (std::uint32_t c = 0; c < cores; ++c) {
            EXPECT_EQ(per_core[c], 8 / cores) << "core " << c << " of " << cores;
        }
    }
}

TEST(CorePlacement, EveryFrameOfAQpGoesToTheThreadThatOwnsIt) {
    constexpr std::uint32_t kCores = 3;
    for (std::uint32_t qpn = 2; qpn < 200; ++qpn) {
        const Steering s = steer_roce(qpn, kCores);
        EXPECT_EQ(s.owner, FrameOwner::Engine);
        EXPECT_EQ(s.core, core_of(Qpn{qpn}, kCores));
    }
}

TEST(CorePlacement, CmMulticastAndOtherFramesGoToTheControlThread) {
    for (std::uint32_t cores : {1u, 2u, 8u}) {
        EXPECT_EQ(steer_roce(kGsiQpNumber, cores).owner, FrameOwner::Control);
        EXPECT_EQ(steer_roce(kMulticastQpNumber, cores).owner, FrameOwner::Control);
    }
    EXPECT_EQ(steer_other().owner, FrameOwner::Control);
}

}  // namespace
}  // namespace uroce::engine::test
