// The numeric values of the QP enums are rdma-core's (verbs.h), so the
// provider can pass them through unchanged. Checked against the numbers
// written out here and, where rdma-core's headers are installed, against
// verbs.h itself.
#include <gtest/gtest.h>

#include <cstdint>

#include "qp/qp_types.h"

#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define UROCE_HAVE_VERBS_H 1
#endif

namespace uroce::qp {
namespace {

template <typename E>
constexpr int num(E e) {
    return static_cast<int>(e);
}

TEST(QpTypes, QpTypeValues) {
    EXPECT_EQ(num(QpType::Rc), 2);
    EXPECT_EQ(num(QpType::Uc), 3);
    EXPECT_EQ(num(QpType::Ud), 4);
}

TEST(QpTypes, QpStateValues) {
    EXPECT_EQ(num(QpState::Reset), 0);
    EXPECT_EQ(num(QpState::Init), 1);
    EXPECT_EQ(num(QpState::Rtr), 2);
    EXPECT_EQ(num(QpState::Rts), 3);
    EXPECT_EQ(num(QpState::Sqd), 4);
    EXPECT_EQ(num(QpState::Sqe), 5);
    EXPECT_EQ(num(QpState::Err), 6);
    EXPECT_EQ(kQpStateCount, 7u);
}

TEST(QpTypes, MtuValuesAndBytes) {
    EXPECT_EQ(num(Mtu::Mtu256), 1);
    EXPECT_EQ(num(Mtu::Mtu512), 2);
    EXPECT_EQ(num(Mtu::Mtu1024), 3);
    EXPECT_EQ(num(Mtu::Mtu2048), 4);
    EXPECT_EQ(num(Mtu::Mtu4096), 5);
    EXPECT_EQ(mtu_bytes(Mtu::Mtu256), 256u);
    EXPECT_EQ(mtu_bytes(Mtu::Mtu512), 512u);
    EXPECT_EQ(mtu_bytes(Mtu::Mtu1024), 1024u);
    EXPECT_EQ(mtu_bytes(Mtu::Mtu2048), 2048u);
    EXPECT_EQ(mtu_bytes(Mtu::Mtu4096), 4096u);
    EXPECT_EQ(mtu_bytes(static_cast<Mtu>(0)), 0u);
    EXPECT_EQ(mtu_bytes(static_cast<Mtu>(6)), 0u);
}

TEST(QpTypes, MigStateValues) {
    EXPECT_EQ(num(MigState::Migrated), 0);
    EXPECT_EQ(num(MigState::Rearm), 1);
    EXPECT_EQ(num(MigState::Armed), 2);
}

TEST(QpTypes, AttrMaskBits) {
    EXPECT_EQ(AttrMask::kState, 1u << 0);
    EXPECT_EQ(AttrMask::kCurState, 1u << 1);
    EXPECT_EQ(AttrMask::kEnSqdAsyncNotify, 1u << 2);
    EXPECT_EQ(AttrMask::kAccessFlags, 1u << 3);
    EXPECT_EQ(AttrMask::kPkeyIndex, 1u << 4);
    EXPECT_EQ(AttrMask::kPort, 1u << 5);
    EXPECT_EQ(AttrMask::kQkey, 1u << 6);
    EXPECT_EQ(AttrMask::kAv, 1u << 7);
    EXPECT_EQ(AttrMask::kPathMtu, 1u << 8);
    EXPECT_EQ(AttrMask::kTimeout, 1u << 9);
    EXPECT_EQ(AttrMask::kRetryCnt, 1u << 10);
    EXPECT_EQ(AttrMask::kRnrRetry, 1u << 11);
    EXPECT_EQ(AttrMask::kRqPsn, 1u << 12);
    EXPECT_EQ(AttrMask::kMaxQpRdAtomic, 1u << 13);
    EXPECT_EQ(AttrMask::kAltPath, 1u << 14);
    EXPECT_EQ(AttrMask::kMinRnrTimer, 1u << 15);
    EXPECT_EQ(AttrMask::kSqPsn, 1u << 16);
    EXPECT_EQ(AttrMask::kMaxDestRdAtomic, 1u << 17);
    EXPECT_EQ(AttrMask::kPathMigState, 1u << 18);
    EXPECT_EQ(AttrMask::kCap, 1u << 19);
    EXPECT_EQ(AttrMask::kDestQpn, 1u << 20);
    EXPECT_EQ(AttrMask::kRateLimit, 1u << 25);
    EXPECT_EQ(AttrMask::kKnown, 0x021FFFFFu);
}

TEST(QpTypes, QpAccessFlagsAreIbvAccessFlags) {
    EXPECT_EQ(QpAccess::kLocalWrite, 1u);
    EXPECT_EQ(QpAccess::kRemoteWrite, 2u);
    EXPECT_EQ(QpAccess::kRemoteRead, 4u);
    EXPECT_EQ(QpAccess::kRemoteAtomic, 8u);
    EXPECT_EQ(QpAccess::kAllowed, 0xFu);
}

#ifdef UROCE_HAVE_VERBS_H
// The installed verbs.h, value by value.
static_assert(num(QpType::Rc) == IBV_QPT_RC);
static_assert(num(QpType::Uc) == IBV_QPT_UC);
static_assert(num(QpType::Ud) == IBV_QPT_UD);
static_assert(num(QpState::Reset) == IBV_QPS_RESET);
static_assert(num(QpState::Init) == IBV_QPS_INIT);
static_assert(num(QpState::Rtr) == IBV_QPS_RTR);
static_assert(num(QpState::Rts) == IBV_QPS_RTS);
static_assert(num(QpState::Sqd) == IBV_QPS_SQD);
static_assert(num(QpState::Sqe) == IBV_QPS_SQE);
static_assert(num(QpState::Err) == IBV_QPS_ERR);
static_assert(kQpStateCount == IBV_QPS_UNKNOWN);
static_assert(num(Mtu::Mtu256) == IBV_MTU_256);
static_assert(num(Mtu::Mtu512) == IBV_MTU_512);
static_assert(num(Mtu::Mtu1024) == IBV_MTU_1024);
static_assert(num(Mtu::Mtu2048) == IBV_MTU_2048);
static_assert(num(Mtu::Mtu4096) == IBV_MTU_4096);
static_assert(num(MigState::Migrated) == IBV_MIG_MIGRATED);
static_assert(num(MigState::Rearm) == IBV_MIG_REARM);
static_assert(num(MigState::Armed) == IBV_MIG_ARMED);
static_assert(AttrMask::kState == IBV_QP_STATE);
static_assert(AttrMask::kCurState == IBV_QP_CUR_STATE);
static_assert(AttrMask::kEnSqdAsyncNotify == IBV_QP_EN_SQD_ASYNC_NOTIFY);
static_assert(AttrMask::kAccessFlags == IBV_QP_ACCESS_FLAGS);
static_assert(AttrMask::kPkeyIndex == IBV_QP_PKEY_INDEX);
static_assert(AttrMask::kPort == IBV_QP_PORT);
static_assert(AttrMask::kQkey == IBV_QP_QKEY);
static_assert(AttrMask::kAv == IBV_QP_AV);
static_assert(AttrMask::kPathMtu == IBV_QP_PATH_MTU);
static_assert(AttrMask::kTimeout == IBV_QP_TIMEOUT);
static_assert(AttrMask::kRetryCnt == IBV_QP_RETRY_CNT);
static_assert(AttrMask::kRnrRetry == IBV_QP_RNR_RETRY);
static_assert(AttrMask::kRqPsn == IBV_QP_RQ_PSN);
static_assert(AttrMask::kMaxQpRdAtomic == IBV_QP_MAX_QP_RD_ATOMIC);
static_assert(AttrMask::kAltPath == IBV_QP_ALT_PATH);
static_assert(AttrMask::kMinRnrTimer == IBV_QP_MIN_RNR_TIMER);
static_assert(AttrMask::kSqPsn == IBV_QP_SQ_PSN);
static_assert(AttrMask::kMaxDestRdAtomic == IBV_QP_MAX_DEST_RD_ATOMIC);
static_assert(AttrMask::kPathMigState == IBV_QP_PATH_MIG_STATE);
static_assert(AttrMask::kCap == IBV_QP_CAP);
static_assert(AttrMask::kDestQpn == IBV_QP_DEST_QPN);
static_assert(AttrMask::kRateLimit == IBV_QP_RATE_LIMIT);
static_assert(QpAccess::kLocalWrite == IBV_ACCESS_LOCAL_WRITE);
static_assert(QpAccess::kRemoteWrite == IBV_ACCESS_REMOTE_WRITE);
static_assert(QpAccess::kRemoteRead == IBV_ACCESS_REMOTE_READ);
static_assert(QpAccess::kRemoteAtomic == IBV_ACCESS_REMOTE_ATOMIC);

TEST(QpTypes, CheckedAgainstInstalledVerbsH) { SUCCEED(); }
#endif

}  // namespace
}  // namespace uroce::qp
