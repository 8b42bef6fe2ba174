// The --device spec of uroced (tools/uroced/device_spec.h): a DPDK port's
// devargs after port=, repeatable ip=, and clear errors for what is wrong.
#include <gtest/gtest.h>

#include "device_spec.h"

namespace uroce::daemon {
namespace {

TEST(DeviceSpec, PortDevargsRunUpToTheNextKey) {
    const ParsedDeviceSpec p = parse_device_spec(
        "name=uroce_b,port=net_af_packet1,iface=veth1,qdisc_bypass=1,ip=10.0.0.2,ip=fd00::2,state-dir=/run/b,"
        "mtu=9000,netns=ns-b");
    ASSERT_TRUE(p.spec) << p.error;
    EXPECT_EQ(p.spec->name, "uroce_b");
    EXPECT_EQ(p.spec->port, "net_af_packet1,iface=veth1,qdisc_bypass=1");
    EXPECT_EQ(p.spec->ips, (std::vector<std::string>{"10.0.0.2", "fd00::2"}));
    EXPECT_EQ(p.spec->state_dir, "/run/b");
    EXPECT_EQ(p.spec->mtu, 9000u);
    EXPECT_EQ(p.spec->netns, "ns-b");
}

TEST(DeviceSpec, KeysInAnyOrderAndLoopback) {
    const ParsedDeviceSpec p = parse_device_spec("state-dir=/tmp/x,ip=192.0.2.9,port=loopback,name=uroce_x");
    ASSERT_TRUE(p.spec) << p.error;
    EXPECT_EQ(p.spec->port, "loopback");
    EXPECT_EQ(p.spec->mtu, 0u);
    EXPECT_TRUE(p.spec->netns.empty());
}

struct BadSpec {
    const char* text;
    const char* says;
};

class DeviceSpecErrors : public ::testing::TestWithParam<BadSpec> {};

TEST_P(DeviceSpecErrors, NameWhatIsWrong) {
    const ParsedDeviceSpec p = parse_device_spec(GetParam().text);
    ASSERT_FALSE(p.spec) << GetParam().text;
    EXPECT_NE(p.error.find(GetParam().says), std::string::npos) << p.error;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, DeviceSpecErrors,
    ::testing::Values(BadSpec{"", "expected key=value"},
                      BadSpec{"name=uroce_b,colour=red,port=loopback,ip=192.0.2.1,state-dir=/x", "'colour=red'"},
                      BadSpec{"name=uroce_b,port=loopback,ip=192.0.2.1", "no state-dir="},
                      BadSpec{"port=loopback,ip=192.0.2.1,state-dir=/x", "no name="},
                      BadSpec{"name=uroce_b,ip=192.0.2.1,state-dir=/x", "no port="},
                      BadSpec{"name=uroce_b,port=loopback,state-dir=/x", "no ip="},
                      BadSpec{"name=mlx5_0,port=loopback,ip=192.0.2.1,state-dir=/x", "must start with 'uroce'"},
                      BadSpec{"name=uroce_b,port=loopback,ip=300.1.2.3,state-dir=/x", "not an IPv4 or IPv6"},
                      BadSpec{"name=uroce_b,port=loopback,ip=192.0.2.1,state-dir=/x,mtu=100", "576 to 9216"},
                      BadSpec{"name=uroce_b,port=loopback,ip=192.0.2.1,state-dir=/x,mtu=9k", "576 to 9216"},
                      BadSpec{"name=uroce_b,port=loopback,ip=192.0.2.1,state-dir=/x,name=uroce_c", "name given twice"},
                      BadSpec{"name=,port=loopback,ip=192.0.2.1,state-dir=/x", "no value"},
                      BadSpec{"name=uroce_b,port=net_memif0,ip=192.0.2.1,state-dir=/x,netns=../etc", "no '/'"},
                      BadSpec{"name=uroce_b,port=loopback,ip=192.0.2.1,state-dir=/x,netns=ns1", "loopback port"}));

TEST(DeviceSet, NamesAndStateDirectoriesMustDiffer) {
    DeviceSpec a;
    a.name = "uroce_a";
    a.state_dir = "/run/a";
    DeviceSpec b = a;
    b.state_dir = "/run/b";
    EXPECT_NE(check_device_set({a, b}).find("two devices named uroce_a"), std::string::npos);
    b.name = "uroce_b";
    b.state_dir = "/run/a/";
    EXPECT_NE(check_device_set({a, b}).find("share the state directory"), std::string::npos);
    b.state_dir = "/run/b";
    EXPECT_EQ(check_device_set({a, b}), "");
}

}  // namespace
}  // namespace uroce::daemon
