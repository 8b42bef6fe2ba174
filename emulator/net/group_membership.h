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
// Older version queriers (RFC 3376 7.2.1, RFC 3810 8.2.1): an IGMPv1 or v2
// query (an MLDv1 query) switches the family to that version's reports for
// the Older Version Querier Present Timeout: the querier's Robustness
// Variable times its Query Interval plus the Query Response Interval
// (RFC 3376 8.12, 8.13; RFC 3810 9.12), learnt from the last v3 (MLDv2)
// query, 2 x 125 s + 10 s = 260 s by default (as Linux computes it). Then:
//   - joins and answers are v1/v2 reports (MLDv1 reports), one message per
//     group sent to the group itself; a general query sets a delay per
//     group (RFC 2236 3); joins are repeated after 10 s (RFC 2236 8.10,
//     RFC 2710 7.10), sooner when a query asks for it;
//   - a leave is one v2 leave to 224.0.0.2 (one MLDv1 done to ff02::2),
//     not repeated, as Linux sends it; with an IGMPv1 querier none (v1 has
//     no leave);
//   - with an IGMPv1 querier a v3 query is answered as a v1 general query
//     (10 s), as Linux does.
// Whenever a family's mode changes, its pending answers and repeats are
// cancelled (RFC 3376 7.2.1). Reports of other hosts are not listened to
// (no v1/v2 report suppression): a snooping bridge wants every member's.
//
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
    // The Unsolicited Report Interval of IGMPv1/v2 and MLDv1 (RFC 2236
    // 8.10, RFC 2710 7.10), used while an older querier is present.
    Clock::duration older_unsolicited_interval = std::chrono::seconds(10);
    // The querier's values until a v3 (MLDv2) query says otherwise:
    // Robustness Variable 2, Query Interval 125 s, Query Response Interval
    // 10 s (RFC 3376 8.1-8.3, RFC 3810 9.1-9.3).
    unsigned querier_robustness = 2;
    Clock::duration querier_query_interval = std::chrono::seconds(125);
    Clock::duration querier_response_interval = std::chrono::seconds(10);
};

struct MembershipCounters {
    std::uint64_t reports_sent = 0;   // report frames: joins and answers to queries
    std::uint64_t leaves_sent = 0;    // leave frames
    std::uint64_t queries = 0;        // well-formed queries received
    std::uint64_t queries_answered = 0;  // of them: a report went or is due (our group, or a general query)
    std::uint64_t older_queries = 0;  // of them: IGMPv1/v2 or MLDv1 queries
    std::uint64_t malformed = 0;      // IGMP/MLD queries that failed the checks
    std::array<std::uint64_t, kQueryDropReasonCount> dropped{};  // malformed, by QueryDropReason
    std::uint64_t tx_refused = 0;     // frames the port refused (queue full)
    std::uint64_t groups = 0;         // groups reported now
    ProtocolVersion ipv4_version = ProtocolVersion::V3;  // the IGMP version reports go out in now
    ProtocolVersion ipv6_version = ProtocolVersion::V2;  // the MLD version
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

    // Sends what is due (and returns to the newest version when an older
    // querier's timeout ran out). Cheap when nothing is.
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

    // What the family's older querier(s) were heard and when they time out.
    struct Compatibility {
        ProtocolVersion mode = ProtocolVersion::V3;  // as last applied (update_mode)
        Clock::time_point v1_until{};  // IGMPv1 / MLDv1 querier present until
        Clock::time_point v2_until{};  // IGMPv2 querier present until (IPv4 only)
        unsigned robustness = 0;
        Clock::duration query_interval{};
        Clock::duration response_interval{};
    };

    void heard_query(MembershipQuery q, Family family, Clock::time_point now);
    void older_querier_heard(Family family, ProtocolVersion version, Clock::time_point now);
    void learn_querier(Family family, const MembershipQuery& q);
    // Applies a mode change (an older querier heard or timed out): pending
    // answers and repeats of the family are cancelled (RFC 3376 7.2.1).
    void update_mode(Family family, Clock::time_point now);
    [[nodiscard]] ProtocolVersion mode_at(Family family, Clock::time_point now) const;
    [[nodiscard]] bool older_mode(Family family) const;
    [[nodiscard]] Clock::duration repeat_interval(Family family) const;
    // True when a report went or is due because of the query.
    bool answer(const MembershipQuery& q, Family family, Clock::time_point now);
    bool schedule_group_answer(Group& g, Family family, Clock::time_point due);
    // Sends one report of `type` naming `groups` of one family, in as many
    // frames as the port's frame size needs (in the family's mode).
    void send_report(Family family, GroupRecordType type, std::span<const wire::Gid> groups);
    void send_v3_report(Family family, GroupRecordType type, std::span<const wire::Gid> groups);
    void send_older_message(Family family, GroupRecordType type, const wire::Gid& group);
    void count_sent(bool sent, GroupRecordType type);
    void send_group_due(const wire::Gid& group, Group& g, Clock::time_point now);
    void send_general(Family family);
    [[nodiscard]] Clock::duration random_delay(std::uint32_t max_ms);
    void note_deadline(Clock::time_point t);
    [[nodiscard]] static Family family_of(const wire::Gid& g);
    [[nodiscard]] static ProtocolVersion newest(Family family);
    [[nodiscard]] static bool never_reported(const wire::Gid& g);

    Port& port_;
    wire::MacAddr mac_;
    std::array<std::uint8_t, 4> ipv4_source_;
    wire::Gid link_local_;
    MembershipConfig config_;
    std::unordered_map<wire::Gid, Group, GidHash> groups_;
    // When the answer to a general query is due, per family.
    std::array<std::optional<Clock::time_point>, 2> general_due_{};
    std::array<Compatibility, 2> compatibility_{};
    std::uint64_t random_state_;
    Clock::time_point next_deadline_ = Clock::time_point::max();
    MembershipCounters counters_;
    std::vector<std::uint8_t> frame_;
};

}  // namespace uroce::net
