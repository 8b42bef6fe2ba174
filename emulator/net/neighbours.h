// The port's neighbour table: answers ARP requests (RFC 826) and IPv6
// Neighbor Solicitations (RFC 4861) for our addresses, and resolves the
// Ethernet address of the peers the engine sends to.
//
// Entries, per peer address:
//   Incomplete  a request is out; frames for the peer wait in a bounded queue
//               (oldest dropped first, like Linux's unres_qlen) and leave in
//               order once the answer comes. Requests are repeated every
//               retry_interval; after max_requests unanswered ones the queue
//               is dropped and the entry forgotten.
//   Reachable   the MAC is known and was confirmed less than reachable_time
//               ago.
//   Probing     reachable_time has passed and the entry was used since its
//               last confirmation: traffic keeps flowing to the known MAC
//               while unicast requests ask the peer to confirm it (RFC 4861
//               7.3.3 PROBE). An entry unused when it expires is forgotten.
//
// Learning follows RFC 826's merge rule: a request or reply updates the entry
// of its sender if there is one, and creates one only when it is aimed at one
// of our addresses. An NA updates an existing entry only (RFC 4861 7.2.5). A
// MAC learned from a request counts as confirmed (RFC 4861 would call it
// STALE and probe soon; on a LAN the sender has just shown it is there).
//
// Flood resistance. Anyone on the link can send requests aimed at us from as
// many made-up sources as they like, so what a request teaches is kept apart
// from what we need:
//   Wanted   an entry we created to send (send_ip), or a learned one we have
//            since sent to. Only these hold a QP's peer.
//   Learned  created from a request or reply aimed at us and not sent to
//            yet: a guess that the sender will soon talk RoCE to us, saving
//            one round trip. At most max_learned of them; a new one pushes
//            out the one heard from longest ago.
// So a flood only churns the learned pool; it never takes a Wanted entry's
// place. When the whole table is full and a new peer must be resolved, the
// least recently used entry no QP is using goes: a Learned one first, else a
// Wanted one not sent to for idle_time and not being resolved. A peer sent to
// within idle_time is never evicted. Each source gets at most one answer per
// answer_interval (its entry remembers when), so re-sending one request fast
// gets one reply, not one per copy.
// This is Linux's scheme in small: it too creates entries only for requests
// aimed at it (arp_process), bounds the table (gc_thresh3) and, when full,
// evicts only entries nobody holds (neigh_forced_gc: refcnt 1, not
// permanent), and bounds the frames waiting per peer (unres_qlen).
//
// Only untagged ARP/ND frames are handled. Neighbours only ever calls
// port.send(); the caller flushes the port as it does after every poll.
// Not thread-safe: the engine's thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "net/arp.h"
#include "net/nd.h"
#include "net/port.h"
#include "wire/headers.h"

namespace uroce::net {

using Clock = std::chrono::steady_clock;

struct NeighbourConfig {
    // Between two requests for one peer. RFC 4861's RETRANS_TIMER is 1 s; a
    // RoCE peer sits on the same LAN and answers in microseconds.
    Clock::duration retry_interval = std::chrono::milliseconds(200);
    // Requests before giving up (RFC 4861 MAX_MULTICAST_SOLICIT is 3).
    unsigned max_requests = 5;
    // How long an answer stays good (Linux's base_reachable_time is 30 s).
    Clock::duration reachable_time = std::chrono::seconds(60);
    std::size_t queue_frames = 64;  // per peer being resolved
    std::size_t max_entries = 4096;
    // Entries learned from requests and not sent to yet (see above); a
    // quarter of Linux's default gc_thresh1 (128) would do for one LAN, but a
    // server may hear from many clients before they connect.
    std::size_t max_learned = 256;
    // A Wanted entry sent to within this long is in use and never evicted
    // (Linux keeps entries for gc_stale_time, 60 s, after last use).
    Clock::duration idle_time = std::chrono::seconds(60);
    // One answer per source per interval; a real peer repeats a request
    // every retry_interval (200 ms here, 1 s in Linux) at most.
    Clock::duration answer_interval = std::chrono::milliseconds(100);
};

// Whether frames to a peer would leave at once, for callers that must know
// before they send anything (rdma_cm's address resolution, addr.c).
enum class LinkState : std::uint8_t {
    Known,      // the MAC is known, or none is needed (ours, multicast, no wire)
    Resolving,  // a request is out (or the table had no room for one)
};

struct NeighbourCounters {
    std::uint64_t arp_requests_sent = 0;
    std::uint64_t arp_replies_sent = 0;
    std::uint64_t ns_sent = 0;
    std::uint64_t na_sent = 0;
    std::uint64_t resolved = 0;  // entries completed or confirmed by an answer
    std::uint64_t learned = 0;   // entries created from a request aimed at us
    std::uint64_t ignored = 0;   // well-formed ARP/ND not for us
    std::uint64_t malformed = 0;
    std::uint64_t frames_queued = 0;
    std::uint64_t frames_released = 0;      // queued frames sent after resolution
    std::uint64_t queue_overflow = 0;       // queued frames pushed out by newer ones
    std::uint64_t unresolved_dropped = 0;   // queued frames of peers that never answered
    std::uint64_t resolution_failures = 0;  // peers given up on (Incomplete or Probing)
    std::uint64_t no_entry_dropped = 0;     // frames dropped: table full or no source address
    std::uint64_t evicted = 0;              // entries pushed out for newer ones (learned pool or full table)
    std::uint64_t answers_limited = 0;      // requests not answered: their source was answered just before
    std::uint64_t entries = 0;              // entries in the table now
};

class Neighbours {
public:
    // `our_addresses`: every address the port answers for, IPv4 held
    // IPv4-mapped (::ffff:a.b.c.d), IPv6 as is (the GID table's addresses).
    Neighbours(Port& port, wire::MacAddr our_mac, std::vector<wire::Gid> our_addresses,
               NeighbourConfig config = {});

    // A received frame that is not RoCE: answers ARP requests and NS for our
    // addresses and learns from answers. True when the frame was ARP or
    // ICMPv6 NS/NA (used, ignored or malformed: either way it is consumed).
    bool handle_frame(std::span<const std::uint8_t> frame, Clock::time_point now);

    // Sends an IP frame to `dst` once its Ethernet destination is known:
    // fills it in and sends at once, or keeps a copy until the peer answers.
    // Ports without a wire (loopback) send everything to our own MAC; so do
    // frames to our own addresses. Multicast goes to the mapped group MAC.
    // False only when the port refused the frame (its transmit queue is
    // full): the caller still has it and may offer it again. A frame kept for
    // a peer being resolved, or dropped for want of an entry, counts as taken.
    bool send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, Clock::time_point now);

    // Starts resolving `dst` as send_ip would (a Wanted entry whose requests
    // come from `source`, or our first address of its family when `source`
    // is not ours) without queuing a frame, unless no resolution is needed
    // or one is under way. Resolving also when the table is full of entries
    // in use (the caller asks again later, as Linux's ib_addr does when
    // neigh_create fails).
    LinkState resolve(const wire::Gid& dst, const wire::Gid& source, Clock::time_point now);
    // The same question, sending nothing and creating nothing.
    [[nodiscard]] LinkState link_state(const wire::Gid& dst) const;

    // Repeats requests, expires and re-probes entries, gives up on peers that
    // do not answer. Cheap when nothing is due.
    void poll(Clock::time_point now);

    // The earliest time poll() may have work, if ever (for the daemon's idle
    // sleep). A lower bound: a poll() then may find nothing due after all.
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;

    // The MAC traffic to `ip` goes to now (Reachable or Probing), if any.
    [[nodiscard]] std::optional<wire::MacAddr> lookup(const wire::Gid& ip) const;
    [[nodiscard]] bool is_ours(const wire::Gid& ip) const;
    [[nodiscard]] NeighbourCounters counters() const;

private:
    enum class State { Incomplete, Reachable, Probing };
    enum class Origin { Wanted, Learned };  // see the header comment

    struct Entry {
        State state = State::Incomplete;
        Origin origin = Origin::Wanted;
        Clock::time_point last_used{};      // last send_ip to it (Wanted) or creation
        std::optional<Clock::time_point> last_answered;
        std::list<wire::Gid>::iterator in_learned;  // its place in learned_ (Learned only)
        wire::MacAddr mac{};
        Clock::time_point confirmed{};
        bool used_since_confirmed = false;
        Clock::time_point next_request{};
        unsigned requests_sent = 0;
        wire::Gid source{};  // our address the requests come from
        std::deque<std::vector<std::uint8_t>> queue;
    };

    struct GidHash {
        std::size_t operator()(const wire::Gid& g) const noexcept;
    };
    using Table = std::unordered_map<wire::Gid, Entry, GidHash>;

    void handle_arp(const ArpMessage& m, Clock::time_point now);
    void handle_nd(const NdMessage& m, Clock::time_point now);
    // Records `mac` for `ip` as confirmed now and sends what was queued.
    void confirm(Entry& e, const wire::MacAddr& mac, Clock::time_point now);
    // A new Learned entry for a peer that spoke to us first; false when the
    // table is full of entries in use.
    bool learn(const wire::Gid& ip, const wire::MacAddr& mac, Clock::time_point now);
    // The sender of a request or reply aimed at us was heard again.
    void heard_again(Entry& e);
    // The entry is sent to: it is Wanted from now on.
    void mark_used(Entry& e, Clock::time_point now);
    // True when `ip`'s entry may answer now (and notes that it does).
    bool may_answer(const wire::Gid& ip, Clock::time_point now);
    // Makes room for one entry when the table is full; false when every
    // entry is in use.
    bool make_room(Clock::time_point now);
    // Removes an entry (from learned_ too); the next one.
    Table::iterator forget(Table::iterator it);
    void send_request(const wire::Gid& ip, Entry& e, Clock::time_point now);
    bool send_frame(std::span<std::uint8_t> frame, const wire::MacAddr& dst);
    [[nodiscard]] bool addressed_to_us(const wire::MacAddr& eth_dst) const;
    [[nodiscard]] std::optional<wire::Gid> source_for(std::span<const std::uint8_t> frame,
                                                      const wire::Gid& dst) const;
    // Our first address of dst's family.
    [[nodiscard]] std::optional<wire::Gid> first_source_for(const wire::Gid& dst) const;
    // A new Incomplete entry for `dst`, its first request sent; table_.end()
    // when the table is full of entries in use.
    Table::iterator start_resolving(const wire::Gid& dst, const wire::Gid& source, Clock::time_point now);
    void note_deadline(Clock::time_point t);

    Port& port_;
    wire::MacAddr our_mac_;
    std::vector<wire::Gid> our_addresses_;
    NeighbourConfig config_;
    Table table_;
    std::list<wire::Gid> learned_;  // the Learned entries, heard from longest ago first
    Clock::time_point next_deadline_ = Clock::time_point::max();
    NeighbourCounters counters_;
};

}  // namespace uroce::net
