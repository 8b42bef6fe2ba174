#include "plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace uroce::tools::testbed {

namespace {

// The device every node's uroced publishes when each node has its own
// daemon: each node has its own state directory, so all can use the name a
// single host would (like mlx5_0 on every machine of a cluster), and a
// program runs unchanged on any node. The devices of one Shared daemon
// need distinct names (docs/daemon.md), uroce0, uroce1, ... by node.
constexpr const char* kDevice = "uroce0";
// The node's end of its link, in its own namespace.
constexpr const char* kNodeInterface = "veth0";

bool name_char_ok(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

}  // namespace

std::string Plan::record_path() const { return fmt::format("{}/testbed-{}.json", options.state_root, options.name); }

std::string Plan::state_dir() const { return fmt::format("{}/testbed-{}", options.state_root, options.name); }

std::string Plan::memif_socket() const { return state_dir() + "/memif.sock"; }

std::vector<std::string> Plan::namespaces() const {
    std::vector<std::string> out;
    if (joint == Joint::Bridge) {
        out.push_back(bridge_netns);
    }
    for (const auto& n : nodes) {
        out.push_back(n.netns);
    }
    return out;
}

Wire default_wire(unsigned nodes) { return nodes == 2 ? Wire::Memif : Wire::Veth; }

std::uint32_t default_mtu(Wire w) {
    switch (w) {
        case Wire::Memif:
            return 9000;
        case Wire::Veth:
            return 1500;
    }
    return 1500;
}

std::string check_options(const Options& o) {
    if (o.name.empty() || o.name.size() > kMaxNameLength || !std::all_of(o.name.begin(), o.name.end(), name_char_ok)) {
        return fmt::format("--name \"{}\": 1 to {} letters, digits, '-' or '_'", o.name, kMaxNameLength);
    }
    if (o.nodes < 2 || o.nodes > kMaxNodes) {
        return fmt::format("--nodes {}: 2 to {}", o.nodes, kMaxNodes);
    }
    if (o.loss_percent && !(*o.loss_percent >= 0.0 && *o.loss_percent <= 100.0)) {
        return fmt::format("--loss {}: a percentage from 0 to 100", *o.loss_percent);
    }
    if (o.state_root.empty() || o.state_root.front() != '/') {
        return fmt::format("state directory \"{}\": must be an absolute path", o.state_root);
    }
    if (o.wire == Wire::Memif) {
        if (o.nodes != 2) {
            return fmt::format(
                "--wire memif joins exactly 2 nodes (a memif pair is one server and one client); for {} nodes use "
                "--wire veth (a bridge)",
                o.nodes);
        }
        Plan p;
        p.options = o;
        if (const std::string socket = p.memif_socket(); socket.size() > kMaxSocketPath) {
            return fmt::format("the memif socket {} is longer than a Unix socket path can be ({} bytes); use a shorter "
                               "$UROCE_TESTBED_DIR or --name",
                               socket, kMaxSocketPath);
        }
    }
    return {};
}

Plan make_plan(const Options& o) {
    Plan p;
    p.options = o;
    p.joint = o.nodes == 2 ? Joint::VethPair : Joint::Bridge;
    if (p.joint == Joint::Bridge) {
        p.bridge_netns = fmt::format("uroce-{}-br", o.name);
    }
    for (unsigned k = 1; k <= o.nodes; ++k) {
        NodePlan n;
        n.node = fmt::format("n{}", k);
        n.netns = fmt::format("uroce-{}-{}", o.name, n.node);
        n.ifname = kNodeInterface;
        n.ipv4 = fmt::format("{}{}", kIpv4Prefix, k);
        n.ipv6 = fmt::format("{}{:x}", kIpv6Prefix, k);
        n.device = o.daemons == DaemonShape::Shared ? fmt::format("uroce{}", k - 1) : std::string(kDevice);
        n.state_dir = fmt::format("{}/{}", p.state_dir(), n.node);
        n.log_path = o.daemons == DaemonShape::Shared ? p.state_dir() + "/uroced.log" : n.state_dir + "/uroced.log";
        p.nodes.push_back(std::move(n));
    }
    return p;
}

const char* wire_name(Wire w) {
    switch (w) {
        case Wire::Memif:
            return "memif";
        case Wire::Veth:
            return "veth";
    }
    return "?";
}

std::optional<Wire> parse_wire(const std::string& text) {
    if (text == "memif") {
        return Wire::Memif;
    }
    if (text == "veth") {
        return Wire::Veth;
    }
    return std::nullopt;
}

std::string loss_fault_rule(double percent) { return fmt::format("drop:rate={:g}%,dir=tx", percent); }

std::string port_spec(const Plan& plan, std::size_t index) {
    const unsigned instance = plan.options.daemons == DaemonShape::Shared ? static_cast<unsigned>(index) : 0;
    switch (plan.options.wire) {
        case Wire::Memif:
            // uroced adds socket-abstract=no for a socket path (docs/wires.md).
            return fmt::format("net_memif{},role={},socket={}", instance, index == 0 ? "server" : "client",
                               plan.memif_socket());
        case Wire::Veth:
            break;
    }
    return fmt::format("net_af_packet{},iface={}", instance, plan.nodes.at(index).ifname);
}

namespace {

void add_fault(const Plan& plan, std::vector<std::string>& argv) {
    if (plan.options.loss_percent && *plan.options.loss_percent > 0.0) {
        // In a Shared daemon the rule applies to every device's port
        // (docs/daemon.md); dir=tx still counts each frame once, at the
        // device that sends it.
        argv.emplace_back("--fault");
        argv.push_back(loss_fault_rule(*plan.options.loss_percent));
    }
}

}  // namespace

std::vector<std::string> uroced_argv(const Plan& plan, std::size_t index, const std::string& uroced) {
    // The flags the dataflow tests give their two daemons (harness
    // Topology), plus the IPv6 address. On either wire the daemon's
    // addresses are its node's (the veth end's): a program that connects
    // to a node's address (rdma_cm, a TCP exchange of QP details) finds
    // that node's daemon, whichever wire carries the RoCE frames.
    const NodePlan& node = plan.nodes.at(index);
    std::vector<std::string> argv = {uroced,       "--port", port_spec(plan, index),
                                     "--ip",       node.ipv4, "--ip",
                                     node.ipv6,    "--name", node.device,
                                     "--state-dir", node.state_dir, "--mtu",
                                     std::to_string(plan.options.mtu)};
    add_fault(plan, argv);
    return argv;
}

std::string device_spec(const Plan& plan, std::size_t index) {
    const NodePlan& node = plan.nodes.at(index);
    return fmt::format("name={},port={},ip={},ip={},state-dir={},mtu={},netns={}", node.device,
                       port_spec(plan, index), node.ipv4, node.ipv6, node.state_dir, plan.options.mtu, node.netns);
}

std::vector<std::string> shared_uroced_argv(const Plan& plan, const std::string& uroced) {
    std::vector<std::string> argv = uroced_argv(plan, 0, uroced);
    for (std::size_t i = 1; i < plan.nodes.size(); ++i) {
        argv.emplace_back("--device");
        argv.push_back(device_spec(plan, i));
    }
    return argv;
}

const char* daemon_shape_name(DaemonShape s) {
    switch (s) {
        case DaemonShape::Shared:
            return "one uroced for all nodes";
        case DaemonShape::PerNode:
            return "one uroced per node";
    }
    return "?";
}

std::string default_state_root() {
    const char* env = std::getenv("UROCE_TESTBED_DIR");
    return env != nullptr && *env != '\0' ? env : "/run/uroce";
}

}  // namespace uroce::tools::testbed
