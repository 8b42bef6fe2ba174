// Posting work requests (verbs_provider/work_queue.h) into rings made the
// way uroced makes them: the WQE bytes each verb writes, the checks of
// ibv_post_send(3) / ibv_post_recv(3) (bad_wr at the first refused WR, the
// ones before it posted), a full ring, the doorbell, concurrent posters.
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>
#include <vector>

#include "ring_fixture.h"
#include "work_queue.h"

namespace uroce::provider_test {
namespace {

using provider::WorkQueue;

class PostSend : public ::testing::Test {
protected:
    void SetUp() override { attach(4, 2, 64); }

    void attach(std::uint32_t wr, std::uint32_t sge, std::uint32_t max_inline) {
        rings_ = make_qp(wr, sge, max_inline, 4, 2);
        ASSERT_NE(rings_, nullptr);
        sq_ = std::make_unique<WorkQueue>();
        ASSERT_EQ(sq_->attach(rings_->sq.header, rings_->memory.size(), WorkQueue::Kind::Send), 0);
    }

    int post(ibv_send_wr* wr, ibv_qp_type type = IBV_QPT_RC, ibv_qp_state state = IBV_QPS_RTS) {
        bad_ = reinterpret_cast<ibv_send_wr*>(0x1);  // must be overwritten
        return sq_->post_send(type, state, doorbell_, wr, &bad_);
    }

    [[nodiscard]] std::uint32_t producer() const { return rings_->sq.header->producer; }
    [[nodiscard]] uroce_send_wqe wqe(std::uint32_t index) const {
        return read_at<uroce_send_wqe>(slot(rings_->sq, index));
    }
    [[nodiscard]] uroce_sge sge(std::uint32_t index, int n) const {
        return read_at<uroce_sge>(slot(rings_->sq, index) + sizeof(uroce_send_wqe) + sizeof(uroce_sge) * n);
    }

    std::shared_ptr<device::QpRings> rings_;
    std::unique_ptr<WorkQueue> sq_;
    ibv_send_wr* bad_ = nullptr;
    int doorbell_ = -1;
};

ibv_send_wr send_wr(std::uint64_t id, ibv_wr_opcode op, ibv_sge* sges = nullptr, int n = 0) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg_list = sges;
    wr.num_sge = n;
    return wr;
}

TEST_F(PostSend, RdmaWriteWithImmediateAndTwoSges) {
    ibv_sge sges[2] = {{0x1000, 100, 0x11}, {0x2000, 200, 0x22}};
    ibv_send_wr wr = send_wr(77, IBV_WR_RDMA_WRITE_WITH_IMM, sges, 2);
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    wr.imm_data = htonl(0xCAFEBABE);
    wr.wr.rdma.remote_addr = 0xDEAD0000;
    wr.wr.rdma.rkey = 0x4321;
    ASSERT_EQ(post(&wr), 0);
    EXPECT_EQ(bad_, nullptr);
    EXPECT_EQ(producer(), 1u);
    const uroce_send_wqe w = wqe(0);
    EXPECT_EQ(w.wr_id, 77u);
    EXPECT_EQ(w.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
    EXPECT_EQ(w.num_sge, 2u);
    EXPECT_EQ(w.send_flags, static_cast<std::uint32_t>(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
    EXPECT_EQ(w.imm_data, htonl(0xCAFEBABE));  // network order, as given
    EXPECT_EQ(w.inline_len, 0u);
    EXPECT_EQ(w.u.rdma.remote_addr, 0xDEAD0000u);
    EXPECT_EQ(w.u.rdma.rkey, 0x4321u);
    EXPECT_EQ(sge(0, 0).addr, 0x1000u);
    EXPECT_EQ(sge(0, 0).length, 100u);
    EXPECT_EQ(sge(0, 0).lkey, 0x11u);
    EXPECT_EQ(sge(0, 1).addr, 0x2000u);
    EXPECT_EQ(sge(0, 1).length, 200u);
    EXPECT_EQ(sge(0, 1).lkey, 0x22u);
}

TEST_F(PostSend, AtomicsCarryTheirOperands) {
    ibv_sge s = {0x3000, 8, 0x33};
    ibv_send_wr cas = send_wr(1, IBV_WR_ATOMIC_CMP_AND_SWP, &s, 1);
    cas.wr.atomic.remote_addr = 0x8000;
    cas.wr.atomic.compare_add = 0x1111222233334444;
    cas.wr.atomic.swap = 0x5555666677778888;
    cas.wr.atomic.rkey = 0x99;
    ibv_send_wr faa = send_wr(2, IBV_WR_ATOMIC_FETCH_AND_ADD, &s, 1);
    faa.wr.atomic.remote_addr = 0x8008;
    faa.wr.atomic.compare_add = 5;
    faa.wr.atomic.rkey = 0x98;
    cas.next = &faa;
    ASSERT_EQ(post(&cas), 0);
    EXPECT_EQ(producer(), 2u);
    EXPECT_EQ(wqe(0).opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
    EXPECT_EQ(wqe(0).u.atomic.remote_addr, 0x8000u);
    EXPECT_EQ(wqe(0).u.atomic.compare_add, 0x1111222233334444u);
    EXPECT_EQ(wqe(0).u.atomic.swap, 0x5555666677778888u);
    EXPECT_EQ(wqe(0).u.atomic.rkey, 0x99u);
    EXPECT_EQ(wqe(1).wr_id, 2u);
    EXPECT_EQ(wqe(1).opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
    EXPECT_EQ(wqe(1).u.atomic.remote_addr, 0x8008u);
    EXPECT_EQ(wqe(1).u.atomic.compare_add, 5u);
    EXPECT_EQ(wqe(1).u.atomic.rkey, 0x98u);
}

TEST_F(PostSend, UdSendNamesTheAddressHandleQpnAndQkey) {
    ibv_ah ah{};
    ah.handle = 0x4242;
    ibv_sge s = {0x1000, 10, 1};
    ibv_send_wr wr = send_wr(9, IBV_WR_SEND_WITH_IMM, &s, 1);
    wr.wr.ud.ah = &ah;
    wr.wr.ud.remote_qpn = 0x123456;
    wr.wr.ud.remote_qkey = 0x11111111;
    ASSERT_EQ(post(&wr, IBV_QPT_UD), 0);
    EXPECT_EQ(wqe(0).u.ud.ah, 0x4242u);
    EXPECT_EQ(wqe(0).u.ud.remote_qpn, 0x123456u);
    EXPECT_EQ(wqe(0).u.ud.remote_qkey, 0x11111111u);
    // A UD send needs an address handle.
    wr.wr.ud.ah = nullptr;
    EXPECT_EQ(post(&wr, IBV_QPT_UD), EINVAL);
    EXPECT_EQ(bad_, &wr);
    EXPECT_EQ(producer(), 1u);
}

TEST_F(PostSend, InvalidateAndBindCarryTheirKeys) {
    ibv_send_wr inv = send_wr(1, IBV_WR_LOCAL_INV);
    inv.invalidate_rkey = 0xABCD01;
    ibv_sge s = {0x1000, 4, 1};
    ibv_send_wr sinv = send_wr(2, IBV_WR_SEND_WITH_INV, &s, 1);
    sinv.invalidate_rkey = 0xABCD02;
    ibv_mw mw{};
    mw.rkey = 0x700;
    ibv_mr mr{};
    mr.lkey = 0x900;
    ibv_send_wr bind = send_wr(3, IBV_WR_BIND_MW);
    bind.bind_mw.mw = &mw;
    bind.bind_mw.rkey = 0x701;
    bind.bind_mw.bind_info.mr = &mr;
    bind.bind_mw.bind_info.addr = 0x5000;
    bind.bind_mw.bind_info.length = 0x100;
    bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    inv.next = &sinv;
    sinv.next = &bind;
    ASSERT_EQ(post(&inv, IBV_QPT_UC), 0);
    EXPECT_EQ(wqe(0).opcode, IBV_WR_LOCAL_INV);
    EXPECT_EQ(wqe(0).imm_data, 0xABCD01u);
    EXPECT_EQ(wqe(0).num_sge, 0u);
    EXPECT_EQ(wqe(1).imm_data, 0xABCD02u);
    EXPECT_EQ(wqe(2).opcode, IBV_WR_BIND_MW);
    EXPECT_EQ(wqe(2).u.bind.addr, 0x5000u);
    EXPECT_EQ(wqe(2).u.bind.length, 0x100u);
    EXPECT_EQ(wqe(2).u.bind.mw_rkey, 0x701u);
    EXPECT_EQ(wqe(2).u.bind.mr_lkey, 0x900u);
    EXPECT_EQ(wqe(2).u.bind.access, static_cast<std::uint32_t>(IBV_ACCESS_REMOTE_READ));
    // A bind names its window.
    bind.next = nullptr;
    bind.bind_mw.mw = nullptr;
    EXPECT_EQ(post(&bind), EINVAL);
}

TEST_F(PostSend, InlineDataIsCopiedAtPostTime) {
    char a[] = "hello, ";
    char b[] = "inline world";
    ibv_sge sges[2] = {{reinterpret_cast<std::uintptr_t>(a), 7, 0xBAD}, {reinterpret_cast<std::uintptr_t>(b), 12, 0}};
    ibv_send_wr wr = send_wr(5, IBV_WR_SEND, sges, 2);
    wr.send_flags = IBV_SEND_INLINE;
    ASSERT_EQ(post(&wr), 0);
    a[0] = 'X';  // the buffer is the application's again
    const uroce_send_wqe w = wqe(0);
    EXPECT_EQ(w.inline_len, 19u);
    EXPECT_EQ(w.num_sge, 0u);
    EXPECT_EQ(w.send_flags, static_cast<std::uint32_t>(IBV_SEND_INLINE));
    const auto* data = reinterpret_cast<const char*>(slot(rings_->sq, 0) + sizeof(uroce_send_wqe));
    EXPECT_EQ(std::string(data, 19), "hello, inline world");
}

TEST_F(PostSend, InlineUpToTheLimitAndNotBeyond) {
    std::vector<char> buf(65, 'z');
    ibv_sge s = {reinterpret_cast<std::uintptr_t>(buf.data()), 64, 0};
    ibv_send_wr ok = send_wr(1, IBV_WR_RDMA_WRITE, &s, 1);
    ok.send_flags = IBV_SEND_INLINE;
    ASSERT_EQ(post(&ok), 0);
    EXPECT_EQ(wqe(0).inline_len, 64u);
    ibv_sge big = {reinterpret_cast<std::uintptr_t>(buf.data()), 65, 0};
    ibv_send_wr too_big = send_wr(2, IBV_WR_SEND, &big, 1);
    too_big.send_flags = IBV_SEND_INLINE;
    EXPECT_EQ(post(&too_big), EINVAL);
    EXPECT_EQ(bad_, &too_big);
    // Nothing to send inline in a READ: refused (as rdma_rxe does).
    ibv_send_wr read = send_wr(3, IBV_WR_RDMA_READ, &s, 1);
    read.send_flags = IBV_SEND_INLINE;
    EXPECT_EQ(post(&read), EINVAL);
    EXPECT_EQ(producer(), 1u);
}

TEST_F(PostSend, TooManySgesStopsTheListThere) {
    ibv_sge sges[3] = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}};
    ibv_send_wr first = send_wr(1, IBV_WR_SEND, sges, 2);
    ibv_send_wr second = send_wr(2, IBV_WR_SEND, sges, 3);
    ibv_send_wr third = send_wr(3, IBV_WR_SEND, sges, 1);
    first.next = &second;
    second.next = &third;
    EXPECT_EQ(post(&first), EINVAL);
    EXPECT_EQ(bad_, &second);
    EXPECT_EQ(producer(), 1u);  // the first stays posted, the third was not looked at
    EXPECT_EQ(wqe(0).wr_id, 1u);
    ibv_send_wr negative = send_wr(4, IBV_WR_SEND, sges, -1);
    EXPECT_EQ(post(&negative), EINVAL);
    ibv_send_wr no_list = send_wr(5, IBV_WR_SEND, nullptr, 1);
    EXPECT_EQ(post(&no_list), EINVAL);
    EXPECT_EQ(producer(), 1u);
}

TEST_F(PostSend, OpcodesFollowTheQpType) {
    ibv_sge s = {0x1000, 8, 1};
    ibv_ah ah{};
    for (const ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        for (int op = 0; op <= IBV_WR_SEND_WITH_INV; ++op) {
            attach(4, 2, 64);
            ibv_send_wr wr = send_wr(1, static_cast<ibv_wr_opcode>(op), &s, 1);
            wr.wr.ud.ah = &ah;
            wr.bind_mw.mw = reinterpret_cast<ibv_mw*>(&ah);  // any non-null window
            const bool allowed = provider::opcode_allowed(type, wr.opcode);
            EXPECT_EQ(post(&wr, type), allowed ? 0 : EINVAL) << "type " << type << " opcode " << op;
        }
    }
    // The table of ibv_post_send(3).
    EXPECT_TRUE(provider::opcode_allowed(IBV_QPT_UD, IBV_WR_SEND));
    EXPECT_TRUE(provider::opcode_allowed(IBV_QPT_UD, IBV_WR_SEND_WITH_IMM));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_UD, IBV_WR_RDMA_WRITE));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_UD, IBV_WR_SEND_WITH_INV));
    EXPECT_TRUE(provider::opcode_allowed(IBV_QPT_UC, IBV_WR_RDMA_WRITE_WITH_IMM));
    EXPECT_TRUE(provider::opcode_allowed(IBV_QPT_UC, IBV_WR_BIND_MW));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_UC, IBV_WR_RDMA_READ));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_UC, IBV_WR_ATOMIC_CMP_AND_SWP));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD));
    EXPECT_TRUE(provider::opcode_allowed(IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_RC, IBV_WR_TSO));
    EXPECT_FALSE(provider::opcode_allowed(IBV_QPT_RC, IBV_WR_DRIVER1));
}

TEST_F(PostSend, TheSendQueueTakesWorkFromRtsOn) {
    ibv_send_wr wr = send_wr(1, IBV_WR_SEND);
    for (const ibv_qp_state s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
        EXPECT_EQ(post(&wr, IBV_QPT_RC, s), EINVAL) << s;
        EXPECT_EQ(bad_, &wr);
    }
    EXPECT_EQ(producer(), 0u);
    for (const ibv_qp_state s : {IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR}) {
        EXPECT_EQ(post(&wr, IBV_QPT_RC, s), 0) << s;
    }
    EXPECT_EQ(producer(), 4u);
}

TEST_F(PostSend, AFullRingIsEnomemAtTheFirstWrThatDoesNotFit) {
    std::vector<ibv_send_wr> wrs(6);
    for (std::size_t i = 0; i < wrs.size(); ++i) {
        wrs[i] = send_wr(i, IBV_WR_SEND);
        wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    EXPECT_EQ(post(&wrs[0]), ENOMEM);
    EXPECT_EQ(bad_, &wrs[4]);
    EXPECT_EQ(producer(), 4u);
    // The daemon retires two: they fit again, in the slots that wrap around.
    rings_->sq.header->consumer = 2;
    EXPECT_EQ(post(&wrs[4]), 0);
    EXPECT_EQ(producer(), 6u);
    EXPECT_EQ(wqe(4).wr_id, 4u);  // slot 0
    EXPECT_EQ(wqe(5).wr_id, 5u);  // slot 1
    EXPECT_EQ(wqe(2).wr_id, 2u);  // untouched
    ibv_send_wr one_more = send_wr(6, IBV_WR_SEND);
    EXPECT_EQ(post(&one_more), ENOMEM);
    EXPECT_EQ(bad_, &one_more);
}

TEST_F(PostSend, DoorbellRingsOnlyWhenArmedAndDisarmsIt) {
    doorbell_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(doorbell_, 0);
    std::uint64_t count = 0;
    ibv_send_wr wr = send_wr(1, IBV_WR_SEND);
    ASSERT_EQ(post(&wr), 0);
    EXPECT_EQ(::read(doorbell_, &count, sizeof count), -1);  // not armed: no system call made
    EXPECT_EQ(errno, EAGAIN);
    rings_->sq.header->doorbell_armed = 1;
    ASSERT_EQ(post(&wr), 0);
    EXPECT_EQ(rings_->sq.header->doorbell_armed, 0u);
    ASSERT_EQ(::read(doorbell_, &count, sizeof count), static_cast<ssize_t>(sizeof count));
    EXPECT_EQ(count, 1u);
    // A refused post publishes nothing and rings nothing.
    rings_->sq.header->doorbell_armed = 1;
    ibv_send_wr bad = send_wr(2, IBV_WR_SEND, nullptr, 1);
    EXPECT_EQ(post(&bad), EINVAL);
    EXPECT_EQ(rings_->sq.header->doorbell_armed, 1u);
    EXPECT_EQ(::read(doorbell_, &count, sizeof count), -1);
    ::close(doorbell_);
}

TEST_F(PostSend, ConcurrentPostersEachGetTheirOwnSlots) {
    constexpr std::uint32_t kPerThread = 2000;
    constexpr int kThreads = 4;
    attach(kPerThread * kThreads, 1, 0);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (std::uint32_t i = 0; i < kPerThread; ++i) {
                ibv_send_wr wr = send_wr((std::uint64_t{static_cast<std::uint32_t>(t)} << 32) | i, IBV_WR_SEND);
                ibv_send_wr* bad = nullptr;
                if (sq_->post_send(IBV_QPT_RC, IBV_QPS_RTS, -1, &wr, &bad) != 0) {
                    ++failures;
                }
            }
        });
    }
    for (auto& th : threads) {
        th.join();
    }
    EXPECT_EQ(failures.load(), 0);
    ASSERT_EQ(producer(), kPerThread * kThreads);
    std::set<std::uint64_t> seen;
    for (std::uint32_t i = 0; i < producer(); ++i) {
        seen.insert(wqe(i).wr_id);
    }
    EXPECT_EQ(seen.size(), std::size_t{kPerThread} * kThreads);
}

class PostRecv : public ::testing::Test {
protected:
    void SetUp() override {
        rings_ = make_qp(4, 1, 0, 4, 2);
        ASSERT_NE(rings_, nullptr);
        ASSERT_EQ(rq_.attach(rings_->rq.header, rings_->memory.size() - rings_->rq_offset, WorkQueue::Kind::Receive),
                  0);
    }

    int post(ibv_recv_wr* wr) {
        bad_ = reinterpret_cast<ibv_recv_wr*>(0x1);
        return rq_.post_recv(-1, wr, &bad_);
    }

    std::shared_ptr<device::QpRings> rings_;
    WorkQueue rq_;
    ibv_recv_wr* bad_ = nullptr;
};

TEST_F(PostRecv, ReceiveWqeWithItsSges) {
    ibv_sge sges[2] = {{0xA000, 4096, 0x31}, {0xB000, 64, 0x32}};
    ibv_recv_wr wr{};
    wr.wr_id = 0x1234;
    wr.sg_list = sges;
    wr.num_sge = 2;
    ASSERT_EQ(post(&wr), 0);
    EXPECT_EQ(bad_, nullptr);
    EXPECT_EQ(rings_->rq.header->producer, 1u);
    const std::uint8_t* s = slot(rings_->rq, 0);
    const auto r = read_at<uroce_recv_wqe>(s);
    EXPECT_EQ(r.wr_id, 0x1234u);
    EXPECT_EQ(r.num_sge, 2u);
    const auto s0 = read_at<uroce_sge>(s + sizeof(uroce_recv_wqe));
    const auto s1 = read_at<uroce_sge>(s + sizeof(uroce_recv_wqe) + sizeof(uroce_sge));
    EXPECT_EQ(s0.addr, 0xA000u);
    EXPECT_EQ(s0.length, 4096u);
    EXPECT_EQ(s0.lkey, 0x31u);
    EXPECT_EQ(s1.addr, 0xB000u);
    EXPECT_EQ(s1.lkey, 0x32u);
}

TEST_F(PostRecv, ZeroSgesAreAReceiveOfNothing) {
    ibv_recv_wr wr{};
    wr.wr_id = 1;
    ASSERT_EQ(post(&wr), 0);
    EXPECT_EQ(read_at<uroce_recv_wqe>(slot(rings_->rq, 0)).num_sge, 0u);
}

TEST_F(PostRecv, TooManySgesAndAFullRing) {
    ibv_sge sges[3] = {};
    std::vector<ibv_recv_wr> wrs(6);
    for (std::size_t i = 0; i < wrs.size(); ++i) {
        wrs[i].wr_id = i;
        wrs[i].sg_list = sges;
        wrs[i].num_sge = 1;
        wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    wrs[1].num_sge = 3;
    EXPECT_EQ(post(&wrs[0]), EINVAL);
    EXPECT_EQ(bad_, &wrs[1]);
    EXPECT_EQ(rings_->rq.header->producer, 1u);
    wrs[1].num_sge = 2;
    EXPECT_EQ(post(&wrs[1]), ENOMEM);
    EXPECT_EQ(bad_, &wrs[4]);
    EXPECT_EQ(rings_->rq.header->producer, 4u);
}

// The device gone (docs/provider.md): the WQEs the daemon did not retire
// complete flushed, oldest first, once; later posts fail with EIO.
TEST_F(PostSend, FlushCompletesWhatTheDaemonDidNotRetireOnce) {
    std::vector<ibv_send_wr> wrs = {send_wr(10, IBV_WR_SEND), send_wr(11, IBV_WR_RDMA_WRITE),
                                    send_wr(12, IBV_WR_RDMA_READ), send_wr(13, IBV_WR_ATOMIC_FETCH_AND_ADD)};
    for (auto& wr : wrs) {
        ASSERT_EQ(post(&wr), 0);
    }
    rings_->sq.header->consumer = 1;  // the daemon retired the first
    std::vector<ibv_wc> out;
    sq_->flush_outstanding(0x42, out);
    ASSERT_EQ(out.size(), 3u);
    const ibv_wc_opcode opcodes[3] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD};
    for (std::size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i].wr_id, 11 + i);
        EXPECT_EQ(out[i].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(out[i].qp_num, 0x42u);
        EXPECT_EQ(out[i].opcode, opcodes[i]);
    }
    sq_->flush_outstanding(0x42, out);
    EXPECT_EQ(out.size(), 3u) << "a work queue is flushed once";
    ibv_send_wr late = send_wr(20, IBV_WR_SEND);
    EXPECT_EQ(post(&late), EIO);
    EXPECT_EQ(bad_, &late);
    EXPECT_EQ(producer(), 4u);
}

TEST_F(PostRecv, FlushCompletesReceivesAcrossTheRingWrap) {
    ibv_recv_wr wr{};
    for (std::uint64_t id = 1; id <= 6; ++id) {  // 4 slots: the last two wrap around
        wr.wr_id = id;
        if (id == 5) {
            rings_->rq.header->consumer = 3;  // the daemon took 1..3
        }
        ASSERT_EQ(post(&wr), 0);
    }
    std::vector<ibv_wc> out;
    rq_.flush_outstanding(7, out);
    ASSERT_EQ(out.size(), 3u);
    for (std::size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i].wr_id, 4 + i);
        EXPECT_EQ(out[i].opcode, IBV_WC_RECV);
        EXPECT_EQ(out[i].status, IBV_WC_WR_FLUSH_ERR);
    }
    wr.wr_id = 9;
    EXPECT_EQ(post(&wr), EIO);
    EXPECT_EQ(bad_, &wr);
}

TEST(AttachWorkQueue, RefusesRingsItCannotUse) {
    auto rings = make_qp(4, 2, 64, 4, 2);
    uroce_wq_ring& h = *rings->sq.header;
    const std::size_t bytes = rings->memory.size();
    WorkQueue q;
    EXPECT_EQ(q.attach(&h, sizeof h - 1, WorkQueue::Kind::Send), EPROTO);
    EXPECT_EQ(q.attach(&h, sizeof h + 4 * h.stride - 1, WorkQueue::Kind::Send), EPROTO);  // slots beyond the mapping
    h.version = UROCE_RING_VERSION + 1;
    EXPECT_EQ(q.attach(&h, bytes, WorkQueue::Kind::Send), EPROTO);
    h.version = UROCE_RING_VERSION;
    h.entries = 3;
    EXPECT_EQ(q.attach(&h, bytes, WorkQueue::Kind::Send), EPROTO);
    h.entries = 4;
    h.max_inline = 1000;  // more than a slot holds
    EXPECT_EQ(q.attach(&h, bytes, WorkQueue::Kind::Send), EPROTO);
    h.max_inline = 64;
    h.max_sge = 5;
    EXPECT_EQ(q.attach(&h, bytes, WorkQueue::Kind::Send), EPROTO);
    h.max_sge = 2;
    EXPECT_FALSE(q.attached());
    EXPECT_EQ(q.attach(&h, bytes, WorkQueue::Kind::Send), 0);
    EXPECT_TRUE(q.attached());
    EXPECT_EQ(q.entries(), 4u);
    EXPECT_EQ(q.max_sge(), 2u);
    EXPECT_EQ(q.max_inline(), 64u);
}

}  // namespace
}  // namespace uroce::provider_test
