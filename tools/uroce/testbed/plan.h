// What `uroce testbed up` makes, decided before anything is made: the
// namespaces, the links joining them, each node's addresses, state directory
// and uroced command line. Pure: nothing here touches the system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace uroce::tools::testbed {

// How the nodes' Ethernet is carried. Only veth now; a shared-memory wire
// (DPDK memif) could be added as a second value.
enum class Wire { Veth };

// How the nodes are joined: two nodes by one veth pair, more by a Linux
// bridge in a namespace of its own, so nothing is made in the host's.
enum class Joint { VethPair, Bridge };

struct Options {
    std::string name = "tb";
    unsigned nodes = 2;
    Wire wire = Wire::Veth;
    std::uint32_t mtu = 1500;
    std::optional<double> loss_percent;  // drop rate, each direction, by uroced --fault
    std::string state_root;              // where records and state directories go
};

struct NodePlan {
    std::string node;       // n1, n2, ...
    std::string netns;      // uroce-<testbed>-<node>
    std::string ifname;     // the node's end of its link, in its namespace
    std::string ipv4;       // 10.77.0.<k>
    std::string ipv6;       // fd00:77::<k>
    std::string device;     // the uroce device its uroced publishes
    std::string state_dir;  // that uroced's --state-dir
    std::string log_path;   // its stdout and stderr
};

struct Plan {
    Options options;
    Joint joint = Joint::VethPair;
    std::string bridge_netns;  // only for Joint::Bridge
    std::vector<NodePlan> nodes;

    [[nodiscard]] std::string record_path() const;  // <state_root>/testbed-<name>.json
    [[nodiscard]] std::string state_dir() const;    // <state_root>/testbed-<name>
    // Every namespace, in the order they are made.
    [[nodiscard]] std::vector<std::string> namespaces() const;
};

// Limits of the plan: the /24 of the IPv4 addresses, and the interface name
// length (IFNAMSIZ - 1) of a bridge port named after its node.
inline constexpr unsigned kMaxNodes = 64;
inline constexpr std::size_t kMaxNameLength = 24;
// The subnets every testbed uses; each lives only in its own namespaces.
inline constexpr const char* kIpv4Prefix = "10.77.0.";
inline constexpr const char* kIpv6Prefix = "fd00:77::";
inline constexpr unsigned kIpv4PrefixLength = 24;
inline constexpr unsigned kIpv6PrefixLength = 64;
// The RoCE v2 GID indices of the node's addresses (docs/daemon.md, GID
// table): 2 is the first IPv4 address, the IPv6 address follows.
inline constexpr unsigned kIpv4GidIndex = 2;
inline constexpr unsigned kIpv6GidIndex = 3;

// Empty when the options can be built, else why not.
[[nodiscard]] std::string check_options(const Options& o);
[[nodiscard]] Plan make_plan(const Options& o);

[[nodiscard]] const char* wire_name(Wire w);
[[nodiscard]] std::optional<Wire> parse_wire(const std::string& text);
// "drop:rate=P%,dir=tx", the uroced --fault rule for --loss P% (docs/ci-testbed.md):
// each frame leaves through exactly one daemon's tx, so every direction of
// every link loses P%; dir=both would count each frame twice (the sender's
// tx and the receiver's rx), about 2P%.
[[nodiscard]] std::string loss_fault_rule(double percent);
// uroced's command line for one node (without the `ip netns exec` prefix).
[[nodiscard]] std::vector<std::string> uroced_argv(const Plan& plan, const NodePlan& node, const std::string& uroced);
// The default for Options::state_root: $UROCE_TESTBED_DIR, else /run/uroce.
[[nodiscard]] std::string default_state_root();

}  // namespace uroce::tools::testbed
