// ibv_reg_mr(3) and ibv_bind_mw(3) access-flag rules.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "mr/access_flags.h"
#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

TEST(AccessFlags, ValuesAreThoseOfIbvAccessFlags) {
    EXPECT_EQ(Access::kLocalWrite, 1u);
    EXPECT_EQ(Access::kRemoteWrite, 2u);
    EXPECT_EQ(Access::kRemoteRead, 4u);
    EXPECT_EQ(Access::kRemoteAtomic, 8u);
    EXPECT_EQ(Access::kMwBind, 16u);
    EXPECT_EQ(Access::kZeroBased, 32u);
    EXPECT_EQ(Access::kOnDemand, 64u);
    EXPECT_EQ(Access::kHugetlb, 128u);
    EXPECT_EQ(Access::kRelaxedOrdering, 1u << 20);
    EXPECT_EQ(Access::kOptionalRange, 0x3FF00000u);
}

TEST(AccessFlags, EveryKnownFlagAloneIsAcceptedExceptRemoteWriteAndAtomic) {
    for (std::uint32_t f : {Access::kLocalWrite, Access::kRemoteRead, Access::kMwBind, Access::kZeroBased,
                            Access::kOnDemand, Access::kHugetlb, Access::kRelaxedOrdering}) {
        const AccessCheck c = check_mr_access(f);
        EXPECT_EQ(c.error, 0) << "flag 0x" << std::hex << f;
        EXPECT_EQ(c.flags, f);
    }
    EXPECT_EQ(check_mr_access(Access::kRemoteWrite).error, EINVAL);
    EXPECT_EQ(check_mr_access(Access::kRemoteAtomic).error, EINVAL);
    EXPECT_EQ(check_mr_access(Access::kRemoteWrite | Access::kRemoteRead).error, EINVAL);
    EXPECT_EQ(check_mr_access(Access::kRemoteAtomic | Access::kMwBind).error, EINVAL);
}

TEST(AccessFlags, NoFlagsMeansLocalReadOnly) {
    const AccessCheck c = check_mr_access(0);
    EXPECT_EQ(c.error, 0);
    EXPECT_EQ(c.flags, 0u);
}

TEST(AccessFlags, AllCombinationsOfKnownBits) {
    // The nine known bits: bits 0-7 and RELAXED_ORDERING.
    for (std::uint32_t combo = 0; combo < (1u << 9); ++combo) {
        const std::uint32_t flags = (combo & 0xFFu) | ((combo & 0x100u) != 0 ? Access::kRelaxedOrdering : 0u);
        const bool needs_local_write = (flags & (Access::kRemoteWrite | Access::kRemoteAtomic)) != 0;
        const bool invalid = needs_local_write && (flags & Access::kLocalWrite) == 0;
        const AccessCheck c = check_mr_access(flags);
        EXPECT_EQ(c.error, invalid ? EINVAL : 0) << "flags 0x" << std::hex << flags;
        if (!invalid) {
            EXPECT_EQ(c.flags, flags);
        }
    }
}

TEST(AccessFlags, UnknownNonOptionalBitsAreRefused) {
    for (unsigned bit = 8; bit < 32; ++bit) {
        const std::uint32_t b = 1u << bit;
        if ((b & Access::kOptionalRange) != 0) {
            continue;
        }
        EXPECT_EQ(check_mr_access(Access::kLocalWrite | b).error, EINVAL) << "bit " << bit;
        EXPECT_EQ(check_mr_access(b).error, EINVAL) << "bit " << bit;
    }
}

TEST(AccessFlags, UnknownOptionalBitsAreDropped) {
    for (unsigned bit = 21; bit < 30; ++bit) {
        const std::uint32_t b = 1u << bit;
        ASSERT_NE(b & Access::kOptionalRange, 0u);
        const AccessCheck c = check_mr_access(Access::kLocalWrite | Access::kRemoteRead | b);
        EXPECT_EQ(c.error, 0) << "bit " << bit;
        EXPECT_EQ(c.flags, Access::kLocalWrite | Access::kRemoteRead) << "bit " << bit;
    }
    // All of them at once, next to the one optional bit that is known.
    const AccessCheck c = check_mr_access(Access::kOptionalRange | Access::kLocalWrite);
    EXPECT_EQ(c.error, 0);
    EXPECT_EQ(c.flags, Access::kLocalWrite | Access::kRelaxedOrdering);
    // An optional bit does not rescue a missing LOCAL_WRITE.
    EXPECT_EQ(check_mr_access(Access::kRemoteWrite | (1u << 25)).error, EINVAL);
}

TEST(AccessFlags, WindowFlags) {
    const std::uint32_t parent = Access::kLocalWrite | Access::kRemoteRead | Access::kMwBind;
    EXPECT_EQ(check_mw_access(Access::kRemoteRead, parent).error, 0);
    EXPECT_EQ(check_mw_access(Access::kRemoteWrite, parent).error, 0);
    EXPECT_EQ(check_mw_access(Access::kRemoteAtomic | Access::kZeroBased, parent).error, 0);
    EXPECT_EQ(check_mw_access(Access::kRemoteAtomic | Access::kZeroBased, parent).flags,
              Access::kRemoteAtomic | Access::kZeroBased);
    EXPECT_EQ(check_mw_access(0, parent).error, 0);
    // LOCAL_WRITE is taken and dropped (rdma_rxe and mlx5 accept it).
    EXPECT_EQ(check_mw_access(Access::kRemoteRead | Access::kLocalWrite, parent).error, 0);
    EXPECT_EQ(check_mw_access(Access::kRemoteRead | Access::kLocalWrite, parent).flags, Access::kRemoteRead);
    // Otherwise only remote rights and ZERO_BASED.
    for (std::uint32_t f : {Access::kMwBind, Access::kOnDemand, Access::kHugetlb,
                            Access::kRelaxedOrdering, 1u << 12, 1u << 25}) {
        EXPECT_EQ(check_mw_access(Access::kRemoteRead | f, parent).error, EINVAL) << "flag 0x" << std::hex << f;
    }
    // The parent must allow binding.
    EXPECT_EQ(check_mw_access(Access::kRemoteRead, parent & ~Access::kMwBind).error, EINVAL);
    // REMOTE_WRITE / REMOTE_ATOMIC windows need LOCAL_WRITE on the parent; reads do not.
    const std::uint32_t read_only_parent = Access::kRemoteRead | Access::kMwBind;
    EXPECT_EQ(check_mw_access(Access::kRemoteRead, read_only_parent).error, 0);
    EXPECT_EQ(check_mw_access(Access::kRemoteWrite, read_only_parent).error, EINVAL);
    EXPECT_EQ(check_mw_access(Access::kRemoteAtomic, read_only_parent).error, EINVAL);
}

// The same rules through ibv_reg_mr.
class RegAccess : public MrTest {};

TEST_F(RegAccess, RemoteWriteOrAtomicWithoutLocalWriteIsEinval) {
    EXPECT_EQ(reg(buf, 4096, kRW).error, EINVAL);
    EXPECT_EQ(reg(buf, 4096, kRA).error, EINVAL);
    EXPECT_EQ(reg(buf, 4096, kRR | kRW).error, EINVAL);
    EXPECT_EQ(reg(buf, 4096, kRW | kLW).error, 0);
    EXPECT_EQ(reg(buf, 4096, kRA | kLW).error, 0);
    EXPECT_EQ(table.counts().mrs, 2u);
}

TEST_F(RegAccess, UnknownBitsThroughRegMr) {
    EXPECT_EQ(reg(buf, 4096, kLW | (1u << 9)).error, EINVAL);
    EXPECT_EQ(reg(buf, 4096, kLW | (1u << 31)).error, EINVAL);
    EXPECT_EQ(table.counts().mrs, 0u);

    const Registered r = reg(buf, 4096, kLW | kRR | (1u << 27));
    ASSERT_EQ(r.error, 0);
    EpochGuard guard(table.epoch());
    const Translation t = table.check_local(guard, MrKey{r.lkey}, PdHandle{pd}, buf, 16, false);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t.desc->access, kLW | kRR);  // the optional bit is gone
}

TEST_F(RegAccess, LocalReadIsAlwaysAllowed) {
    const std::uint32_t key = reg_ok(0, 4096, 0);
    EXPECT_EQ(local(table, key, pd, buf, 4096, false).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, key, pd, buf, 1, true).status, CheckStatus::LocalWriteNotGranted);
    EXPECT_EQ(rd(key, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
}

TEST_F(RegAccess, EachRemoteRightGrantsOnlyItsOperation) {
    const std::uint32_t r_only = reg_ok(0, 4096, kRR);
    const std::uint32_t w_only = reg_ok(4096, 4096, kLW | kRW);
    const std::uint32_t a_only = reg_ok(8192, 4096, kLW | kRA);

    EXPECT_EQ(rd(r_only, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(wr(r_only, buf, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(r_only, buf).status, CheckStatus::RemoteAccessNotGranted);

    EXPECT_EQ(rd(w_only, buf + 4096, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(wr(w_only, buf + 4096, 8).status, CheckStatus::Ok);
    EXPECT_EQ(atomic(w_only, buf + 4096).status, CheckStatus::RemoteAccessNotGranted);

    EXPECT_EQ(rd(a_only, buf + 8192, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(wr(a_only, buf + 8192, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(a_only, buf + 8192).status, CheckStatus::Ok);
}

TEST_F(RegAccess, RelaxedOrderingIsKeptAndHarmless) {
    const Registered r = reg(buf, 4096, kLW | kRR | Access::kRelaxedOrdering);
    ASSERT_EQ(r.error, 0);
    EpochGuard guard(table.epoch());
    const Translation t = table.check_local(guard, MrKey{r.lkey}, PdHandle{pd}, buf, 16, true);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t.desc->access, kLW | kRR | Access::kRelaxedOrdering);
}

}  // namespace
}  // namespace uroce::mr
