#include "handlers_stats.h"

#include <algorithm>

#include "mr/keys.h"

namespace uroce::daemon {

namespace {

// The way the DMA interface serves a whole MR: the way a transfer of its
// whole range would take in its owner's memory (dma/client_memory.h).
std::uint8_t way_of(const mr::Descriptor& d, const Datapath* datapath) {
    // A dma-buf MR translates to its window of the owner's shared mappings
    // (mr_registrations.h): it reports shared once mapped.
    if (datapath == nullptr) {
        return UROCE_MR_WAY_UNSERVED;
    }
    const std::optional<dma::Way> w = datapath->way_of(d.owner, d.host_base, d.length);
    if (!w) {
        return UROCE_MR_WAY_UNSERVED;
    }
    return *w == dma::Way::Shared ? UROCE_MR_WAY_SHARED : UROCE_MR_WAY_COPY;
}

uroce_stats_engine engine_stats(const engine::EngineCounters& e) {
    uroce_stats_engine s{};
    s.rx_packets = e.rx_packets;
    s.tx_packets = e.tx_packets;
    s.rx_dropped = e.rx_dropped;
    s.retransmits = e.retransmits;
    s.timeouts = e.timeouts;
    s.rnr_naks_sent = e.rnr_naks_sent;
    s.rnr_naks_received = e.rnr_naks_received;
    s.seq_naks_sent = e.seq_naks_sent;
    s.seq_naks_received = e.seq_naks_received;
    s.duplicates = e.duplicates;
    s.bad_wqes = e.bad_wqes;
    s.cq_overruns = e.cq_overruns;
    s.dma_faults = e.dma_faults;
    s.retransmitted_packets = e.retransmitted_packets;
    s.tx_deferred = e.tx_deferred;
    return s;
}

uroce_stats_neighbours neighbour_stats(const net::NeighbourCounters& n) {
    uroce_stats_neighbours s{};
    s.arp_requests_sent = n.arp_requests_sent;
    s.arp_replies_sent = n.arp_replies_sent;
    s.ns_sent = n.ns_sent;
    s.na_sent = n.na_sent;
    s.resolved = n.resolved;
    s.learned = n.learned;
    s.ignored = n.ignored;
    s.malformed = n.malformed;
    s.frames_queued = n.frames_queued;
    s.frames_released = n.frames_released;
    s.queue_overflow = n.queue_overflow;
    s.unresolved_dropped = n.unresolved_dropped;
    s.resolution_failures = n.resolution_failures;
    s.no_entry_dropped = n.no_entry_dropped;
    s.entries = n.entries;
    s.evicted = n.evicted;
    s.answers_limited = n.answers_limited;
    return s;
}

}  // namespace

static_assert(wire::kParseStatusCount <= UROCE_STATS_PARSE_REASONS, "the reply holds every parse outcome");
static_assert(engine::kDropReasonCount <= UROCE_STATS_DROP_REASONS, "the reply holds every drop reason");
static_assert(engine::kNakReasonCount == UROCE_STATS_NAK_REASONS, "the reply holds every NAK kind");

uroce_ctrl_stats_reasons_reply stats_reasons_reply(const Datapath* datapath) {
    uroce_ctrl_stats_reasons_reply r{};
    if (datapath == nullptr) {
        return r;
    }
    const DatapathCounters& f = datapath->counters();
    std::copy(f.malformed.begin(), f.malformed.end(), r.frames_malformed);
    const engine::EngineCounters& e = datapath->engine().counters();
    std::copy(e.dropped.begin(), e.dropped.end(), r.engine_dropped);
    std::copy(e.naks_sent.begin(), e.naks_sent.end(), r.naks_sent);
    std::copy(e.naks_received.begin(), e.naks_received.end(), r.naks_received);
    return r;
}

static_assert(kStallCauseCount <= UROCE_LOOP_STALL_CAUSES, "the reply holds every stall cause");
static_assert(kLoopPhaseCount <= UROCE_LOOP_PHASES, "the reply holds every loop phase");

uroce_ctrl_loop_stalls_reply loop_stalls_reply(const LoopStallCounters& c) {
    uroce_ctrl_loop_stalls_reply r{};
    r.threshold_ns = static_cast<std::uint64_t>(c.threshold.count());
    r.rounds = c.rounds;
    r.stalls = c.stalls;
    r.longest_ns = c.longest_ns;
    r.stalled_ns = c.stalled_ns;
    std::copy(c.by_cause.begin(), c.by_cause.end(), r.by_cause);
    std::copy(c.by_phase.begin(), c.by_phase.end(), r.by_phase);
    r.rounds_over_20ms = c.rounds_over_20ms;
    r.rounds_over_100ms = c.rounds_over_100ms;
    r.rounds_over_1s = c.rounds_over_1s;
    return r;
}

static_assert(net::kQueryDropReasonCount <= UROCE_MEMBERSHIP_DROP_REASONS, "the reply holds every drop reason");

uroce_ctrl_membership_reply membership_reply(const net::MembershipCounters& c) {
    uroce_ctrl_membership_reply r{};
    r.reports_sent = c.reports_sent;
    r.leaves_sent = c.leaves_sent;
    r.queries = c.queries;
    r.queries_answered = c.queries_answered;
    r.older_queries = c.older_queries;
    r.queries_dropped = c.malformed;
    r.tx_refused = c.tx_refused;
    r.groups = c.groups;
    std::copy(c.dropped.begin(), c.dropped.end(), r.dropped);
    r.igmp_version = static_cast<std::uint8_t>(c.ipv4_version);
    r.mld_version = static_cast<std::uint8_t>(c.ipv6_version);
    return r;
}

uroce_ctrl_stats_reply stats_reply(const device::Device& device, const Datapath* datapath,
                                   const OwnerFilter& visible) {
    uroce_ctrl_stats_reply r{};
    if (datapath != nullptr) {
        r.engine = engine_stats(datapath->engine().counters());
        const DatapathCounters& f = datapath->counters();
        r.frames.rx_roce = f.rx_roce;
        r.frames.rx_other = f.rx_other;
        r.frames.rx_malformed = f.rx_malformed;
        const net::PortCounters p = datapath->port_counters();
        r.port.rx_frames = p.rx_frames;
        r.port.rx_bytes = p.rx_bytes;
        r.port.tx_frames = p.tx_frames;
        r.port.tx_bytes = p.tx_bytes;
        r.port.tx_dropped = p.tx_dropped;
        r.neighbours = neighbour_stats(datapath->neighbours().counters());
        const dma::DmaCounters d = datapath->dma_counters();
        r.dma.shared_ops = d.shared_ops;
        r.dma.shared_bytes = d.shared_bytes;
        r.dma.copy_ops = d.copy_ops;
        r.dma.copy_bytes = d.copy_bytes;
        r.dma.faults = d.faults;
        r.dma.shared_mappings = datapath->shared_mappings();
        const IdleCounters i = datapath->idle_counters();
        r.idle.sleeps = i.sleeps;
        r.idle.woken_by_fd = i.woken_by_fd;
        r.idle.slept_ns = i.slept_ns;
    }
    device.mrs().for_each_mr([&](const mr::Descriptor& d) {
        if (!visible(d.owner)) {
            return true;
        }
        switch (way_of(d, datapath)) {
            case UROCE_MR_WAY_SHARED:
                ++r.mrs_shared;
                break;
            case UROCE_MR_WAY_COPY:
                ++r.mrs_copy;
                break;
            default:
                ++r.mrs_unserved;
                break;
        }
        return true;
    });
    return r;
}

uroce_ctrl_list_mrs_reply list_mrs_reply(const device::Device& device, const Datapath* datapath,
                                         std::uint32_t first_index, const OwnerFilter& visible) {
    uroce_ctrl_list_mrs_reply r{};
    device.mrs().for_each_mr(
        [&](const mr::Descriptor& d) {
            if (!visible(d.owner)) {
                return true;
            }
            if (r.count == UROCE_LIST_MRS_PER_REPLY) {
                r.next_index = d.index;  // one more: the next page starts here
                return false;
            }
            uroce_ctrl_mr_entry& e = r.entries[r.count++];
            e.lkey = d.key();
            e.pd = d.pd;
            e.client = d.owner;
            e.access = d.access;
            e.addr = d.host_base;
            e.length = d.length;
            e.way = way_of(d, datapath);
            return true;
        },
        first_index);
    return r;
}

}  // namespace uroce::daemon
