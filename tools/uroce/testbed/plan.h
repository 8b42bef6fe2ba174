// What `uroce testbed up` makes, decided before anything is made: the
// namespaces, the links joining them, each node's addresses, state directory
// and uroced command line. Pure: nothing here touches the system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace uroce::tools::testbed {

// How the daemons' RoCE frames are carried (docs/wires.md):
// - Memif: a DPDK net_memif pair, shared memory between the two daemons
//   (n1 the server, n2 the client, the socket in the testbed's state
//   directory; both ends in one process when the daemon is Shared); two
//   nodes only, a memif pair has two ends. The veth (or
//   bridge) is still made: it carries the programs' own TCP exchange.
// - Veth: each daemon on net_af_packet over its node's veth end, the
//   frames through the kernel (the "real kernel interface" case).
enum class Wire { Memif, Veth };

// How the nodes are joined: two nodes by one veth pair, more by a Linux
// bridge in a namespace of its own, so nothing is made in the host's.
enum class Joint { VethPair, Bridge };

// How many uroced the nodes' devices live in (docs/ci-testbed.md):
// - Shared: one uroced hosts every node's device (tools/uroced
//   device_instance.h), each with its own port, state directory and, for
//   its port's sockets and UDP sink, its node's namespace (--device
//   netns=); one loop thread competes with the programs for the CPUs.
// - PerNode: one uroced per node, each inside its node's namespace.
enum class DaemonShape { Shared, PerNode };

struct Options {
    std::string name = "tb";
    unsigned nodes = 2;
    Wire wire = Wire::Memif;
    DaemonShape daemons = DaemonShape::Shared;
    std::uint32_t mtu = 9000;  // default_mtu(wire) unless --mtu
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
    std::string state_dir;  // that device's state directory
    std::string log_path;   // its uroced's stdout and stderr (the shared one's log when Shared)
};

struct Plan {
    Options options;
    Joint joint = Joint::VethPair;
    std::string bridge_netns;  // only for Joint::Bridge
    std::vector<NodePlan> nodes;

    [[nodiscard]] std::string record_path() const;  // <state_root>/testbed-<name>.json
    [[nodiscard]] std::string state_dir() const;    // <state_root>/testbed-<name>
    // The memif control socket, <state_dir>/memif.sock (only for Wire::Memif).
    [[nodiscard]] std::string memif_socket() const;
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

// A Unix socket's path must fit sockaddr_un::sun_path (108 bytes with its
// terminating NUL, unix(7)).
inline constexpr std::size_t kMaxSocketPath = 107;

// The wire when --wire is not given: memif for two nodes (the fast one),
// veth for more (memif joins exactly two daemons).
[[nodiscard]] Wire default_wire(unsigned nodes);
// The Ethernet MTU when --mtu is not given: memif's own default (9000,
// active IB MTU 4096, as uroced's memif port) and the kernel's 1500 on a veth.
[[nodiscard]] std::uint32_t default_mtu(Wire w);

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
// uroced's --port for node `index`: its af_packet port on its veth end, or
// its memif end (n1 role=server, n2 role=client). In a Shared daemon each
// port has its own vdev instance number (net_memif0, net_memif1, ...).
[[nodiscard]] std::string port_spec(const Plan& plan, std::size_t index);
// uroced's command line for node `index` alone (PerNode; without the
// `ip netns exec` prefix).
[[nodiscard]] std::vector<std::string> uroced_argv(const Plan& plan, std::size_t index, const std::string& uroced);
// The one uroced of a Shared testbed: n1's device by the single-device
// flags (the daemon runs in n1's namespace), every other node's by a
// --device spec with netns= its namespace.
[[nodiscard]] std::vector<std::string> shared_uroced_argv(const Plan& plan, const std::string& uroced);
// The --device spec of node `index` in a Shared daemon.
[[nodiscard]] std::string device_spec(const Plan& plan, std::size_t index);
[[nodiscard]] const char* daemon_shape_name(DaemonShape s);
// The default for Options::state_root: $UROCE_TESTBED_DIR, else /run/uroce.
[[nodiscard]] std::string default_state_root();

}  // namespace uroce::tools::testbed
