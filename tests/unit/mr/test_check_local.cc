// check_local: the lkey of a local SGE, every failure reason.
#include <gtest/gtest.h>

#include <cstdint>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

class CheckLocal : public MrTest {};

TEST_F(CheckLocal, OkTranslatesToTheProcessAddress) {
    const std::uint32_t key = reg_ok(4096, 8192, kLW);
    EpochGuard guard(table.epoch());
    const Translation t = table.check_local(guard, MrKey{key}, PdHandle{pd}, buf + 4096 + 100, 200, true);
    ASSERT_EQ(t.status, CheckStatus::Ok);
    EXPECT_EQ(t.host_addr, buf + 4096 + 100);
    ASSERT_NE(t.desc, nullptr);
    EXPECT_EQ(t.desc->key(), key);
    EXPECT_EQ(t.desc->kind, ObjectKind::Mr);
    EXPECT_EQ(t.desc->pd, pd);
    EXPECT_EQ(t.desc->owner, kOwner);
    EXPECT_EQ(t.desc->iova, buf + 4096);
    EXPECT_EQ(t.desc->length, 8192u);
    EXPECT_EQ(t.desc->host_base, buf + 4096);
    EXPECT_EQ(t.desc->backing, Backing::ProcessMemory);
    // The whole MR, first and last byte.
    EXPECT_TRUE(table.check_local(guard, MrKey{key}, PdHandle{pd}, buf + 4096, 8192, true).ok());
    EXPECT_TRUE(table.check_local(guard, MrKey{key}, PdHandle{pd}, buf + 4096 + 8191, 1, false).ok());
}

TEST_F(CheckLocal, LkeyInvalid) {
    const std::uint32_t key = reg_ok(0, 4096, kLW);
    // No such entry: a never-used index, one beyond every segment, key 0.
    EXPECT_EQ(local(table, make_key(5000, 1), pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    EXPECT_EQ(local(table, 0xFFFFFF01u, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    EXPECT_EQ(local(table, 0, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    // Right index, wrong key byte.
    for (int delta : {1, 2, 0x80, 0xFF}) {
        const std::uint32_t stale = other_byte(key, static_cast<std::uint8_t>(delta));
        EXPECT_EQ(local(table, stale, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
    }
    // Deregistered.
    ASSERT_EQ(table.dereg_mr(key, kOwner), 0);
    EXPECT_EQ(local(table, key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
}

TEST_F(CheckLocal, AWindowKeyIsNotAnLkey) {
    const std::uint32_t mr = reg_ok(0, 8192, kFull | Access::kMwBind);
    const KeyResult mw1 = table.alloc_mw(pd, kOwner, MwType::Type1);
    ASSERT_EQ(mw1.error, 0);
    EXPECT_EQ(local(table, mw1.key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);  // unbound

    BindRequest b;
    b.owner = kOwner;
    b.mw_key = mw1.key;
    b.mr_lkey = mr;
    b.addr = buf;
    b.length = 4096;
    b.access = kRR;
    b.qpn = kQpn;
    b.qp_pd = pd;
    const KeyResult bound = table.bind_mw_type1(b);
    ASSERT_EQ(bound.error, 0);
    ASSERT_EQ(rd(bound.key, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, bound.key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);

    const KeyResult mw2 = table.alloc_mw(pd, kOwner, MwType::Type2);
    ASSERT_EQ(mw2.error, 0);
    b.mw_key = make_key(key_index(mw2.key), 0x42);
    ASSERT_EQ(table.bind_mw_type2(b), 0);
    EXPECT_EQ(local(table, b.mw_key, pd, buf, 8, false).status, CheckStatus::LkeyInvalid);
}

TEST_F(CheckLocal, LocalPdMismatch) {
    const std::uint32_t key = reg_ok(0, 4096, kLW);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    EXPECT_EQ(local(table, key, pd2, buf, 8, false).status, CheckStatus::LocalPdMismatch);
    EXPECT_EQ(local(table, key, pd2, buf, 8, true).status, CheckStatus::LocalPdMismatch);
    EXPECT_EQ(local(table, key, 0, buf, 8, false).status, CheckStatus::LocalPdMismatch);
}

TEST_F(CheckLocal, LocalWriteNotGrantedOnlyWhenTheDeviceWrites) {
    const std::uint32_t ro = reg_ok(0, 4096, kRR);
    EXPECT_EQ(local(table, ro, pd, buf, 4096, false).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, ro, pd, buf, 4096, true).status, CheckStatus::LocalWriteNotGranted);
    EXPECT_EQ(local(table, ro, pd, buf, 1, true).status, CheckStatus::LocalWriteNotGranted);
    const std::uint32_t rw = reg_ok(4096, 4096, kLW);
    EXPECT_EQ(local(table, rw, pd, buf + 4096, 4096, true).status, CheckStatus::Ok);
}

TEST_F(CheckLocal, LocalOutOfRange) {
    const std::uint64_t base = buf + 4096;
    const std::uint32_t key = reg_ok(4096, 4096, kLW);
    EXPECT_EQ(local(table, key, pd, base - 1, 1, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base - 1, 2, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base, 4097, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base + 4095, 2, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base + 4096, 1, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, 0, 8, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base + 4095, 1, false).status, CheckStatus::Ok);
}

TEST_F(CheckLocal, RangesNeverOverflowAtTheTopOfTheAddressSpace) {
    const std::uint64_t base = buf;
    const std::uint32_t key = reg_ok(0, 4096, kLW);
    // addr + length wraps around to land inside the MR.
    EXPECT_EQ(local(table, key, pd, base + 16, UINT64_MAX - 8, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base + 16, UINT64_MAX, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, base, 0ull - base + 16, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, UINT64_MAX - 10, 100, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, key, pd, UINT64_MAX, 1, false).status, CheckStatus::LocalOutOfRange);

    // An MR whose iova space sits just under the top of the address space.
    RegRequest r = make_req(pd, buf, 4096, kLW);
    const std::uint64_t top = UINT64_MAX - 8191;  // [top, top + 4096) ends 4 KiB below 2^64
    r.iova = top;
    const Registered high = table.reg_mr(r);
    ASSERT_EQ(high.error, 0);
    EXPECT_EQ(local(table, high.lkey, pd, top, 4096, true).status, CheckStatus::Ok);
    EXPECT_EQ(local(table, high.lkey, pd, top + 100, 4096, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, high.lkey, pd, top + 100, UINT64_MAX - 50, false).status,
              CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, high.lkey, pd, top + 4096, 8, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, high.lkey, pd, UINT64_MAX - 7, 8, false).status, CheckStatus::LocalOutOfRange);
    EXPECT_EQ(local(table, high.lkey, pd, UINT64_MAX, 1, false).status, CheckStatus::LocalOutOfRange);
}

TEST_F(CheckLocal, IovaAddressesTranslateToTheBuffer) {
    RegRequest r = make_req(pd, buf + 8192, 8192, kLW);
    r.iova = 0x7000'0000'0000;
    const Registered reg = table.reg_mr(r);
    ASSERT_EQ(reg.error, 0);
    const Checked c = local(table, reg.lkey, pd, 0x7000'0000'0000 + 4100, 16, true);
    ASSERT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, buf + 8192 + 4100);
    // The buffer's own address is not in the MR's iova space.
    EXPECT_EQ(local(table, reg.lkey, pd, buf + 8192, 16, false).status, CheckStatus::LocalOutOfRange);
}

TEST_F(CheckLocal, FirstFailedCheckWins) {
    // PD before write permission before range.
    const std::uint32_t ro = reg_ok(0, 4096, 0);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    EXPECT_EQ(local(table, ro, pd2, 0, 1ull << 40, true).status, CheckStatus::LocalPdMismatch);
    EXPECT_EQ(local(table, ro, pd, 0, 1ull << 40, true).status, CheckStatus::LocalWriteNotGranted);
    EXPECT_EQ(local(table, ro, pd, 0, 1ull << 40, false).status, CheckStatus::LocalOutOfRange);
}

}  // namespace
}  // namespace uroce::mr
