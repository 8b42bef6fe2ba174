// apply_modify: what a sequence of accepted modifies leaves in the stored
// attributes, which ibv_query_qp returns; and the SQD drain rule.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "qp/address_values.h"
#include "qp_test_util.h"

namespace uroce::qp {
namespace {

using namespace test;

using S = QpState;

// A QP as the engine keeps it: check, then apply what was accepted.
struct Qp {
    QpType type;
    QpAttr stored;

    int modify(const QpAttr& attr, std::uint32_t mask) {
        const ModifyCheck c = check_modify(type, stored, mask, attr, kLimits);
        if (c.error == 0) {
            apply_modify(stored, mask, attr, c.next);
        }
        return c.error;
    }
};

Qp make_qp(QpType type) {
    Qp qp{type, QpAttr{}};
    qp.stored.cap = QpCap{.max_send_wr = 64, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 2,
                          .max_inline_data = 128};
    return qp;
}

TEST(QpApply, RcBringUpIsReturnedByQuery) {
    Qp qp = make_qp(QpType::Rc);

    QpAttr init;
    init.state = S::Init;
    init.pkey_index = 0;
    init.port_num = 1;
    init.qp_access_flags = QpAccess::kRemoteWrite | QpAccess::kRemoteRead;
    ASSERT_EQ(qp.modify(init, kStateBit | kPkey | kPort | kAccess), 0);

    QpAttr rtr;
    rtr.state = S::Rtr;
    rtr.path_mtu = Mtu::Mtu1024;
    rtr.dest_qp_num = 0x00ABCD;
    rtr.rq_psn = 0x111111;
    rtr.max_dest_rd_atomic = 12;
    rtr.min_rnr_timer = 18;
    rtr.ah_attr = good_ah();
    ASSERT_EQ(qp.modify(rtr, kStateBit | kAv | kMtu | kDestQpn | kRqPsn | kDestRdAtomic | kMinRnr), 0);

    QpAttr rts;
    rts.state = S::Rts;
    rts.timeout = 14;
    rts.retry_cnt = 6;
    rts.rnr_retry = 7;
    rts.sq_psn = 0x222222;
    rts.max_rd_atomic = 8;
    ASSERT_EQ(qp.modify(rts, kStateBit | kTimeout | kRetry | kRnrRetry | kSqPsn | kRdAtomic), 0);

    // What ibv_query_qp should report, written out field by field.
    QpAttr want;
    want.state = S::Rts;
    want.cur_state = S::Rts;
    want.path_mtu = Mtu::Mtu1024;
    want.path_mig_state = MigState::Migrated;
    want.qkey = 0;
    want.rq_psn = 0x111111;
    want.sq_psn = 0x222222;
    want.dest_qp_num = 0x00ABCD;
    want.qp_access_flags = QpAccess::kRemoteWrite | QpAccess::kRemoteRead;
    want.cap = QpCap{.max_send_wr = 64, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 2,
                     .max_inline_data = 128};
    want.ah_attr = good_ah();
    want.pkey_index = 0;
    want.en_sqd_async_notify = false;
    want.sq_draining = false;
    want.max_rd_atomic = 8;
    want.max_dest_rd_atomic = 12;
    want.min_rnr_timer = 18;
    want.port_num = 1;
    want.timeout = 14;
    want.retry_cnt = 6;
    want.rnr_retry = 7;
    want.rate_limit = 0;
    EXPECT_EQ(qp.stored, want);
    EXPECT_EQ(qp.stored.ah_attr.dgid, good_ah().dgid);
    EXPECT_EQ(qp.stored.ah_attr.flow_label, 0x12345u);
}

TEST(QpApply, WideValuesAreKeptAsTheKernelTakesThem) {
    Qp qp = make_qp(QpType::Rc);
    QpAttr init;
    init.state = S::Init;
    init.port_num = 1;
    ASSERT_EQ(qp.modify(init, kStateBit | kPkey | kPort | kAccess), 0);
    QpAttr rtr;
    rtr.state = S::Rtr;
    rtr.ah_attr = good_ah();
    rtr.ah_attr.flow_label = 0xFFFFFFFF;  // what UCX sets
    rtr.ah_attr.sl = 0x13;
    rtr.ah_attr.hop_limit = 1;  // ibv_rc_pingpong's
    rtr.path_mtu = Mtu::Mtu1024;
    rtr.dest_qp_num = 0xAB000123;
    rtr.min_rnr_timer = 0x3F;
    ASSERT_EQ(qp.modify(rtr, kStateBit | kAv | kMtu | kDestQpn | kRqPsn | kDestRdAtomic | kMinRnr), 0);
    EXPECT_EQ(qp.stored.ah_attr.flow_label, 0xFFFFFu);
    EXPECT_EQ(qp.stored.ah_attr.sl, 0x3);
    // A unicast path gets the route's hop limit, as the kernel resolves it.
    EXPECT_EQ(qp.stored.ah_attr.hop_limit, kRouteHopLimit);
    EXPECT_EQ(qp.stored.dest_qp_num, 0x000123u);
    EXPECT_EQ(qp.stored.min_rnr_timer, 0x1F);
    QpAttr rts;
    rts.state = S::Rts;
    rts.retry_cnt = 0x0F;
    rts.rnr_retry = 0xFF;
    ASSERT_EQ(qp.modify(rts, kStateBit | kTimeout | kRetry | kRnrRetry | kSqPsn | kRdAtomic), 0);
    EXPECT_EQ(qp.stored.retry_cnt, 7);
    EXPECT_EQ(qp.stored.rnr_retry, 7);
}

TEST(QpApply, MulticastPathKeepsItsHopLimit) {
    AhAttr ah = good_ah();
    ah.hop_limit = 3;
    ah.dgid = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    EXPECT_EQ(as_kernel_takes(ah).hop_limit, 3);
    ah.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 1, 2, 3};
    EXPECT_EQ(as_kernel_takes(ah).hop_limit, 3);
    ah.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 1, 2, 3};
    EXPECT_EQ(as_kernel_takes(ah).hop_limit, kRouteHopLimit);
}

TEST(QpApply, UdBringUpKeepsQkeyAndSqPsn) {
    Qp qp = make_qp(QpType::Ud);
    QpAttr a;
    a.state = S::Init;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = 0x80000001;
    ASSERT_EQ(qp.modify(a, kStateBit | kPkey | kPort | kQkey), 0);
    a.state = S::Rtr;
    ASSERT_EQ(qp.modify(a, kStateBit), 0);
    a.state = S::Rts;
    a.sq_psn = 0x5A5A5A;
    ASSERT_EQ(qp.modify(a, kStateBit | kSqPsn), 0);
    EXPECT_EQ(qp.stored.state, S::Rts);
    EXPECT_EQ(qp.stored.cur_state, S::Rts);
    EXPECT_EQ(qp.stored.qkey, 0x80000001u);
    EXPECT_EQ(qp.stored.sq_psn, 0x5A5A5Au);
    EXPECT_EQ(qp.stored.port_num, 1);
    EXPECT_EQ(qp.stored.rq_psn, 0u);  // never set
}

TEST(QpApply, OnlyTheMaskedFieldsChange) {
    QpAttr stored = good_attr(S::Rts, S::Rts);
    stored.state = S::Rts;
    stored.cur_state = S::Rts;
    const QpAttr before = stored;

    QpAttr change;  // every field different from `stored`'s ...
    change.state = S::Rts;
    change.min_rnr_timer = 3;
    change.timeout = 1;
    change.qkey = 7;
    change.port_num = 9;
    apply_modify(stored, kMinRnr, change, S::Rts);  // ... but only MIN_RNR_TIMER is in the mask

    QpAttr want = before;
    want.min_rnr_timer = 3;
    EXPECT_EQ(stored, want);
}

TEST(QpApply, EveryBitStoresItsField) {
    struct Case {
        std::uint32_t bit;
        void (*set)(QpAttr&);
        bool (*stored)(const QpAttr&);
    };
    const Case cases[] = {
        {kSqdNotify, [](QpAttr& a) { a.en_sqd_async_notify = true; },
         [](const QpAttr& a) { return a.en_sqd_async_notify; }},
        {kAccess, [](QpAttr& a) { a.qp_access_flags = 8; }, [](const QpAttr& a) { return a.qp_access_flags == 8; }},
        {kPkey, [](QpAttr& a) { a.pkey_index = 5; }, [](const QpAttr& a) { return a.pkey_index == 5; }},
        {kPort, [](QpAttr& a) { a.port_num = 1; }, [](const QpAttr& a) { return a.port_num == 1; }},
        {kQkey, [](QpAttr& a) { a.qkey = 42; }, [](const QpAttr& a) { return a.qkey == 42; }},
        {kAv, [](QpAttr& a) { a.ah_attr = good_ah(); }, [](const QpAttr& a) { return a.ah_attr == good_ah(); }},
        {kMtu, [](QpAttr& a) { a.path_mtu = Mtu::Mtu512; }, [](const QpAttr& a) { return a.path_mtu == Mtu::Mtu512; }},
        {kTimeout, [](QpAttr& a) { a.timeout = 20; }, [](const QpAttr& a) { return a.timeout == 20; }},
        {kRetry, [](QpAttr& a) { a.retry_cnt = 5; }, [](const QpAttr& a) { return a.retry_cnt == 5; }},
        {kRnrRetry, [](QpAttr& a) { a.rnr_retry = 4; }, [](const QpAttr& a) { return a.rnr_retry == 4; }},
        {kRqPsn, [](QpAttr& a) { a.rq_psn = 0x77; }, [](const QpAttr& a) { return a.rq_psn == 0x77; }},
        {kRdAtomic, [](QpAttr& a) { a.max_rd_atomic = 2; }, [](const QpAttr& a) { return a.max_rd_atomic == 2; }},
        {kMinRnr, [](QpAttr& a) { a.min_rnr_timer = 9; }, [](const QpAttr& a) { return a.min_rnr_timer == 9; }},
        {kSqPsn, [](QpAttr& a) { a.sq_psn = 0x88; }, [](const QpAttr& a) { return a.sq_psn == 0x88; }},
        {kDestRdAtomic, [](QpAttr& a) { a.max_dest_rd_atomic = 3; },
         [](const QpAttr& a) { return a.max_dest_rd_atomic == 3; }},
        {kMigState, [](QpAttr& a) { a.path_mig_state = MigState::Armed; },
         [](const QpAttr& a) { return a.path_mig_state == MigState::Armed; }},
        {kDestQpn, [](QpAttr& a) { a.dest_qp_num = 0x99; }, [](const QpAttr& a) { return a.dest_qp_num == 0x99; }},
    };
    for (const Case& c : cases) {
        QpAttr stored;
        QpAttr attr;
        c.set(attr);
        apply_modify(stored, c.bit, attr, S::Reset);
        EXPECT_TRUE(c.stored(stored)) << attr_mask_bit_name(c.bit);
        QpAttr untouched;
        apply_modify(untouched, 0, attr, S::Reset);
        EXPECT_FALSE(c.stored(untouched)) << attr_mask_bit_name(c.bit) << " stored without its bit";
    }
}

TEST(QpApply, PsnsAreMaskedTo24Bits) {
    QpAttr stored;
    QpAttr attr;
    attr.rq_psn = 0x01234567;
    attr.sq_psn = 0xFFFFFFFF;
    apply_modify(stored, kRqPsn | kSqPsn, attr, S::Reset);
    EXPECT_EQ(stored.rq_psn, 0x234567u);
    EXPECT_EQ(stored.sq_psn, 0xFFFFFFu);
}

TEST(QpApply, CapIsNotChangedByModify) {
    Qp qp = make_qp(QpType::Rc);
    const QpCap before = qp.stored.cap;
    QpAttr a = good_attr(S::Reset, S::Init);
    a.cap = QpCap{1, 1, 1, 1, 1};
    EXPECT_EQ(qp.modify(a, kStateBit | kPkey | kPort | kAccess | kCap), EINVAL);
    EXPECT_EQ(qp.modify(a, kStateBit | kPkey | kPort | kAccess), 0);
    EXPECT_EQ(qp.stored.cap, before);
}

TEST(QpApply, RefusedModifyChangesNothing) {
    Qp qp = make_qp(QpType::Rc);
    const QpAttr before = qp.stored;
    QpAttr a = good_attr(S::Reset, S::Init);
    a.port_num = 2;
    EXPECT_EQ(qp.modify(a, kStateBit | kPkey | kPort | kAccess), EINVAL);
    EXPECT_EQ(qp.stored, before);
    a = good_attr(S::Reset, S::Rts);
    EXPECT_EQ(qp.modify(a, kStateBit), EINVAL);
    EXPECT_EQ(qp.stored, before);
}

TEST(QpApply, ModifyWithoutStateKeepsTheState) {
    Qp qp = make_qp(QpType::Rc);
    qp.stored.state = S::Rts;
    qp.stored.cur_state = S::Rts;
    QpAttr a = good_attr(S::Rts, S::Err);  // state is not in the mask: ignored
    a.min_rnr_timer = 22;
    EXPECT_EQ(qp.modify(a, kMinRnr), 0);
    EXPECT_EQ(qp.stored.state, S::Rts);
    EXPECT_EQ(qp.stored.min_rnr_timer, 22);
}

TEST(QpApply, SqdDrainsBeforeItMayBeLeftOrModified) {
    Qp qp = make_qp(QpType::Rc);
    qp.stored.state = S::Rts;
    qp.stored.cur_state = S::Rts;

    QpAttr sqd;
    sqd.state = S::Sqd;
    sqd.en_sqd_async_notify = true;
    ASSERT_EQ(qp.modify(sqd, kStateBit | kSqdNotify), 0);
    EXPECT_EQ(qp.stored.state, S::Sqd);
    EXPECT_TRUE(qp.stored.sq_draining);
    EXPECT_TRUE(qp.stored.en_sqd_async_notify);

    // While draining: no resume, no SQD -> SQD change, with or without STATE.
    QpAttr rts = good_attr(S::Sqd, S::Rts);
    EXPECT_EQ(qp.modify(rts, kStateBit), EINVAL);
    QpAttr change = good_attr(S::Sqd, S::Sqd);
    change.timeout = 3;
    EXPECT_EQ(qp.modify(change, kStateBit | kTimeout), EINVAL);
    EXPECT_EQ(qp.modify(change, kTimeout), EINVAL);
    EXPECT_EQ(qp.stored.timeout, 0);
    // ... the state-only check does not know about draining.
    EXPECT_EQ(check_modify(QpType::Rc, S::Sqd, kTimeout, change, kLimits).error, 0);
    // ERR and RESET are always possible.
    EXPECT_EQ(check_modify(QpType::Rc, qp.stored, kStateBit, good_attr(S::Sqd, S::Err), kLimits).error, 0);
    EXPECT_EQ(check_modify(QpType::Rc, qp.stored, kStateBit, good_attr(S::Sqd, S::Reset), kLimits).error, 0);

    // The engine reports the SQ drained.
    qp.stored.sq_draining = false;
    EXPECT_EQ(qp.modify(change, kTimeout), 0);
    EXPECT_EQ(qp.stored.timeout, 3);
    EXPECT_EQ(qp.stored.state, S::Sqd);
    EXPECT_FALSE(qp.stored.sq_draining);  // SQD -> SQD does not restart draining
    EXPECT_EQ(qp.modify(rts, kStateBit), 0);
    EXPECT_EQ(qp.stored.state, S::Rts);
    EXPECT_FALSE(qp.stored.sq_draining);
}

TEST(QpApply, ErrorFromDrainingSqdClearsTheDrainFlag) {
    QpAttr stored;
    stored.state = S::Sqd;
    stored.cur_state = S::Sqd;
    stored.sq_draining = true;
    apply_modify(stored, kStateBit, good_attr(S::Sqd, S::Err), S::Err);
    EXPECT_EQ(stored.state, S::Err);
    EXPECT_FALSE(stored.sq_draining);
}

TEST(QpApply, ResetKeepsAttributesButNotTheState) {
    Qp qp = make_qp(QpType::Uc);
    qp.stored = good_attr(S::Rts, S::Rts);
    qp.stored.state = S::Rts;
    qp.stored.cur_state = S::Rts;
    QpAttr before = qp.stored;
    ASSERT_EQ(qp.modify(good_attr(S::Rts, S::Reset), kStateBit), 0);
    before.state = S::Reset;
    before.cur_state = S::Reset;
    EXPECT_EQ(qp.stored, before);
}

}  // namespace
}  // namespace uroce::qp
