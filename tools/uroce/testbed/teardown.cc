#include "teardown.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "daemon_process.h"
#include "device_node.h"
#include "dpdk_instance.h"
#include "network.h"

namespace uroce::tools::testbed {

namespace fs = std::filesystem;

namespace {

// How long a uroced gets to stop cleanly on SIGTERM: telling its clients
// takes milliseconds; 10 s covers a loaded machine.
constexpr auto kStopGrace = std::chrono::seconds(10);

// The nodes whose uroced is `d` ("n1" or, for a Shared daemon, "n1, n2").
std::string nodes_of(const Record& r, const DaemonRecord& d) {
    std::string out;
    for (std::size_t i = 0; i < r.daemons.size(); ++i) {
        if (r.daemons[i].pid == d.pid && r.daemons[i].start_time == d.start_time) {
            out += (out.empty() ? "" : ", ") + r.plan.nodes[i].node;
        }
    }
    return out;
}

void stop_daemons(const Record& r, TeardownReport& rep) {
    std::set<std::pair<pid_t, std::uint64_t>> stopped;  // a Shared daemon is every node's
    for (const DaemonRecord& d : r.daemons) {
        if (d.pid == 0 || !stopped.emplace(d.pid, d.start_time).second) {
            continue;  // never started, or seen as another node's
        }
        const StopOutcome o = stop_daemon(d, kStopGrace);
        const std::string line = fmt::format("uroced of {} (pid {}): {}", nodes_of(r, d), d.pid, stop_outcome_name(o));
        (o == StopOutcome::Stuck ? rep.problems : rep.done).push_back(line);
    }
}

// What a daemon that did not stop cleanly leaves outside its state
// directory (docs/daemon.md): its DPDK runtime directory, and its owner
// file beside the shared device node. Constructing and destroying a
// DeviceNode is exactly the daemons' own sweep: under the directory lock,
// owner files nobody holds are removed, and the node with the last of them
// when a uroced made it.
void remove_daemon_leftovers(const Record& r, TeardownReport& rep) {
    std::set<std::string> devices;
    for (const auto& n : r.plan.nodes) {
        const fs::path dpdk = daemon::dpdk_runtime_dir(n.device, n.state_dir);
        std::error_code ec;
        if (fs::exists(dpdk, ec)) {
            fs::remove_all(dpdk, ec);
            if (ec) {
                rep.problems.push_back(fmt::format("{}: {}", dpdk.string(), ec.message()));
            } else {
                rep.done.push_back("removed " + dpdk.string() + " (left by a daemon that did not stop cleanly)");
            }
        }
        devices.insert(n.device);
    }
    for (const auto& device : devices) {
        const daemon::DeviceNode sweep("uverbs_" + device);
        if (sweep.removed_stale()) {
            rep.done.push_back("removed the /dev/infiniband owner files of dead daemons of " + device);
        }
    }
}

void delete_namespaces(const std::vector<std::string>& namespaces, TeardownReport& rep) {
    const std::set<std::string> existing = existing_namespaces();
    for (const auto& ns : namespaces) {
        if (existing.count(ns) == 0) {
            continue;
        }
        if (std::string err = delete_namespace(ns); !err.empty()) {
            rep.problems.push_back(err);
        } else {
            rep.done.push_back("deleted namespace " + ns);
        }
    }
}

void remove_path(const std::string& path, TeardownReport& rep) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        return;
    }
    fs::remove_all(path, ec);
    if (ec) {
        rep.problems.push_back(fmt::format("{}: {}", path, ec.message()));
    } else {
        rep.done.push_back("removed " + path);
    }
}

}  // namespace

TeardownReport tear_down(const Record& r) {
    TeardownReport rep;
    stop_daemons(r, rep);
    remove_daemon_leftovers(r, rep);
    delete_namespaces(r.plan.namespaces(), rep);
    if (r.plan.options.wire == Wire::Memif) {
        // Named on its own line: a memif server that did not stop cleanly
        // leaves its socket, and the next server on that path would find it.
        remove_path(r.plan.memif_socket(), rep);
    }
    remove_path(r.plan.state_dir(), rep);
    if (rep.clean()) {
        remove_path(r.plan.record_path(), rep);  // kept while something is left, for the next try
    }
    return rep;
}

TeardownReport tear_down_by_name(const std::string& name) {
    TeardownReport rep;
    const std::string prefix = fmt::format("uroce-{}-", name);
    std::vector<std::string> ours;
    for (const auto& ns : existing_namespaces()) {
        if (ns.rfind(prefix, 0) != 0) {
            continue;
        }
        // Only names make_plan gives (…-br, …-n<k>): testbed "a" must not
        // take testbed "a-b"'s namespaces.
        const std::string rest = ns.substr(prefix.size());
        const bool node = rest.size() > 1 && rest[0] == 'n' &&
                          rest.find_first_not_of("0123456789", 1) == std::string::npos;
        if (rest == "br" || node) {
            ours.push_back(ns);
        }
    }
    delete_namespaces(ours, rep);
    return rep;
}

}  // namespace uroce::tools::testbed
