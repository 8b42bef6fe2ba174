#include "group_membership.h"

#include <algorithm>
#include <cstring>

#include "net/mld.h"
#include "net/nd.h"

namespace uroce::net {

namespace {

constexpr std::size_t kFamilies = 2;
// One VLAN tag's room kept off max_frame(): reports go untagged.
constexpr std::size_t kVlanTagSize = 4;

// splitmix64 (Steele, Lea, Flood 2014): a tiny generator good enough to
// spread report delays.
std::uint64_t next_random(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// An IGMPv1 host answers every query after up to 10 s (RFC 1112
// appendix I; Linux's IGMP_QUERY_RESPONSE_INTERVAL for a v3 query heard
// while a v1 querier is present).
constexpr std::uint32_t kV1ResponseMs = 10'000;

std::uint64_t seed_of(const wire::MacAddr& mac) {
    std::uint64_t seed = 0;
    for (const std::uint8_t b : mac) {
        seed = seed << 8 | b;
    }
    return seed;
}

}  // namespace

std::size_t GroupMembership::GidHash::operator()(const wire::Gid& g) const noexcept {
    std::uint64_t low = 0;
    std::memcpy(&low, g.data() + 8, sizeof low);
    return static_cast<std::size_t>(low * 0x9E3779B97F4A7C15ull);
}

GroupMembership::GroupMembership(Port& port, wire::MacAddr mac, std::array<std::uint8_t, 4> ipv4_source,
                                 wire::Gid link_local, MembershipConfig config)
    : port_(port), mac_(mac), ipv4_source_(ipv4_source), link_local_(link_local), config_(config),
      random_state_(seed_of(mac)) {
    for (const Family f : {Family::Ipv4, Family::Ipv6}) {
        Compatibility& c = compatibility_[static_cast<std::size_t>(f)];
        c.mode = newest(f);
        c.robustness = config_.querier_robustness;
        c.query_interval = config_.querier_query_interval;
        c.response_interval = config_.querier_response_interval;
    }
}

ProtocolVersion GroupMembership::newest(Family family) {
    return family == Family::Ipv4 ? ProtocolVersion::V3 : ProtocolVersion::V2;  // IGMPv3, MLDv2
}

GroupMembership::Family GroupMembership::family_of(const wire::Gid& g) {
    return wire::is_ipv4_mapped(g) ? Family::Ipv4 : Family::Ipv6;
}

bool GroupMembership::never_reported(const wire::Gid& g) {
    return g == wire::ipv4_mapped(kAllSystemsGroup) || g == kAllNodesMulticast;
}

void GroupMembership::joined(const wire::Gid& group, Clock::time_point now) {
    if (!port_.has_wire() || never_reported(group)) {
        return;
    }
    const Family family = family_of(group);
    update_mode(family, now);
    Group& g = groups_[group];
    g.member = true;
    send_report(family, GroupRecordType::ChangeToExclude, std::span(&group, 1));
    g.pending = config_.repeats > 0 ? Pending::Join : Pending::None;
    g.repeats_left = config_.repeats;
    g.due = now + repeat_interval(family);
    note_deadline(g.due);
}

void GroupMembership::left(const wire::Gid& group, Clock::time_point now) {
    const auto it = groups_.find(group);
    if (it == groups_.end() || !it->second.member) {
        return;
    }
    const Family family = family_of(group);
    update_mode(family, now);
    send_report(family, GroupRecordType::ChangeToInclude, std::span(&group, 1));
    if (config_.repeats == 0 || older_mode(family)) {
        groups_.erase(it);  // an older version's leave is sent once (or not at all: IGMPv1)
        return;
    }
    Group& g = it->second;
    g.member = false;
    g.pending = Pending::Leave;
    g.repeats_left = config_.repeats;
    g.due = now + config_.unsolicited_interval;
    note_deadline(g.due);
}

bool GroupMembership::handle_frame(std::span<const std::uint8_t> frame, Clock::time_point now) {
    Family family = Family::Ipv4;
    QueryParseResult r;
    if (is_igmp_frame(frame)) {
        r = parse_igmp_query(frame);
    } else if (is_mld_frame(frame)) {
        family = Family::Ipv6;
        r = parse_mld_query(frame);
    } else {
        return false;
    }
    if (r.status == QueryParseStatus::Malformed) {
        ++counters_.malformed;
        ++counters_.dropped[static_cast<std::size_t>(r.reason)];
    } else if (r.status == QueryParseStatus::Ok) {
        ++counters_.queries;
        if (r.query.version != newest(family)) {
            ++counters_.older_queries;
        }
        if (port_.has_wire()) {
            heard_query(r.query, family, now);
        }
    }
    return true;
}

void GroupMembership::heard_query(MembershipQuery q, Family family, Clock::time_point now) {
    if (q.version != newest(family)) {
        older_querier_heard(family, q.version, now);
    } else if (!older_mode(family)) {
        learn_querier(family, q);  // Linux learns only while no older querier is present
    }
    update_mode(family, now);
    const ProtocolVersion mode = compatibility_[static_cast<std::size_t>(family)].mode;
    if (family == Family::Ipv4 && mode == ProtocolVersion::V1 && q.version == ProtocolVersion::V3) {
        q.general = true;  // a v1 host knows no group-specific query
        q.group = {};
        q.max_response_ms = kV1ResponseMs;
    }
    if (answer(q, family, now)) {
        ++counters_.queries_answered;
    }
}

void GroupMembership::older_querier_heard(Family family, ProtocolVersion version, Clock::time_point now) {
    Compatibility& c = compatibility_[static_cast<std::size_t>(family)];
    // RFC 3376 8.12 / 8.13, RFC 3810 9.12: Robustness Variable times Query
    // Interval plus Query Response Interval.
    const Clock::time_point until = now + c.robustness * c.query_interval + c.response_interval;
    (version == ProtocolVersion::V1 ? c.v1_until : c.v2_until) = until;
    note_deadline(until);  // poll() switches back then
}

void GroupMembership::learn_querier(Family family, const MembershipQuery& q) {
    Compatibility& c = compatibility_[static_cast<std::size_t>(family)];
    // A QRV or QQIC of 0 means "use the default" (RFC 3376 4.1.6, 4.1.7;
    // RFC 3810 5.1.8, 5.1.9); the Query Response Interval is the query's
    // Max Resp Time (RFC 3376 8.3).
    c.robustness = q.robustness != 0 ? q.robustness : config_.querier_robustness;
    c.query_interval = q.query_interval_s != 0 ? Clock::duration(std::chrono::seconds(q.query_interval_s))
                                               : config_.querier_query_interval;
    c.response_interval = q.max_response_ms != 0 ? Clock::duration(std::chrono::milliseconds(q.max_response_ms))
                                                 : config_.querier_response_interval;
}

ProtocolVersion GroupMembership::mode_at(Family family, Clock::time_point now) const {
    const Compatibility& c = compatibility_[static_cast<std::size_t>(family)];
    if (now < c.v1_until) {
        return ProtocolVersion::V1;
    }
    if (family == Family::Ipv4 && now < c.v2_until) {
        return ProtocolVersion::V2;
    }
    return newest(family);
}

bool GroupMembership::older_mode(Family family) const {
    return compatibility_[static_cast<std::size_t>(family)].mode != newest(family);
}

GroupMembership::Clock::duration GroupMembership::repeat_interval(Family family) const {
    return older_mode(family) ? config_.older_unsolicited_interval : config_.unsolicited_interval;
}

void GroupMembership::update_mode(Family family, Clock::time_point now) {
    Compatibility& c = compatibility_[static_cast<std::size_t>(family)];
    const ProtocolVersion mode = mode_at(family, now);
    if (mode == c.mode) {
        return;
    }
    c.mode = mode;
    // RFC 3376 7.2.1, RFC 3810 8.2.1: a host changing its compatibility
    // mode cancels its pending response and retransmission timers.
    general_due_[static_cast<std::size_t>(family)].reset();
    for (auto it = groups_.begin(); it != groups_.end();) {
        if (family_of(it->first) != family) {
            ++it;
            continue;
        }
        it->second.pending = Pending::None;
        it->second.repeats_left = 0;
        it = it->second.member ? std::next(it) : groups_.erase(it);  // a leave's repeats were all it had
    }
}

bool GroupMembership::answer(const MembershipQuery& q, Family family, Clock::time_point now) {
    const Clock::time_point due = now + random_delay(q.max_response_ms);
    auto& general = general_due_[static_cast<std::size_t>(family)];
    if (general && *general <= due) {
        return true;  // RFC 3376 5.2 rule 1: the pending general answer comes first
    }
    if (q.general && older_mode(family)) {
        // RFC 2236 3, RFC 2710 4: a delay of its own for every group.
        bool any = false;
        for (auto& [gid, g] : groups_) {
            if (g.member && family_of(gid) == family) {
                any = schedule_group_answer(g, family, now + random_delay(q.max_response_ms)) || any;
            }
        }
        return any;
    }
    if (q.general) {
        general = due;
        note_deadline(due);
        return std::any_of(groups_.begin(), groups_.end(), [family](const auto& entry) {
            return entry.second.member && family_of(entry.first) == family;
        });
    }
    const auto it = groups_.find(q.group);
    if (it == groups_.end() || !it->second.member) {
        return false;  // not ours: nothing to say (RFC 3376 5.2)
    }
    return schedule_group_answer(it->second, family, due);
}

bool GroupMembership::schedule_group_answer(Group& g, Family family, Clock::time_point due) {
    if (g.pending == Pending::None || (g.pending == Pending::Answer && due < g.due)) {
        g.pending = Pending::Answer;
        g.due = due;
        note_deadline(due);
    } else if (g.pending == Pending::Join && older_mode(family) && due < g.due) {
        // RFC 2236 3: a v1/v2 host has one timer per group; a query asking
        // sooner than the join's repeat brings that report forward.
        g.due = due;
        note_deadline(due);
    }
    return true;  // due now, or sooner: a report goes either way
}

void GroupMembership::poll(Clock::time_point now) {
    if (now < next_deadline_) {
        return;
    }
    next_deadline_ = Clock::time_point::max();
    for (std::size_t f = 0; f < kFamilies; ++f) {
        update_mode(static_cast<Family>(f), now);
        const Compatibility& c = compatibility_[f];
        for (const Clock::time_point until : {c.v1_until, c.v2_until}) {
            if (until > now) {
                note_deadline(until);
            }
        }
        if (general_due_[f] && *general_due_[f] <= now) {
            general_due_[f].reset();
            send_general(static_cast<Family>(f));
        } else if (general_due_[f]) {
            note_deadline(*general_due_[f]);
        }
    }
    for (auto it = groups_.begin(); it != groups_.end();) {
        Group& g = it->second;
        if (g.pending != Pending::None && g.due <= now) {
            send_group_due(it->first, g, now);
        }
        if (g.pending != Pending::None) {
            note_deadline(g.due);
        }
        it = (!g.member && g.pending == Pending::None) ? groups_.erase(it) : std::next(it);
    }
}

void GroupMembership::send_group_due(const wire::Gid& group, Group& g, Clock::time_point now) {
    GroupRecordType type = GroupRecordType::ModeIsExclude;
    if (g.pending == Pending::Join) {
        type = GroupRecordType::ChangeToExclude;
    } else if (g.pending == Pending::Leave) {
        type = GroupRecordType::ChangeToInclude;
    }
    send_report(family_of(group), type, std::span(&group, 1));
    if (g.pending != Pending::Answer && g.repeats_left > 1) {
        --g.repeats_left;
        g.due = now + repeat_interval(family_of(group));
        return;
    }
    g.repeats_left = 0;
    g.pending = Pending::None;
}

void GroupMembership::send_general(Family family) {
    std::vector<wire::Gid> members;
    for (const auto& [gid, g] : groups_) {
        if (g.member && family_of(gid) == family) {
            members.push_back(gid);
        }
    }
    if (!members.empty()) {
        send_report(family, GroupRecordType::ModeIsExclude, members);
    }
}

void GroupMembership::send_report(Family family, GroupRecordType type, std::span<const wire::Gid> groups) {
    if (!older_mode(family)) {
        send_v3_report(family, type, groups);
        return;
    }
    for (const wire::Gid& group : groups) {
        send_older_message(family, type, group);
    }
}

void GroupMembership::send_v3_report(Family family, GroupRecordType type, std::span<const wire::Gid> groups) {
    const std::size_t overhead = family == Family::Ipv4 ? kIgmpReportOverhead : kMldReportOverhead;
    const std::size_t record = family == Family::Ipv4 ? kIgmpRecordSize : kMldRecordSize;
    const std::size_t room = port_.max_frame() - kVlanTagSize;
    const std::size_t per_frame = room > overhead ? (room - overhead) / record : 0;
    if (per_frame == 0) {
        return;
    }
    frame_.resize(room);
    for (std::size_t at = 0; at < groups.size(); at += per_frame) {
        const auto chunk = groups.subspan(at, std::min(per_frame, groups.size() - at));
        const std::size_t n = family == Family::Ipv4 ? build_igmp_report(frame_, mac_, ipv4_source_, type, chunk)
                                                     : build_mld_report(frame_, mac_, link_local_, type, chunk);
        count_sent(port_.send(std::span(frame_.data(), n)), type);
    }
}

void GroupMembership::send_older_message(Family family, GroupRecordType type, const wire::Gid& group) {
    const bool leave = type == GroupRecordType::ChangeToInclude;
    const ProtocolVersion mode = compatibility_[static_cast<std::size_t>(family)].mode;
    frame_.resize(std::max(kIgmpV2MessageFrameSize, kMldV1MessageFrameSize));
    std::size_t n = 0;
    if (family == Family::Ipv6) {
        n = build_mldv1_message(frame_, mac_, link_local_, leave ? MldType::V1Done : MldType::V1Report, group);
    } else if (mode == ProtocolVersion::V2) {
        n = build_igmp_v1v2_message(frame_, mac_, ipv4_source_,
                                    leave ? IgmpType::V2LeaveGroup : IgmpType::V2MembershipReport, group);
    } else if (!leave) {
        n = build_igmp_v1v2_message(frame_, mac_, ipv4_source_, IgmpType::V1MembershipReport, group);
    } else {
        return;  // IGMPv1 has no leave (RFC 3376 7.2.1)
    }
    if (n > port_.max_frame() - kVlanTagSize) {
        return;
    }
    count_sent(port_.send(std::span(frame_.data(), n)), type);
}

void GroupMembership::count_sent(bool sent, GroupRecordType type) {
    if (!sent) {
        ++counters_.tx_refused;
    } else if (type == GroupRecordType::ChangeToInclude) {
        ++counters_.leaves_sent;
    } else {
        ++counters_.reports_sent;
    }
}

GroupMembership::Clock::duration GroupMembership::random_delay(std::uint32_t max_ms) {
    if (max_ms == 0) {
        return Clock::duration::zero();
    }
    const std::uint64_t max_us = std::uint64_t{max_ms} * 1000;
    return std::chrono::microseconds(next_random(random_state_) % max_us);
}

void GroupMembership::note_deadline(Clock::time_point t) { next_deadline_ = std::min(next_deadline_, t); }

std::optional<GroupMembership::Clock::time_point> GroupMembership::next_deadline() const {
    if (next_deadline_ == Clock::time_point::max()) {
        return std::nullopt;
    }
    return next_deadline_;
}

MembershipCounters GroupMembership::counters() const {
    MembershipCounters c = counters_;
    c.groups = static_cast<std::uint64_t>(std::count_if(groups_.begin(), groups_.end(),
                                                        [](const auto& entry) { return entry.second.member; }));
    c.ipv4_version = compatibility_[static_cast<std::size_t>(Family::Ipv4)].mode;
    c.ipv6_version = compatibility_[static_cast<std::size_t>(Family::Ipv6)].mode;
    return c;
}

}  // namespace uroce::net
