// UC and UD through two engines: UC drops a message with a lost packet and
// carries on with the next; UD puts the GRH first, checks the Q_Key, and
// completes sends without waiting for anything.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

class Uc : public TwoNodes {
protected:
    void SetUp() override { connect(qp::QpType::Uc); }
};

TEST_F(Uc, MessageWithALostPacketIsDroppedAndTheNextArrives) {
    std::vector<std::uint8_t> src(3 * kMtu), dst(3 * kMtu, 0);
    fill_pattern(src, 5);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), static_cast<std::uint32_t>(dst.size()), dmr.lkey);
    qb_.post_recv(1, std::span(&r, 1));
    int seen = 0;
    wire_.filter = [&seen](std::span<const std::uint8_t>) { return ++seen == 2 ? 0 : 1; };  // lose the MIDDLE
    const uroce_sge s = sge_of(src.data(), static_cast<std::uint32_t>(src.size()), smr.lkey);
    qa_.post_send(send_wqe(WrOpcode::Send, 1, 1), std::span(&s, 1));
    qa_.post_send(send_wqe(WrOpcode::Send, 2, 1), std::span(&s, 1));
    std::vector<uroce_cqe> a, b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        for (auto& e : qb_.poll()) b.push_back(e);
        return a.size() == 2 && !b.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);  // UC completes when sent
    ASSERT_EQ(b.size(), 1u);     // only the second message arrived
    EXPECT_EQ(b[0].byte_len, src.size());
    EXPECT_EQ(src, dst);
}

class Ud : public TwoNodes {
protected:
    void SetUp() override {
        connect(qp::QpType::Ud);
        qp::AhAttr ah;
        const auto& g = b_.gid();
        std::copy(g.begin(), g.end(), ah.dgid.begin());
        ah.is_global = true;
        a_.engine().add_ah(5, ah);
    }
};

TEST_F(Ud, DatagramArrivesAfterTheGrh) {
    std::vector<std::uint8_t> src(500), dst(540, 0);
    fill_pattern(src, 8);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 540, dmr.lkey);
    qb_.post_recv(3, std::span(&r, 1));
    uroce_send_wqe w = send_wqe(WrOpcode::Send, 4, 1);
    w.u.ud.ah = 5;
    w.u.ud.remote_qpn = 0x22;
    w.u.ud.remote_qkey = 0x11111111;
    const uroce_sge s = sge_of(src.data(), 500, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> a, b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        for (auto& e : qb_.poll()) b.push_back(e);
        return !a.empty() && !b.empty();
    }));
    EXPECT_EQ(a[0].status, 0u);
    EXPECT_EQ(b[0].status, 0u);
    EXPECT_EQ(b[0].byte_len, 540u);
    EXPECT_EQ(b[0].src_qp, 0x11u);
    EXPECT_TRUE(b[0].wc_flags & WcFlag::kGrh);
    // sl carries the packet type, as on mlx5: RoCE v2 (UDP) over IPv4.
    EXPECT_EQ(b[0].sl, RoceWcSl::kRoceV2Ipv4);
    EXPECT_EQ(b[0].qp_num, 0x22u);
    EXPECT_EQ(b[0].pkey_index, 0u);
    EXPECT_EQ(b[0].slid, 0u);
    EXPECT_EQ(b[0].dlid_path_bits, 0u);
    EXPECT_EQ(dst[20], 0x45);  // the IPv4 header in the GRH's last 20 bytes
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 40));
}

TEST_F(Ud, WrongQkeyIsDroppedSilently) {
    std::vector<std::uint8_t> src(10, 1), dst(100, 0);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(3, std::span(&r, 1));
    uroce_send_wqe w = send_wqe(WrOpcode::Send, 4, 1);
    w.u.ud.ah = 5;
    w.u.ud.remote_qpn = 0x22;
    w.u.ud.remote_qkey = 0x1234;
    const uroce_sge s = sge_of(src.data(), 10, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> a;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qa_.poll()) a.push_back(e);
        return !a.empty() && wire_.in_flight.empty();
    }));
    run_until([] { return false; }, 10);
    EXPECT_TRUE(qb_.poll().empty());
    EXPECT_GE(b_.engine().counters().rx_dropped, 1u);
}

class UdIpv6 : public TwoNodes {
protected:
    UdIpv6() : TwoNodes(true) {}
    void SetUp() override {
        connect(qp::QpType::Ud);
        qp::AhAttr ah;
        const auto& g = b_.gid();
        std::copy(g.begin(), g.end(), ah.dgid.begin());
        ah.is_global = true;
        a_.engine().add_ah(5, ah);
    }
};

TEST_F(UdIpv6, ReceiveReportsAnIpv6PacketInSl) {
    std::vector<std::uint8_t> src(64, 7), dst(40 + 64, 0);
    const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), static_cast<std::uint32_t>(dst.size()), dmr.lkey);
    qb_.post_recv(3, std::span(&r, 1));
    uroce_send_wqe w = send_wqe(WrOpcode::Send, 4, 1);
    w.u.ud.ah = 5;
    w.u.ud.remote_qpn = 0x22;
    w.u.ud.remote_qkey = 0x11111111;
    const uroce_sge s = sge_of(src.data(), 64, smr.lkey);
    qa_.post_send(w, std::span(&s, 1));
    std::vector<uroce_cqe> b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qb_.poll()) b.push_back(e);
        return !b.empty();
    }));
    EXPECT_EQ(b[0].status, 0u);
    EXPECT_TRUE(b[0].wc_flags & WcFlag::kGrh);
    EXPECT_EQ(b[0].sl, RoceWcSl::kRoceV2Ipv6);
    EXPECT_EQ(dst[0] >> 4, 6);  // the IPv6 header fills the 40 bytes
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 40));
}

}  // namespace
}  // namespace uroce::engine::test
