#include "record.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace uroce::tools::testbed {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kRecordVersion = 1;  // bump when a field changes meaning

json to_json(const Record& r) {
    const Options& o = r.plan.options;
    json nodes = json::array();
    for (std::size_t i = 0; i < r.plan.nodes.size(); ++i) {
        const NodePlan& n = r.plan.nodes[i];
        const DaemonRecord& d = r.daemons.at(i);
        nodes.push_back({{"node", n.node},
                         {"netns", n.netns},
                         {"ifname", n.ifname},
                         {"ipv4", n.ipv4},
                         {"ipv6", n.ipv6},
                         {"device", n.device},
                         {"state_dir", n.state_dir},
                         {"log", n.log_path},
                         {"pid", d.pid},
                         {"start_time", d.start_time},
                         {"argv", d.argv}});
    }
    json j = {{"version", kRecordVersion},
              {"name", o.name},
              {"wire", wire_name(o.wire)},
              {"daemon_per_node", o.daemons == DaemonShape::PerNode},
              {"joint", r.plan.joint == Joint::Bridge ? "bridge" : "veth-pair"},
              {"bridge_netns", r.plan.bridge_netns},
              {"mtu", o.mtu},
              {"loss_percent", o.loss_percent ? json(*o.loss_percent) : json(nullptr)},
              {"state_root", o.state_root},
              {"state_dir", r.plan.state_dir()},
              {"namespaces", r.plan.namespaces()},
              {"links", r.links},
              {"memif_socket", o.wire == Wire::Memif ? json(r.plan.memif_socket()) : json(nullptr)},
              {"uroced", r.uroced},
              {"nodes", nodes}};
    return j;
}

Record from_json(const json& j) {
    if (j.at("version").get<int>() != kRecordVersion) {
        throw std::runtime_error("record version " + j.at("version").dump() + ", this uroce reads " +
                                 std::to_string(kRecordVersion));
    }
    Record r;
    Options& o = r.plan.options;
    o.name = j.at("name").get<std::string>();
    const auto wire = parse_wire(j.at("wire").get<std::string>());
    if (!wire) {
        throw std::runtime_error("unknown wire " + j.at("wire").dump());
    }
    o.wire = *wire;
    // Records written before the Shared shape had one uroced per node.
    o.daemons = j.value("daemon_per_node", true) ? DaemonShape::PerNode : DaemonShape::Shared;
    o.mtu = j.at("mtu").get<std::uint32_t>();
    if (!j.at("loss_percent").is_null()) {
        o.loss_percent = j.at("loss_percent").get<double>();
    }
    o.state_root = j.at("state_root").get<std::string>();
    r.plan.joint = j.at("joint").get<std::string>() == "bridge" ? Joint::Bridge : Joint::VethPair;
    r.plan.bridge_netns = j.at("bridge_netns").get<std::string>();
    r.links = j.at("links").get<std::vector<std::string>>();
    r.uroced = j.at("uroced").get<std::string>();
    for (const auto& jn : j.at("nodes")) {
        NodePlan n;
        n.node = jn.at("node").get<std::string>();
        n.netns = jn.at("netns").get<std::string>();
        n.ifname = jn.at("ifname").get<std::string>();
        n.ipv4 = jn.at("ipv4").get<std::string>();
        n.ipv6 = jn.at("ipv6").get<std::string>();
        n.device = jn.at("device").get<std::string>();
        n.state_dir = jn.at("state_dir").get<std::string>();
        n.log_path = jn.at("log").get<std::string>();
        DaemonRecord d;
        d.pid = jn.at("pid").get<pid_t>();
        d.start_time = jn.at("start_time").get<std::uint64_t>();
        d.argv = jn.at("argv").get<std::vector<std::string>>();
        r.plan.nodes.push_back(std::move(n));
        r.daemons.push_back(std::move(d));
    }
    o.nodes = static_cast<unsigned>(r.plan.nodes.size());
    return r;
}

}  // namespace

std::string save_record(const Record& r) {
    const std::string path = r.plan.record_path();
    const std::string tmp = path + ".tmp";
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << to_json(r).dump(2) << '\n';
        f.flush();
        if (!f) {
            return "cannot write " + tmp;
        }
    }
    fs::rename(tmp, path, ec);
    return ec ? "cannot rename " + tmp + " to " + path + ": " + ec.message() : std::string{};
}

std::optional<Record> load_record(const std::string& path, std::string& problem) {
    std::ifstream f(path);
    if (!f) {
        problem = "no record " + path;
        return std::nullopt;
    }
    try {
        return from_json(json::parse(f));
    } catch (const std::exception& e) {
        problem = path + ": " + e.what();
        return std::nullopt;
    }
}

std::vector<std::string> recorded_testbeds(const std::string& state_root) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(state_root, ec)) {
        const std::string file = entry.path().filename().string();
        const std::string prefix = "testbed-";
        const std::string suffix = ".json";
        if (file.size() > prefix.size() + suffix.size() && file.rfind(prefix, 0) == 0 &&
            file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
            names.push_back(file.substr(prefix.size(), file.size() - prefix.size() - suffix.size()));
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string record_json(const Record& r) { return to_json(r).dump(2); }

}  // namespace uroce::tools::testbed
