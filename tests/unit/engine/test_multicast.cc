// Multicast in the engine: the group table's answers (rdma_rxe's), and a
// UD SEND to QP 0xFFFFFF reaching a QP attached to the group its
// destination GID names, dropped when none is, and not after a detach.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>

#include "engine/multicast_groups.h"
#include "engine_fixture.h"

namespace uroce::engine::test {
namespace {

constexpr wire::Gid kGroup = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 9, 9, 9};
constexpr wire::Gid kOtherGroup = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};

TEST(MulticastGroups, AttachIsIdempotentAndDetachOfAStrangerIsEinval) {
    MulticastGroups g;
    EXPECT_EQ(g.attach(kGroup, 0x11), 0);
    EXPECT_EQ(g.attach(kGroup, 0x11), 0);
    EXPECT_EQ(g.attach(kGroup, 0x12), 0);
    EXPECT_EQ(g.attach(kOtherGroup, 0x11), 0);
    EXPECT_EQ(g.members(kGroup).size(), 2u);
    EXPECT_EQ(g.groups_of(0x11), 2u);
    EXPECT_EQ(g.attachments(), 3u);
    EXPECT_EQ(g.detach(kGroup, 0x13), EINVAL);
    EXPECT_EQ(g.detach(kGroup, 0x12), 0);
    EXPECT_EQ(g.detach(kGroup, 0x12), EINVAL);
    g.detach_all(0x11);
    EXPECT_EQ(g.group_count(), 0u);
    EXPECT_EQ(g.attachments(), 0u);
    EXPECT_EQ(g.groups_of(0x11), 0u);
    EXPECT_TRUE(g.members(kGroup).empty());
}

TEST(MulticastGroups, AGroupHoldsRxesLimitOfQps) {
    MulticastGroups g;
    for (std::uint32_t q = 0; q < kMaxQpsPerGroup; ++q) {
        ASSERT_EQ(g.attach(kGroup, 0x100 + q), 0);
    }
    EXPECT_EQ(g.attach(kGroup, 0x999), ENOMEM);
    EXPECT_EQ(g.members(kGroup).size(), kMaxQpsPerGroup);
}

class Multicast : public TwoNodes {
protected:
    void SetUp() override {
        connect(qp::QpType::Ud);
        qp::AhAttr ah;
        std::copy(kGroup.begin(), kGroup.end(), ah.dgid.begin());
        ah.is_global = true;
        ah.hop_limit = 64;
        a_.engine().add_ah(5, ah);
    }

    // Sends `src` from QP 0x11 to the group; true once it completed and the
    // wire is empty.
    bool send_to_group(std::vector<std::uint8_t>& src) {
        const auto smr = a_.reg(src.data(), src.size(), kAllAccess);
        uroce_send_wqe w = send_wqe(WrOpcode::Send, 4, 1);
        w.u.ud.ah = 5;
        w.u.ud.remote_qpn = kMulticastQpn;
        w.u.ud.remote_qkey = 0x11111111;
        const uroce_sge s = sge_of(src.data(), static_cast<std::uint32_t>(src.size()), smr.lkey);
        qa_.post_send(w, std::span(&s, 1));
        std::vector<uroce_cqe> a;
        return run_until([&] {
            for (auto& e : qa_.poll()) a.push_back(e);
            return !a.empty() && wire_.in_flight.empty();
        });
    }
};

TEST_F(Multicast, AnAttachedQpReceivesTheGroupsDatagram) {
    ASSERT_EQ(b_.engine().multicast().attach(kGroup, 0x22), 0);
    std::vector<std::uint8_t> src(300), dst(340, 0);
    fill_pattern(src, 3);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 340, dmr.lkey);
    qb_.post_recv(7, std::span(&r, 1));
    ASSERT_TRUE(send_to_group(src));
    std::vector<uroce_cqe> b;
    ASSERT_TRUE(run_until([&] {
        for (auto& e : qb_.poll()) b.push_back(e);
        return !b.empty();
    }));
    EXPECT_EQ(b[0].status, 0u);
    EXPECT_EQ(b[0].byte_len, 340u);
    EXPECT_EQ(b[0].src_qp, 0x11u);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 40));
    EXPECT_TRUE(std::equal(kGroup.begin() + 12, kGroup.end(), dst.begin() + 36));  // IPv4 destination in the GRH
}

TEST_F(Multicast, WithoutAMemberOrAfterADetachTheDatagramIsDropped) {
    std::vector<std::uint8_t> src(50, 9), dst(100, 0);
    const auto dmr = b_.reg(dst.data(), dst.size(), kAllAccess);
    const uroce_sge r = sge_of(dst.data(), 100, dmr.lkey);
    qb_.post_recv(7, std::span(&r, 1));
    const auto unknown_before = b_.engine().counters().dropped[static_cast<std::size_t>(DropReason::UnknownQp)];
    ASSERT_TRUE(send_to_group(src));
    ASSERT_EQ(b_.engine().multicast().attach(kGroup, 0x22), 0);
    ASSERT_EQ(b_.engine().multicast().detach(kGroup, 0x22), 0);
    ASSERT_TRUE(send_to_group(src));
    EXPECT_TRUE(qb_.poll().empty());
    EXPECT_EQ(b_.engine().counters().dropped[static_cast<std::size_t>(DropReason::UnknownQp)], unknown_before + 2);
}

TEST_F(Multicast, RemovingAQpDetachesIt) {
    ASSERT_EQ(b_.engine().multicast().attach(kGroup, 0x22), 0);
    b_.engine().remove_qp(Qpn{0x22});
    EXPECT_EQ(b_.engine().multicast().groups_of(0x22), 0u);
    EXPECT_TRUE(b_.engine().multicast().members(kGroup).empty());
}

}  // namespace
}  // namespace uroce::engine::test
