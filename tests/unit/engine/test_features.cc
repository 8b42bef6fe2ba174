// Engine features beyond plain transfers: shared receive queues and their
// limit event, WRITE with immediate, completion events (solicited only),
// fences behind READs, SEND with invalidate, and IPv6 GIDs.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

class Features : public TwoNodes {
protected:
    void SetUp() override { connect(qp::QpType::Rc); }

    std::vector<uroce_cqe> wait_for(TestQp& q, std::size_t n) {
        std::vector<uroce_cqe> out;
        EXPECT_TRUE(run_until([&] {
            for (auto& e : q.poll()) out.push_back(e);
            return out.size() >= n;
        }));
        return out;
    }
};

TEST_F(Features, SharedReceiveQueueFeedsTheQpAndRaisesItsLimitEvent) {
    // A second QP pair on B: its receives come from an SRQ.
    RingMemory srq_mem = make_wq(64, 16 + 4 * 16, 4, 0);
    b_.engine().add_srq(SrqHandle{9}, ClientId{kOwner}, PdHandle{b_.pd}, WorkRing(srq_mem.wq(), 64, 16 + 4 * 16, 4, 0),
                        0x5EC, 2);
    TestQp qs;
    qs.qpn = 0x33;
    qs.sq_mem = make_wq(qs.sq_entries, qs.sq_stride, 4, 128);
    qs.cq_mem = make_cq(qs.cq_entries);
    b_.engine().add_cq(CqHandle{2}, ClientId{kOwner}, CqRing(qs.cq(), qs.cq_entries), -1, 0);
    QpSetup s;
    s.qpn = 0x33;
    s.owner = kOwner;
    s.pd = b_.pd;
    s.send_cq = 2;
    s.recv_cq = 2;
    s.srq = 9;
    s.sq = WorkRing(qs.sq(), qs.sq_entries, qs.sq_stride, 4, 128);
    b_.engine().add_qp(s);
    // Point A's QP at the SRQ QP instead.
    qp::QpAttr to_b = rts_attr(b_, 0x33);
    a_.engine().modify_qp(Qpn{0x11}, to_b, qp::AttrMask::kDestQpn);
    qp::QpAttr to_a = rts_attr(a_, 0x11);
    b_.engine().modify_qp(Qpn{0x33}, to_a,
                          qp::AttrMask::kState | qp::AttrMask::kAv | qp::AttrMask::kPathMtu | qp::AttrMask::kDestQpn |
                              qp::AttrMask::kRqPsn | qp::AttrMask::kSqPsn | qp::AttrMask::kAccessFlags |
                              qp::AttrMask::kMaxDestRdAtomic | qp::AttrMask::kMinRnrTimer);

    std::vector<std::uint8_t> dst(4 * 100, 0), src(100);
    fill_pattern(src, 4);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    for (std::uint32_t i = 0; i < 4; ++i) {  // four receives in the SRQ
        auto* h = srq_mem.wq();
        std::uint8_t* slot = reinterpret_cast<std::uint8_t*>(h + 1) + std::size_t{h->producer & 63} * h->stride;
        const uroce_recv_wqe w{500 + i, 1, 0};
        const uroce_sge sg = sge_of(dst.data() + i * 100, 100, dmr.lkey);
        std::memcpy(slot, &w, sizeof w);
        std::memcpy(slot + sizeof w, &sg, sizeof sg);
        std::atomic_ref<std::uint32_t>(h->producer).fetch_add(1, std::memory_order_release);
    }
    const uroce_sge sg = sge_of(src.data(), 100, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&sg, 1));
    qa_.post_send(send_wqe(WrOpcode::Send, 2, 1), std::span(&sg, 1));
    qa_.post_send(send_wqe(WrOpcode::Send, 3, 1), std::span(&sg, 1));
    std::vector<uroce_cqe> b = wait_for(qs, 3);
    ASSERT_EQ(b.size(), 3u);
    for (std::uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(b[i].wr_id, 500 + i);
        EXPECT_EQ(b[i].qp_num, 0x33u);
        EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + i * 100));
    }
    // Four posted, three taken: one left, below the limit of 2 -> one event.
    ASSERT_EQ(b_.events.size(), 1u);
    EXPECT_EQ(b_.events[0].first, 0x5ECu);
    EXPECT_EQ(b_.events[0].second, AsyncEvent::SrqLimitReached);
}

TEST_F(Features, QpOnAnSrqEnteringErrorRaisesLastWqeReached) {
    RingMemory srq_mem = make_wq(64, 16 + 4 * 16, 4, 0);
    b_.engine().add_srq(SrqHandle{9}, ClientId{kOwner}, PdHandle{b_.pd}, WorkRing(srq_mem.wq(), 64, 16 + 4 * 16, 4, 0), 0x5EC, 0);
    TestQp qs;
    qs.sq_mem = make_wq(qs.sq_entries, qs.sq_stride, 4, 128);
    qs.cq_mem = make_cq(qs.cq_entries);
    b_.engine().add_cq(CqHandle{2}, ClientId{kOwner}, CqRing(qs.cq(), qs.cq_entries), -1, 0);
    QpSetup s;
    s.qpn = 0x33;
    s.owner = kOwner;
    s.pd = b_.pd;
    s.send_cq = 2;
    s.recv_cq = 2;
    s.srq = 9;
    s.cookie = 0xC0FFEE;
    s.sq = WorkRing(qs.sq(), qs.sq_entries, qs.sq_stride, 4, 128);
    b_.engine().add_qp(s);
    const std::size_t before = b_.events.size();
    qp::QpAttr err;
    err.state = qp::QpState::Err;
    b_.engine().modify_qp(Qpn{0x33}, err, qp::AttrMask::kState);
    ASSERT_EQ(b_.events.size(), before + 1);
    EXPECT_EQ(b_.events.back().first, 0xC0FFEEu);
    EXPECT_EQ(b_.events.back().second, AsyncEvent::QpLastWqeReached);
    // A QP with its own receive queue raises nothing.
    b_.engine().modify_qp(Qpn{qb_.qpn}, err, qp::AttrMask::kState);
    EXPECT_EQ(b_.events.size(), before + 1);
}

TEST_F(Features, WriteWithImmediateConsumesAReceiveAndReportsTheLength) {
    std::vector<std::uint8_t> src(3000), dst(3000, 0), unused(8);
    fill_pattern(src, 6);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const auto umr = b_.reg(unused.data(), unused.size(), kAllAccess);
    const uroce_sge r = sge_of(unused.data(), 8, umr.lkey);
    qb_.post_recv(70, std::span(&r, 1));
    uroce_send_wqe w = send_wqe(WrOpcode::RdmaWriteWithImm, 7, 1);
    w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.u.rdma.rkey = dmr.rkey;
    w.imm_data = 0xAABBCCDD;
    const uroce_sge s = sge_of(src.data(), 3000, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    const auto b = wait_for(qb_, 1);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].wr_id, 70u);
    EXPECT_EQ(b[0].opcode, static_cast<std::uint32_t>(WcOpcode::RecvRdmaWithImm));
    EXPECT_EQ(b[0].byte_len, 3000u);
    EXPECT_EQ(b[0].imm_data, 0xAABBCCDDu);
    EXPECT_EQ(src, dst);
}

TEST_F(Features, SolicitedOnlyNotificationWaitsForASolicitedMessage) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_NONBLOCK), 0);
    // Re-register B's CQ with a channel.
    b_.engine().add_cq(CqHandle{1}, ClientId{kOwner}, CqRing(qb_.cq(), qb_.cq_entries), pipe_fds[1], 0xABCDEF);
    std::vector<std::uint8_t> src(10, 1), dst(100, 0);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(1, std::span(&r, 1));
    qb_.post_recv(2, std::span(&r, 1));
    // Arm for solicited completions only (sequence 1).
    std::atomic_ref<std::uint32_t>(qb_.cq()->notify_request).store(1u << 1 | 1u, std::memory_order_seq_cst);
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    ASSERT_EQ(wait_for(qb_, 1).size(), 1u);
    std::uint64_t cookie = 0;
    EXPECT_EQ(::read(pipe_fds[0], &cookie, sizeof cookie), -1);  // not solicited: no event
    qa_.post_send(send_wqe(WrOpcode::Send, 2, 1, SendFlag::kSignaled | SendFlag::kSolicited), std::span(&s, 1));
    ASSERT_EQ(wait_for(qb_, 1).size(), 1u);
    ASSERT_EQ(::read(pipe_fds[0], &cookie, sizeof cookie), static_cast<ssize_t>(sizeof cookie));
    EXPECT_EQ(cookie, 0xABCDEFu);
    EXPECT_EQ(::read(pipe_fds[0], &cookie, sizeof cookie), -1);  // once per arming
    ::close(pipe_fds[0]);
}

TEST_F(Features, FencedWriteWaitsForTheReadBeforeIt) {
    std::vector<std::uint8_t> remote(8192), local(8192, 0), src(100, 0x5A);
    fill_pattern(remote, 11);
    const auto rmr = b_.reg(remote.data(), remote.size(), kAllAccess);
    const auto lmr = a_.reg(local.data(), local.size(), kAllAccess);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    uroce_send_wqe rd = send_wqe(WrOpcode::RdmaRead, 1, 1);
    rd.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
    rd.u.rdma.rkey = rmr.rkey;
    const uroce_sge ls = sge_of(local.data(), 8192, lmr.lkey);
    qa_.post_send(rd, std::span(&ls, 1));
    // Fenced: must not overwrite the start of `remote` before the READ got it.
    uroce_send_wqe wr = send_wqe(WrOpcode::RdmaWrite, 2, 1, SendFlag::kSignaled | SendFlag::kFence);
    wr.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote.data());
    wr.u.rdma.rkey = rmr.rkey;
    const uroce_sge ss = sge_of(src.data(), 100, smr.lkey);
    qa_.post_send(wr, std::span(&ss, 1));
    std::vector<std::uint8_t> expect(8192);
    fill_pattern(expect, 11);
    const auto a = wait_for(qa_, 2);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(a[1].status, 0u);
    EXPECT_EQ(local, expect);  // the READ saw the old bytes
    EXPECT_TRUE(std::all_of(remote.begin(), remote.begin() + 100, [](std::uint8_t c) { return c == 0x5A; }));
}

TEST_F(Features, SendQueueDrainedStateStartsNothingNew) {
    std::vector<std::uint8_t> src(10, 1), dst(100, 0);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(1, std::span(&r, 1));
    qp::QpAttr attr = rts_attr(b_, 0x22);
    attr.state = qp::QpState::Sqd;
    a_.engine().modify_qp(Qpn{0x11}, attr, qp::AttrMask::kState);
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    run_until([] { return false; }, 50);
    EXPECT_TRUE(qa_.poll().empty());  // posted in SQD: held
    attr.state = qp::QpState::Rts;
    a_.engine().modify_qp(Qpn{0x11}, attr, qp::AttrMask::kState);
    const auto a = wait_for(qa_, 1);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].status, 0u);
}

class Ipv6 : public TwoNodes {
protected:
    Ipv6() : TwoNodes(true) {}
    void SetUp() override { connect(qp::QpType::Rc); }
};

TEST_F(Ipv6, SendWriteAndReadOverIpv6Gids) {
    int ipv6_frames = 0;
    wire_.filter = [&ipv6_frames](std::span<const std::uint8_t> frame) {
        const wire::ParseResult r = wire::parse_and_verify(frame);
        if (r.ok() && r.packet.ip_version() == wire::IpVersion::V6) {
            ++ipv6_frames;
        }
        return 1;
    };
    std::vector<std::uint8_t> src(5000), dst(5000, 0), back(5000, 0);
    fill_pattern(src, 12);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const auto bmr = a_.reg(back.data(), back.size(), kAllAccess);
    uroce_send_wqe w = send_wqe(WrOpcode::RdmaWrite, 1, 1);
    w.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    w.u.rdma.rkey = dmr.rkey;
    const uroce_sge s = sge_of(src.data(), 5000, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    uroce_send_wqe r = send_wqe(WrOpcode::RdmaRead, 2, 1);
    r.u.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
    r.u.rdma.rkey = dmr.rkey;
    const uroce_sge bs = sge_of(back.data(), 5000, bmr.lkey);
    qa_.post_send(r, std::span(&bs, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return a.size() == 2;
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(a[1].status, 0u);
    EXPECT_EQ(src, dst);
    EXPECT_EQ(src, back);
    EXPECT_GE(ipv6_frames, 10);  // 5 WRITE + 1 READ request + 5 responses + ACK
}

}  // namespace
}  // namespace uroce::engine::test
