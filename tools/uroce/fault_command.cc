#include "fault_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "abi/control_client.h"
#include "device_locator.h"

namespace uroce::tools {

namespace {

struct FaultOptions {
    DeviceLocation loc;
    std::string rule;
    std::uint32_t id = 0;
    std::uint64_t seed = 0;
    bool json = false;
};

// Connects, or says why not (exit status 1).
bool open(abi::ControlClient& c, const DeviceLocation& loc) {
    if (const int err = c.connect(loc.socket_path()); err != 0) {
        fmt::print(stderr, "uroce fault: no daemon at {} ({})\n", loc.socket_path(), std::strerror(err));
        return false;
    }
    return true;
}

// The daemon's refusals, in words; 1 for the exit status.
int refused(std::string_view what, int err) {
    switch (err) {
        case EPERM:
            fmt::print(stderr, "uroce fault {}: permission denied: only root or the user uroced runs as may change "
                               "fault rules\n", what);
            break;
        case ENOTSUP:
            fmt::print(stderr, "uroce fault {}: this uroced runs without the fault hook (--no-fault-hook)\n", what);
            break;
        default:
            fmt::print(stderr, "uroce fault {}: {}\n", what, std::strerror(err));
    }
    return 1;
}

int add(const FaultOptions& o) {
    abi::ControlClient c;
    if (!open(c, o.loc)) {
        return 1;
    }
    uroce_ctrl_fault_add req{};
    req.hdr.op = UROCE_CTRL_FAULT_ADD;
    if (o.rule.size() >= sizeof req.rule) {
        fmt::print(stderr, "uroce fault add: a rule of {} characters; at most {}\n", o.rule.size(), sizeof req.rule - 1);
        return 1;
    }
    std::memcpy(req.rule, o.rule.data(), o.rule.size());
    uroce_ctrl_fault_add_reply reply{};
    const int err = c.call(&req, sizeof req, &reply, sizeof reply);
    if (err == EINVAL && !c.transport_failed()) {
        reply.message[sizeof reply.message - 1] = '\0';
        fmt::print(stderr, "uroce fault add: bad rule: {}\n", reply.message);
        return 1;
    }
    if (err != 0) {
        return refused("add", err);
    }
    fmt::print("{}\n", reply.id);
    return 0;
}

int list(const FaultOptions& o) {
    abi::ControlClient c;
    if (!open(c, o.loc)) {
        return 1;
    }
    std::vector<uroce_ctrl_fault_list_reply> rules;
    std::uint64_t seed = 0;
    for (std::uint32_t index = 0;; ++index) {
        uroce_ctrl_fault_list req{};
        req.hdr.op = UROCE_CTRL_FAULT_LIST;
        req.index = index;
        uroce_ctrl_fault_list_reply reply{};
        const int err = c.call(&req, sizeof req, &reply, sizeof reply);
        if (err == ENOENT && !c.transport_failed()) {
            seed = reply.seed;
            break;  // past the last rule
        }
        if (err != 0) {
            return refused("list", err);
        }
        reply.rule[sizeof reply.rule - 1] = '\0';
        rules.push_back(reply);
        seed = reply.seed;
    }
    auto state = [](const uroce_ctrl_fault_list_reply& r) { return r.state == UROCE_FAULT_RULE_ACTIVE ? "active" : "done"; };
    if (o.json) {
        nlohmann::ordered_json j;
        j["seed"] = seed;
        j["rules"] = nlohmann::ordered_json::array();
        for (const auto& r : rules) {
            j["rules"].push_back({{"id", r.id},
                                  {"rule", r.rule},
                                  {"state", state(r)},
                                  {"seen", r.seen},
                                  {"injected", r.injected}});
        }
        fmt::print("{}\n", j.dump(2));
        return 0;
    }
    fmt::print("seed {}, {} rule(s)\n", seed, rules.size());
    if (!rules.empty()) {
        fmt::print("  {:>4}  {:<7} {:>14} {:>14}  {}\n", "id", "state", "seen", "injected", "rule");
    }
    for (const auto& r : rules) {
        fmt::print("  {:>4}  {:<7} {:>14} {:>14}  {}\n", r.id, state(r), r.seen, r.injected, r.rule);
    }
    return 0;
}

int clear(const FaultOptions& o) {
    abi::ControlClient c;
    if (!open(c, o.loc)) {
        return 1;
    }
    uroce_ctrl_fault_clear req{};
    req.hdr.op = UROCE_CTRL_FAULT_CLEAR;
    req.id = o.id;
    uroce_ctrl_hdr reply{};
    if (const int err = c.call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        if (err == ENOENT && !c.transport_failed()) {
            fmt::print(stderr, "uroce fault clear: no rule {}\n", o.id);
            return 1;
        }
        return refused("clear", err);
    }
    return 0;
}

int seed(const FaultOptions& o) {
    abi::ControlClient c;
    if (!open(c, o.loc)) {
        return 1;
    }
    uroce_ctrl_fault_seed req{};
    req.hdr.op = UROCE_CTRL_FAULT_SEED;
    req.seed = o.seed;
    uroce_ctrl_hdr reply{};
    if (const int err = c.call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return refused("seed", err);
    }
    return 0;
}

void add_location(CLI::App* cmd, FaultOptions& o) {
    cmd->add_option("--state-dir", o.loc.state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", o.loc.device, "device name")->capture_default_str();
}

}  // namespace

void add_fault_command(CLI::App& app) {
    auto o = std::make_shared<FaultOptions>();
    o->loc.state_dir = default_state_dir();
    auto* fault = app.add_subcommand("fault", "Inject faults into the daemon's traffic (docs/fault-injection.md)");
    fault->require_subcommand(1);

    auto* a = fault->add_subcommand("add", "Add a rule (prints its id), e.g. drop:rate=5% or down:ms=500");
    a->add_option("RULE", o->rule, "ACTION[:KEY=VALUE,...]")->required();
    add_location(a, *o);
    a->callback([o] { throw CLI::RuntimeError(add(*o)); });

    auto* l = fault->add_subcommand("list", "Show the rules with what each saw and injected");
    l->add_flag("--json", o->json, "one JSON object: seed and rules");
    add_location(l, *o);
    l->callback([o] { throw CLI::RuntimeError(list(*o)); });

    auto* c = fault->add_subcommand("clear", "Remove rule ID, or every rule");
    c->add_option("ID", o->id, "the rule's id (uroce fault list); none: every rule");
    add_location(c, *o);
    c->callback([o] { throw CLI::RuntimeError(clear(*o)); });

    auto* s = fault->add_subcommand("seed", "Restart every rule's random stream from seed N");
    s->add_option("N", o->seed, "the seed")->required();
    add_location(s, *o);
    s->callback([o] { throw CLI::RuntimeError(seed(*o)); });
}

}  // namespace uroce::tools
