#include "explain_command.h"

#include <poll.h>
#include <time.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "abi/control_client.h"
#include "device_locator.h"
#include "engine/failure_event.h"
#include "wire/describe.h"

namespace uroce::tools {

namespace {

// --follow asks again this often once it has read everything: the daemon
// never waits on a reader, and a reader that sleeps between questions costs
// it one small request per interval.
constexpr int kFollowIntervalMs = 100;

struct Options {
    DeviceLocation loc;
    bool follow = false;
    bool json = false;
    bool only_new = false;
    std::optional<std::uint32_t> qp;
    std::size_t count = 0;     // stop after this many records (0: no limit)
    double timeout_s = 0;      // --follow: stop after this long (0: never)
};

nlohmann::json to_json(const uroce_explain_record& r) {
    wire::Gid gid{};
    std::memcpy(gid.data(), r.peer_gid, sizeof r.peer_gid);
    nlohmann::json j = {
        {"seq", r.seq},
        {"time_ns", r.time_ns},
        {"kind", engine::kind_name(r.kind)},
        {"check", engine::check_name(r.check)},
        {"client", r.client},
        {"uid", r.uid == UROCE_EXPLAIN_UID_UNKNOWN ? nlohmann::json(nullptr) : nlohmann::json(r.uid)},
        {"qpn", r.qpn},
        {"remote_qpn", r.remote_qpn},
        {"peer", wire::ip_to_string(gid)},
        {"opcode", r.opcode},
        {"opcode_name", engine::opcode_name(r)},
        {"psn", r.psn},
        {"va", r.va},
        {"length", r.length},
        {"rkey", r.rkey},
        {"wc_status", r.wc_status},
        {"nak", r.nak == UROCE_EXPLAIN_NO_NAK ? nlohmann::json(nullptr) : nlohmann::json(r.nak)},
        {"nak_name", r.nak == UROCE_EXPLAIN_NO_NAK ? nlohmann::json(nullptr)
                                                   : nlohmann::json(engine::nak_name(r.nak))},
        {"count", r.count},
        {"wr_id", r.wr_id},
        {"send_queue", (r.flags & UROCE_EXPLAIN_SEND_QUEUE) != 0},
        {"qp_pd", r.qp_pd},
        {"overrun", r.overrun},
        {"before_start", (r.flags & UROCE_EXPLAIN_BEFORE_START) != 0},
        {"text", engine::describe(r)},
    };
    j["region"] = nullptr;
    if ((r.flags & UROCE_EXPLAIN_REGION_KNOWN) != 0) {
        j["region"] = {{"pd", r.region_pd}, {"start", r.region_start}, {"length", r.region_length},
                       {"access", r.region_access}};
    }
    j["history"] = nullptr;
    if ((r.flags & UROCE_EXPLAIN_HISTORY) != 0) {
        j["history"] = {{"registered_ns", r.registered_ns}, {"deregistered_ns", r.deregistered_ns}};
    }
    return j;
}

void print(const uroce_explain_record& r, bool json) {
    if (json) {
        fmt::print("{}\n", to_json(r).dump());
    } else {
        fmt::print("#{} {} {}: {}\n", r.seq, engine::kind_name(r.kind), engine::check_name(r.check),
                   engine::describe(r));
    }
    std::fflush(stdout);
}

// One EXPLAIN_FETCH; 0 or an errno.
int fetch(abi::ControlClient& c, std::uint64_t after, const Options& o, uroce_ctrl_explain_reply& reply) {
    uroce_ctrl_explain_fetch req{};
    req.hdr.op = UROCE_CTRL_EXPLAIN_FETCH;
    req.after = after;
    req.qpn = o.qp.value_or(UROCE_EXPLAIN_ANY_QP);
    if (const int err = c.call(&req, sizeof req, &reply, sizeof reply); err != 0) {
        return err;
    }
    return reply.count <= UROCE_EXPLAIN_PER_REPLY ? 0 : EPROTO;
}

// Reads every record after `after` the daemon keeps now; prints them unless
// `quiet`. Returns 0 or an errno; `after` moves on, `printed` counts.
int drain(abi::ControlClient& c, std::uint64_t& after, const Options& o, bool quiet, std::size_t& printed) {
    for (;;) {
        uroce_ctrl_explain_reply reply{};
        if (const int err = fetch(c, after, o, reply); err != 0) {
            return err;
        }
        if (reply.missed > 0 && !quiet) {
            fmt::print(stderr, "uroce explain: {} record(s) overwritten before they were read\n", reply.missed);
        }
        for (std::uint32_t i = 0; i < reply.count && !quiet; ++i) {
            if (o.count != 0 && printed == o.count) {
                return 0;
            }
            print(reply.records[i], o.json);
            ++printed;
        }
        if (reply.last <= after && reply.count == 0) {
            return 0;
        }
        after = reply.last;
        if (reply.count == 0) {
            return 0;
        }
    }
}

int run(const Options& o) {
    abi::ControlClient c;
    if (int err = c.connect(o.loc.socket_path()); err != 0) {
        fmt::print(stderr, "uroce explain: no daemon at {} ({})\n", o.loc.socket_path(), std::strerror(err));
        return 1;
    }
    std::uint64_t after = 0;
    std::size_t printed = 0;
    int err = drain(c, after, o, o.follow && o.only_new, printed);
    if (err == 0 && o.follow) {
        // Tells a script the follow has begun: records after this line are new.
        fmt::print(stderr, "uroce explain: following after record {}\n", after);
        const auto start = std::chrono::steady_clock::now();
        const auto limit = std::chrono::duration<double>(o.timeout_s);
        while (err == 0 && (o.count == 0 || printed < o.count)) {
            if (o.timeout_s > 0 && std::chrono::steady_clock::now() - start >= limit) {
                return 2;
            }
            ::poll(nullptr, 0, kFollowIntervalMs);
            err = drain(c, after, o, false, printed);
        }
    }
    if (err != 0) {
        fmt::print(stderr, "uroce explain: the daemon at {} did not answer: {}\n", o.loc.socket_path(),
                   std::strerror(err));
        return 1;
    }
    return 0;
}

}  // namespace

void add_explain_command(CLI::App& app) {
    auto o = std::make_shared<Options>();
    o->loc.state_dir = default_state_dir();
    auto* cmd = app.add_subcommand("explain", "Explain refused remote accesses and error completions, in words");
    cmd->add_option("--state-dir", o->loc.state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", o->loc.device, "device name")->capture_default_str();
    cmd->add_flag("--follow,-f", o->follow, "keep printing new records as they happen");
    cmd->add_flag("--new", o->only_new, "with --follow: only records that happen from now on");
    cmd->add_flag("--json", o->json, "one JSON object per line per record");
    cmd->add_option("--qp", o->qp, "only the records of this local QP number");
    cmd->add_option("--count", o->count, "stop after this many records");
    cmd->add_option("--timeout", o->timeout_s, "with --follow: give up after this many seconds (exit status 2)");
    cmd->callback([o] { throw CLI::RuntimeError(run(*o)); });
}

}  // namespace uroce::tools
