// What a host does for the multicast groups it belongs to (RFC 3376 5 for
// IPv4/IGMPv3, RFC 3810 6 for IPv6/MLDv2), so that a snooping switch or
// bridge forwards the groups' traffic to this port:
//   - the first member of a group: an unsolicited state-change report
//     (CHANGE_TO_EXCLUDE, no sources), repeated once (robustness 2, RFC 3376
//     8.1 / RFC 3810 9.1) after the unsolicited report interval;
//   - the last member gone: a leave (CHANGE_TO_INCLUDE, no sources),
//     repeated the same way;
//   - a general query: one current-state report (MODE_IS_EXCLUDE) of every
//     group, after a delay; a group-specific query for a group we are in: a
//     report of that group, after a delay. The delay is picked uniformly in
//     [0, Max Resp Time) (RFC 3376 5.2, RFC 3810 6.2). A pending general
//     answer due sooner covers a new query (rule 1); a group answer already
//     due sooner is kept (rule 3 without sources).
// The delays come from a small generator seeded with the port's MAC: two
// daemons on one link pick different delays, and one daemon's are the same
// run after run (reproducible tests).
//
// Ports without a wire (loopback) send nothing: there is no switch to tell.
// 224.0.0.1 and ff02::1 (all systems / all nodes) are never reported.
// Not thread-safe: the engine's thread owns it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "net/igmp.h"
#include "net/port.h"
#include "wire/headers.h"

namespace uroce::net {

struct MembershipConfig {
    using Clock = std::chrono::steady_clock;
    // RFC 3376 8.11 / RFC 3810 9.11: Unsolicited Report Interval, 1 s.
    Clock::duration unsolicited_interval = std::chrono::seconds(1);
    // State-change reports after the first (Robustness Variable - 1, the
    // default robustness being 2: RFC 3376 8.1, RFC 3810 9.1).
    unsigned repeats = 1;
};

struct MembershipCounters {
    std::uint64_t reports_sent = 0;   // report frames: joins and answers to queries
    std::uint64_t leaves_sent = 0;    // leave frames
    std::uint64_t queries = 0;        // well-formed queries received
    std::uint64_t malformed = 0;      // IGMP/MLD queries that failed the checks
    std::uint64_t tx_refused = 0;     // frames the port refused (queue full)
    std::uint64_t groups = 0;         // groups reported now
};

class GroupMembership {
public:
    using Clock = std::chrono::steady_clock;

    // `ipv4_source`: the port's IPv4 address reports come from (RFC 3376
    // 4.2.13 allows 0.0.0.0 when there is none); `link_local`: the
    // fe80:: address MLD reports must come from.
    GroupMembership(Port& port, wire::MacAddr mac, std::array<std::uint8_t, 4> ipv4_source,
                    wire::Gid link_local, MembershipConfig config = {});

    // The first QP joined `group` (IPv4-mapped or IPv6 multicast GID).
    void joined(const wire::Gid& group, Clock::time_point now);
    // The last QP left `group`.
    void left(const wire::Gid& group, Clock::time_point now);

    // A received frame that is not RoCE: true when it was IGMP or MLD
    // (a query answered or ignored, another host's report, a malformed one:
    // consumed either way).
    bool handle_frame(std::span<const std::uint8_t> frame, Clock::time_point now);

    // Sends what is due. Cheap when nothing is.
    void poll(Clock::time_point now);
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;
    [[nodiscard]] MembershipCounters counters() const;

private:
    enum class Family { Ipv4, Ipv6 };
    // A report waiting to go: state changes (join/leave, with repeats left)
    // and answers to group-specific queries.
    enum class Pending { None, Join, Leave, Answer };

    struct Group {
        bool member = false;  // false: left, a leave still to repeat
        Pending pending = Pending::None;
        unsigned repeats_left = 0;
        Clock::time_point due{};
    };
    struct GidHash {
        std::size_t operator()(const wire::Gid& g) const noexcept;
    };

    void answer(const MembershipQuery& q, Family family, Clock::time_point now);
    // Sends one report of `type` naming `groups` of one family, in as many
    // frames as the port's frame size needs.
    void send_report(Family family, GroupRecordType type, std::span<const wire::Gid> groups);
    void send_group_due(const wire::Gid& group, Group& g, Clock::time_point now);
    void send_general(Family family);
    [[nodiscard]] Clock::duration random_delay(std::uint32_t max_ms);
    void note_deadline(Clock::time_point t);
    [[nodiscard]] static Family family_of(const wire::Gid& g);
    [[nodiscard]] static bool never_reported(const wire::Gid& g);

    Port& port_;
    wire::MacAddr mac_;
    std::array<std::uint8_t, 4> ipv4_source_;
    wire::Gid link_local_;
    MembershipConfig config_;
    std::unordered_map<wire::Gid, Group, GidHash> groups_;
    // When the answer to a general query is due, per family.
    std::array<std::optional<Clock::time_point>, 2> general_due_{};
    std::uint64_t random_state_;
    Clock::time_point next_deadline_ = Clock::time_point::max();
    MembershipCounters counters_;
    std::vector<std::uint8_t> frame_;
};

}  // namespace uroce::net
