// Per-client quotas (tools/uroced/client_quota.h): EDQUOT at a client's own
// limit, ENOMEM at the device's budget, releases give room back, a departed
// client's charges all go.
#include <gtest/gtest.h>

#include <cerrno>

#include "client_quota.h"

namespace uroce::daemon {
namespace {

constexpr Charge kRing{1, 1, 4096, 0};

TEST(ClientQuota, EachLimitIsPerClient) {
    ClientQuota q(QuotaLimits{4, 2, 8192, 1}, DeviceBudget{});
    ASSERT_EQ(q.admit(1, kRing), 0);
    q.add(ObjectKind::Cq, 10, 1, kRing);
    q.add(ObjectKind::Cq, 11, 1, kRing);
    EXPECT_EQ(q.admit(1, kRing), EDQUOT);      // mappings (and bytes)
    EXPECT_EQ(q.admit(1, Charge{}), 0);        // an object without a mapping still fits
    EXPECT_EQ(q.admit(1, Charge{1, 0, 0, 2}), EDQUOT);  // fds
    EXPECT_EQ(q.admit(2, kRing), 0);           // another client has its own quota
    q.remove(ObjectKind::Cq, 10);
    EXPECT_EQ(q.admit(1, kRing), 0);
    EXPECT_EQ(q.usage(1).mappings, 1u);
}

TEST(ClientQuota, DeviceBudgetIsSharedAndAnswersEnomem) {
    ClientQuota q(QuotaLimits{}, DeviceBudget{3, 100});
    q.add(ObjectKind::Qp, 1, 1, kRing);
    q.add(ObjectKind::Qp, 2, 1, kRing);
    q.add(ObjectKind::Qp, 3, 2, kRing);
    EXPECT_EQ(q.admit(3, kRing), ENOMEM);
    q.remove_client(1);
    EXPECT_EQ(q.admit(3, kRing), 0);
    EXPECT_EQ(q.usage(1).objects, 0u);
    EXPECT_EQ(q.usage(2).objects, 1u);
}

TEST(ClientQuota, KindsAreSeparateAndReaddingDoesNotCountTwice) {
    ClientQuota q(QuotaLimits{2, 10, 1u << 20, 10}, DeviceBudget{});
    q.add(ObjectKind::Cq, 5, 1, kRing);
    q.add(ObjectKind::Srq, 5, 1, kRing);  // same handle, other kind: another object
    EXPECT_EQ(q.admit(1, Charge{}), EDQUOT);
    q.add(ObjectKind::Srq, 5, 1, kRing);  // replaced, not added
    EXPECT_EQ(q.usage(1).objects, 2u);
    q.remove(ObjectKind::Mr, 5);          // unknown: nothing changes
    EXPECT_EQ(q.usage(1).objects, 2u);
}

TEST(ClientQuota, DefaultsTakeAQuarterOfTheBudgets) {
    const QuotaLimits d = default_quota(DeviceBudget{4000, 400});
    EXPECT_EQ(d.mappings, 1000u);
    EXPECT_EQ(d.fds, 100u);
    EXPECT_GT(d.bytes, 0u);
    const DeviceBudget measured = measure_device_budget();
    EXPECT_GT(measured.mappings, 0u);
    EXPECT_GT(measured.fds, 0u);
}

}  // namespace
}  // namespace uroce::daemon
