#include "neighbours.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace uroce::net {

namespace {

constexpr wire::MacAddr kBroadcastMac = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
constexpr Ipv4Addr kUnspecifiedIpv4 = {0, 0, 0, 0};
constexpr Ipv4Addr kLimitedBroadcast = {255, 255, 255, 255};

// The I/G bit: set in broadcast and multicast MACs, never in a station's own
// (IEEE 802 48-bit address, first octet bit 0).
constexpr bool is_group(const wire::MacAddr& mac) { return (mac[0] & 0x01) != 0; }

// The Ethernet group a multicast or broadcast IP maps to, or nothing for a
// unicast address (RFC 1112 6.4 for IPv4, RFC 2464 7 for IPv6).
std::optional<wire::MacAddr> group_mac(const wire::Gid& dst) {
    if (wire::is_ipv4_mapped(dst)) {
        const Ipv4Addr ip = wire::ipv4_of(dst);
        if (ip == kLimitedBroadcast) {
            return kBroadcastMac;
        }
        if ((ip[0] & 0xF0) == 0xE0) {  // 224.0.0.0/4
            return wire::MacAddr{0x01, 0x00, 0x5E, static_cast<std::uint8_t>(ip[1] & 0x7F), ip[2], ip[3]};
        }
        return std::nullopt;
    }
    if (is_ipv6_multicast(dst)) {
        return ipv6_multicast_mac(dst);
    }
    return std::nullopt;
}

}  // namespace

std::size_t Neighbours::GidHash::operator()(const wire::Gid& g) const noexcept {
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    std::memcpy(&high, g.data(), sizeof(high));
    std::memcpy(&low, g.data() + sizeof(high), sizeof(low));
    // Multiply-xorshift mixing (the MurmurHash3 finaliser's constants).
    std::uint64_t h = high ^ (low * 0x9E3779B97F4A7C15ull);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
}

Neighbours::Neighbours(Port& port, wire::MacAddr our_mac, std::vector<wire::Gid> our_addresses,
                       NeighbourConfig config)
    : port_(port), our_mac_(our_mac), our_addresses_(std::move(our_addresses)), config_(config) {}

bool Neighbours::is_ours(const wire::Gid& ip) const {
    return std::find(our_addresses_.begin(), our_addresses_.end(), ip) != our_addresses_.end();
}

bool Neighbours::addressed_to_us(const wire::MacAddr& eth_dst) const {
    return eth_dst == our_mac_ || is_group(eth_dst);
}

std::optional<wire::MacAddr> Neighbours::lookup(const wire::Gid& ip) const {
    const auto it = table_.find(ip);
    if (it == table_.end() || it->second.state == State::Incomplete) {
        return std::nullopt;
    }
    return it->second.mac;
}

NeighbourCounters Neighbours::counters() const {
    NeighbourCounters c = counters_;
    c.entries = table_.size();
    return c;
}

std::optional<Clock::time_point> Neighbours::next_deadline() const {
    if (next_deadline_ == Clock::time_point::max()) {
        return std::nullopt;
    }
    return next_deadline_;
}

void Neighbours::note_deadline(Clock::time_point t) { next_deadline_ = std::min(next_deadline_, t); }

bool Neighbours::send_frame(std::span<std::uint8_t> frame, const wire::MacAddr& dst) {
    std::memcpy(frame.data(), dst.data(), dst.size());
    return port_.send(frame);
}

// ---- receiving -------------------------------------------------------------

bool Neighbours::handle_frame(std::span<const std::uint8_t> frame, Clock::time_point now) {
    if (frame.size() < sizeof(wire::EthHdr)) {
        return false;
    }
    const std::uint16_t ether_type = reinterpret_cast<const wire::EthHdr*>(frame.data())->ether_type.get();
    if (ether_type == kEtherTypeArp) {
        const auto m = parse_arp(frame);
        if (!m) {
            counters_.malformed += 1;
        } else if (!addressed_to_us(m->eth_dst)) {
            counters_.ignored += 1;
        } else {
            handle_arp(*m, now);
        }
        return true;
    }
    if (ether_type == wire::kEtherTypeIpv6) {
        const NdParseResult r = parse_nd(frame);
        switch (r.status) {
        case NdParseStatus::NotNd:
            return false;
        case NdParseStatus::Malformed:
            counters_.malformed += 1;
            return true;
        case NdParseStatus::Ok:
            if (!addressed_to_us(r.message.eth_dst)) {
                counters_.ignored += 1;
            } else {
                handle_nd(r.message, now);
            }
            return true;
        }
    }
    return false;
}

void Neighbours::handle_arp(const ArpMessage& m, Clock::time_point now) {
    // A group address cannot own an IP address; our own MAC means our frame
    // came back to us.
    if (is_group(m.sender_mac) || m.sender_mac == our_mac_) {
        counters_.ignored += 1;
        return;
    }
    const wire::Gid sender = wire::ipv4_mapped(m.sender_ip);
    const bool aimed_at_us = is_ours(wire::ipv4_mapped(m.target_ip));
    bool acted = false;
    // RFC 826 "Packet reception": merge the sender into an existing entry;
    // add it only if we are the target. 0.0.0.0 is a probe (RFC 5227), not an
    // address to learn; nobody else owns our addresses.
    if (m.sender_ip != kUnspecifiedIpv4 && !is_ours(sender)) {
        if (auto it = table_.find(sender); it != table_.end()) {
            confirm(it->second, m.sender_mac, now);
            if (aimed_at_us) {
                heard_again(it->second);
            }
            acted = true;
        } else if (aimed_at_us) {
            acted = learn(sender, m.sender_mac, now);
        }
    }
    if (m.op == ArpOp::Request && aimed_at_us && !may_answer(sender, now)) {
        return;
    }
    if (m.op == ArpOp::Request && aimed_at_us) {
        const ArpMessage reply{
            .eth_dst = m.sender_mac,
            .eth_src = our_mac_,
            .op = ArpOp::Reply,
            .sender_mac = our_mac_,
            .sender_ip = m.target_ip,
            .target_mac = m.sender_mac,
            .target_ip = m.sender_ip,
        };
        std::array<std::uint8_t, kArpFrameSize> out{};
        port_.send(std::span(out.data(), build_arp(out, reply)));
        counters_.arp_replies_sent += 1;
        acted = true;
    }
    if (!acted) {
        counters_.ignored += 1;
    }
}

void Neighbours::handle_nd(const NdMessage& m, Clock::time_point now) {
    if (is_group(m.eth_src) || m.eth_src == our_mac_) {
        counters_.ignored += 1;
        return;
    }
    if (m.type == NdType::NeighborSolicitation) {
        if (!is_ours(m.target)) {
            counters_.ignored += 1;
            return;
        }
        const bool duplicate_address_detection = is_unspecified(m.ip_src);
        // RFC 4861 7.2.3: the solicitation's source link-layer address
        // updates or creates the entry of its sender.
        if (!duplicate_address_detection && m.link_addr && !is_ours(m.ip_src)) {
            if (auto it = table_.find(m.ip_src); it != table_.end()) {
                confirm(it->second, *m.link_addr, now);
                heard_again(it->second);
            } else {
                learn(m.ip_src, *m.link_addr, now);
            }
        }
        if (!duplicate_address_detection && !may_answer(m.ip_src, now)) {
            return;
        }
        // RFC 4861 7.2.4: answer to the sender (to all nodes for DAD, then
        // not Solicited), overriding whatever the sender had for us.
        const NdMessage advert{
            .type = NdType::NeighborAdvertisement,
            .eth_dst = duplicate_address_detection ? ipv6_multicast_mac(kAllNodesMulticast)
                                                   : m.link_addr.value_or(m.eth_src),
            .eth_src = our_mac_,
            .ip_src = m.target,
            .ip_dst = duplicate_address_detection ? kAllNodesMulticast : m.ip_src,
            .target = m.target,
            .link_addr = our_mac_,
            .router = false,
            .solicited = !duplicate_address_detection,
            .override_entry = true,
        };
        std::array<std::uint8_t, kNdFrameSize> out{};
        port_.send(std::span(out.data(), build_nd(out, advert)));
        counters_.na_sent += 1;
        return;
    }

    // Neighbor Advertisement, RFC 4861 7.2.5: only for entries we have.
    const auto it = table_.find(m.target);
    if (it == table_.end()) {
        counters_.ignored += 1;
        return;
    }
    Entry& e = it->second;
    if (e.state == State::Incomplete) {
        if (!m.link_addr) {
            counters_.ignored += 1;  // an answer without the address we asked for
            return;
        }
        confirm(e, *m.link_addr, now);
        return;
    }
    const bool new_mac = m.link_addr && *m.link_addr != e.mac;
    if (new_mac && !m.override_entry) {
        counters_.ignored += 1;  // keep the address we have (RFC: it would only become STALE)
        return;
    }
    if (m.solicited) {
        confirm(e, m.link_addr.value_or(e.mac), now);
    } else if (new_mac) {
        e.mac = *m.link_addr;  // the peer announced a new address
    } else {
        counters_.ignored += 1;
    }
}

void Neighbours::confirm(Entry& e, const wire::MacAddr& mac, Clock::time_point now) {
    e.mac = mac;
    e.state = State::Reachable;
    e.confirmed = now;
    e.requests_sent = 0;
    e.used_since_confirmed = false;  // the queue leaving now was the reason to ask, not later use
    counters_.resolved += 1;
    while (!e.queue.empty()) {
        send_frame(e.queue.front(), mac);
        e.queue.pop_front();
        counters_.frames_released += 1;
    }
    note_deadline(now + config_.reachable_time);
}

bool Neighbours::learn(const wire::Gid& ip, const wire::MacAddr& mac, Clock::time_point now) {
    if (config_.max_learned == 0) {
        return false;
    }
    if (learned_.size() >= config_.max_learned) {
        forget(table_.find(learned_.front()));  // the pool is full: its stalest guess goes
        counters_.evicted += 1;
    }
    if (table_.size() >= config_.max_entries && !make_room(now)) {
        return false;
    }
    Entry& e = table_[ip];
    e.state = State::Reachable;
    e.origin = Origin::Learned;
    e.mac = mac;
    e.confirmed = now;
    e.last_used = now;
    e.in_learned = learned_.insert(learned_.end(), ip);
    counters_.learned += 1;
    note_deadline(now + config_.reachable_time);
    return true;
}

void Neighbours::heard_again(Entry& e) {
    if (e.origin == Origin::Learned) {
        learned_.splice(learned_.end(), learned_, e.in_learned);
    }
}

void Neighbours::mark_used(Entry& e, Clock::time_point now) {
    e.last_used = now;
    if (e.origin == Origin::Learned) {
        learned_.erase(e.in_learned);
        e.origin = Origin::Wanted;
    }
}

bool Neighbours::may_answer(const wire::Gid& ip, Clock::time_point now) {
    const auto it = table_.find(ip);
    if (it == table_.end()) {
        return true;  // not kept (the table is full of entries in use): nothing to limit by
    }
    Entry& e = it->second;
    if (e.last_answered && now < *e.last_answered + config_.answer_interval) {
        counters_.answers_limited += 1;
        return false;
    }
    e.last_answered = now;
    return true;
}

bool Neighbours::make_room(Clock::time_point now) {
    if (!learned_.empty()) {
        forget(table_.find(learned_.front()));
        counters_.evicted += 1;
        return true;
    }
    // Linux's forced GC in small: the least recently used entry nobody
    // holds. One pass over the table, only when it is full.
    auto victim = table_.end();
    for (auto it = table_.begin(); it != table_.end(); ++it) {
        const Entry& e = it->second;
        const bool idle = e.state != State::Incomplete && e.queue.empty() && now >= e.last_used + config_.idle_time;
        if (idle && (victim == table_.end() || e.last_used < victim->second.last_used)) {
            victim = it;
        }
    }
    if (victim == table_.end()) {
        return false;
    }
    forget(victim);
    counters_.evicted += 1;
    return true;
}

Neighbours::Table::iterator Neighbours::forget(Table::iterator it) {
    if (it->second.origin == Origin::Learned) {
        learned_.erase(it->second.in_learned);
    }
    return table_.erase(it);
}

// ---- sending ---------------------------------------------------------------

std::optional<wire::Gid> Neighbours::source_for(std::span<const std::uint8_t> frame, const wire::Gid& dst) const {
    // The frame's own source address when it is ours (so the peer learns the
    // address it is about to hear from), else our first of the same family.
    const bool v4 = wire::is_ipv4_mapped(dst);
    const std::uint16_t ether_type = reinterpret_cast<const wire::EthHdr*>(frame.data())->ether_type.get();
    constexpr std::size_t ip_at = sizeof(wire::EthHdr);
    if (v4 && ether_type == wire::kEtherTypeIpv4 && frame.size() >= ip_at + sizeof(wire::Ipv4Hdr)) {
        const wire::Gid src =
            wire::ipv4_mapped(reinterpret_cast<const wire::Ipv4Hdr*>(frame.data() + ip_at)->src);
        if (is_ours(src)) {
            return src;
        }
    } else if (!v4 && ether_type == wire::kEtherTypeIpv6 && frame.size() >= ip_at + sizeof(wire::Ipv6Hdr)) {
        const wire::Gid src = reinterpret_cast<const wire::Ipv6Hdr*>(frame.data() + ip_at)->src;
        if (is_ours(src)) {
            return src;
        }
    }
    return first_source_for(dst);
}

std::optional<wire::Gid> Neighbours::first_source_for(const wire::Gid& dst) const {
    const bool v4 = wire::is_ipv4_mapped(dst);
    for (const wire::Gid& a : our_addresses_) {
        if (wire::is_ipv4_mapped(a) == v4) {
            return a;
        }
    }
    return std::nullopt;
}

Neighbours::Table::iterator Neighbours::start_resolving(const wire::Gid& dst, const wire::Gid& source,
                                                        Clock::time_point now) {
    if (table_.size() >= config_.max_entries && !make_room(now)) {
        return table_.end();
    }
    auto it = table_.emplace(dst, Entry{}).first;
    it->second.source = source;
    it->second.last_used = now;
    send_request(dst, it->second, now);
    return it;
}

LinkState Neighbours::link_state(const wire::Gid& dst) const {
    if (!port_.has_wire() || is_ours(dst) || group_mac(dst)) {
        return LinkState::Known;
    }
    return lookup(dst) ? LinkState::Known : LinkState::Resolving;
}

LinkState Neighbours::resolve(const wire::Gid& dst, const wire::Gid& source, Clock::time_point now) {
    if (link_state(dst) == LinkState::Known) {
        return LinkState::Known;
    }
    if (table_.contains(dst)) {
        return LinkState::Resolving;  // Incomplete: its requests are already out
    }
    // No source address of the family, or no room: nothing is sent, and the
    // caller's own timeout ends the wait (Linux: -ENODATA until it expires).
    if (const auto from = is_ours(source) ? std::optional(source) : first_source_for(dst)) {
        start_resolving(dst, *from, now);
    }
    return LinkState::Resolving;
}

bool Neighbours::send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, Clock::time_point now) {
    if (frame.size() < sizeof(wire::EthHdr)) {
        return true;  // nothing to send: taken, as far as the caller can do anything about it
    }
    if (!port_.has_wire() || is_ours(dst)) {
        return send_frame(frame, our_mac_);
    }
    if (const auto group = group_mac(dst)) {
        return send_frame(frame, *group);
    }
    auto it = table_.find(dst);
    if (it != table_.end() && it->second.state != State::Incomplete) {
        it->second.used_since_confirmed = true;
        mark_used(it->second, now);
        return send_frame(frame, it->second.mac);
    }
    if (it == table_.end()) {
        const auto source = source_for(frame, dst);
        if (source) {
            it = start_resolving(dst, *source, now);
        }
        if (it == table_.end()) {
            counters_.no_entry_dropped += 1;
            return true;
        }
    }
    Entry& e = it->second;
    if (e.queue.size() >= config_.queue_frames) {
        e.queue.pop_front();
        counters_.queue_overflow += 1;
    }
    e.queue.emplace_back(frame.begin(), frame.end());
    counters_.frames_queued += 1;
    return true;
}

void Neighbours::send_request(const wire::Gid& ip, Entry& e, Clock::time_point now) {
    // Probing asks the known MAC directly (RFC 4861 7.3.3; Linux does the
    // same for ARP); resolving asks everyone.
    const bool unicast = e.state == State::Probing;
    if (wire::is_ipv4_mapped(ip)) {
        const ArpMessage request{
            .eth_dst = unicast ? e.mac : kBroadcastMac,
            .eth_src = our_mac_,
            .op = ArpOp::Request,
            .sender_mac = our_mac_,
            .sender_ip = wire::ipv4_of(e.source),
            .target_mac = unicast ? e.mac : wire::MacAddr{},
            .target_ip = wire::ipv4_of(ip),
        };
        std::array<std::uint8_t, kArpFrameSize> out{};
        port_.send(std::span(out.data(), build_arp(out, request)));
        counters_.arp_requests_sent += 1;
    } else {
        const wire::Gid group = solicited_node_multicast(ip);
        const NdMessage solicitation{
            .type = NdType::NeighborSolicitation,
            .eth_dst = unicast ? e.mac : ipv6_multicast_mac(group),
            .eth_src = our_mac_,
            .ip_src = e.source,
            .ip_dst = unicast ? ip : group,
            .target = ip,
            .link_addr = our_mac_,
        };
        std::array<std::uint8_t, kNdFrameSize> out{};
        port_.send(std::span(out.data(), build_nd(out, solicitation)));
        counters_.ns_sent += 1;
    }
    e.requests_sent += 1;
    e.next_request = now + config_.retry_interval;
    note_deadline(e.next_request);
}

// ---- timers ----------------------------------------------------------------

void Neighbours::poll(Clock::time_point now) {
    if (now < next_deadline_) {
        return;
    }
    Clock::time_point next = Clock::time_point::max();
    for (auto it = table_.begin(); it != table_.end();) {
        Entry& e = it->second;
        bool drop = false;
        if (e.state == State::Reachable) {
            const Clock::time_point expiry = e.confirmed + config_.reachable_time;
            if (now < expiry) {
                next = std::min(next, expiry);
            } else if (e.used_since_confirmed) {
                e.state = State::Probing;
                e.requests_sent = 0;
                send_request(it->first, e, now);
                next = std::min(next, e.next_request);
            } else {
                drop = true;  // unused: resolve afresh if it is ever needed
            }
        } else if (now < e.next_request) {
            next = std::min(next, e.next_request);
        } else if (e.requests_sent >= config_.max_requests) {
            counters_.unresolved_dropped += e.queue.size();
            counters_.resolution_failures += 1;
            drop = true;
        } else {
            send_request(it->first, e, now);
            next = std::min(next, e.next_request);
        }
        it = drop ? forget(it) : std::next(it);
    }
    next_deadline_ = next;
}

}  // namespace uroce::net
