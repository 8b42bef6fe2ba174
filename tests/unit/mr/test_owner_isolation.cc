// Owners (client processes): one cannot touch another's objects, and
// destroy_owner cleans up everything a departed client left.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>

#include "mr/address_space.h"
#include "mr/relaxed_client.h"
#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

class Owners : public MrTest {
protected:
    Owners() { pd2 = pds.alloc(kOtherOwner).pd; }

    BindRequest bind(std::uint32_t owner, std::uint32_t mw_key, std::uint32_t mr_lkey, std::uint32_t qp_pd,
                     std::uint64_t addr) const {
        BindRequest b;
        b.owner = owner;
        b.mw_key = mw_key;
        b.mr_lkey = mr_lkey;
        b.addr = addr;
        b.length = 4096;
        b.access = kRR;
        b.qpn = kQpn;
        b.qp_pd = qp_pd;
        return b;
    }

    std::uint32_t pd2 = 0;  // kOtherOwner's
};

TEST_F(Owners, CannotUseAnotherOwnersPd) {
    EXPECT_EQ(table.reg_mr(make_req(pd, buf, 4096, kLW, kOtherOwner)).error, EINVAL);
    EXPECT_EQ(table.alloc_mw(pd, kOtherOwner, MwType::Type1).error, EINVAL);
    PoolMemory m(2);
    RelaxedPoolConfig cfg;
    cfg.capacity = 2;
    int err = 0;
    EXPECT_EQ(table.create_relaxed_pool(pd, kOtherOwner, cfg, m.header, err), nullptr);
    EXPECT_EQ(err, EINVAL);
    EXPECT_EQ(pds.dealloc(pd, kOtherOwner), EINVAL);
    EXPECT_FALSE(pds.owned_by(pd, kOtherOwner));
    EXPECT_TRUE(pds.owned_by(pd, kOwner));
}

TEST_F(Owners, CannotDeregReregBindOrDeallocAnotherOwnersObjects) {
    const std::uint32_t mr = reg_ok(0, 8192, kFull | Access::kMwBind);
    const KeyResult mw1 = table.alloc_mw(pd, kOwner, MwType::Type1);
    const KeyResult mw2 = table.alloc_mw(pd, kOwner, MwType::Type2);
    ASSERT_EQ(mw1.error, 0);
    ASSERT_EQ(mw2.error, 0);

    EXPECT_EQ(table.dereg_mr(mr, kOtherOwner), EINVAL);
    RegRequest r = make_req(pd2, buf, 4096, kFull, kOtherOwner);
    EXPECT_EQ(table.rereg_mr(mr, rereg::kChangeAccess, r), EINVAL);
    EXPECT_EQ(table.rereg_mr(mr, rereg::kChangePd, r), EINVAL);
    EXPECT_EQ(table.rereg_mr(mr, rereg::kChangeTranslation, r), EINVAL);
    EXPECT_EQ(table.dealloc_mw(mw1.key, kOtherOwner), EINVAL);
    EXPECT_EQ(table.dealloc_mw(mw2.key, kOtherOwner), EINVAL);
    // Binding someone else's window, or one's own window to someone else's MR.
    EXPECT_EQ(table.bind_mw_type1(bind(kOtherOwner, mw1.key, mr, pd, buf)).error, EINVAL);
    EXPECT_EQ(table.bind_mw_type2(bind(kOtherOwner, make_key(key_index(mw2.key), 5), mr, pd, buf)), EINVAL);
    const KeyResult theirs = table.alloc_mw(pd2, kOtherOwner, MwType::Type1);
    ASSERT_EQ(theirs.error, 0);
    EXPECT_EQ(table.bind_mw_type1(bind(kOtherOwner, theirs.key, mr, pd2, buf)).error, EINVAL);
    EXPECT_EQ(table.bind_mw_type1(bind(kOtherOwner, theirs.key, mr, pd, buf)).error, EINVAL);

    // Everything still belongs to and works for its owner.
    EXPECT_EQ(rd(mr, buf, 8).status, CheckStatus::Ok);
    const KeyResult b = table.bind_mw_type1(bind(kOwner, mw1.key, mr, pd, buf));
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(table.dealloc_mw(b.key, kOwner), 0);
    EXPECT_EQ(table.dealloc_mw(mw2.key, kOwner), 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0);
}

TEST_F(Owners, CannotDestroyAnotherOwnersPool) {
    PoolMemory m(2);
    RelaxedPoolConfig cfg;
    cfg.capacity = 2;
    int err = 0;
    RelaxedPool* pool = table.create_relaxed_pool(pd, kOwner, cfg, m.header, err);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(table.destroy_relaxed_pool(pool, kOtherOwner), EINVAL);
    EXPECT_EQ(table.destroy_relaxed_pool(nullptr, kOwner), EINVAL);
    EXPECT_EQ(table.counts().relaxed_pools, 1u);
    EXPECT_EQ(table.destroy_relaxed_pool(pool, kOwner), 0);
}

TEST_F(Owners, DestroyOwnerFreesEverythingOfThatOwnerOnly) {
    // Owner 1: two MRs, a bound type 1 and a bound type 2 window, an unbound
    // window, and a relaxed pool with a live registration.
    const std::uint32_t mr_a = reg_ok(0, 8192, kFull | Access::kMwBind);
    const std::uint32_t mr_b = reg_ok(8192, 4096, kFull);
    const KeyResult w1 = table.alloc_mw(pd, kOwner, MwType::Type1);
    const KeyResult b1 = table.bind_mw_type1(bind(kOwner, w1.key, mr_a, pd, buf));
    ASSERT_EQ(b1.error, 0);
    const KeyResult w2 = table.alloc_mw(pd, kOwner, MwType::Type2);
    const std::uint32_t k2 = make_key(key_index(w2.key), 0x44);
    ASSERT_EQ(table.bind_mw_type2(bind(kOwner, k2, mr_a, pd, buf + 4096)), 0);
    ASSERT_EQ(table.alloc_mw(pd, kOwner, MwType::Type1).error, 0);
    PoolMemory m1(4);
    RelaxedPoolConfig cfg;
    cfg.capacity = 4;
    int err = 0;
    ASSERT_NE(table.create_relaxed_pool(pd, kOwner, cfg, m1.header, err), nullptr);
    RelaxedClient c1(m1.header);
    const RelaxedRegistration rel1 = c1.reg(buf, 4096, kFull, 1);
    ASSERT_EQ(rel1.error, 0);

    // Owner 2: an MR, a bound window and a pool.
    const Registered theirs = table.reg_mr(make_req(pd2, buf, 8192, kFull | Access::kMwBind, kOtherOwner));
    ASSERT_EQ(theirs.error, 0);
    const KeyResult tw = table.alloc_mw(pd2, kOtherOwner, MwType::Type1);
    const KeyResult tb = table.bind_mw_type1(bind(kOtherOwner, tw.key, theirs.lkey, pd2, buf));
    ASSERT_EQ(tb.error, 0);
    PoolMemory m2(2);
    cfg.capacity = 2;
    ASSERT_NE(table.create_relaxed_pool(pd2, kOtherOwner, cfg, m2.header, err), nullptr);
    RelaxedClient c2(m2.header);
    const RelaxedRegistration rel2 = c2.reg(buf, 4096, kFull, 1);
    ASSERT_EQ(rel2.error, 0);

    TableCounts c = table.counts();
    EXPECT_EQ(c.mrs, 3u);
    EXPECT_EQ(c.mws, 4u);
    EXPECT_EQ(c.relaxed_pools, 2u);
    EXPECT_EQ(c.relaxed_slots, 6u);

    EXPECT_EQ(table.destroy_owner(kOwner), 2u + 3u + 1u);  // MRs, windows, pools

    c = table.counts();
    EXPECT_EQ(c.mrs, 1u);
    EXPECT_EQ(c.mws, 1u);
    EXPECT_EQ(c.relaxed_pools, 1u);
    EXPECT_EQ(c.relaxed_slots, 2u);
    for (std::uint32_t k : {mr_a, mr_b, b1.key, rel1.key}) {
        EXPECT_EQ(rd(k, buf, 8).status, CheckStatus::RkeyInvalid);
    }
    EXPECT_EQ(remote(table, k2, pd, RemoteOp::Read, buf + 4096, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(local(table, mr_b, pd, buf + 8192, 8, false).status, CheckStatus::LkeyInvalid);
    // The PD is no longer referenced.
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0);

    // The other owner is untouched.
    EXPECT_EQ(remote(table, theirs.rkey, pd2, RemoteOp::Write, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(remote(table, tb.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(remote(table, rel2.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(pds.dealloc(pd2, kOtherOwner), EBUSY);

    EXPECT_EQ(table.destroy_owner(kOwner), 0u) << "nothing left";
    EXPECT_EQ(table.destroy_owner(12345), 0u);
    EXPECT_EQ(table.destroy_owner(kOtherOwner), 3u);
    c = table.counts();
    EXPECT_EQ(c.mrs, 0u);
    EXPECT_EQ(c.mws, 0u);
    EXPECT_EQ(c.relaxed_pools, 0u);
    EXPECT_EQ(c.relaxed_slots, 0u);
    EXPECT_EQ(pds.dealloc(pd2, kOtherOwner), 0);

    // The table is fully usable afterwards.
    const std::uint32_t pd3 = pds.alloc(kOwner).pd;
    EXPECT_EQ(table.reg_mr(make_req(pd3, buf, 4096, kLW)).error, 0);
}

TEST(PdTableTest, AllocDeallocAndBusy) {
    PdTable pds(3);
    const PdTable::Alloc a = pds.alloc(kOwner);
    const PdTable::Alloc b = pds.alloc(kOwner);
    const PdTable::Alloc c = pds.alloc(kOtherOwner);
    ASSERT_EQ(a.error, 0);
    ASSERT_EQ(b.error, 0);
    ASSERT_EQ(c.error, 0);
    EXPECT_NE(a.pd, 0u);
    EXPECT_NE(a.pd, b.pd);
    EXPECT_NE(b.pd, c.pd);
    EXPECT_EQ(pds.alloc(kOwner).error, ENOMEM);
    EXPECT_EQ(pds.count(), 3u);
    EXPECT_EQ(pds.max_pd(), 3u);

    pds.ref(a.pd);
    EXPECT_EQ(pds.dealloc(a.pd, kOwner), EBUSY);
    pds.unref(a.pd);
    EXPECT_EQ(pds.dealloc(a.pd, kOwner), 0);
    EXPECT_EQ(pds.dealloc(a.pd, kOwner), EINVAL);
    // Handles are not reused.
    const PdTable::Alloc d = pds.alloc(kOwner);
    ASSERT_EQ(d.error, 0);
    EXPECT_NE(d.pd, a.pd);
    EXPECT_EQ(pds.destroy_owner(kOwner), 2u);
    EXPECT_EQ(pds.count(), 1u);
    EXPECT_TRUE(pds.owned_by(c.pd, kOtherOwner));
}

// A departed owner's descriptors, the live ones and those retired while it
// was there, hold its address space and through it the /proc/<pid>/maps its
// HELLO carried: destroy_owner frees them at once, not once a thousand other
// descriptors are pending (fuzz_control found the file outliving its client).
TEST_F(Owners, DestroyOwnerReleasesItsAddressSpaceAtOnce) {
    auto space = std::make_shared<const ProcessAddressSpace>(ProcessAddressSpace::open_maps(::getpid()));
    const std::weak_ptr<const AddressSpace> watch = space;
    RegRequest r = make_req(pd, buf, 4096, kFull);
    r.address_space = std::move(space);
    const Registered kept = table.reg_mr(r);
    const Registered dropped = table.reg_mr(r);
    ASSERT_EQ(kept.error, 0);
    ASSERT_EQ(dropped.error, 0);
    ASSERT_EQ(table.dereg_mr(dropped.lkey, kOwner), 0);  // retired, owner still there
    r.address_space.reset();
    ASSERT_FALSE(watch.expired()) << "the live MR holds it";

    EXPECT_EQ(table.destroy_owner(kOwner), 1u);
    EXPECT_TRUE(watch.expired()) << "a retired descriptor still holds the departed owner's address space";
}

TEST_F(Owners, PdDeallocIsBusyWhileAnyObjectUsesIt) {
    const std::uint32_t mr = reg_ok(0, 4096, kLW);
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    ASSERT_EQ(table.dereg_mr(mr, kOwner), 0);
    const KeyResult mw = table.alloc_mw(pd, kOwner, MwType::Type2);
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    ASSERT_EQ(table.dealloc_mw(mw.key, kOwner), 0);
    PoolMemory m(2);
    RelaxedPoolConfig cfg;
    cfg.capacity = 2;
    int err = 0;
    RelaxedPool* pool = table.create_relaxed_pool(pd, kOwner, cfg, m.header, err);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    ASSERT_EQ(table.destroy_relaxed_pool(pool, kOwner), 0);
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0);
}

}  // namespace
}  // namespace uroce::mr
