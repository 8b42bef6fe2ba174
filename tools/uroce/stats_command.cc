#include "stats_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abi/control_client.h"
#include "device_locator.h"
#include "engine/drop_reason.h"
#include "wire/parse_status.h"

namespace uroce::tools {

namespace {

// One counter group of the STATS reply, by name, in the reply's order.
struct Group {
    const char* name;
    std::vector<std::pair<const char*, std::uint64_t>> counters;
};

template <typename T>
struct Field {
    const char* name;
    std::uint64_t T::*member;
};

template <typename T, std::size_t N>
Group group(const char* name, const T& values, const Field<T> (&fields)[N]) {
    Group g{name, {}};
    for (const Field<T>& f : fields) {
        g.counters.emplace_back(f.name, values.*(f.member));
    }
    return g;
}

// The field names are the daemon's counter names (abi/control.h).
constexpr Field<uroce_stats_engine> kEngine[] = {
    {"rx_packets", &uroce_stats_engine::rx_packets},
    {"tx_packets", &uroce_stats_engine::tx_packets},
    {"rx_dropped", &uroce_stats_engine::rx_dropped},
    {"retransmits", &uroce_stats_engine::retransmits},
    {"timeouts", &uroce_stats_engine::timeouts},
    {"rnr_naks_sent", &uroce_stats_engine::rnr_naks_sent},
    {"rnr_naks_received", &uroce_stats_engine::rnr_naks_received},
    {"seq_naks_sent", &uroce_stats_engine::seq_naks_sent},
    {"seq_naks_received", &uroce_stats_engine::seq_naks_received},
    {"duplicates", &uroce_stats_engine::duplicates},
    {"bad_wqes", &uroce_stats_engine::bad_wqes},
    {"cq_overruns", &uroce_stats_engine::cq_overruns},
    {"dma_faults", &uroce_stats_engine::dma_faults},
    {"retransmitted_packets", &uroce_stats_engine::retransmitted_packets},
    {"tx_deferred", &uroce_stats_engine::tx_deferred},
};
constexpr Field<uroce_stats_frames> kFrames[] = {
    {"rx_roce", &uroce_stats_frames::rx_roce},
    {"rx_other", &uroce_stats_frames::rx_other},
    {"rx_malformed", &uroce_stats_frames::rx_malformed},
};
constexpr Field<uroce_stats_port> kPort[] = {
    {"rx_frames", &uroce_stats_port::rx_frames},
    {"rx_bytes", &uroce_stats_port::rx_bytes},
    {"tx_frames", &uroce_stats_port::tx_frames},
    {"tx_bytes", &uroce_stats_port::tx_bytes},
    {"tx_dropped", &uroce_stats_port::tx_dropped},
};
constexpr Field<uroce_stats_neighbours> kNeighbours[] = {
    {"arp_requests_sent", &uroce_stats_neighbours::arp_requests_sent},
    {"arp_replies_sent", &uroce_stats_neighbours::arp_replies_sent},
    {"ns_sent", &uroce_stats_neighbours::ns_sent},
    {"na_sent", &uroce_stats_neighbours::na_sent},
    {"resolved", &uroce_stats_neighbours::resolved},
    {"learned", &uroce_stats_neighbours::learned},
    {"ignored", &uroce_stats_neighbours::ignored},
    {"malformed", &uroce_stats_neighbours::malformed},
    {"frames_queued", &uroce_stats_neighbours::frames_queued},
    {"frames_released", &uroce_stats_neighbours::frames_released},
    {"queue_overflow", &uroce_stats_neighbours::queue_overflow},
    {"unresolved_dropped", &uroce_stats_neighbours::unresolved_dropped},
    {"resolution_failures", &uroce_stats_neighbours::resolution_failures},
    {"no_entry_dropped", &uroce_stats_neighbours::no_entry_dropped},
    {"entries", &uroce_stats_neighbours::entries},
    {"evicted", &uroce_stats_neighbours::evicted},
    {"answers_limited", &uroce_stats_neighbours::answers_limited},
};
constexpr Field<uroce_stats_dma> kDma[] = {
    {"shared_ops", &uroce_stats_dma::shared_ops},
    {"shared_bytes", &uroce_stats_dma::shared_bytes},
    {"copy_ops", &uroce_stats_dma::copy_ops},
    {"copy_bytes", &uroce_stats_dma::copy_bytes},
    {"faults", &uroce_stats_dma::faults},
    {"shared_mappings", &uroce_stats_dma::shared_mappings},
};
constexpr Field<uroce_stats_idle> kIdle[] = {
    {"sleeps", &uroce_stats_idle::sleeps},
    {"woken_by_fd", &uroce_stats_idle::woken_by_fd},
    {"slept_ns", &uroce_stats_idle::slept_ns},
};

// A group of the STATS_REASONS reply: `values[i]` is named `names[i]`.
template <std::size_t N, typename Names>
Group reasons(const char* name, const std::uint64_t (&values)[N], const Names& names, std::size_t first = 0) {
    Group g{name, {}};
    for (std::size_t i = first; i < names.size() && i < N; ++i) {
        g.counters.emplace_back(names[i].data(), values[i]);
    }
    return g;
}

// The parse outcomes that are drops (not Ok, not "not RoCEv2"), by name.
std::array<std::string_view, wire::kParseStatusCount> parse_drop_names() {
    std::array<std::string_view, wire::kParseStatusCount> names{};
    for (std::size_t i = 0; i < names.size(); ++i) {
        names[i] = wire::kParseStatusInfo[i].name;
    }
    return names;
}

// Frames the fault rules acted on (FAULT_TOTALS), by action: the names of
// fault/rule.h's actions, in its order.
constexpr std::array<std::string_view, UROCE_FAULT_ACTIONS> kFaultActionNames = {
    "dropped", "duplicated", "reordered", "delayed", "corrupted", "truncated", "link_down_dropped",
    "peer_silent_dropped",
};

Group fault_group(const uroce_ctrl_fault_totals_reply& f) {
    Group g = reasons("faults", f.injected, kFaultActionNames);
    g.counters.emplace_back("held_now", f.held);
    g.counters.emplace_back("rules", f.rules);
    return g;
}

// The daemon loop's stalls (LOOP_STALLS): the names of
// tools/uroced/loop_stalls.h's StallCause and LoopPhase, in their order.
constexpr std::array<std::string_view, 4> kStallCauseNames = {"cpu_wait", "on_cpu", "asked_sleep", "off_cpu"};
constexpr std::array<std::string_view, 5> kLoopPhaseNames = {"data_path", "control", "housekeeping", "spin", "sleep"};

Group loop_stalls_group(const uroce_ctrl_loop_stalls_reply& l) {
    Group g{"loop_stalls",
            {{"threshold_ns", l.threshold_ns},
             {"rounds", l.rounds},
             {"stalls", l.stalls},
             {"longest_ns", l.longest_ns},
             {"stalled_ns", l.stalled_ns}}};
    static const auto kCauses = [] {
        std::array<std::string, kStallCauseNames.size()> names;
        for (std::size_t i = 0; i < names.size(); ++i) {
            names[i] = fmt::format("cause_{}", kStallCauseNames[i]);
        }
        return names;
    }();
    static const auto kPhases = [] {
        std::array<std::string, kLoopPhaseNames.size()> names;
        for (std::size_t i = 0; i < names.size(); ++i) {
            names[i] = fmt::format("phase_{}", kLoopPhaseNames[i]);
        }
        return names;
    }();
    for (std::size_t i = 0; i < kCauses.size(); ++i) {
        g.counters.emplace_back(kCauses[i].c_str(), l.by_cause[i]);
    }
    for (std::size_t i = 0; i < kPhases.size(); ++i) {
        g.counters.emplace_back(kPhases[i].c_str(), l.by_phase[i]);
    }
    g.counters.emplace_back("rounds_over_20ms", l.rounds_over_20ms);
    g.counters.emplace_back("rounds_over_100ms", l.rounds_over_100ms);
    g.counters.emplace_back("rounds_over_1s", l.rounds_over_1s);
    return g;
}

// Multicast membership (MEMBERSHIP): net/igmp.h's QueryDropReason names,
// in its order (the first, none, is not printed).
constexpr std::array<std::string_view, 7> kQueryDropNames = {"none",     "length", "checksum", "hop_limit",
                                                             "fragment", "source", "group"};

Group membership_group(const uroce_ctrl_membership_reply& m) {
    Group g{"membership",
            {{"reports_sent", m.reports_sent},
             {"leaves_sent", m.leaves_sent},
             {"queries", m.queries},
             {"queries_answered", m.queries_answered},
             {"older_queries", m.older_queries},
             {"queries_dropped", m.queries_dropped}}};
    static const auto kDropped = [] {
        std::array<std::string, kQueryDropNames.size()> names;
        for (std::size_t i = 0; i < names.size(); ++i) {
            names[i] = fmt::format("dropped_{}", kQueryDropNames[i]);
        }
        return names;
    }();
    for (std::size_t i = 1; i < kDropped.size(); ++i) {
        g.counters.emplace_back(kDropped[i].c_str(), m.dropped[i]);
    }
    g.counters.emplace_back("tx_refused", m.tx_refused);
    g.counters.emplace_back("groups", m.groups);
    g.counters.emplace_back("igmp_version", m.igmp_version);
    g.counters.emplace_back("mld_version", m.mld_version);
    return g;
}

std::vector<Group> base_groups(const uroce_ctrl_stats_reply& s, const uroce_ctrl_stats_reasons_reply& r) {
    static const auto kParseNames = parse_drop_names();
    constexpr auto kFirstDrop = static_cast<std::size_t>(wire::ParseStatus::EthernetTruncated);
    return {group("engine", s.engine, kEngine),           group("frames", s.frames, kFrames),
            group("port", s.port, kPort),                 group("neighbours", s.neighbours, kNeighbours),
            group("dma", s.dma, kDma),                    group("idle", s.idle, kIdle),
            Group{"mr_ways", {{"shared", s.mrs_shared}, {"copy", s.mrs_copy}, {"unserved", s.mrs_unserved}}},
            reasons("frames_malformed", r.frames_malformed, kParseNames, kFirstDrop),
            reasons("engine_dropped", r.engine_dropped, engine::kDropReasonName),
            reasons("naks_sent", r.naks_sent, engine::kNakReasonName),
            reasons("naks_received", r.naks_received, engine::kNakReasonName)};
}

// The groups of the optional replies: absent when the daemon does not answer them.
struct OptionalReplies {
    const uroce_ctrl_fault_totals_reply* faults = nullptr;
    const uroce_ctrl_loop_stalls_reply* loop_stalls = nullptr;
    const uroce_ctrl_membership_reply* membership = nullptr;
};

std::vector<Group> groups(const uroce_ctrl_stats_reply& s, const uroce_ctrl_stats_reasons_reply& r,
                          const OptionalReplies& more) {
    std::vector<Group> all = base_groups(s, r);
    if (more.faults != nullptr) {
        all.push_back(fault_group(*more.faults));  // absent when the daemon runs without the fault hook
    }
    if (more.loop_stalls != nullptr) {
        all.push_back(loop_stalls_group(*more.loop_stalls));
    }
    if (more.membership != nullptr) {
        all.push_back(membership_group(*more.membership));
    }
    return all;
}

const char* way_name(std::uint8_t way) {
    switch (way) {
        case UROCE_MR_WAY_SHARED:
            return "shared";
        case UROCE_MR_WAY_COPY:
            return "copy";
        default:
            return "unserved";
    }
}

// Every MR, page after page. 0 or an errno.
int list_mrs(abi::ControlClient& c, std::vector<uroce_ctrl_mr_entry>& out) {
    std::uint32_t first = 0;
    for (;;) {
        uroce_ctrl_list_mrs req{};
        req.hdr.op = UROCE_CTRL_LIST_MRS;
        req.first_index = first;
        uroce_ctrl_list_mrs_reply reply{};
        if (const int err = c.call(&req, sizeof req, &reply, sizeof reply); err != 0) {
            return err;
        }
        if (reply.count > UROCE_LIST_MRS_PER_REPLY) {
            return EPROTO;
        }
        out.insert(out.end(), reply.entries, reply.entries + reply.count);
        // Pages go up in key index; anything else would loop forever.
        if (reply.next_index == 0 || reply.next_index <= first) {
            return 0;
        }
        first = reply.next_index;
    }
}

void print_json(const uroce_ctrl_stats_reply& s, const uroce_ctrl_stats_reasons_reply& r,
                const OptionalReplies& more, const std::vector<uroce_ctrl_mr_entry>& mrs) {
    nlohmann::ordered_json j;
    for (const Group& g : groups(s, r, more)) {
        nlohmann::ordered_json values = nlohmann::ordered_json::object();
        for (const auto& [name, value] : g.counters) {
            values[name] = value;
        }
        j[g.name] = std::move(values);
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const uroce_ctrl_mr_entry& e : mrs) {
        list.push_back({{"lkey", e.lkey},
                        {"pd", e.pd},
                        {"client", e.client},
                        {"access", e.access},
                        {"addr", e.addr},
                        {"length", e.length},
                        {"way", way_name(e.way)}});
    }
    j["mrs"] = std::move(list);
    fmt::print("{}\n", j.dump(2));
}

void print_text(const uroce_ctrl_stats_reply& s, const uroce_ctrl_stats_reasons_reply& r,
                const OptionalReplies& more, const std::vector<uroce_ctrl_mr_entry>& mrs) {
    for (const Group& g : groups(s, r, more)) {
        fmt::print("{}\n", g.name);
        for (const auto& [name, value] : g.counters) {
            fmt::print("  {:<30}{:>20}\n", name, value);
        }
    }
    fmt::print("mrs ({})\n", mrs.size());
    if (mrs.empty()) {
        return;
    }
    fmt::print("  {:<10} {:>6} {:>6} {:>7} {:>18} {:>14}  {}\n", "lkey", "pd", "client", "access", "addr", "length",
               "way");
    for (const uroce_ctrl_mr_entry& e : mrs) {
        fmt::print("  0x{:08x} {:>6} {:>6} {:>#7x} {:>#18x} {:>14}  {}\n", e.lkey, e.pd, e.client, e.access, e.addr,
                   e.length, way_name(e.way));
    }
}

int show(const DeviceLocation& loc, bool json) {
    abi::ControlClient c;
    if (int err = c.connect(loc.socket_path()); err != 0) {
        fmt::print(stderr, "uroce stats: no daemon at {} ({})\n", loc.socket_path(), std::strerror(err));
        return 1;
    }
    uroce_ctrl_stats_reply stats{};
    std::vector<uroce_ctrl_mr_entry> mrs;
    uroce_ctrl_stats_reasons_reply reasons{};
    int err = c.call_simple(UROCE_CTRL_STATS, &stats, sizeof stats);
    if (err == 0) {
        err = c.call_simple(UROCE_CTRL_STATS_REASONS, &reasons, sizeof reasons);
    }
    if (err == 0) {
        err = list_mrs(c, mrs);
    }
    if (err != 0) {
        fmt::print(stderr, "uroce stats: the daemon at {} did not answer: {}\n", loc.socket_path(),
                   std::strerror(err));
        return 1;
    }
    uroce_ctrl_fault_totals_reply fault_totals{};
    const bool have_faults = c.call_simple(UROCE_CTRL_FAULT_TOTALS, &fault_totals, sizeof fault_totals) == 0;
    uroce_ctrl_loop_stalls_reply loop_stalls{};
    const bool have_loop_stalls = c.call_simple(UROCE_CTRL_LOOP_STALLS, &loop_stalls, sizeof loop_stalls) == 0;
    uroce_ctrl_membership_reply membership{};
    const bool have_membership = c.call_simple(UROCE_CTRL_MEMBERSHIP, &membership, sizeof membership) == 0;
    const OptionalReplies more{have_faults ? &fault_totals : nullptr, have_loop_stalls ? &loop_stalls : nullptr,
                               have_membership ? &membership : nullptr};
    if (json) {
        print_json(stats, reasons, more, mrs);
    } else {
        print_text(stats, reasons, more, mrs);
    }
    return 0;
}

}  // namespace

void add_stats_command(CLI::App& app) {
    auto loc = std::make_shared<DeviceLocation>();
    loc->state_dir = default_state_dir();
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("stats", "Show the daemon's counters and which DMA way serves each MR");
    cmd->add_option("--state-dir", loc->state_dir, "where uroced publishes the device")->capture_default_str();
    cmd->add_option("--device", loc->device, "device name")->capture_default_str();
    cmd->add_flag("--json", *json, "one JSON object: a member per counter group, and 'mrs', a list");
    cmd->callback([loc, json] { throw CLI::RuntimeError(show(*loc, *json)); });
}

}  // namespace uroce::tools
