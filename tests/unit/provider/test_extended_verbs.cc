// The extended verbs' provider side on its own: what ibv_create_qp_ex and
// ibv_create_cq_ex accept (extended_rules.h), and the ibv_wr_* table
// (qp_ex_ops.h, send_batch.h) writing WQEs into a send ring made the way
// uroced makes it: the bytes of every operation, nothing in the ring before
// ibv_wr_complete, the first mistake returned and nothing posted, abort,
// all-or-nothing on a full ring.
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "extended_rules.h"
#include "parent_domain.h"
#include "qp_ex_ops.h"
#include "ring_fixture.h"
#include "send_batch.h"
#include "work_queue.h"

namespace uroce::provider {
namespace {

// An extended QP as the table sees it: its ibv_qp_ex first, then what
// batch_of and post_batch below find from it.
struct TestQp {
    ibv_qp_ex qpx;
    SendBatch batch;
    WorkQueue sq;
};

}  // namespace

SendBatch& batch_of(ibv_qp_ex* qp) { return reinterpret_cast<TestQp*>(qp)->batch; }

int post_batch(ibv_qp_ex* qp, ibv_send_wr* wr) {
    return reinterpret_cast<TestQp*>(qp)->sq.post_send_all(qp->qp_base.qp_type, qp->qp_base.state, -1, wr);
}

}  // namespace uroce::provider

namespace uroce::provider_test {
namespace {

using provider::TestQp;

constexpr std::uint64_t kRcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

TEST(SendOpsOffered, FollowTheOpcodesEachQpTypeMayPost) {
    EXPECT_EQ(provider::send_ops_offered(IBV_QPT_RC), kRcOps);
    EXPECT_EQ(provider::send_ops_offered(IBV_QPT_UC),
              kRcOps & ~std::uint64_t{IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD});
    EXPECT_EQ(provider::send_ops_offered(IBV_QPT_UD),
              std::uint64_t{IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM});
    EXPECT_EQ(provider::send_ops_offered(IBV_QPT_RAW_PACKET), 0u);
}

class QpInitAttrEx : public ::testing::Test {
protected:
    QpInitAttrEx() {
        attr_.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        attr_.pd = &pd_;
        attr_.qp_type = IBV_QPT_RC;
        attr_.send_ops_flags = kRcOps;
    }
    ibv_pd pd_{};
    ibv_qp_init_attr_ex attr_{};
};

TEST_F(QpInitAttrEx, EveryOpcodeOfTheTypeIsAccepted) {
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), 0);
    attr_.qp_type = IBV_QPT_UD;
    attr_.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), 0);
    attr_.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;  // with no flag set
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), 0);
}

// An XRC target QP has an XRCD and no PD (ibv_create_qp_ex(3)); without
// the XRCD it is EINVAL. An XRC send QP needs its PD as any other.
TEST_F(QpInitAttrEx, XrcTargetNeedsItsXrcdNotAPd) {
    ibv_xrcd xrcd{};
    attr_.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    attr_.pd = nullptr;
    attr_.xrcd = &xrcd;
    attr_.qp_type = IBV_QPT_XRC_RECV;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), 0);
    attr_.xrcd = nullptr;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EINVAL);
    attr_.xrcd = &xrcd;
    attr_.comp_mask = 0;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EINVAL);
    attr_.comp_mask = IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_RX_HASH;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP);
}

TEST_F(QpInitAttrEx, XrcSendTakesRcOps) {
    attr_.qp_type = IBV_QPT_XRC_SEND;
    attr_.send_ops_flags = kRcOps;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), 0);
    attr_.comp_mask &= ~static_cast<std::uint32_t>(IBV_QP_INIT_ATTR_PD);
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EINVAL);
}

TEST_F(QpInitAttrEx, NoPdIsEinval) {
    attr_.comp_mask &= ~static_cast<std::uint32_t>(IBV_QP_INIT_ATTR_PD);
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EINVAL);
    attr_.comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr_.pd = nullptr;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EINVAL);
}

TEST_F(QpInitAttrEx, WhatUroceDoesNotOfferIsEopnotsupp) {
    const std::uint64_t refused_ops[] = {IBV_QP_EX_WITH_TSO, IBV_QP_EX_WITH_ATOMIC_WRITE, 1u << 11, 1ull << 40};
    for (const std::uint64_t op : refused_ops) {
        attr_.send_ops_flags = kRcOps | op;
        EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP) << op;
    }
    attr_.send_ops_flags = kRcOps;
    attr_.qp_type = IBV_QPT_UC;
    attr_.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP);
    attr_.qp_type = IBV_QPT_UD;
    attr_.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP);
    attr_.send_ops_flags = IBV_QP_EX_WITH_SEND;
    attr_.qp_type = IBV_QPT_RC;
    for (const std::uint32_t mask : {IBV_QP_INIT_ATTR_XRCD, IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
                                     IBV_QP_INIT_ATTR_IND_TABLE, IBV_QP_INIT_ATTR_RX_HASH}) {
        attr_.comp_mask = IBV_QP_INIT_ATTR_PD | mask;
        EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP) << mask;
    }
    attr_.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    attr_.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    EXPECT_EQ(provider::check_qp_init_attr_ex(attr_), EOPNOTSUPP);
}

TEST(CqInitAttrEx, Rules) {
    ibv_cq_init_attr_ex a{};
    a.cqe = 16;
    a.wc_flags = provider::kCqWcFlagsOffered;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), 0);
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), 0);
    a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EOPNOTSUPP);
    a.flags = 0;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;  // a parent domain is offered, but none is given
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EINVAL);
    provider::Pd plain{};  // a protection domain is not a parent domain (as mlx5)
    a.parent_domain = &plain.pd;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EINVAL);
    provider::Pd parent{};
    parent.kind = provider::PdKind::Parent;
    a.parent_domain = &parent.pd;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), 0);
    a.comp_mask = 0;
    for (const std::uint64_t f : {IBV_WC_EX_WITH_CVLAN, IBV_WC_EX_WITH_FLOW_TAG, IBV_WC_EX_WITH_TM_INFO}) {
        a.wc_flags = f;
        EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EOPNOTSUPP) << f;
    }
    a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
    a.cqe = 0;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EINVAL);
    a.cqe = 16;
    a.comp_vector = 1;
    EXPECT_EQ(provider::check_cq_init_attr_ex(a, 1), EINVAL);
}

class WrPost : public ::testing::Test {
protected:
    void SetUp() override { make(IBV_QPT_RC, kRcOps, 4); }

    void make(ibv_qp_type type, std::uint64_t ops, std::uint32_t depth) {
        rings_ = make_qp(depth, 2, 64, 4, 1);
        ASSERT_NE(rings_, nullptr);
        qp_ = std::make_unique<TestQp>();
        ASSERT_EQ(qp_->sq.attach(rings_->sq.header, rings_->memory.size(), provider::WorkQueue::Kind::Send), 0);
        qp_->batch.configure(type, ops, qp_->sq.max_sge(), qp_->sq.max_inline());
        provider::install_send_ops(qp_->qpx);
        qp_->qpx.qp_base.qp_type = type;
        qp_->qpx.qp_base.state = IBV_QPS_RTS;
        q_ = &qp_->qpx;
    }

    [[nodiscard]] std::uint32_t producer() const { return rings_->sq.header->producer; }
    [[nodiscard]] uroce_send_wqe wqe(std::uint32_t index) const {
        return read_at<uroce_send_wqe>(slot(rings_->sq, index));
    }
    [[nodiscard]] uroce_sge sge(std::uint32_t index, int n) const {
        return read_at<uroce_sge>(slot(rings_->sq, index) + sizeof(uroce_send_wqe) + sizeof(uroce_sge) * n);
    }
    [[nodiscard]] std::string inline_data(std::uint32_t index) const {
        const auto* p = reinterpret_cast<const char*>(slot(rings_->sq, index) + sizeof(uroce_send_wqe));
        return std::string(p, wqe(index).inline_len);
    }

    std::shared_ptr<device::QpRings> rings_;
    std::unique_ptr<TestQp> qp_;
    ibv_qp_ex* q_ = nullptr;
};

TEST_F(WrPost, ABatchReachesTheRingOnlyAtComplete) {
    ibv_wr_start(q_);
    q_->wr_id = 5;
    q_->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    ibv_wr_send_imm(q_, htonl(0xCAFE));
    ibv_wr_set_sge(q_, 0x11, 0x1000, 100);
    q_->wr_id = 6;
    q_->wr_flags = 0;
    ibv_wr_rdma_write(q_, 0x2222, 0xDEAD0000);
    const ibv_sge list[2] = {{0x3000, 10, 0x33}, {0x4000, 20, 0x44}};
    ibv_wr_set_sge_list(q_, 2, list);
    EXPECT_EQ(producer(), 0u);
    EXPECT_EQ(qp_->batch.pending(), 2u);
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    ASSERT_EQ(producer(), 2u);
    uroce_send_wqe w = wqe(0);
    EXPECT_EQ(w.wr_id, 5u);
    EXPECT_EQ(w.opcode, IBV_WR_SEND_WITH_IMM);
    EXPECT_EQ(w.send_flags, static_cast<std::uint32_t>(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
    EXPECT_EQ(w.imm_data, htonl(0xCAFE));
    EXPECT_EQ(w.num_sge, 1u);
    EXPECT_EQ(sge(0, 0).addr, 0x1000u);
    EXPECT_EQ(sge(0, 0).length, 100u);
    EXPECT_EQ(sge(0, 0).lkey, 0x11u);
    w = wqe(1);
    EXPECT_EQ(w.wr_id, 6u);
    EXPECT_EQ(w.opcode, IBV_WR_RDMA_WRITE);
    EXPECT_EQ(w.send_flags, 0u);
    EXPECT_EQ(w.u.rdma.rkey, 0x2222u);
    EXPECT_EQ(w.u.rdma.remote_addr, 0xDEAD0000u);
    EXPECT_EQ(w.num_sge, 2u);
    EXPECT_EQ(sge(1, 1).addr, 0x4000u);
    EXPECT_EQ(sge(1, 1).lkey, 0x44u);
    EXPECT_EQ(qp_->batch.pending(), 0u);
}

TEST_F(WrPost, InlineDataIsCopiedWhenSet) {
    char first[] = "hello, ";
    char second[] = "inline ";
    char third[] = "world";
    ibv_wr_start(q_);
    q_->wr_id = 1;
    ibv_wr_send(q_);
    ibv_wr_set_inline_data(q_, first, 7);
    q_->wr_id = 2;
    ibv_wr_rdma_write_imm(q_, 7, 0x5000, htonl(3));
    const ibv_data_buf bufs[3] = {{first, 7}, {second, 7}, {third, 5}};
    ibv_wr_set_inline_data_list(q_, 3, bufs);
    std::memset(first, 'x', 7);
    std::memset(second, 'x', 7);
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    EXPECT_EQ(inline_data(0), "hello, ");
    EXPECT_EQ(inline_data(1), "hello, inline world");
    EXPECT_NE(wqe(0).send_flags & IBV_SEND_INLINE, 0u);
    EXPECT_EQ(wqe(1).num_sge, 0u);
    EXPECT_EQ(wqe(1).u.rdma.remote_addr, 0x5000u);
    EXPECT_EQ(wqe(1).imm_data, htonl(3));
}

TEST_F(WrPost, ReadAtomicsInvalidateAndBindCarryTheirFields) {
    make(IBV_QPT_RC, kRcOps, 8);
    ibv_mw mw{};
    ibv_mr mr{};
    mr.lkey = 0x77;
    const ibv_mw_bind_info info{&mr, 0x9000, 0x100, IBV_ACCESS_REMOTE_WRITE};
    ibv_wr_start(q_);
    ibv_wr_rdma_read(q_, 0x10, 0xA000);
    ibv_wr_set_sge(q_, 1, 0x100, 8);
    ibv_wr_atomic_cmp_swp(q_, 0x20, 0xB000, 11, 22);
    ibv_wr_set_sge(q_, 1, 0x108, 8);
    ibv_wr_atomic_fetch_add(q_, 0x30, 0xC000, 33);
    ibv_wr_set_sge(q_, 1, 0x110, 8);
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    ibv_wr_start(q_);
    ibv_wr_bind_mw(q_, &mw, 0x4401, &info);
    ibv_wr_local_inv(q_, 0x5501);
    ibv_wr_send_inv(q_, 0x6601);
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    ASSERT_EQ(producer(), 6u);
    EXPECT_EQ(wqe(0).opcode, IBV_WR_RDMA_READ);
    EXPECT_EQ(wqe(0).u.rdma.rkey, 0x10u);
    EXPECT_EQ(wqe(0).u.rdma.remote_addr, 0xA000u);
    EXPECT_EQ(wqe(1).opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
    EXPECT_EQ(wqe(1).u.atomic.rkey, 0x20u);
    EXPECT_EQ(wqe(1).u.atomic.compare_add, 11u);
    EXPECT_EQ(wqe(1).u.atomic.swap, 22u);
    EXPECT_EQ(wqe(2).opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
    EXPECT_EQ(wqe(2).u.atomic.remote_addr, 0xC000u);
    EXPECT_EQ(wqe(2).u.atomic.compare_add, 33u);
    EXPECT_EQ(wqe(3).opcode, IBV_WR_BIND_MW);
    EXPECT_EQ(wqe(3).u.bind.mw_rkey, 0x4401u);
    EXPECT_EQ(wqe(3).u.bind.mr_lkey, 0x77u);
    EXPECT_EQ(wqe(3).u.bind.addr, 0x9000u);
    EXPECT_EQ(wqe(3).u.bind.length, 0x100u);
    EXPECT_EQ(wqe(3).u.bind.access, static_cast<std::uint32_t>(IBV_ACCESS_REMOTE_WRITE));
    EXPECT_EQ(wqe(4).opcode, IBV_WR_LOCAL_INV);
    EXPECT_EQ(wqe(4).imm_data, 0x5501u);
    EXPECT_EQ(wqe(5).opcode, IBV_WR_SEND_WITH_INV);
    EXPECT_EQ(wqe(5).imm_data, 0x6601u);
}

TEST_F(WrPost, UdAddressInEitherOrder) {
    make(IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 4);
    ibv_ah ah{};
    ah.handle = 0x4242;
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    ibv_wr_set_ud_addr(q_, &ah, 0x123456, 0x11111111);
    ibv_wr_set_sge(q_, 1, 0x100, 8);
    ibv_wr_send_imm(q_, 0);
    ibv_wr_set_sge(q_, 1, 0x100, 8);
    ibv_wr_set_ud_addr(q_, &ah, 0x654321, 0x22222222);
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    EXPECT_EQ(wqe(0).u.ud.ah, 0x4242u);
    EXPECT_EQ(wqe(0).u.ud.remote_qpn, 0x123456u);
    EXPECT_EQ(wqe(1).u.ud.remote_qpn, 0x654321u);
    EXPECT_EQ(wqe(1).u.ud.remote_qkey, 0x22222222u);
    // Without an address the batch is refused.
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), EINVAL);
    EXPECT_EQ(producer(), 2u);
}

// Each mistake: ibv_wr_complete returns it, the batch (with the good WR
// before the mistake) is not posted, and the QP takes the next batch.
TEST_F(WrPost, TheFirstMistakeIsReturnedAndNothingPosted) {
    make(IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 4);
    char big[128] = {};
    const ibv_sge three[3] = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}};
    ibv_ah ah{};
    struct Case {
        const char* what;
        void (*mistake)(ibv_qp_ex*, char*, const ibv_sge*, ibv_ah*);
        int want;
    };
    const Case cases[] = {
        {"an opcode not in send_ops_flags",
         [](ibv_qp_ex* q, char*, const ibv_sge*, ibv_ah*) { ibv_wr_rdma_write(q, 1, 1); }, EINVAL},
        {"more SGEs than max_send_sge",
         [](ibv_qp_ex* q, char*, const ibv_sge* s, ibv_ah*) {
             ibv_wr_send(q);
             ibv_wr_set_sge_list(q, 3, s);
         },
         EINVAL},
        {"inline beyond max_inline_data",
         [](ibv_qp_ex* q, char* b, const ibv_sge*, ibv_ah*) {
             ibv_wr_send(q);
             ibv_wr_set_inline_data(q, b, 65);
         },
         EINVAL},
        {"set_ud_addr on RC",
         [](ibv_qp_ex* q, char*, const ibv_sge*, ibv_ah* handle) {
             ibv_wr_send(q);
             ibv_wr_set_ud_addr(q, handle, 1, 1);
         },
         EINVAL},
        {"TSO", [](ibv_qp_ex* q, char* b, const ibv_sge*, ibv_ah*) { ibv_wr_send_tso(q, b, 10, 10); }, EOPNOTSUPP},
        {"XRC SRQ on an RC QP",
         [](ibv_qp_ex* q, char*, const ibv_sge*, ibv_ah*) {
             ibv_wr_send(q);
             ibv_wr_set_xrc_srqn(q, 1);
         },
         EINVAL},
    };
    ibv_wr_start(q_);
    ibv_wr_set_sge(q_, 1, 0x100, 8);  // before any opcode
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), EINVAL) << "set_sge before an opcode";
    for (const Case& c : cases) {
        ibv_wr_start(q_);
        ibv_wr_send(q_);
        ibv_wr_set_sge(q_, 1, 0x100, 8);
        c.mistake(q_, big, three, &ah);
        EXPECT_EQ(ibv_wr_complete(q_), c.want) << c.what;
        EXPECT_EQ(producer(), 0u) << c.what;
    }
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), 0);
    EXPECT_EQ(producer(), 1u);
}

TEST_F(WrPost, AbortDropsTheBatch) {
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    ibv_wr_abort(q_);
    EXPECT_EQ(qp_->batch.pending(), 0u);
    EXPECT_EQ(ibv_wr_complete(q_), EINVAL);  // no wr_start since the abort
    EXPECT_EQ(producer(), 0u);
}

TEST_F(WrPost, AFullRingTakesNoneOfTheBatch) {
    ibv_wr_start(q_);
    for (int i = 0; i < 3; ++i) {
        ibv_wr_send(q_);
    }
    ASSERT_EQ(ibv_wr_complete(q_), 0);
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), ENOMEM);  // 1 slot left of 4, 2 WRs
    EXPECT_EQ(producer(), 3u);
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), 0);
    EXPECT_EQ(producer(), 4u);
}

TEST_F(WrPost, BeforeRtsTheBatchIsRefused) {
    q_->qp_base.state = IBV_QPS_RTR;
    ibv_wr_start(q_);
    ibv_wr_send(q_);
    EXPECT_EQ(ibv_wr_complete(q_), EINVAL);
    EXPECT_EQ(producer(), 0u);
}

}  // namespace
}  // namespace uroce::provider_test
