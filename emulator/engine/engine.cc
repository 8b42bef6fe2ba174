#include "engine/engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "common/epoch.h"
#include "wire/parse.h"

namespace uroce::engine {

namespace {

// Room for the largest frame: 4096-byte payload plus every header, and a
// 9000-byte Ethernet MTU.
constexpr std::size_t kMaxFrame = 9216 + 64;

}  // namespace

Engine::Engine(EngineConfig config, mr::MrTable& mrs, FrameSink& sink,
               std::function<dma::ClientMemory*(std::uint32_t)> memory_of,
               std::function<void(std::uint32_t, std::uint64_t, AsyncEvent)> async_event)
    : config_(std::move(config)), mrs_(mrs), sink_(sink), memory_of_(std::move(memory_of)),
      async_event_(std::move(async_event)), tx_buffer_(kMaxFrame) {}

Engine::~Engine() {
    for (auto& [handle, cq] : cqs_) {
        if (cq.channel_fd >= 0) {
            ::close(cq.channel_fd);
        }
    }
}

// ---- objects ----

void Engine::add_cq(CqHandle handle, ClientId owner, CqRing ring, int channel_fd, std::uint64_t cookie,
                    CompletionStamp stamp) {
    if (channel_fd >= 0) {
        // Never block the engine on a client that stopped reading events.
        const int flags = ::fcntl(channel_fd, F_GETFL);
        if (flags >= 0) {
            ::fcntl(channel_fd, F_SETFL, flags | O_NONBLOCK);
        }
    }
    remove_cq(handle);
    cqs_[handle.value()] = CompletionQueue{owner.value(), ring, channel_fd, cookie, 0, false, stamp};
}

void Engine::remove_cq(CqHandle handle) {
    if (auto it = cqs_.find(handle.value()); it != cqs_.end()) {
        if (it->second.channel_fd >= 0) {
            ::close(it->second.channel_fd);
        }
        cqs_.erase(it);
    }
}

int Engine::resize_cq(CqHandle handle, CqRing ring) {
    auto it = cqs_.find(handle.value());
    if (it == cqs_.end() || !it->second.ring.move_unread_to(ring)) {
        return EINVAL;
    }
    it->second.ring = ring;
    return 0;
}

void Engine::add_srq(SrqHandle handle, ClientId owner, PdHandle pd, WorkRing ring, std::uint64_t cookie,
                     std::uint32_t limit, XrcSrq xrc) {
    srqs_[handle.value()] = SharedReceiveQueue{owner.value(), pd.value(), ring, cookie, limit, 0, {}, xrc};
}

void Engine::set_srq_limit(SrqHandle handle, std::uint32_t limit) {
    if (auto it = srqs_.find(handle.value()); it != srqs_.end()) {
        it->second.limit = limit;
    }
}

void Engine::remove_srq(SrqHandle handle) { srqs_.erase(handle.value()); }

void Engine::add_ah(std::uint32_t handle, const qp::AhAttr& attr) { ahs_[handle] = attr; }

void Engine::remove_ah(std::uint32_t handle) { ahs_.erase(handle); }

void Engine::add_qp(const QpSetup& s) {
    auto qp = std::make_unique<QueuePair>();
    static_cast<QpSetup&>(*qp) = s;
    // Both XRC halves run as RC QPs with their role (queue_pair.h).
    if (s.type == qp::QpType::XrcIni || s.type == qp::QpType::XrcTgt) {
        qp->xrc = s.type == qp::QpType::XrcIni ? XrcRole::Initiator : XrcRole::Target;
        qp->type = qp::QpType::Rc;
    }
    qp->wqes.resize(std::max<std::uint32_t>(s.sq.entries(), 1));
    for (auto& w : qp->wqes) {
        w.sge.reserve(s.sq.max_sge());
    }
    qp->recv.sge.reserve(s.rq.valid() ? s.rq.max_sge() : 32);
    // RoCEv2 A17.5.2.1: the UDP source port is flow entropy from 0xC000 up;
    // spread QPs over it so ECMP and RSS can tell flows apart.
    qp->udp_src_port = static_cast<std::uint16_t>(0xC000 | ((s.qpn * 0x9E37u) & 0x3FFF));
    qp->window = CongestionWindow(config_.send_window, config_.initial_window);
    qps_[s.qpn] = std::move(qp);
    rebuild_order();
}

void Engine::rebuild_order() {
    order_.clear();
    for (auto& [qpn, qp] : qps_) {
        order_.push_back(qp.get());
    }
    std::sort(order_.begin(), order_.end(), [](const QueuePair* a, const QueuePair* b) { return a->qpn < b->qpn; });
    next_turn_ = 0;
}

void Engine::modify_qp(Qpn qpn, const qp::QpAttr& attr, std::uint32_t mask) {
    auto it = qps_.find(qpn.value());
    if (it == qps_.end()) {
        return;
    }
    QueuePair& qp = *it->second;
    const qp::QpState old_state = qp.attr.state;
    qp.attr = attr;
    qp.mtu = qp::mtu_bytes(attr.path_mtu) != 0 ? qp::mtu_bytes(attr.path_mtu) : 1024;
    if (qp.type == qp::QpType::Ud) {
        qp.mtu = 4096;  // bounded by the port; checked per send against the frame size
    }
    if ((mask & qp::AttrMask::kRqPsn) != 0) {
        qp.epsn = wire::Psn(attr.rq_psn);
    }
    if ((mask & qp::AttrMask::kSqPsn) != 0) {
        qp.next_psn = wire::Psn(attr.sq_psn);
        qp.unacked = qp.next_psn;
        qp.sent_high = qp.next_psn;
    }
    if ((mask & qp::AttrMask::kRetryCnt) != 0) {
        qp.retry_left = attr.retry_cnt;
    }
    if ((mask & qp::AttrMask::kRnrRetry) != 0) {
        qp.rnr_retry_left = attr.rnr_retry;
    }
    if ((mask & qp::AttrMask::kMaxDestRdAtomic) != 0 || qp.resources.empty()) {
        qp.resources.assign(std::max<std::size_t>(attr.max_dest_rd_atomic, 1), ResponderResource{});
        qp.next_resource = 0;
    }
    if ((mask & qp::AttrMask::kState) == 0) {
        return;
    }
    if (attr.state == qp::QpState::Reset) {
        // Back to RESET: forget everything in flight (ibv_modify_qp(3)). The
        // rings restart empty; the provider resets its indices as well.
        const QpSetup s = qp;  // the identity and wiring, nothing in flight
        const std::uint32_t sq_producer = qp.sq.valid() ? qp.sq.producer() : 0;
        const std::uint32_t rq_producer = qp.rq.valid() ? qp.rq.producer() : 0;
        add_qp(s);
        QueuePair& fresh = *qps_[qpn.value()];
        fresh.attr = attr;
        fresh.fetched = fresh.retired = fresh.sending = sq_producer;
        if (fresh.sq.valid()) {
            fresh.sq.publish_consumer(sq_producer);
            fresh.sq.clear_error();
        }
        if (fresh.rq.valid()) {
            fresh.rq.publish_consumer(rq_producer);
            fresh.rq.clear_error();
        }
        fresh.rq_consumed = rq_producer;
        return;
    }
    if (attr.state == qp::QpState::Err && old_state != qp::QpState::Err) {
        move_to_error(qp, Clock::now());
    }
}

std::optional<qp::QpState> Engine::qp_state(Qpn qpn) const {
    if (auto it = qps_.find(qpn.value()); it != qps_.end()) {
        return it->second->attr.state;
    }
    return std::nullopt;
}

void Engine::remove_qp(Qpn qpn) {
    multicast_.detach_all(qpn.value());
    qps_.erase(qpn.value());
    rebuild_order();
}

dma::ClientMemory* Engine::memory(std::uint32_t owner) const { return memory_of_ ? memory_of_(owner) : nullptr; }

// ---- polling ----

bool Engine::poll(Clock::time_point now) {
    bool worked = send_held(now);
    // ACKs first: they are small and open the peers' windows.
    for (QueuePair* qp : order_) {
        responder_poll(*qp, now);
    }
    // Then requests and READ responses, the QPs taking turns: each sends at
    // most packets_per_poll, and when the port fills up the next poll starts
    // with the QP after the one that filled it, so every QP gets the port in
    // turn (docs/congestion.md).
    share_engine_window();
    const std::size_t count = order_.size();
    const std::size_t first = count == 0 ? 0 : next_turn_ % count;
    for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = (first + k) % count;
        QueuePair& qp = *order_[i];
        const bool was_blocked = tx_blocked();
        worked |= requester_poll(qp, now);
        if (!qp.pending_reads.empty() && qp.attr.state != qp::QpState::Err) {
            send_read_responses(qp, now);
            worked = true;
        }
        if (tx_blocked() && !was_blocked) {
            next_turn_ = i + 1;
        }
    }
    // Held frames keep the daemon polling until the port takes them.
    return worked || tx_blocked();
}

void Engine::share_engine_window() {
    std::uint32_t busy = 0;
    for (QueuePair* qp : order_) {
        if (qp->type == qp::QpType::Rc && qp->sq.valid() &&
            (qp->retired != qp->fetched || qp->sq.producer() != qp->fetched)) {
            ++busy;
        }
    }
    // Never below the initial window: smaller READ parts and fewer packets
    // per round trip cost more than the losses they would save.
    window_share_ = std::max<std::uint32_t>(config_.engine_window / std::max<std::uint32_t>(busy, 1),
                                            config_.initial_window);
}

bool Engine::send_held(Clock::time_point now) {
    bool sent = false;
    while (!held_.empty()) {
        HeldFrame& h = held_.front();
        if (!sink_.send_ip(std::span<std::uint8_t>(h.bytes), h.dst, now)) {
            break;
        }
        const std::optional<std::uint32_t> request_of = h.request_of;
        held_.pop_front();
        if (request_of) {
            held_request_left(*request_of, now);
        }
        sent = true;
    }
    return sent;
}

void Engine::arm_doorbells() {
    for (auto& [qpn, qp] : qps_) {
        if (qp->sq.valid()) {
            qp->sq.arm_doorbell();
        }
        if (qp->rq.valid()) {
            qp->rq.arm_doorbell();
        }
    }
    for (auto& [handle, srq] : srqs_) {
        srq.ring.arm_doorbell();
    }
}

std::optional<Clock::time_point> Engine::next_deadline() const {
    std::optional<Clock::time_point> next;
    auto consider = [&next](const std::optional<Clock::time_point>& t) {
        if (t && (!next || *t < *next)) {
            next = t;
        }
    };
    for (const auto& [qpn, qp] : qps_) {
        consider(qp->retransmit_at);
        consider(qp->rnr_resume_at);
    }
    return next;
}

// ---- frames ----

bool Engine::fill_path(const QueuePair& qp, const qp::AhAttr& path, wire::PacketFields& f) const {
    if (path.sgid_index >= config_.gids.size()) {
        return false;
    }
    const wire::Gid& sgid = config_.gids[path.sgid_index].gid;
    std::copy(path.dgid.begin(), path.dgid.end(), f.ip.dst.begin());
    f.ip.src = sgid;
    f.ip.version = wire::is_ipv4_mapped(sgid) ? wire::IpVersion::V4 : wire::IpVersion::V6;
    f.ip.traffic_class = path.traffic_class;
    f.ip.ttl = path.hop_limit != 0 ? path.hop_limit : 64;
    f.ip.flow_label = path.flow_label;
    f.eth.src = config_.mac;
    f.udp.src_port = qp.udp_src_port;
    return true;
}

Engine::TxOutcome Engine::send_frame(QueuePair& qp, wire::PacketFields& f,
                                     std::span<const std::uint8_t> payload_in_place, Clock::time_point now) {
    (void)qp;
    f.payload = payload_in_place;
    // A payload was placed in the room frame_room() chose; a frame without
    // one chooses its room now.
    const std::span<std::uint8_t> out = payload_in_place.empty() ? frame_room(f, 0) : room_;
    // In the port's room, with nothing to read it, the ICRC pass is left
    // out (net::Port::icrc_unread); a frame the engine keeps gets one.
    const wire::Icrc icrc = room_is_ports_ && sink_.icrc_unread() ? wire::Icrc::LeaveOut : wire::Icrc::Compute;
    const wire::BuildResult r = wire::build_frame(f, out, icrc);
    if (r.status != wire::BuildStatus::Ok) {
        drop(DropReason::FrameNotBuilt);
        return TxOutcome::Dropped;
    }
    ++counters_.tx_packets;
    const std::span<std::uint8_t> frame(out.data(), r.length);
    // Frames leave in the order they were made: nothing overtakes a held one.
    if (held_.empty() && sink_.send_ip(frame, f.ip.dst, now)) {
        return TxOutcome::Sent;
    }
    if (held_.size() >= config_.max_held_frames) {
        drop(DropReason::HeldFramesFull);
        return TxOutcome::Dropped;
    }
    ++counters_.tx_deferred;
    if (icrc == wire::Icrc::LeaveOut) {
        wire::seal_icrc(frame);  // offered again later as a copy, which is checked
    }
    held_.push_back(HeldFrame{std::vector<std::uint8_t>(frame.begin(), frame.end()), f.ip.dst, std::nullopt});
    return TxOutcome::Held;
}

std::span<std::uint8_t> Engine::frame_room(const wire::PacketFields& f, std::size_t payload_length) {
    // Payload, at most 3 bytes of pad and the 4-byte ICRC (IBA 9.8.3).
    constexpr std::size_t kPadAndIcrc = 3 + 4;
    const std::span<std::uint8_t> port_room = sink_.tx_room();
    const bool fits = port_room.size() >= wire::payload_offset(f) + payload_length + kPadAndIcrc;
    room_ = fits ? port_room : std::span<std::uint8_t>(tx_buffer_);
    room_is_ports_ = fits;
    return room_;
}

// ---- DMA between SGE lists and packets ----

template <typename Move>
WcStatus Engine::walk_sges(const QueuePair& qp, std::span<const Sge> sges, std::uint64_t offset, std::size_t length,
                           bool device_writes, Move move) {
    dma::ClientMemory* mem = memory(qp.dma_owner());
    if (mem == nullptr) {
        return WcStatus::LocProtErr;
    }
    EpochGuard guard(mrs_.epoch());
    std::size_t done = 0;
    for (const Sge& s : sges) {
        if (done == length) {
            break;
        }
        if (offset >= s.length) {
            offset -= s.length;
            continue;
        }
        const std::uint64_t n = std::min<std::uint64_t>(s.length - offset, length - done);
        const mr::Translation t = mrs_.check_local(guard, MrKey{s.lkey}, PdHandle{qp.pd}, s.addr + offset, n, device_writes,
                                                         Qpn{qp.qpn});
        if (!t.ok()) {
            return mr::info(t.status).wc_status;
        }
        if (move(*mem, t.host_addr, done, static_cast<std::size_t>(n)) != 0) {
            ++counters_.dma_faults;
            return WcStatus::LocProtErr;
        }
        done += n;
        offset = 0;
    }
    return done == length ? WcStatus::Success : WcStatus::LocLenErr;
}

WcStatus Engine::scatter(const QueuePair& qp, std::span<const Sge> sges, std::uint64_t offset,
                         std::span<const std::uint8_t> data) {
    return walk_sges(qp, sges, offset, data.size(), /*device_writes=*/true,
                     [&](dma::ClientMemory& mem, std::uint64_t host, std::size_t at, std::size_t n) {
                         return mem.write(host, data.data() + at, n);
                     });
}

WcStatus Engine::gather(const QueuePair& qp, const SendWqe& w, std::uint64_t offset, std::span<std::uint8_t> out) {
    if (w.is_inline) {
        if (offset + out.size() > w.inline_data.size()) {
            return WcStatus::LocLenErr;
        }
        std::copy_n(w.inline_data.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
        return WcStatus::Success;
    }
    return walk_sges(qp, w.sge, offset, out.size(), /*device_writes=*/false,
                     [&](dma::ClientMemory& mem, std::uint64_t host, std::size_t at, std::size_t n) {
                         return mem.read(host, out.data() + at, n);
                     });
}

// ---- errors ----

void Engine::move_to_error(QueuePair& qp, Clock::time_point now) {
    (void)now;
    qp.attr.state = qp::QpState::Err;
    qp.retransmit_at.reset();
    qp.rnr_resume_at.reset();
    qp.pending_reads.clear();
    qp.ack_pending = false;
    if (qp.sq.valid()) {
        qp.sq.mark_error();
    }
    if (qp.rq.valid()) {
        qp.rq.mark_error();
    }
    flush_send_queue(qp);
    flush_receive_queue(qp);
    // A QP that takes its receive WQEs from an SRQ (an XRC target takes them
    // from its domain's XRC SRQs) tells its owner that it will consume no
    // more: IBV_EVENT_QP_LAST_WQE_REACHED (IBA 10.2.9.5 / 11.6.3.1, which
    // the kernel's providers raise on entering the error state).
    if ((qp.srq != 0 || qp.xrc == XrcRole::Target) && async_event_) {
        async_event_(qp.owner, qp.cookie, AsyncEvent::QpLastWqeReached);
    }
}

}  // namespace uroce::engine
