// XRC target QPs shared by their handles (QueueObjects::open_xrc_tgt), as the
// kernel shares them (ib_open_qp / ib_close_qp): the last handle's close
// destroys the QP, a domain reference with live handles or SRQs cannot be
// closed (EBUSY), and only a target QP of the caller's domain opens. One
// client holding two handles on one QP closes the one it names (by cookie).
#include <gtest/gtest.h>

#include <cerrno>

#include "device/device.h"
#include "wire/build.h"

namespace uroce::device {
namespace {

DeviceConfig config() {
    DeviceConfig c;
    c.name = "uroce_xrc";
    c.port.mac = {0x02, 0, 0, 0, 0xC1, 0x12};
    c.port.netdev_mtu = 1500;
    c.ips = {wire::ipv4_mapped({192, 0, 2, 12})};
    return c;
}

// One domain file, opened by two clients.
struct SharedDomain {
    Device device{config()};
    QueueObjects& q = device.queues();
    std::uint32_t creator = device.open_client(1);
    std::uint32_t opener = device.open_client(2);
    std::uint32_t creator_ref = 0;
    std::uint32_t opener_ref = 0;

    SharedDomain() {
        XrcdOpen how;
        how.inode = XrcdOpen::Inode{7, 42};
        how.create = true;
        creator_ref = q.open_xrcd(creator, how).handle;
        how.create = false;
        opener_ref = q.open_xrcd(opener, how).handle;
    }
};

TEST(XrcSharing, OpenedTargetOutlivesItsCreatorsHandle) {
    SharedDomain d;
    const Created tgt = d.q.create_xrc_tgt(d.creator, d.creator_ref);
    ASSERT_EQ(tgt.error, 0);
    ASSERT_EQ(d.q.open_xrc_tgt(d.opener, d.opener_ref, Qpn{tgt.handle}), 0);
    EXPECT_EQ(d.q.close_xrcd(d.opener, d.opener_ref), EBUSY);
    EXPECT_EQ(d.q.close_xrcd(d.creator, d.creator_ref), EBUSY);

    ASSERT_EQ(d.q.destroy_qp(d.creator, Qpn{tgt.handle}), 0);
    EXPECT_TRUE(d.q.qp_exists(Qpn{tgt.handle}));
    EXPECT_FALSE(d.q.query_qp(d.creator, Qpn{tgt.handle})) << "the creator's handle is closed";
    EXPECT_TRUE(d.q.query_qp(d.opener, Qpn{tgt.handle}));
    EXPECT_EQ(d.q.close_xrcd(d.creator, d.creator_ref), 0);

    ASSERT_EQ(d.q.destroy_qp(d.opener, Qpn{tgt.handle}), 0);
    EXPECT_FALSE(d.q.qp_exists(Qpn{tgt.handle})) << "the last close destroys the QP";
    EXPECT_EQ(d.q.close_xrcd(d.opener, d.opener_ref), 0);
}

TEST(XrcSharing, OpensOnlyATargetQpOfTheCallersDomain) {
    SharedDomain d;
    XrcdOpen own;
    own.create = true;
    const std::uint32_t other_ref = d.q.open_xrcd(d.opener, own).handle;
    const Created tgt = d.q.create_xrc_tgt(d.creator, d.creator_ref);
    ASSERT_EQ(tgt.error, 0);
    EXPECT_EQ(d.q.open_xrc_tgt(d.opener, other_ref, Qpn{tgt.handle}), EINVAL) << "another domain's target QP";
    EXPECT_EQ(d.q.open_xrc_tgt(d.opener, d.opener_ref, Qpn{tgt.handle + 1}), EINVAL) << "no QP of that number";
    EXPECT_EQ(d.q.open_xrc_tgt(d.opener, d.creator_ref, Qpn{tgt.handle}), EINVAL) << "another client's reference";
}

TEST(XrcSharing, DepartingClientsCloseTheirHandlesOnly) {
    SharedDomain d;
    const Created tgt = d.q.create_xrc_tgt(d.creator, d.creator_ref);
    ASSERT_EQ(tgt.error, 0);
    ASSERT_EQ(d.q.open_xrc_tgt(d.opener, d.opener_ref, Qpn{tgt.handle}), 0);
    EXPECT_TRUE(d.q.close_xrc_tgts_of(d.creator).empty());
    EXPECT_TRUE(d.q.qp_exists(Qpn{tgt.handle}));
    EXPECT_EQ(d.q.close_xrc_tgts_of(d.opener), std::vector<std::uint32_t>{tgt.handle});
    EXPECT_FALSE(d.q.qp_exists(Qpn{tgt.handle}));
}

TEST(XrcSharing, OneClientsTwoHandlesCloseByCookie) {
    SharedDomain d;
    constexpr std::uint64_t kCreated = 0x1000;
    constexpr std::uint64_t kOpened = 0x2000;
    const Created tgt = d.q.create_xrc_tgt(d.creator, d.creator_ref, kCreated);
    ASSERT_EQ(tgt.error, 0);
    ASSERT_EQ(d.q.open_xrc_tgt(d.creator, d.creator_ref, Qpn{tgt.handle}, kOpened), 0);
    EXPECT_EQ(d.q.close_xrc_tgt(d.creator, Qpn{tgt.handle}, 0x3000), EINVAL) << "no handle with that cookie";
    EXPECT_EQ(d.q.close_xrc_tgt(d.opener, Qpn{tgt.handle}, kOpened), EINVAL) << "another client's handle";

    ASSERT_EQ(d.q.close_xrc_tgt(d.creator, Qpn{tgt.handle}, kOpened), 0);
    ASSERT_TRUE(d.q.qp_exists(Qpn{tgt.handle}));
    const std::vector<SharedQpHandle> left = d.q.xrc_tgt_handles(tgt.handle);
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].cookie, kCreated) << "events go to the handle still open";

    ASSERT_EQ(d.q.close_xrc_tgt(d.creator, Qpn{tgt.handle}, kCreated), 0);
    EXPECT_FALSE(d.q.qp_exists(Qpn{tgt.handle})) << "the last close destroys the QP";
    EXPECT_EQ(d.q.close_xrcd(d.creator, d.creator_ref), 0);
}

}  // namespace
}  // namespace uroce::device
