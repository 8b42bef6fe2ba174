#include <gtest/gtest.h>

#include <cstdint>

#include "wire/psn.h"

namespace uroce::wire {
namespace {

TEST(Psn, MasksTo24Bits) {
    EXPECT_EQ(Psn(0x12345678).value(), 0x345678u);
    EXPECT_EQ(Psn(0xFFFFFFFF).value(), 0xFFFFFFu);
    EXPECT_EQ(Psn(0x01000000).value(), 0u);
    EXPECT_EQ(Psn().value(), 0u);
    EXPECT_EQ(Psn::kMask, 0xFFFFFFu);
    EXPECT_EQ(Psn::kModulus, 1u << 24);
}

TEST(Psn, IncrementWraps) {
    Psn p(0xFFFFFE);
    ++p;
    EXPECT_EQ(p.value(), 0xFFFFFFu);
    ++p;
    EXPECT_EQ(p.value(), 0u);
    ++p;
    EXPECT_EQ(p.value(), 1u);
    EXPECT_EQ((Psn(0xFFFFFF) + 1).value(), 0u);
    EXPECT_EQ((Psn(0xFFFFF0) + 0x20).value(), 0x10u);
    EXPECT_EQ((Psn(5) + 0x1000000).value(), 5u);
    Psn q(0xFFFFFF);
    q += 3;
    EXPECT_EQ(q.value(), 2u);
}

TEST(Psn, SubtractWraps) {
    EXPECT_EQ((Psn(0) - 1).value(), 0xFFFFFFu);
    EXPECT_EQ((Psn(2) - 5).value(), 0xFFFFFDu);
    EXPECT_EQ((Psn(100) - 100).value(), 0u);
}

TEST(Psn, DistanceIsSignedAcrossTheWrap) {
    EXPECT_EQ(distance(Psn(1), Psn(0xFFFFFF)), 2);
    EXPECT_EQ(distance(Psn(0xFFFFFF), Psn(1)), -2);
    EXPECT_EQ(distance(Psn(0), Psn(0xFFFFFF)), 1);
    EXPECT_EQ(distance(Psn(0xFFFFFF), Psn(0)), -1);
    EXPECT_EQ(distance(Psn(0), Psn(0x800000)), -0x800000);
    EXPECT_EQ(distance(Psn(0x800000), Psn(0)), -0x800000);
    EXPECT_EQ(distance(Psn(0x7FFFFF), Psn(0)), 0x7FFFFF);
    EXPECT_EQ(distance(Psn(0), Psn(0x7FFFFF)), -0x7FFFFF);
    EXPECT_EQ(distance(Psn(1000), Psn(10)), 990);
    EXPECT_EQ(distance(Psn(10), Psn(1000)), -990);
    EXPECT_EQ(distance(Psn(0x123456), Psn(0x123456)), 0);
}

TEST(Psn, DistanceMatchesModularDifference) {
    const std::uint32_t bases[] = {0, 1, 0x7FFFFF, 0x800000, 0x800001, 0xFFFFFE, 0xFFFFFF, 0x3A5C7E};
    const std::int32_t steps[] = {0, 1, -1, 2, -2, 1000, -1000, 0x7FFFFF, -0x7FFFFF, -0x800000};
    for (std::uint32_t b : bases) {
        for (std::int32_t d : steps) {
            const Psn base(b);
            const Psn moved(static_cast<std::uint32_t>(static_cast<std::int64_t>(b) + d + 0x1000000) & 0xFFFFFF);
            EXPECT_EQ(distance(moved, base), d) << "base " << b << " step " << d;
            EXPECT_EQ(moved == base, d == 0);
            EXPECT_EQ(moved > base, d > 0);
            EXPECT_EQ(moved < base, d < 0);
            EXPECT_EQ(moved >= base, d >= 0);
            EXPECT_EQ(moved <= base, d <= 0);
        }
    }
}

TEST(Psn, ComparisonsAcrossTheWrap) {
    EXPECT_TRUE(Psn(0) > Psn(0xFFFFFF));
    EXPECT_TRUE(Psn(0xFFFFFF) < Psn(0));
    EXPECT_TRUE(Psn(5) > Psn(0xFFFFF0));
    EXPECT_FALSE(Psn(5) < Psn(0xFFFFF0));
    EXPECT_TRUE(Psn(0xFFFFF0) <= Psn(5));
    EXPECT_TRUE(Psn(5) >= Psn(5));
    EXPECT_TRUE(Psn(5) <= Psn(5));
    EXPECT_FALSE(Psn(5) < Psn(5));
    EXPECT_FALSE(Psn(5) > Psn(5));
    EXPECT_TRUE(Psn(10) < Psn(11));
    EXPECT_TRUE(Psn(0x1000005) == Psn(5));
    EXPECT_TRUE(Psn(6) != Psn(5));
}

TEST(Psn, HalfRangeBoundary) {
    EXPECT_TRUE(Psn(0x7FFFFF) > Psn(0));
    EXPECT_TRUE(Psn(0x800000) < Psn(0));
    EXPECT_TRUE(Psn(0x800000 + 10) < Psn(10));
    EXPECT_TRUE(Psn(0x7FFFFF + 10) > Psn(10));
    EXPECT_TRUE(Psn(0xFFFFFF) + 0x7FFFFF > Psn(0xFFFFFF));
    EXPECT_TRUE(Psn(0xFFFFFF) + 0x800000 < Psn(0xFFFFFF));
}

}  // namespace
}  // namespace uroce::wire
