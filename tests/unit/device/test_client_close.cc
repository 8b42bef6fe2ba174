// Device::close_client lets go of everything the client handed over, at
// once: its MR descriptors hold its address space (the daemon's copy of the
// client's /proc/self/maps), and a departed client must leave no descriptor
// open in the daemon (the kill test counts the daemon's fds).
#include <gtest/gtest.h>

#include <memory>

#include "device/device.h"
#include "wire/build.h"

namespace uroce::device {
namespace {

// An address space that says everything is mapped and counts its lives.
class CountedSpace final : public mr::AddressSpace {
public:
    explicit CountedSpace(int& alive) : alive_(alive) { ++alive_; }
    ~CountedSpace() override { --alive_; }
    [[nodiscard]] bool accessible(std::uint64_t, std::uint64_t, bool) const override { return true; }
    [[nodiscard]] std::optional<std::uint64_t> huge_page_size(std::uint64_t, std::uint64_t) const override {
        return std::nullopt;
    }

private:
    int& alive_;
};

DeviceConfig config() {
    DeviceConfig c;
    c.name = "uroce_close";
    c.port.mac = {0x02, 0, 0, 0, 0xC1, 0x05};
    c.port.netdev_mtu = 1500;
    c.ips = {wire::ipv4_mapped({192, 0, 2, 9})};
    return c;
}

TEST(CloseClient, ReleasesTheAddressSpaceItsMrsHeld) {
    Device device(config());
    int alive = 0;
    const std::uint32_t client = device.open_client(1);
    ASSERT_TRUE(device.attach_address_space(client, std::make_shared<CountedSpace>(alive)));
    const auto pd = device.pds().alloc(client);
    ASSERT_EQ(pd.error, 0);
    for (int i = 0; i < 8; ++i) {
        mr::RegRequest r;
        r.pd = pd.pd;
        r.owner = client;
        r.addr = 0x10000 + static_cast<std::uint64_t>(i) * 0x1000;
        r.length = 0x1000;
        r.address_space = device.address_space(client);
        ASSERT_EQ(device.mrs().reg_mr(r).error, 0);
    }
    ASSERT_EQ(alive, 1);
    EXPECT_EQ(device.close_client(client), 9u);  // 8 MRs and the PD
    EXPECT_EQ(alive, 0) << "a retired MR descriptor still holds the departed client's address space";
}

}  // namespace
}  // namespace uroce::device
