#include "datapath.h"

#include <unistd.h>

#include <cstring>

#include "abi/control.h"
#include "cm/qp1.h"
#include "engine/failure_report.h"
#include "log.h"
#include "wire/parse.h"

namespace uroce::daemon {

namespace {

constexpr std::size_t kRxBurst = 32;
// Bursts received per round while the port keeps returning full ones. An
// engine round costs time per QP (256 QPs: 256 rings looked at), so one
// burst per round made the receive rate fall as QPs were added, and the
// kernel dropped what the af_packet ring could not hold (docs/congestion.md).
// 128 bursts (4096 frames) is the af_packet ring (dpdk_port.cc): a round
// drains it, so ACKs that waited there while the daemon was not scheduled
// are taken before the engine's round looks at the ACK timers.
constexpr std::size_t kRxBurstsPerRound = 128;

std::vector<wire::Gid> addresses_of(const device::Device& d) {
    std::vector<wire::Gid> out;
    for (const auto& g : d.gids()) {
        if (g.type == device::GidType::RoceV2) {
            out.push_back(g.gid);
        }
    }
    return out;
}

// The IPv4 address IGMP reports come from: the first IPv4 RoCE v2 GID
// (0.0.0.0, which RFC 3376 4.2.13 allows, when there is none).
std::array<std::uint8_t, 4> ipv4_source_of(const device::Device& d) {
    for (const auto& g : d.gids()) {
        if (g.type == device::GidType::RoceV2 && wire::is_ipv4_mapped(g.gid)) {
            return wire::ipv4_of(g.gid);
        }
    }
    return {};
}

// The fe80:: address MLD reports come from (RFC 3810 5: link-local), the
// GID table's entry 0.
wire::Gid link_local_of(const device::Device& d) {
    for (const auto& g : d.gids()) {
        if (g.gid[0] == 0xFE && (g.gid[1] & 0xC0) == 0x80) {
            return g.gid;
        }
    }
    return {};
}

void add_to(dma::DmaCounters& sum, const dma::DmaCounters& c) {
    sum.shared_ops += c.shared_ops;
    sum.shared_bytes += c.shared_bytes;
    sum.copy_ops += c.copy_ops;
    sum.copy_bytes += c.copy_bytes;
    sum.faults += c.faults;
}

engine::WorkRing view(const device::WorkQueueRing& r) {
    if (!r.present()) {
        return {};
    }
    return engine::WorkRing(r.header, r.geometry.entries, r.geometry.stride, r.geometry.max_sge,
                            r.geometry.max_inline);
}

}  // namespace

Datapath::Datapath(device::Device& device, net::Port& port)
    : port_(port), mrs_(device.mrs()), neighbours_(port, port.mac(), addresses_of(device)),
      membership_(port, port.mac(), ipv4_source_of(device), link_local_of(device)), rx_(kRxBurst) {
    engine::EngineConfig cfg;
    cfg.mac = port.mac();
    cfg.gids = device.gids();
    engine_ = std::make_unique<engine::Engine>(
        cfg, device.mrs(), *this, [this](std::uint32_t client) { return memory_of(client); },
        [this](std::uint32_t client, std::uint64_t cookie, engine::AsyncEvent e) {
            if (async_sink_) {
                async_sink_(client, cookie, e);
            }
        });
    engine_->multicast().set_observer([this](const wire::Gid& group, engine::GroupChange change) {
        if (change == engine::GroupChange::FirstMember) {
            membership_.joined(group, engine::Clock::now());
        } else {
            membership_.left(group, engine::Clock::now());
        }
    });
    engine_->set_failure_observer([this](const uroce_explain_record& r) { events_.add(r); });
    mrs_.set_stale_observer(
        [this](const mr::StaleAccessReport& report) { events_.add(engine::stale_access_record(report)); });
}

Datapath::~Datapath() { mrs_.set_stale_observer(nullptr); }

bool Datapath::poll(engine::Clock::time_point now) {
    seal_icrcs_once_watched();
    bool worked = receive_own_frames(now);
    for (std::size_t burst = 0; burst < kRxBurstsPerRound; ++burst) {
        const std::size_t n = receive_burst(now);
        worked |= n > 0;
        if (n < rx_.size()) {
            break;  // the port is drained
        }
    }
    worked |= engine_->poll(now);
    if (cm_ != nullptr) {
        cm_->poll(now);  // deliveries queued for the device, retransmissions, timewait
    }
    neighbours_.poll(now);
    membership_.poll(now);
    port_.flush();
    // Frames the port still holds (a short transmit burst) keep the loop busy.
    return worked || !to_self_.empty() || port_.tx_pending();
}

void Datapath::seal_icrcs_once_watched() {
    // Rules and captures start between rounds (control ops), so frames the
    // engine built without an ICRC before one started are all still in the
    // port now, and get one before anything receives them.
    const bool unread = port_.icrc_unread();
    if (icrc_was_unread_ && !unread) {
        port_.seal_icrcs();
    }
    icrc_was_unread_ = unread;
}

std::size_t Datapath::receive_burst(engine::Clock::time_point now) {
    const std::size_t n = port_.receive(rx_);
    for (std::size_t i = 0; i < n; ++i) {
        const std::span<const std::uint8_t> frame = rx_[i].bytes;
        wire::ParseResult r = wire::parse_frame(frame);
        if (rx_[i].icrc_vouched) {
            r.packet.vouch_icrc();
        }
        if (capture_ != nullptr && capture_->active()) [[unlikely]] {
            capture_received(frame, r, now);
        } else {
            handle_received(frame, r, now);
        }
    }
    if (n > 0) {
        port_.release(std::span(rx_.data(), n));
    }
    return n;
}

void Datapath::handle_received(std::span<const std::uint8_t> frame, const wire::ParseResult& r,
                               engine::Clock::time_point now) {
    if (r.ok()) {
        deliver(frame, r.packet, now);
    } else if (wire::reached_roce(r.status)) {
        counters_.count_malformed(r.status);
    } else {
        ++counters_.rx_other;
        if (!membership_.handle_frame(frame, now)) {
            neighbours_.handle_frame(frame, now);
        }
    }
}

void Datapath::set_capture(CaptureTap& tap) {
    capture_ = &tap;
    tap.set_peer_qp_lookup([this](std::uint32_t qpn) -> std::optional<std::uint32_t> {
        const auto it = peer_qps_.find(qpn);
        return it == peer_qps_.end() ? std::nullopt : std::optional(it->second);
    });
}

void Datapath::capture_received(std::span<const std::uint8_t> frame, const wire::ParseResult& r,
                                engine::Clock::time_point now) {
    if (!r.ok() && !wire::reached_roce(r.status)) {
        handle_received(frame, r, now);  // ARP, ND, other traffic: not captured
        return;
    }
    // Which check dropped it shows in the counters by reason it moves.
    const auto engine_before = engine_->counters().dropped;
    const std::uint64_t no_cm_before = cm_frames_.no_cm;
    const auto cm_before = cm_ != nullptr ? cm_->framer_counters().rx_status : decltype(cm_->framer_counters().rx_status){};
    capture_->hold();
    handle_received(frame, r, now);
    std::string why;
    if (!r.ok()) {
        why = fmt::format("dropped by the parser: {}", wire::kParseStatusInfo[static_cast<std::size_t>(r.status)].name);
    } else if (cm_frames_.no_cm != no_cm_before) {
        why = "dropped: CM MAD and no wire CM";
    } else if (cm_ != nullptr) {
        const auto& after = cm_->framer_counters().rx_status;
        for (std::size_t i = 1; i < after.size() && why.empty(); ++i) {
            if (after[i] != cm_before[i]) {
                why = fmt::format("dropped by the CM: {}", cm::kCmParseStatusInfo[i].name);
            }
        }
    }
    // Only the receive checks: the reasons from FrameNotBuilt on are about
    // frames the engine made (while handling this one).
    constexpr auto kReceiveChecks = static_cast<std::size_t>(engine::DropReason::FrameNotBuilt);
    const auto& engine_after = engine_->counters().dropped;
    for (std::size_t i = 0; i < kReceiveChecks && why.empty(); ++i) {
        if (engine_after[i] != engine_before[i]) {
            why = fmt::format("dropped by the engine: {}", engine::kDropReasonName[i]);
        }
    }
    capture_->received(frame, why);
}

void Datapath::deliver(std::span<const std::uint8_t> frame, const wire::Packet& packet,
                       engine::Clock::time_point now) {
    ++counters_.rx_roce;
    if (!cm::is_for_qp1(packet)) {
        engine_->receive(packet, now);
        return;
    }
    if (cm_ == nullptr) {
        ++cm_frames_.no_cm;
        return;
    }
    ++cm_frames_.received;
    const auto before = cm_->framer_counters().rx_status;
    cm_->receive_frame(frame);
    const auto& after = cm_->framer_counters().rx_status;
    for (std::size_t i = 1; i < after.size(); ++i) {
        if (after[i] != before[i] && !cm_drop_logged_[i]) {
            cm_drop_logged_[i] = true;  // later ones are only counted (log_cm_summary)
            log_info("CM MAD dropped: {} (first of its kind; counted from now on)", cm::kCmParseStatusInfo[i].description);
        }
    }
}

void Datapath::attach_cm(ucma::WireConnectionManager& cm) {
    cm_ = &cm;
    cm.set_port(this);
}

void Datapath::send_to(std::span<const std::uint8_t> frame, const wire::Gid& peer) {
    std::vector<std::uint8_t> copy(frame.begin(), frame.end());
    if (!send_ip(copy, peer, engine::Clock::now())) {
        ++cm_frames_.tx_refused;
    }
}

namespace {
ucma::NeighbourState neighbour_state(net::LinkState s) {
    return s == net::LinkState::Known ? ucma::NeighbourState::Known : ucma::NeighbourState::Resolving;
}
}  // namespace

ucma::NeighbourState Datapath::resolve(const wire::Gid& source, const wire::Gid& destination,
                                       engine::Clock::time_point now) {
    return neighbour_state(neighbours_.resolve(destination, source, now));  // its request leaves at the next poll's flush
}

ucma::NeighbourState Datapath::state_of(const wire::Gid& destination) const {
    return neighbour_state(neighbours_.link_state(destination));
}

void Datapath::log_cm_summary() const {
    if (cm_ == nullptr) {
        return;
    }
    const auto& f = cm_->framer_counters();
    const auto& c = cm_->cm_counters();
    const auto& w = cm_->counters();
    std::string dropped;
    for (std::size_t i = 1; i < f.rx_status.size(); ++i) {
        if (f.rx_status[i] != 0) {
            dropped += fmt::format(" {}={}", cm::kCmParseStatusInfo[i].name, f.rx_status[i]);
        }
    }
    log_info("cm: {} MADs in ({} well-formed), {} frames out, {} retransmits, {} duplicates, {} unmatched, "
             "{} timeouts, {} REJ no listener, {} requests refused by the device, {} dropped, {} refused by the "
             "port; dropped frames:{}",
             cm_frames_.received, f.rx_status[0], f.frames_sent, c.retransmits, c.duplicates, c.unmatched,
             c.timeouts, c.no_listener, w.requests_refused, w.requests_dropped, cm_frames_.tx_refused,
             dropped.empty() ? " none" : dropped);
}

bool Datapath::receive_own_frames(engine::Clock::time_point now) {
    if (to_self_.empty()) {
        return false;
    }
    std::vector<std::vector<std::uint8_t>> frames;
    frames.swap(to_self_);  // what the engine sends meanwhile waits for the next poll
    for (const std::vector<std::uint8_t>& frame : frames) {
        const wire::ParseResult r = wire::parse_frame(frame);
        if (capture_ != nullptr && capture_->active()) [[unlikely]] {
            capture_received(frame, r, now);
        } else if (r.ok()) {
            deliver(frame, r.packet, now);
        } else {
            counters_.count_malformed(r.status);
        }
    }
    return true;
}

std::optional<engine::Clock::time_point> Datapath::next_deadline() const {
    if (!to_self_.empty()) {
        return engine::Clock::now();  // frames to ourselves wait to be received
    }
    auto a = engine_->next_deadline();
    auto b = neighbours_.next_deadline();
    if (const auto m = membership_.next_deadline(); m && (!b || *m < *b)) {
        b = m;
    }
    if (cm_ != nullptr) {
        if (const auto c = cm_->next_deadline(); c && (!a || *c < *a)) {
            a = c;
        }
    }
    if (!a) {
        return b;
    }
    if (!b) {
        return a;
    }
    return std::min(*a, *b);
}

bool Datapath::send_ip(std::span<std::uint8_t> frame, const wire::Gid& dst, engine::Clock::time_point now) {
    if (port_.has_wire() && neighbours_.is_ours(dst) && frame.size() >= sizeof(wire::EthHdr)) {
        const wire::MacAddr ours = port_.mac();
        std::memcpy(frame.data(), ours.data(), ours.size());  // Ethernet destination first, as on the wire
        to_self_.emplace_back(frame.begin(), frame.end());
        if (capture_ != nullptr && capture_->active()) [[unlikely]] {
            capture_->record(CaptureDirection::Sent, frame);
        }
        return true;
    }
    // A frame too long for the port is refused for good (counted in the
    // port's tx_dropped): the engine must not hold it, waiting for room.
    const bool can_ever_go = frame.size() <= port_.max_frame();
    const bool taken = neighbours_.send_ip(frame, dst, now);
    if (taken && port_.has_wire() && !engine_->multicast().members(dst).empty()) {
        keep_multicast_copy(frame);  // once: a refused frame is offered again
    }
    return taken || !can_ever_go;
}

void Datapath::keep_multicast_copy(std::span<const std::uint8_t> frame) {
    if (frame.size() < sizeof(wire::EthHdr)) {
        return;
    }
    // The frame as it went to the wire, the group's MAC its Ethernet destination.
    to_self_.emplace_back(frame.begin(), frame.end());
}

dma::ClientMemory* Datapath::memory_of(std::uint32_t client) {
    if (last_memory_ != nullptr && client == last_client_) {
        return last_memory_;
    }
    auto it = memories_.find(client);
    if (it == memories_.end()) {
        return nullptr;
    }
    last_client_ = client;
    last_memory_ = it->second.get();
    return last_memory_;
}

void Datapath::on_client(std::uint32_t client) {
    last_memory_ = nullptr;
    memories_[client] = std::make_unique<dma::ClientMemory>(UniqueFd{});
}

bool Datapath::on_client_memory(std::uint32_t client, UniqueFd process_memory) {
    dma::ClientMemory* m = memory_of(client);
    return m != nullptr && m->attach(std::move(process_memory));
}

void Datapath::on_client_gone(std::uint32_t client) {
    // Everything the client owned leaves the engine before its rings are
    // unmapped and its memory forgotten.
    auto remove_owned = [client](auto& objects, auto remove) {
        std::erase_if(objects, [&](const auto& entry) {
            if (entry.second->owner != client) {
                return false;
            }
            remove(entry.first);
            return true;
        });
    };
    remove_owned(qps_, [this](std::uint32_t qpn) {
        engine_->remove_qp(Qpn{qpn});
        peer_qps_.erase(qpn);
    });
    remove_owned(srqs_, [this](std::uint32_t srq) { engine_->remove_srq(SrqHandle{srq}); });
    remove_owned(cqs_, [this](std::uint32_t cq) { engine_->remove_cq(CqHandle{cq}); });
    // Its mappings go with its ClientMemory; keep its DMA counters for stats.
    if (auto m = memories_.find(client); m != memories_.end()) {
        add_to(departed_dma_, m->second->counters());
        last_memory_ = nullptr;
        memories_.erase(m);
    }
}

void Datapath::on_cq(std::shared_ptr<const device::CqRings> cq) {
    const int fd = cq->channel_fd >= 0 ? ::dup(cq->channel_fd) : -1;
    const auto stamp = (cq->flags & UROCE_CQ_TIMESTAMPS) != 0 ? engine::CompletionStamp::Times
                                                              : engine::CompletionStamp::None;
    engine_->add_cq(CqHandle{cq->handle}, ClientId{cq->owner}, engine::CqRing(cq->header, cq->entries), fd, cq->cookie,
                    stamp);
    cqs_[cq->handle] = std::move(cq);
}

void Datapath::on_qp(std::shared_ptr<const device::QpRings> q) {
    engine::QpSetup s;
    s.qpn = q->qpn;
    s.owner = q->owner;
    s.pd = q->pd;
    s.type = q->type;
    s.send_cq = q->send_cq;
    s.recv_cq = q->recv_cq;
    s.srq = q->srq;
    s.sq_sig_all = q->sq_sig_all;
    s.xrc_domain = q->xrc_domain;
    s.cookie = q->cookie;
    s.sq = view(q->sq);
    s.rq = view(q->rq);
    engine_->add_qp(s);
    qps_[q->qpn] = std::move(q);
}

void Datapath::on_srq(std::shared_ptr<const device::SrqRings> srq, std::uint32_t limit) {
    engine_->add_srq(SrqHandle{srq->handle}, ClientId{srq->owner}, PdHandle{srq->pd}, view(srq->ring), srq->cookie,
                     limit, engine::XrcSrq{srq->xrc_domain, CqHandle{srq->cq}});
    srqs_[srq->handle] = std::move(srq);
}

int Datapath::on_resize_cq(std::shared_ptr<const device::CqRings> cq) {
    const int err = engine_->resize_cq(CqHandle{cq->handle}, engine::CqRing(cq->header, cq->entries));
    if (err == 0) {
        cqs_[cq->handle] = std::move(cq);
    }
    return err;
}

void Datapath::on_destroy_cq(std::uint32_t cq) {
    engine_->remove_cq(CqHandle{cq});
    cqs_.erase(cq);
}

void Datapath::on_destroy_qp(std::uint32_t qpn) {
    engine_->remove_qp(Qpn{qpn});
    qps_.erase(qpn);
    peer_qps_.erase(qpn);
}

void Datapath::on_destroy_srq(std::uint32_t srq) {
    engine_->remove_srq(SrqHandle{srq});
    srqs_.erase(srq);
}

dma::DmaCounters Datapath::dma_counters() const {
    dma::DmaCounters sum = departed_dma_;
    for (const auto& [client, m] : memories_) {
        add_to(sum, m->counters());
    }
    return sum;
}

std::size_t Datapath::shared_mappings() const {
    std::size_t n = 0;
    for (const auto& [client, m] : memories_) {
        n += m->shared_mappings();
    }
    return n;
}

std::optional<dma::Way> Datapath::way_of(std::uint32_t client, std::uint64_t addr, std::uint64_t length) const {
    auto it = memories_.find(client);
    if (it == memories_.end()) {
        return std::nullopt;
    }
    return it->second->way(addr, length);
}

}  // namespace uroce::daemon
