// ibv_advise_mr(3): which SGEs MrTable::prefetch_target accepts (mlx5's
// rules) and where their bytes are in the client's memory.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

class Prefetch : public MrTest {};

TEST_F(Prefetch, OnDemandMrOfThePdAnswersWithTheClientAddress) {
    const std::uint32_t odp = reg_ok(0, 8192, Access::kLocalWrite | Access::kOnDemand);
    const PrefetchTarget t = table.prefetch_target(kOwner, pd, odp, buf + 100, 200, true);
    EXPECT_EQ(t.error, 0);
    EXPECT_EQ(t.host, buf + 100);
    EXPECT_EQ(table.prefetch_target(kOwner, pd, odp, buf, 8192, false).error, 0) << "the whole MR";
}

TEST_F(Prefetch, OnlyOnDemandMrsOfThePdAndOwnerAreFound) {
    const std::uint32_t pinned = reg_ok(0, 8192, Access::kLocalWrite);
    const std::uint32_t odp = reg_ok(0, 8192, Access::kLocalWrite | Access::kOnDemand);
    EXPECT_EQ(table.prefetch_target(kOwner, pd, pinned, buf, 8, false).error, ENOENT) << "pinned";
    EXPECT_EQ(table.prefetch_target(kOwner, pd + 1, odp, buf, 8, false).error, ENOENT) << "other PD";
    EXPECT_EQ(table.prefetch_target(kOwner + 1, pd, odp, buf, 8, false).error, ENOENT) << "other owner";
    EXPECT_EQ(table.prefetch_target(kOwner, pd, odp ^ 0xFF, buf, 8, false).error, ENOENT) << "stale key";
}

TEST_F(Prefetch, WriteAdviceNeedsAWritableMr) {
    const std::uint32_t ro = reg_ok(0, 8192, Access::kOnDemand);
    EXPECT_EQ(table.prefetch_target(kOwner, pd, ro, buf, 8, true).error, ENOENT);
    EXPECT_EQ(table.prefetch_target(kOwner, pd, ro, buf, 8, false).error, 0);
}

TEST_F(Prefetch, RangeOutsideTheMrIsEfault) {
    const std::uint32_t odp = reg_ok(4096, 8192, Access::kLocalWrite | Access::kOnDemand);
    EXPECT_EQ(table.prefetch_target(kOwner, pd, odp, buf, 8, false).error, EFAULT) << "before";
    EXPECT_EQ(table.prefetch_target(kOwner, pd, odp, buf + 4096 + 8190, 8, false).error, EFAULT) << "past the end";
    EXPECT_EQ(table.prefetch_target(kOwner, pd, odp, buf + 4096, UINT64_MAX, false).error, EFAULT) << "overflow";
}

}  // namespace
}  // namespace uroce::mr
