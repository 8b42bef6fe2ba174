// Memory windows: type 1 (ibv_bind_mw) and type 2 (IBV_WR_BIND_MW,
// LOCAL_INV, SEND_WITH_INV).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <set>

#include "mr_test_util.h"

namespace uroce::mr {
namespace {

using namespace test;

class Windows : public MrTest {
protected:
    // A 16-page MR that allows binding and everything else.
    Windows() { mr = reg_ok(0, kBufBytes, kFull | Access::kMwBind); }

    BindRequest bind_req(std::uint32_t mw_key, std::uint64_t offset, std::uint64_t length, std::uint32_t access,
                         std::uint32_t qpn = kQpn) const {
        BindRequest b;
        b.owner = kOwner;
        b.mw_key = mw_key;
        b.mr_lkey = mr;
        b.addr = buf + offset;
        b.length = length;
        b.access = access;
        b.qpn = qpn;
        b.qp_pd = pd;
        return b;
    }
    std::uint32_t alloc(MwType type) {
        const KeyResult k = table.alloc_mw(pd, kOwner, type);
        EXPECT_EQ(k.error, 0);
        return k.key;
    }

    std::uint32_t mr = 0;
};

// ---- type 1 ----

// ibv_bind_mw(3) posts the bind on the send queue with the window's next
// rkey (ibv_inc_rkey): the engine binds to exactly that key, rebinding a
// bound window, and a zero-length one unbinds.
TEST_F(Windows, PostedType1BindTakesTheKeyTheConsumerChose) {
    const std::uint32_t mw = alloc(MwType::Type1);
    const std::uint32_t next = make_key(key_index(mw), static_cast<std::uint8_t>(key_byte(mw) + 1));
    ASSERT_EQ(table.bind_mw_posted(bind_req(next, 0, 4096, kRR | kRW | Access::kLocalWrite)), 0);
    EXPECT_EQ(wr(next, buf + 8, 8).status, CheckStatus::Ok);
    EXPECT_EQ(wr(mw, buf + 8, 8).status, CheckStatus::RkeyInvalid);
    const std::uint32_t again = make_key(key_index(mw), static_cast<std::uint8_t>(key_byte(next) + 1));
    ASSERT_EQ(table.bind_mw_posted(bind_req(again, 8192, 4096, kRR)), 0) << "a bound type 1 window rebinds";
    EXPECT_EQ(rd(again, buf + 8192, 8).status, CheckStatus::Ok);
    EXPECT_EQ(rd(next, buf + 8, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(table.bind_mw_posted(bind_req(again, kBufBytes - 8, 4096, kRR)), EINVAL) << "past the MR";
    BindRequest unbind = bind_req(make_key(key_index(mw), static_cast<std::uint8_t>(key_byte(again) + 1)), 0, 0, 0);
    unbind.mr_lkey = 0;
    ASSERT_EQ(table.bind_mw_posted(unbind), 0);
    EXPECT_EQ(rd(unbind.mw_key, buf, 8).status, CheckStatus::RkeyInvalid) << "unbound";
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0) << "nothing pins the MR after the unbind";
}

TEST_F(Windows, PostedBindOfAnotherOwnersWindowIsRefused) {
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(make_key(key_index(mw), 7), 0, 4096, kRR);
    b.owner = kOwner + 1;
    EXPECT_EQ(table.bind_mw_posted(b), EINVAL);
    EXPECT_EQ(table.bind_mw_posted(bind_req(make_key(key_index(mr), 7), 0, 4096, kRR)), EINVAL) << "an MR's key";
}


TEST_F(Windows, Type1BindGivesANewRkeyEachTime) {
    const std::uint32_t mw = alloc(MwType::Type1);
    EXPECT_EQ(rd(mw, buf, 8).status, CheckStatus::RkeyInvalid) << "not bound yet";
    EXPECT_EQ(table.counts().mws, 1u);

    const KeyResult b1 = table.bind_mw_type1(bind_req(mw, 4096, 8192, kRR | kRW));
    ASSERT_EQ(b1.error, 0);
    EXPECT_EQ(key_index(b1.key), key_index(mw));
    EXPECT_NE(b1.key, mw);
    EXPECT_EQ(rd(mw, buf + 4096, 8).status, CheckStatus::RkeyInvalid) << "the allocation key is gone";
    const Checked c = wr(b1.key, buf + 4096 + 100, 50);
    ASSERT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, buf + 4096 + 100);

    // Rebinding (somewhere else) retires the previous rkey.
    const KeyResult b2 = table.bind_mw_type1(bind_req(b1.key, 0, 4096, kRR));
    ASSERT_EQ(b2.error, 0);
    EXPECT_NE(b2.key, b1.key);
    EXPECT_EQ(wr(b1.key, buf + 4096 + 100, 50).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(b2.key, buf + 8, 8).status, CheckStatus::Ok);
    // The old key cannot drive a bind either.
    EXPECT_EQ(table.bind_mw_type1(bind_req(b1.key, 0, 4096, kRR)).error, EINVAL);

    std::set<std::uint32_t> keys{mw, b1.key, b2.key};
    std::uint32_t cur = b2.key;
    for (int i = 0; i < 100; ++i) {
        const KeyResult n = table.bind_mw_type1(bind_req(cur, 0, 4096, kRR));
        ASSERT_EQ(n.error, 0);
        ASSERT_NE(n.key, cur);
        keys.insert(n.key);
        cur = n.key;
    }
    EXPECT_EQ(keys.size(), 103u);
}

TEST_F(Windows, Type1ZeroLengthBindUnbinds) {
    const std::uint32_t mw = alloc(MwType::Type1);
    const KeyResult b = table.bind_mw_type1(bind_req(mw, 0, 4096, kRR));
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), EBUSY) << "a window is bound to the MR";

    const KeyResult u = table.bind_mw_type1(bind_req(b.key, 0, 0, 0));
    ASSERT_EQ(u.error, 0);
    EXPECT_NE(u.key, b.key);
    EXPECT_EQ(rd(b.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(rd(u.key, buf, 8).status, CheckStatus::RkeyInvalid) << "an unbound window grants nothing";
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0);
    // Unbinding an unbound window is harmless.
    EXPECT_EQ(table.bind_mw_type1(BindRequest{kOwner, u.key, 0, 0, 0, 0, 0, pd}).error, 0);
}

TEST_F(Windows, Type1NeedsMwBindOnTheMr) {
    const std::uint32_t plain = reg_ok(0, 4096, kFull);
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(mw, 0, 4096, kRR);
    b.mr_lkey = plain;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    EXPECT_EQ(table.dereg_mr(plain, kOwner), 0) << "a failed bind leaves the MR unbusy";
}

TEST_F(Windows, WriteOrAtomicWindowNeedsLocalWriteOnTheMr) {
    const std::uint32_t ro = reg_ok(0, 4096, kRR | Access::kMwBind);
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(mw, 0, 4096, kRW);
    b.mr_lkey = ro;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    b.access = kRA;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    b.access = kRR;
    const KeyResult ok = table.bind_mw_type1(b);
    ASSERT_EQ(ok.error, 0);
    EXPECT_EQ(rd(ok.key, buf, 8).status, CheckStatus::Ok);
    // LOCAL_WRITE among the window's flags is taken and dropped (rdma_rxe and
    // mlx5 accept it); other flags outside remote rights and ZERO_BASED are
    // refused.
    b.mw_key = ok.key;
    b.access = kRR | kLW;
    const KeyResult with_local_write = table.bind_mw_type1(b);
    ASSERT_EQ(with_local_write.error, 0);
    EXPECT_EQ(wr(with_local_write.key, buf, 8).status, CheckStatus::RemoteAccessNotGranted) << "no write right";
    b.mw_key = with_local_write.key;
    b.access = kRR | Access::kMwBind;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
}

TEST_F(Windows, BindRangeMustLieInsideTheMr) {
    const std::uint32_t mw = alloc(MwType::Type1);
    EXPECT_EQ(table.bind_mw_type1(bind_req(mw, 0, kBufBytes + 1, kRR)).error, EINVAL);
    EXPECT_EQ(table.bind_mw_type1(bind_req(mw, kBufBytes - 4096, 8192, kRR)).error, EINVAL);
    BindRequest before = bind_req(mw, 0, 4096, kRR);
    before.addr = buf - 1;
    EXPECT_EQ(table.bind_mw_type1(before).error, EINVAL);
    BindRequest wrap = bind_req(mw, 4096, UINT64_MAX - 100, kRR);
    EXPECT_EQ(table.bind_mw_type1(wrap).error, EINVAL);
    EXPECT_EQ(table.bind_mw_type1(bind_req(mw, 0, kBufBytes, kRR)).error, 0);
}

TEST_F(Windows, BindNeedsOnePd) {
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    const Registered other = table.reg_mr(make_req(pd2, buf, 4096, kFull | Access::kMwBind));
    ASSERT_EQ(other.error, 0);
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(mw, 0, 4096, kRR);
    b.mr_lkey = other.lkey;  // MR in pd2, window in pd
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    b.mr_lkey = mr;
    b.qp_pd = pd2;  // posted on a QP of another PD
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    b.qp_pd = pd;
    const KeyResult ok = table.bind_mw_type1(b);
    ASSERT_EQ(ok.error, 0);
    EXPECT_EQ(remote(table, ok.key, pd2, RemoteOp::Read, buf, 8).status, CheckStatus::RemotePdMismatch);
}

TEST_F(Windows, WindowGrantsOnlyItsRightsAndRange) {
    const std::uint32_t mw = alloc(MwType::Type1);
    const KeyResult b = table.bind_mw_type1(bind_req(mw, 8192, 4096, kRR));
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(rd(b.key, buf + 8192, 4096).status, CheckStatus::Ok);
    EXPECT_EQ(wr(b.key, buf + 8192, 8).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(atomic(b.key, buf + 8192).status, CheckStatus::RemoteAccessNotGranted);
    EXPECT_EQ(rd(b.key, buf + 8191, 8).status, CheckStatus::RemoteOutOfRange) << "inside the MR, outside the window";
    EXPECT_EQ(rd(b.key, buf + 8192 + 4090, 8).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(b.key, buf + 8200, UINT64_MAX - 4).status, CheckStatus::RemoteOutOfRange);
    // The MR's own key is unaffected.
    EXPECT_EQ(wr(mr, buf + 8191, 8).status, CheckStatus::Ok);
}

TEST_F(Windows, ZeroBasedWindow) {
    const std::uint32_t mw = alloc(MwType::Type1);
    const KeyResult b = table.bind_mw_type1(bind_req(mw, 3 * 4096, 8192, kRR | kRW | Access::kZeroBased));
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(rd(b.key, 0, 8).host_addr, buf + 3 * 4096);
    EXPECT_EQ(wr(b.key, 8000, 192).host_addr, buf + 3 * 4096 + 8000);
    EXPECT_EQ(rd(b.key, 8192, 1).status, CheckStatus::RemoteOutOfRange);
    EXPECT_EQ(rd(b.key, buf + 3 * 4096, 8).status, CheckStatus::RemoteOutOfRange);
}

TEST_F(Windows, WindowOverAnIovaMr) {
    RegRequest r = make_req(pd, buf + 4096, 8 * 4096, kFull | Access::kMwBind);
    const std::uint64_t iova = 0x7777'0000'0000;
    r.iova = iova;
    const Registered base = table.reg_mr(r);
    ASSERT_EQ(base.error, 0);
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(mw, 0, 4096, kRR);
    b.mr_lkey = base.lkey;
    b.addr = iova + 2 * 4096;  // bind addresses are in the MR's iova space
    const KeyResult k = table.bind_mw_type1(b);
    ASSERT_EQ(k.error, 0);
    EXPECT_EQ(rd(k.key, iova + 2 * 4096 + 10, 8).host_addr, buf + 4096 + 2 * 4096 + 10);
    EXPECT_EQ(rd(k.key, iova + 4096, 8).status, CheckStatus::RemoteOutOfRange);
    // A process address is outside the iova space.
    b.mw_key = k.key;
    b.addr = buf + 4096;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);

    // Zero-based window on top of the iova MR.
    b.addr = iova + 4096;
    b.access = kRR | Access::kZeroBased;
    const KeyResult z = table.bind_mw_type1(b);
    ASSERT_EQ(z.error, 0);
    EXPECT_EQ(rd(z.key, 16, 8).host_addr, buf + 4096 + 4096 + 16);
}

TEST_F(Windows, WindowOverAZeroBasedMr) {
    const std::uint32_t zb = reg_ok(4096, 4 * 4096, kFull | Access::kMwBind | Access::kZeroBased);
    const std::uint32_t mw = alloc(MwType::Type1);
    BindRequest b = bind_req(mw, 0, 4096, kRR);
    b.mr_lkey = zb;
    b.addr = 8192;  // offset 8192 in the zero-based MR
    const KeyResult k = table.bind_mw_type1(b);
    ASSERT_EQ(k.error, 0);
    EXPECT_EQ(rd(k.key, 8192 + 100, 8).host_addr, buf + 4096 + 8192 + 100);
    b.mw_key = k.key;
    b.access = kRR | Access::kZeroBased;
    const KeyResult z = table.bind_mw_type1(b);
    ASSERT_EQ(z.error, 0);
    EXPECT_EQ(rd(z.key, 100, 8).host_addr, buf + 4096 + 8192 + 100);
    b.addr = 4 * 4096;  // past the end of the MR
    b.mw_key = z.key;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
}

TEST_F(Windows, Type1CannotBeInvalidatedByAWorkRequest) {
    const std::uint32_t mw = alloc(MwType::Type1);
    const KeyResult b = table.bind_mw_type1(bind_req(mw, 0, 4096, kRR));
    ASSERT_EQ(b.error, 0);
    EXPECT_EQ(table.invalidate(b.key, pd, std::nullopt), EINVAL);
    EXPECT_EQ(table.invalidate(b.key, pd, kQpn), EINVAL);
    EXPECT_EQ(rd(b.key, buf, 8).status, CheckStatus::Ok);
    EXPECT_EQ(table.invalidate(mr, pd, std::nullopt), EINVAL) << "nor an MR";
}

TEST_F(Windows, KindsAreNotInterchangeable) {
    const std::uint32_t t1 = alloc(MwType::Type1);
    const std::uint32_t t2 = alloc(MwType::Type2);
    BindRequest b = bind_req(t2, 0, 4096, kRR);
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
    b.mw_key = make_key(key_index(t1), 0x10);
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL);
    b.mw_key = make_key(key_index(mr), 0x10);
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL);
    EXPECT_EQ(table.dealloc_mw(mr, kOwner), EINVAL);
    // A window cannot be the MR of a bind.
    b.mw_key = t1;
    b.mr_lkey = t2;
    EXPECT_EQ(table.bind_mw_type1(b).error, EINVAL);
}

TEST_F(Windows, DeallocAndCounts) {
    const std::uint32_t t1 = alloc(MwType::Type1);
    const std::uint32_t t2 = alloc(MwType::Type2);
    EXPECT_EQ(table.counts().mws, 2u);
    EXPECT_EQ(pds.dealloc(pd, kOwner), EBUSY);
    const KeyResult b = table.bind_mw_type1(bind_req(t1, 0, 4096, kRR));
    ASSERT_EQ(b.error, 0);
    // Deallocating a bound window releases the MR.
    EXPECT_EQ(table.dealloc_mw(b.key, kOwner), 0);
    EXPECT_EQ(rd(b.key, buf, 8).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(table.dealloc_mw(b.key, kOwner), EINVAL) << "already gone";
    EXPECT_EQ(table.dealloc_mw(t2, kOwner), 0);
    EXPECT_EQ(table.counts().mws, 0u);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0);
    EXPECT_EQ(pds.dealloc(pd, kOwner), 0);
}

// ---- type 2 ----

TEST_F(Windows, Type2ConsumerKeyByteIsTheRkey) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t rkey = make_key(key_index(mw), 0xA5);
    ASSERT_EQ(table.bind_mw_type2(bind_req(rkey, 4096, 4096, kRR | kRW, 0x40)), 0);
    const Checked c = remote(table, rkey, pd, RemoteOp::Write, buf + 4096 + 8, 8, 0x40);
    ASSERT_EQ(c.status, CheckStatus::Ok);
    EXPECT_EQ(c.host_addr, buf + 4096 + 8);
    EXPECT_EQ(c.desc_key, rkey);
    if (mw != rkey) {
        EXPECT_EQ(remote(table, mw, pd, RemoteOp::Read, buf + 4096, 8, 0x40).status, CheckStatus::RkeyInvalid);
    }
    EXPECT_EQ(remote(table, other_byte(rkey), pd, RemoteOp::Read, buf + 4096, 8, 0x40).status,
              CheckStatus::RkeyInvalid);
}

TEST_F(Windows, Type2OnlyFromTheBoundQp) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t rkey = make_key(key_index(mw), 0x01);
    ASSERT_EQ(table.bind_mw_type2(bind_req(rkey, 0, 4096, kRR | kRW | kRA, 0x40)), 0);
    for (RemoteOp op : {RemoteOp::Read, RemoteOp::Write, RemoteOp::Atomic}) {
        EXPECT_EQ(remote(table, rkey, pd, op, buf, 8, 0x40).status, CheckStatus::Ok);
        EXPECT_EQ(remote(table, rkey, pd, op, buf, 8, 0x41).status, CheckStatus::WindowWrongQp);
    }
}

TEST_F(Windows, Type2BindsOnlyFromTheFreeState) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t k1 = make_key(key_index(mw), 0x10);
    ASSERT_EQ(table.bind_mw_type2(bind_req(k1, 0, 4096, kRR, 0x40)), 0);
    const std::uint32_t k2 = make_key(key_index(mw), 0x11);
    EXPECT_EQ(table.bind_mw_type2(bind_req(k2, 0, 4096, kRR, 0x40)), EINVAL);
    EXPECT_EQ(table.bind_mw_type2(bind_req(k1, 0, 4096, kRR, 0x40)), EINVAL);
    EXPECT_EQ(remote(table, k1, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::Ok);
    EXPECT_EQ(table.bind_mw_type2(bind_req(mw, 0, 0, kRR, 0x40)), EINVAL) << "zero length";
}

TEST_F(Windows, Type2Refusals) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t k = make_key(key_index(mw), 0x20);
    BindRequest b = bind_req(k, 0, 4096, kRW);
    const std::uint32_t ro = reg_ok(0, 4096, kRR | Access::kMwBind);
    b.mr_lkey = ro;
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL) << "write window on an MR without LOCAL_WRITE";
    const std::uint32_t no_bind = reg_ok(0, 4096, kFull);
    b.mr_lkey = no_bind;
    b.access = kRR;
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL) << "MR without MW_BIND";
    b.mr_lkey = mr;
    b.length = kBufBytes + 1;
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL) << "outside the MR";
    b.length = 4096;
    b.qp_pd = pds.alloc(kOwner).pd;
    EXPECT_EQ(table.bind_mw_type2(b), EINVAL) << "QP of another PD";
    b.qp_pd = pd;
    ASSERT_EQ(table.bind_mw_type2(b), 0);
}

TEST_F(Windows, LocalInvalidate) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t k = make_key(key_index(mw), 0x30);
    ASSERT_EQ(table.bind_mw_type2(bind_req(k, 0, 4096, kRR, 0x40)), 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), EBUSY);
    const std::uint32_t pd2 = pds.alloc(kOwner).pd;
    EXPECT_EQ(table.invalidate(k, pd2, std::nullopt), EINVAL) << "LOCAL_INV from a QP of another PD";
    EXPECT_EQ(table.invalidate(other_byte(k), pd, std::nullopt), EINVAL) << "wrong key byte";
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::Ok);
    // LOCAL_INV can be posted on any QP of the PD.
    ASSERT_EQ(table.invalidate(k, pd, std::nullopt), 0);
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(table.invalidate(k, pd, std::nullopt), EINVAL) << "already free";
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0) << "the window no longer holds the MR";
}

TEST_F(Windows, SendWithInvalidateMustArriveOnTheBoundQp) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t k = make_key(key_index(mw), 0x31);
    ASSERT_EQ(table.bind_mw_type2(bind_req(k, 0, 4096, kRR, 0x40)), 0);
    EXPECT_EQ(table.invalidate(k, pd, 0x41), EINVAL);
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::Ok);
    ASSERT_EQ(table.invalidate(k, pd, 0x40), 0);
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::RkeyInvalid);

    // Free again: it binds anew, with a new consumer key byte, to another QP.
    const std::uint32_t k2 = make_key(key_index(mw), 0x32);
    ASSERT_EQ(table.bind_mw_type2(bind_req(k2, 8192, 4096, kRR, 0x50)), 0);
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf + 8192, 8, 0x40).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(remote(table, k2, pd, RemoteOp::Read, buf + 8192, 8, 0x40).status, CheckStatus::WindowWrongQp);
    EXPECT_EQ(remote(table, k2, pd, RemoteOp::Read, buf + 8192, 8, 0x50).host_addr, buf + 8192);
}

TEST_F(Windows, Type2DeallocWhileBoundReleasesTheMr) {
    const std::uint32_t mw = alloc(MwType::Type2);
    const std::uint32_t k = make_key(key_index(mw), 0x77);
    ASSERT_EQ(table.bind_mw_type2(bind_req(k, 0, 4096, kRR, 0x40)), 0);
    // Deallocation names the window by index, whatever its key byte now is.
    EXPECT_EQ(table.dealloc_mw(mw, kOwner), 0);
    EXPECT_EQ(remote(table, k, pd, RemoteOp::Read, buf, 8, 0x40).status, CheckStatus::RkeyInvalid);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0);
    // The entry's next user does not answer to the consumer's byte. (The
    // free list hands out the MR's entry first, then the window's.)
    const std::uint32_t first = reg_ok(0, 4096, kFull);
    const std::uint32_t next = reg_ok(0, 4096, kFull);
    EXPECT_EQ(key_index(first), key_index(mr));
    EXPECT_EQ(key_index(next), key_index(k));
    EXPECT_NE(next, k);
    EXPECT_EQ(rd(k, buf, 8).status, CheckStatus::RkeyInvalid);
}

TEST_F(Windows, MultipleWindowsHoldTheMrUntilAllAreGone) {
    const KeyResult a = table.bind_mw_type1(bind_req(alloc(MwType::Type1), 0, 4096, kRR));
    const KeyResult b = table.bind_mw_type1(bind_req(alloc(MwType::Type1), 4096, 4096, kRR));
    const std::uint32_t t2 = make_key(key_index(alloc(MwType::Type2)), 9);
    ASSERT_EQ(a.error, 0);
    ASSERT_EQ(b.error, 0);
    ASSERT_EQ(table.bind_mw_type2(bind_req(t2, 0, 4096, kRR, 0x40)), 0);
    // Rebinding a window to the same MR does not count it twice.
    const KeyResult a2 = table.bind_mw_type1(bind_req(a.key, 8192, 4096, kRR));
    ASSERT_EQ(a2.error, 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), EBUSY);
    ASSERT_EQ(table.bind_mw_type1(bind_req(a2.key, 0, 0, 0)).error, 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), EBUSY);
    ASSERT_EQ(table.dealloc_mw(b.key, kOwner), 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), EBUSY);
    ASSERT_EQ(table.invalidate(t2, pd, 0x40), 0);
    EXPECT_EQ(table.dereg_mr(mr, kOwner), 0);
}

}  // namespace
}  // namespace uroce::mr
