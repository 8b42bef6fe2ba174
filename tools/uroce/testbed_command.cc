#include "testbed_command.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "device_locator.h"
#include "testbed/bring_up.h"
#include "testbed/daemon_process.h"
#include "testbed/network.h"
#include "testbed/run_command.h"
#include "testbed/teardown.h"

namespace uroce::tools {

namespace tb = testbed;

namespace {

constexpr const char* kDefaultName = "tb";

std::string self_path() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("uroce") : p.string();
}

[[noreturn]] void fail(const std::string& what, int code = 1) {
    fmt::print(stderr, "uroce testbed: {}\n", what);
    throw CLI::RuntimeError(code);
}

// "1%", "1.5" -> the number.
double parse_percent(std::string text) {
    if (!text.empty() && text.back() == '%') {
        text.pop_back();
    }
    try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size()) {
            return v;
        }
    } catch (const std::exception&) {
    }
    fail(fmt::format("--loss {}: a percentage such as 1% or 0.5", text), 2);
}

// --loss is carried out by the daemon's fault injection (uroced --fault);
// a uroced built before it cannot.
void require_fault_injection(const std::string& uroced) {
    const tb::CommandResult r = tb::run_command({uroced, "--help"});
    if (r.output.find("--fault") == std::string::npos) {
        fail(fmt::format("--loss needs fault injection, and {} has no --fault option", uroced), 2);
    }
}

std::string name_flag(const std::string& name) { return name == kDefaultName ? "" : " --name " + name; }

void print_up(const tb::Record& r) {
    const tb::Plan& p = r.plan;
    const std::string uroce = self_path();
    const std::string name = name_flag(p.options.name);
    fmt::print("testbed {} is up: {} nodes joined by {}, wire {}, MTU {}, {}, {}\n", p.options.name, p.nodes.size(),
               p.joint == tb::Joint::VethPair ? "a veth pair" : "a bridge (in " + p.bridge_netns + ")",
               tb::wire_name(p.options.wire), p.options.mtu,
               p.options.loss_percent ? fmt::format("{:g}% loss each way (uroced --fault {})", *p.options.loss_percent,
                                                    tb::loss_fault_rule(*p.options.loss_percent))
                                      : std::string("no injected loss"),
               tb::daemon_shape_name(p.options.daemons));
    fmt::print("{:<5} {:<24} {:<9} {:<12} {:<14} {:<8} {}\n", "node", "namespace", "interface", "IPv4", "IPv6",
               "device", "uroced pid");
    for (std::size_t i = 0; i < p.nodes.size(); ++i) {
        const tb::NodePlan& n = p.nodes[i];
        fmt::print("{:<5} {:<24} {:<9} {:<12} {:<14} {:<8} {}\n", n.node, n.netns, n.ifname, n.ipv4, n.ipv6, n.device,
                   r.daemons[i].pid);
    }
    if (p.options.wire == tb::Wire::Memif) {
        fmt::print("The devices' RoCE frames go over memif (n1 role=server, n2 role=client, socket {}); the {} "
                   "carries only the programs' own TCP. No tcpdump on memif: use uroce capture.\n",
                   p.memif_socket(), p.nodes[0].ifname);
    }
    const tb::NodePlan& a = p.nodes[0];
    const tb::NodePlan& b = p.nodes[1];
    fmt::print("GID index {} is a node's IPv4 address as RoCE v2, {} its IPv6 address.\n", tb::kIpv4GidIndex,
               tb::kIpv6GidIndex);
    fmt::print("Run a program on a node (in its namespace, with its device):\n");
    fmt::print("  {} testbed exec{} {} -- ibv_rc_pingpong -d {} -g {}\n", uroce, name, a.node, a.device,
               tb::kIpv4GidIndex);
    fmt::print("  {} testbed exec{} {} -- ibv_rc_pingpong -d {} -g {} {}\n", uroce, name, b.node, b.device,
               tb::kIpv4GidIndex, a.ipv4);
    fmt::print("Logs: {}; record: {}\n",
               p.options.daemons == tb::DaemonShape::Shared ? a.log_path : p.state_dir() + "/NODE/uroced.log",
               p.record_path());
    fmt::print("Take it down: {} testbed down{}\n", uroce, name.empty() ? "" : " " + p.options.name);
}

tb::Record load_or_fail(const std::string& state_root, const std::string& name) {
    tb::Options o;
    o.name = name;
    o.state_root = state_root;
    std::string problem;
    auto r = tb::load_record(tb::make_plan(o).record_path(), problem);
    if (!r) {
        fail(fmt::format("testbed {}: {} (uroce testbed up{} makes it)", name, problem, name_flag(name)));
    }
    return std::move(*r);
}

void add_up(CLI::App& testbed, const std::shared_ptr<std::string>& root) {
    auto o = std::make_shared<tb::Options>();
    auto loss = std::make_shared<std::string>();
    auto wire = std::make_shared<std::string>();  // empty: tb::default_wire
    auto mtu = std::make_shared<std::uint32_t>(0);  // 0: tb::default_mtu
    auto uroced = std::make_shared<std::string>();
    auto timeout = std::make_shared<double>(60);
    auto per_node = std::make_shared<bool>(false);
    auto* up = testbed.add_subcommand("up", "Make the namespaces and links and start the uroced of the nodes");
    up->add_option("--nodes", o->nodes, "how many nodes (2: a veth pair; more: a bridge)")->capture_default_str();
    up->add_option("--name", o->name, "the testbed's name (several can be up at once)")->capture_default_str();
    up->add_option("--loss", *loss, "drop this share of packets in each direction, e.g. 1% (uroced --fault)");
    up->add_option("--wire", *wire,
                   "how the daemons' RoCE frames are carried: memif (shared memory, 2 nodes only) or veth "
                   "(af_packet through the kernel); default memif for 2 nodes, veth for more")
        ->check(CLI::IsMember({"memif", "veth"}));
    up->add_option("--mtu", *mtu, "Ethernet MTU of the wire and the veths (default 9000 on memif, 1500 on veth)")
        ->check(CLI::Range(576u, 9216u));
    up->add_flag("--daemon-per-node", *per_node,
                 "one uroced per node, each in its node's namespace (default: one uroced hosting every node's "
                 "device, one loop thread for the testbed)");
    up->add_option("--uroced", *uroced, "the daemon to run (default: beside this uroce, else installed, else PATH)");
    up->add_option("--timeout", *timeout, "seconds to wait for each daemon to be ready")->capture_default_str();
    up->callback([=] {
        o->state_root = *root;
        o->wire = wire->empty() ? tb::default_wire(o->nodes) : *tb::parse_wire(*wire);
        o->mtu = *mtu != 0 ? *mtu : tb::default_mtu(o->wire);
        o->daemons = *per_node ? tb::DaemonShape::PerNode : tb::DaemonShape::Shared;
        if (!loss->empty()) {
            o->loss_percent = parse_percent(*loss);
        }
        if (std::string err = tb::check_options(*o); !err.empty()) {
            fail(err, 2);
        }
        const std::string daemon = uroced->empty() ? daemon_path() : *uroced;
        if (daemon.empty()) {
            fail("no uroced beside this uroce, installed or in PATH; give --uroced");
        }
        if (o->loss_percent && *o->loss_percent > 0.0) {
            require_fault_injection(daemon);
        }
        const tb::Plan plan = tb::make_plan(*o);
        if (std::filesystem::exists(plan.record_path())) {
            fail(fmt::format("testbed {} exists ({}); uroce testbed down{} first", o->name, plan.record_path(),
                             name_flag(o->name)));
        }
        const auto existing = tb::existing_namespaces();
        for (const auto& ns : plan.namespaces()) {
            if (existing.count(ns) != 0) {
                fail(fmt::format("namespace {} exists already and is not in a testbed record; remove it (ip netns "
                                 "delete {}) or choose another --name",
                                 ns, ns));
            }
        }
        const auto ms = std::chrono::milliseconds(static_cast<long>(*timeout * 1000));
        const tb::UpResult result = tb::bring_up(plan, daemon, ms);
        if (!result.record) {
            fail(fmt::format("testbed {} not made: {}", o->name, result.problem));
        }
        print_up(*result.record);
    });
}

void add_exec(CLI::App& testbed, const std::shared_ptr<std::string>& root) {
    auto name = std::make_shared<std::string>(kDefaultName);
    auto node = std::make_shared<std::string>();
    auto argv = std::make_shared<std::vector<std::string>>();
    auto* exec = testbed.add_subcommand("exec", "Run a program on a node: in its namespace, with its uroce device");
    exec->add_option("--name", *name, "the testbed")->capture_default_str();
    exec->add_option("node", *node, "n1, n2, ...")->required();
    exec->add_option("command", *argv, "PROGRAM [ARGS...] (after --)")->required();
    exec->prefix_command();
    exec->callback([=] {
        const tb::Record r = load_or_fail(*root, *name);
        const tb::NodePlan* n = nullptr;
        for (const auto& candidate : r.plan.nodes) {
            if (candidate.node == *node) {
                n = &candidate;
            }
        }
        if (n == nullptr) {
            fail(fmt::format("testbed {} has no node {} (it has n1 to n{})", *name, *node, r.plan.nodes.size()), 2);
        }
        // `ip netns exec` as for the daemon, then `uroce exec` for the
        // device's environment and the preload library.
        std::vector<std::string> full = {"ip", "netns", "exec", n->netns, self_path(), "exec", "--state-dir",
                                         n->state_dir, "--"};
        full.insert(full.end(), argv->begin(), argv->end());
        std::vector<char*> args;
        for (auto& a : full) {
            args.push_back(a.data());
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        fail(fmt::format("cannot run ip: {}", std::strerror(errno)), 127);
    });
}

// One testbed's health: every namespace there and every daemon running.
bool print_status(const tb::Record& r) {
    const auto existing = tb::existing_namespaces();
    bool healthy = true;
    fmt::print("testbed {}: {} nodes, {}, wire {}, MTU {}, {}, {}\n", r.plan.options.name, r.plan.nodes.size(),
               r.plan.joint == tb::Joint::VethPair ? "veth pair" : "bridge in " + r.plan.bridge_netns,
               tb::wire_name(r.plan.options.wire), r.plan.options.mtu,
               r.plan.options.loss_percent ? fmt::format("{:g}% loss", *r.plan.options.loss_percent) : "no loss",
               tb::daemon_shape_name(r.plan.options.daemons));
    if (r.plan.joint == tb::Joint::Bridge && existing.count(r.plan.bridge_netns) == 0) {
        fmt::print("  bridge namespace {} is missing\n", r.plan.bridge_netns);
        healthy = false;
    }
    if (r.plan.options.wire == tb::Wire::Memif) {
        // The server daemon (n1) binds it when it starts and removes it when
        // it stops cleanly; a crash leaves it (`down` removes it).
        std::error_code ec;
        const bool present = std::filesystem::exists(r.plan.memif_socket(), ec);
        fmt::print("  memif socket {} {}\n", r.plan.memif_socket(), present ? "present" : "missing");
        healthy = healthy && present;
    }
    for (std::size_t i = 0; i < r.plan.nodes.size(); ++i) {
        const tb::NodePlan& n = r.plan.nodes[i];
        const bool ns_ok = existing.count(n.netns) != 0;
        const tb::DaemonState st = tb::daemon_state(r.daemons[i]);
        healthy = healthy && ns_ok && st == tb::DaemonState::Running;
        fmt::print("  {:<4} {:<24} {:<8} {} {:<14} uroced pid {} {}\n", n.node, n.netns, ns_ok ? "" : "(missing)",
                   n.ipv4, n.ipv6, r.daemons[i].pid, tb::daemon_state_name(st));
    }
    return healthy;
}

void add_status(CLI::App& testbed, const std::shared_ptr<std::string>& root) {
    auto name = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto* status = testbed.add_subcommand("status", "Show the testbeds, their nodes and daemons; exit 1 if one is broken");
    status->add_option("name", *name, "only this testbed");
    status->add_flag("--json", *json, "the record(s) as JSON");
    status->callback([=] {
        const std::vector<std::string> names = name->empty() ? tb::recorded_testbeds(*root)
                                                             : std::vector<std::string>{*name};
        bool healthy = true;
        if (*json) {
            fmt::print("[");
        } else if (names.empty()) {
            fmt::print("no testbed is up (records in {})\n", *root);
        }
        for (std::size_t i = 0; i < names.size(); ++i) {
            const tb::Record r = load_or_fail(*root, names[i]);
            if (*json) {
                fmt::print("{}{}", i == 0 ? "" : ",", tb::record_json(r));
            } else {
                healthy = print_status(r) && healthy;
            }
        }
        if (*json) {
            fmt::print("]\n");
        }
        if (!healthy) {
            throw CLI::RuntimeError(1);
        }
    });
}

void add_down(CLI::App& testbed, const std::shared_ptr<std::string>& root) {
    auto name = std::make_shared<std::string>(kDefaultName);
    auto* down = testbed.add_subcommand("down", "Stop the testbed's daemons and remove everything it made");
    down->add_option("name", *name, "the testbed")->capture_default_str();
    down->callback([=] {
        tb::Options o;
        o.name = *name;
        o.state_root = *root;
        if (std::string err = tb::check_options(o); !err.empty()) {
            fail(err, 2);
        }
        std::string problem;
        const auto record = tb::load_record(tb::make_plan(o).record_path(), problem);
        const tb::TeardownReport rep = record ? tb::tear_down(*record) : tb::tear_down_by_name(*name);
        for (const auto& line : rep.done) {
            fmt::print("  {}\n", line);
        }
        for (const auto& line : rep.problems) {
            fmt::print(stderr, "  not removed: {}\n", line);
        }
        if (!rep.clean()) {
            fail(fmt::format("testbed {} only partly removed; its record is kept, run down again", *name));
        }
        fmt::print("testbed {}: {}\n", *name, rep.done.empty() ? "nothing to remove" : "removed");
    });
}

}  // namespace

void add_testbed_command(CLI::App& app) {
    auto root = std::make_shared<std::string>(tb::default_state_root());
    auto* testbed = app.add_subcommand("testbed", "Nodes in network namespaces, each with a uroce device (docs/ci-testbed.md)");
    testbed->require_subcommand(1);
    add_up(*testbed, root);
    add_exec(*testbed, root);
    add_status(*testbed, root);
    add_down(*testbed, root);
}

}  // namespace uroce::tools
