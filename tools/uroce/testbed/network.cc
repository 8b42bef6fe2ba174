#include "network.h"

#include <fmt/format.h>

#include <sstream>

#include "run_command.h"

namespace uroce::tools::testbed {

namespace {

// The bridge in the bridge namespace; each node's port there is named
// after the node.
constexpr const char* kBridge = "br0";

std::string ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"ip"};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult r = run_command(argv);
    if (r.ok()) {
        return {};
    }
    std::string out = r.output;
    while (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return fmt::format("{} failed (exit {}): {}", command_line(argv), r.exit_code, out);
}

// Runs the steps in order, stopping at the first failure.
std::string each(std::initializer_list<std::vector<std::string>> steps) {
    for (const auto& s : steps) {
        if (std::string err = ip(s); !err.empty()) {
            return err;
        }
    }
    return {};
}

// Sets a per-namespace sysctl by writing its /proc/sys file from inside the
// namespace (sh is essential in Debian; procps's sysctl may be absent, as
// in the debian:12 container image).
std::string sysctl_in(const std::string& netns, const std::string& file, const std::string& value) {
    const CommandResult r = run_command({"ip", "netns", "exec", netns, "sh", "-c", "echo \"$1\" > \"$2\"", "sh",
                                         value, file});
    return r.ok() ? std::string{} : fmt::format("setting {} to {} in {}: {}", file, value, netns, r.output);
}

}  // namespace

std::string add_namespace(const std::string& netns) { return ip({"netns", "add", netns}); }

std::string delete_namespace(const std::string& netns) {
    if (existing_namespaces().count(netns) == 0) {
        return {};
    }
    return ip({"netns", "delete", netns});
}

std::set<std::string> existing_namespaces() {
    std::set<std::string> out;
    const CommandResult r = run_command({"ip", "netns", "list"});
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
        // "name" or "name (id: 3)"
        const std::string name = line.substr(0, line.find(' '));
        if (!name.empty()) {
            out.insert(name);
        }
    }
    return out;
}

std::string make_links(const Plan& plan) {
    const std::string mtu = std::to_string(plan.options.mtu);
    if (plan.joint == Joint::VethPair) {
        const NodePlan& a = plan.nodes[0];
        const NodePlan& b = plan.nodes[1];
        // Made inside a's namespace with its peer straight in b's: nothing
        // ever exists in the host's namespace, so no name there can clash.
        return ip({"-n", a.netns, "link", "add", a.ifname, "mtu", mtu, "type", "veth", "peer", "name", b.ifname, "mtu",
                   mtu, "netns", b.netns});
    }
    const std::string& br = plan.bridge_netns;
    // The bridge namespace has no addresses of its own: no IPv6 there, so
    // its interfaces add no router solicitations or MLD to the nodes' wire.
    for (const char* conf : {"all", "default"}) {
        if (std::string err = sysctl_in(br, fmt::format("/proc/sys/net/ipv6/conf/{}/disable_ipv6", conf), "1");
            !err.empty()) {
            return err;
        }
    }
    // No STP: the ports forward at once (no 15 s listening and learning).
    if (std::string err = each({{"-n", br, "link", "add", kBridge, "mtu", mtu, "type", "bridge", "stp_state", "0"},
                                {"-n", br, "link", "set", kBridge, "up"}});
        !err.empty()) {
        return err;
    }
    for (const auto& n : plan.nodes) {
        if (std::string err = each({{"-n", br, "link", "add", n.node, "mtu", mtu, "type", "veth", "peer", "name",
                                     n.ifname, "mtu", mtu, "netns", n.netns},
                                    {"-n", br, "link", "set", n.node, "master", kBridge, "up"}});
            !err.empty()) {
            return err;
        }
    }
    return {};
}

std::string configure_node(const Plan& plan, const NodePlan& n) {
    // The kernel would send router solicitations on the link; the RoCE
    // frames are easier to read in a capture without them.
    if (std::string err = sysctl_in(n.netns, fmt::format("/proc/sys/net/ipv6/conf/{}/router_solicitations", n.ifname), "0");
        !err.empty()) {
        return err;
    }
    return each({
        {"-n", n.netns, "link", "set", "lo", "up"},
        {"-n", n.netns, "addr", "add", fmt::format("{}/{}", n.ipv4, kIpv4PrefixLength), "dev", n.ifname},
        // nodad: the address is usable at once (it is unique by construction).
        {"-n", n.netns, "addr", "add", fmt::format("{}/{}", n.ipv6, kIpv6PrefixLength), "dev", n.ifname, "nodad"},
        {"-n", n.netns, "link", "set", n.ifname, "mtu", std::to_string(plan.options.mtu), "up"},
    });
}

std::vector<std::string> describe_links(const Plan& plan) {
    std::vector<std::string> out;
    if (plan.options.wire == Wire::Memif) {
        const NodePlan& a = plan.nodes[0];
        const NodePlan& b = plan.nodes[1];
        out.push_back(fmt::format("memif server uroced@{} <-> client uroced@{} ({}; the RoCE frames)", a.netns,
                                  b.netns, plan.memif_socket()));
    }
    if (plan.joint == Joint::VethPair) {
        const NodePlan& a = plan.nodes[0];
        const NodePlan& b = plan.nodes[1];
        out.push_back(fmt::format("veth {}@{} <-> {}@{}", a.ifname, a.netns, b.ifname, b.netns));
        return out;
    }
    out.push_back(fmt::format("bridge {}@{}", kBridge, plan.bridge_netns));
    for (const auto& n : plan.nodes) {
        out.push_back(fmt::format("veth {}@{} <-> {}@{} (port of {})", n.ifname, n.netns, n.node, plan.bridge_netns,
                                  kBridge));
    }
    return out;
}

}  // namespace uroce::tools::testbed
