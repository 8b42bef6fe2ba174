#include "bring_up.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "daemon_process.h"
#include "network.h"
#include "teardown.h"

namespace uroce::tools::testbed {

namespace fs = std::filesystem;

namespace {

std::string make_state_dirs(const Plan& plan) {
    for (const auto& n : plan.nodes) {
        std::error_code ec;
        fs::create_directories(n.state_dir, ec);
        if (ec) {
            return fmt::format("cannot create {}: {}", n.state_dir, ec.message());
        }
    }
    return {};
}

std::string make_network(const Plan& plan) {
    for (const auto& ns : plan.namespaces()) {
        if (std::string err = add_namespace(ns); !err.empty()) {
            return err;
        }
    }
    if (std::string err = make_links(plan); !err.empty()) {
        return err;
    }
    for (const auto& n : plan.nodes) {
        if (std::string err = configure_node(plan, n); !err.empty()) {
            return err;
        }
    }
    return {};
}

// Waits until node i's daemon answers on its control socket.
std::string wait_daemon(const Record& r, std::size_t i, std::chrono::milliseconds ready_timeout) {
    const NodePlan& n = r.plan.nodes[i];
    const std::string socket = n.state_dir + "/" + n.device + ".sock";
    switch (wait_ready(r.daemons[i], socket, ready_timeout)) {
        case Readiness::Ready:
            return {};
        case Readiness::Exited:
            return fmt::format("{}: uroced exited before it was ready; the end of {}:\n{}", n.node, n.log_path,
                               log_tail(n.log_path));
        case Readiness::TimedOut:
            return fmt::format("{}: uroced did not answer on {} within {} s; the end of {}:\n{}", n.node, socket,
                               ready_timeout.count() / 1000, n.log_path, log_tail(n.log_path));
    }
    return {};
}

// Starts every node's daemon, recording each PID before waiting for any.
// On memif the server (the first node) is made ready first: a client that
// starts before it connects only when it dials again (docs/wires.md), up to
// a backoff later.
std::string start_daemon_per_node(Record& r, std::chrono::milliseconds ready_timeout) {
    const bool server_first = r.plan.options.wire == Wire::Memif;
    for (std::size_t i = 0; i < r.plan.nodes.size(); ++i) {
        const NodePlan& n = r.plan.nodes[i];
        std::string problem;
        r.daemons[i] = start_daemon(n.netns, uroced_argv(r.plan, i, r.uroced), n.log_path, problem);
        if (!problem.empty()) {
            return fmt::format("{}: cannot start uroced: {}", n.node, problem);
        }
        if (std::string err = save_record(r); !err.empty()) {
            return err;
        }
        if (server_first && i == 0) {
            if (std::string err = wait_daemon(r, 0, ready_timeout); !err.empty()) {
                return err;
            }
        }
    }
    return {};
}

// Starts the one uroced of every node, in n1's namespace (its ports are
// made in the order of its devices: the memif server, n1's, before the
// client).
std::string start_shared_daemon(Record& r) {
    const NodePlan& first = r.plan.nodes.front();
    std::string problem;
    const DaemonRecord d = start_daemon(first.netns, shared_uroced_argv(r.plan, r.uroced), first.log_path, problem);
    if (!problem.empty()) {
        return fmt::format("cannot start uroced: {}", problem);
    }
    std::fill(r.daemons.begin(), r.daemons.end(), d);
    return save_record(r);
}

std::string start_daemons(Record& r, std::chrono::milliseconds ready_timeout) {
    std::string err = r.plan.options.daemons == DaemonShape::Shared ? start_shared_daemon(r)
                                                                    : start_daemon_per_node(r, ready_timeout);
    if (!err.empty()) {
        return err;
    }
    for (std::size_t i = 0; i < r.plan.nodes.size(); ++i) {
        if (err = wait_daemon(r, i, ready_timeout); !err.empty()) {
            return err;
        }
    }
    return {};
}

}  // namespace

UpResult bring_up(const Plan& plan, const std::string& uroced, std::chrono::milliseconds ready_timeout) {
    UpResult result;
    Record r;
    r.plan = plan;
    r.uroced = uroced;
    r.links = describe_links(plan);
    r.daemons.resize(plan.nodes.size());
    // The record first: whatever happens next, `down` knows what to remove.
    std::string problem = save_record(r);
    if (problem.empty()) {
        problem = make_state_dirs(plan);
    }
    if (problem.empty()) {
        problem = make_network(plan);
    }
    if (problem.empty()) {
        problem = start_daemons(r, ready_timeout);
    }
    if (problem.empty()) {
        result.record = std::move(r);
        return result;
    }
    const TeardownReport rep = tear_down(r);
    result.problem = problem;
    for (const auto& p : rep.problems) {
        result.problem += "\n  and while removing what was made: " + p;
    }
    return result;
}

}  // namespace uroce::tools::testbed
