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
      random_state_(seed_of(mac)) {}

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
    Group& g = groups_[group];
    g.member = true;
    send_report(family_of(group), GroupRecordType::ChangeToExclude, std::span(&group, 1));
    g.pending = config_.repeats > 0 ? Pending::Join : Pending::None;
    g.repeats_left = config_.repeats;
    g.due = now + config_.unsolicited_interval;
    note_deadline(g.due);
}

void GroupMembership::left(const wire::Gid& group, Clock::time_point now) {
    const auto it = groups_.find(group);
    if (it == groups_.end() || !it->second.member) {
        return;
    }
    send_report(family_of(group), GroupRecordType::ChangeToInclude, std::span(&group, 1));
    if (config_.repeats == 0) {
        groups_.erase(it);
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
    } else if (r.status == QueryParseStatus::Ok) {
        ++counters_.queries;
        if (port_.has_wire()) {
            answer(r.query, family, now);
        }
    }
    return true;
}

void GroupMembership::answer(const MembershipQuery& q, Family family, Clock::time_point now) {
    const Clock::time_point due = now + random_delay(q.max_response_ms);
    auto& general = general_due_[static_cast<std::size_t>(family)];
    if (general && *general <= due) {
        return;  // RFC 3376 5.2 rule 1: the pending general answer comes first
    }
    if (q.general) {
        general = due;
        note_deadline(due);
        return;
    }
    const auto it = groups_.find(q.group);
    if (it == groups_.end() || !it->second.member) {
        return;  // not ours: nothing to say (RFC 3376 5.2)
    }
    Group& g = it->second;
    if (g.pending == Pending::None || (g.pending == Pending::Answer && due < g.due)) {
        g.pending = Pending::Answer;
        g.due = due;
        note_deadline(due);
    }
}

void GroupMembership::poll(Clock::time_point now) {
    if (now < next_deadline_) {
        return;
    }
    next_deadline_ = Clock::time_point::max();
    for (std::size_t f = 0; f < kFamilies; ++f) {
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
        g.due = now + config_.unsolicited_interval;
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
        if (!port_.send(std::span(frame_.data(), n))) {
            ++counters_.tx_refused;
        } else if (type == GroupRecordType::ChangeToInclude) {
            ++counters_.leaves_sent;
        } else {
            ++counters_.reports_sent;
        }
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
    return c;
}

}  // namespace uroce::net
