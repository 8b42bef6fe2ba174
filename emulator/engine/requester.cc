// The requester: turns send-queue WQEs into packets (IBA 9.7.4, C9-87 on
// segmentation by path MTU), keeps the retransmit and RNR timers, goes back
// to a PSN when told to (timeout, PSN-sequence NAK, RNR NAK) and retires
// WQEs in order once the completer marks them done.
#include <algorithm>

#include "engine/engine.h"

#include "common/epoch.h"
#include "wire/opcode.h"

namespace uroce::engine {

namespace {


wire::Transport transport_of(qp::QpType t) {
    switch (t) {
        case qp::QpType::Rc:
            return wire::Transport::RC;
        case qp::QpType::Uc:
            return wire::Transport::UC;
        case qp::QpType::Ud:
            return wire::Transport::UD;
        case qp::QpType::XrcIni:
        case qp::QpType::XrcTgt:
            return wire::Transport::XRC;
    }
    return wire::Transport::None;
}

// What packet `index` of `count` of `w` is (IBA 9.7.4): its segment, and the
// immediate or invalidate the last packet carries. Its opcode comes from the
// table (wire::find_opcode).
wire::OpcodeKey packet_key(qp::QpType type, const SendWqe& w, std::uint32_t index, std::uint32_t count) {
    const bool first = index == 0;
    const bool last = index + 1 == count;
    wire::OpcodeKey k;
    k.transport = transport_of(type);
    k.segment = first && last ? wire::Segment::Only
                : first       ? wire::Segment::First
                : last        ? wire::Segment::Last
                              : wire::Segment::Middle;
    switch (w.opcode) {
        case WrOpcode::Send:
        case WrOpcode::SendWithImm:
        case WrOpcode::SendWithInv:
            k.operation = wire::Operation::Send;
            k.immediate = last && w.opcode == WrOpcode::SendWithImm;
            k.invalidate = last && w.opcode == WrOpcode::SendWithInv;
            break;
        case WrOpcode::RdmaWrite:
        case WrOpcode::RdmaWriteWithImm:
            k.operation = wire::Operation::RdmaWrite;
            k.immediate = last && w.opcode == WrOpcode::RdmaWriteWithImm;
            break;
        case WrOpcode::RdmaRead:
            k.operation = wire::Operation::RdmaReadRequest;
            k.segment = wire::Segment::Only;
            break;
        case WrOpcode::AtomicCmpAndSwp:
            k.operation = wire::Operation::CompareSwap;
            k.segment = wire::Segment::Only;
            break;
        case WrOpcode::AtomicFetchAndAdd:
            k.operation = wire::Operation::FetchAdd;
            k.segment = wire::Segment::Only;
            break;
        case WrOpcode::LocalInv:
        case WrOpcode::BindMw:
            break;  // local: never sent (no opcode)
    }
    return k;
}

}  // namespace

void Engine::fetch_new_wqes(QueuePair& qp, Clock::time_point now) {
    const std::uint32_t produced = qp.sq.producer();
    // A producer more than a ring ahead of what we retired is garbage: the
    // provider never posts into slots we have not freed. So is one behind
    // what we fetched: posts are never taken back (and the loop below would
    // run 2^32 times).
    if (produced - qp.retired > qp.sq.entries() || produced - qp.retired < qp.fetched - qp.retired) {
        ++counters_.bad_wqes;
        qp.fetched = qp.retired;
        move_to_error(qp, now);
        return;
    }
    while (qp.fetched != produced) {
        SendWqe& w = qp.wqe(qp.fetched);
        const WqeProblem problem = fetch_send_wqe(qp.sq, qp.fetched, qp.type, qp.scratch, w);
        ++qp.fetched;
        if (!problem.empty()) {
            ++counters_.bad_wqes;
            // A malformed WQE completes in error and takes its QP (only) to
            // the error state (IBA 10.8.3.1: local QP operation error).
            w.status = WcStatus::LocQpOpErr;
            w.started = true;
            w.done = true;
            if (qp.attr.state != qp::QpState::Err) {
                // Everything before it still completes normally once acked;
                // it and everything after are flushed.
                qp.sending = qp.fetched;
                move_to_error(qp, now);
            }
        }
    }
}

bool Engine::start_wqe(QueuePair& qp, SendWqe& w, Clock::time_point now) {
    if ((w.flags & SendFlag::kFence) != 0 && qp.rd_atomic_in_flight > 0) {
        return false;  // IBV_SEND_FENCE: wait for earlier READs and atomics
    }
    if (w.is_read_or_atomic()) {
        if (qp.rd_atomic_in_flight >= std::max<std::uint32_t>(qp.attr.max_rd_atomic, 1)) {
            return false;  // max_rd_atomic outstanding already
        }
    }
    switch (w.opcode) {
        case WrOpcode::LocalInv: {
            const int err = mrs_.invalidate(w.imm, qp.pd, std::nullopt);
            w.status = err == 0 ? WcStatus::Success : WcStatus::LocQpOpErr;
            w.started = w.done = true;
            w.packets = 0;
            if (err != 0) {
                move_to_error(qp, now);
            }
            return true;
        }
        case WrOpcode::BindMw: {
            mr::BindRequest b;
            b.owner = qp.owner;
            b.mw_key = w.bind_mw_rkey;
            b.mr_lkey = w.bind_mr_lkey;
            b.addr = w.bind_addr;
            b.length = w.bind_length;
            b.access = w.bind_access;
            b.qpn = qp.qpn;
            b.qp_pd = qp.pd;
            const int err = mrs_.bind_mw_posted(b);
            w.status = err == 0 ? WcStatus::Success : WcStatus::MwBindErr;
            w.started = w.done = true;
            w.packets = 0;
            if (err != 0) {
                move_to_error(qp, now);
            }
            return true;
        }
        default:
            break;
    }
    if (qp.type == qp::QpType::Ud) {
        w.packets = 1;
    } else if (w.opcode == WrOpcode::AtomicCmpAndSwp || w.opcode == WrOpcode::AtomicFetchAndAdd) {
        w.packets = 1;
    } else {
        w.packets = static_cast<std::uint32_t>(std::max<std::uint64_t>((w.length + qp.mtu - 1) / qp.mtu, 1));
    }
    if (w.is_read_or_atomic()) {
        ++qp.rd_atomic_in_flight;
    }
    w.first_psn = qp.next_psn;
    qp.next_psn += w.packets;
    w.started = true;
    return true;
}

bool Engine::send_packet(QueuePair& qp, SendWqe& w, Clock::time_point now) {
    wire::PacketFields f;
    const qp::AhAttr* path = &qp.attr.ah_attr;
    if (qp.type == qp::QpType::Ud) {
        auto it = ahs_.find(w.ah);
        if (it == ahs_.end()) {
            complete_wqe_error(qp, w, WcStatus::LocQpOpErr, now);
            return false;
        }
        path = &it->second;
    }
    if (!fill_path(qp, *path, f)) {
        complete_wqe_error(qp, w, WcStatus::LocQpOpErr, now);
        return false;
    }
    const std::uint32_t index = qp.sent_packets;
    const std::uint32_t count = w.packets;
    const qp::QpType transport = qp.xrc == XrcRole::Initiator ? qp::QpType::XrcIni : qp.type;
    const std::optional<std::uint8_t> opcode = wire::find_opcode(packet_key(transport, w, index, count));
    if (!opcode) {
        complete_wqe_error(qp, w, WcStatus::LocQpOpErr, now);  // no such packet on this transport
        return false;
    }
    f.bth.opcode = *opcode;
    f.bth.dest_qp = qp.type == qp::QpType::Ud ? w.remote_qpn : qp.attr.dest_qp_num;
    f.bth.psn = w.first_psn + index;
    f.ext.xrc_srq = w.xrc_srqn;  // written only by XRC opcodes
    const wire::OpcodeInfo& info = wire::opcode_info(f.bth.opcode);
    const bool last = index + 1 == count || w.is_read_or_atomic();
    f.bth.solicited = last && (w.flags & SendFlag::kSolicited) != 0 &&
                      (info.operation == wire::Operation::Send || info.has_immediate);
    if (qp.type == qp::QpType::Rc) {
        // Ask for an ACK on every last packet, every ack_request_every
        // packets (or every half window, when the window is smaller), and on
        // the packet that fills the window: the ACK is what opens it again.
        const std::uint32_t window = usable_window(qp);
        const std::uint32_t every = std::max<std::uint32_t>(std::min(config_.ack_request_every, window / 2), 1);
        const bool fills_window =
            distance(f.bth.psn, qp.unacked) + 1 >= static_cast<std::int32_t>(window);
        f.bth.ack_req = last || (index + 1) % every == 0 || fills_window;
    }
    if (info.has(wire::Ext::Deth)) {
        // IBA 10.2.4: a Q_Key with the high bit set means "use the QP's own".
        f.ext.deth.qkey = (w.remote_qkey & 0x80000000u) != 0 ? qp.attr.qkey : w.remote_qkey;
        f.ext.deth.src_qp = qp.qpn;
    }
    std::uint64_t offset = std::uint64_t{index} * qp.mtu;
    if (info.has(wire::Ext::Reth)) {
        f.ext.reth.va = w.remote_addr + offset;
        f.ext.reth.rkey = w.rkey;
        std::uint64_t length = w.length - std::min(w.length, offset);
        if (w.opcode == WrOpcode::RdmaRead && qp.type == qp::QpType::Rc) {
            // A READ longer than the window is asked for in parts (docs/congestion.md).
            length = std::min<std::uint64_t>(length, std::uint64_t{read_part(qp, w)} * qp.mtu);
        }
        f.ext.reth.dma_length = static_cast<std::uint32_t>(length);
    }
    if (info.has(wire::Ext::AtomicEth)) {
        f.ext.atomic_eth.va = w.remote_addr;
        f.ext.atomic_eth.rkey = w.rkey;
        f.ext.atomic_eth.swap_add = w.opcode == WrOpcode::AtomicCmpAndSwp ? w.swap : w.compare_add;
        f.ext.atomic_eth.compare = w.opcode == WrOpcode::AtomicCmpAndSwp ? w.compare_add : 0;
    }
    if (info.has_immediate) {
        f.ext.immediate = __builtin_bswap32(w.imm);  // the WQE holds it in network order
    }
    if (info.has_invalidate) {
        f.ext.invalidate_rkey = w.imm;
    }
    std::span<const std::uint8_t> payload;
    if (info.payload_allowed && w.opcode != WrOpcode::RdmaRead) {
        const std::uint64_t len = std::min<std::uint64_t>(qp.mtu, w.length - std::min(w.length, offset));
        if (qp.type == qp::QpType::Ud && w.length > qp.mtu) {
            complete_wqe_error(qp, w, WcStatus::LocLenErr, now);
            return false;
        }
        if (len > 0) {
            const std::size_t at = wire::payload_offset(f);
            std::span<std::uint8_t> room(frame_room(f, len).data() + at, len);
            const WcStatus st = gather(qp, w, offset, room);
            if (st != WcStatus::Success) {
                complete_wqe_error(qp, w, st, now);
                return false;
            }
            payload = room;
        }
    }
    const TxOutcome outcome = send_frame(qp, f, payload, now);
    note_sent(qp, w, f.bth.psn);
    if (qp.type == qp::QpType::Rc) {
        start_ack_timer(qp, outcome, now);
    }
    return true;
}

// IBA 9.7.6.1.3 (C9-140): the local ACK timer measures from when a request
// went on the wire. A frame the port took starts it (if it is not running);
// one the port refused starts it when it leaves (held_request_left). A
// dropped frame is as good as lost on the wire: the timer recovers it.
void Engine::start_ack_timer(QueuePair& qp, TxOutcome outcome, Clock::time_point now) {
    switch (outcome) {
        case TxOutcome::Held:
            held_.back().request_of = qp.qpn;
            ++qp.requests_held;
            return;
        case TxOutcome::Sent:
        case TxOutcome::Dropped:
            if (!qp.retransmit_at) {
                qp.restart_retransmit_timer(now);
            }
            return;
    }
}

void Engine::held_request_left(std::uint32_t qpn, Clock::time_point now) {
    const auto it = qps_.find(qpn);
    if (it == qps_.end()) {
        return;  // destroyed while its frame waited
    }
    QueuePair& qp = *it->second;
    if (qp.requests_held > 0) {
        --qp.requests_held;
    }
    // Restarted, not only started: a timer started by an earlier frame of
    // the QP may have run out while this one waited for the port.
    if (qp.attr.state != qp::QpState::Err && qp.unacked != qp.next_psn) {
        qp.restart_retransmit_timer(now);
    }
}

void Engine::keep_ack_timer(QueuePair& qp, Clock::time_point now) {
    // Work outstanding and no timer: it was stopped while the port held the
    // QP back (requester_timers). Once the QP had its turn with the port
    // free, it runs again from now; whatever the QP sent in that turn has
    // started it already.
    if (qp.type == qp::QpType::Rc && !qp.retransmit_at && qp.unacked != qp.next_psn && qp.requests_held == 0 &&
        !tx_blocked() && qp.can_send() && !qp.rnr_resume_at) {
        qp.restart_retransmit_timer(now);
    }
}

bool Engine::window_allows(const QueuePair& qp, const SendWqe& w) const {
    if (w.opcode == WrOpcode::RdmaRead) {
        if (qp.sent_packets > w.received) {
            return false;  // a part of this READ is still coming: one part at a time
        }
        // Each part is a READ request of its own and takes one of the
        // responder's max_dest_rd_atomic resources, oldest first. Parts go
        // only once every older READ has all its responses, so they never
        // push out the resource of a READ that may still be asked for again.
        // (Asking again takes no resource: the responder replays it.)
        const bool asked_before = w.first_psn + qp.sent_packets < qp.sent_high;
        if (!asked_before && read_part(qp, w) < w.packets - qp.sent_packets && older_read_outstanding(qp, w)) {
            return false;
        }
    }
    const wire::Psn psn = w.first_psn + qp.sent_packets;
    const std::int32_t in_flight = distance(psn, qp.unacked);
    if (in_flight <= 0) {
        return true;  // nothing unacknowledged: one packet (or one READ part) always goes
    }
    return static_cast<std::uint32_t>(in_flight) < usable_window(qp);
}

bool Engine::older_read_outstanding(const QueuePair& qp, const SendWqe& w) const {
    const std::uint32_t mask = qp.sq.entries() - 1;
    for (std::uint32_t i = qp.retired; &qp.wqes[i & mask] != &w; ++i) {
        const SendWqe& older = qp.wqes[i & mask];
        if (older.opcode == WrOpcode::RdmaRead && !older.done) {
            return true;
        }
    }
    return false;
}

ReadAsking Engine::read_asking(const SendWqe& w) const {
    // A READ's range is checked by the responder only as far as one request
    // names it (IBA 9.7.5.2.4, 10.6.7): asked for in parts, a READ ending
    // past the peer's MR had its first parts' data placed before a later part
    // was refused with REMOTE_ACCESS_ERR. Within the initial window, which
    // every QP may always have in flight (share_engine_window), a READ is one
    // request like on any RC device (IBA 9.4.5), so a refused READ changes no
    // byte of its local buffer.
    return w.packets <= config_.initial_window ? ReadAsking::Whole : ReadAsking::InParts;
}

std::uint32_t Engine::read_part(const QueuePair& qp, const SendWqe& w) const {
    std::uint32_t rest = w.packets - qp.sent_packets;
    if (read_asking(w) == ReadAsking::Whole) {
        return rest;  // asked again too: to the end, as it was asked first
    }
    // Asking again for responses already asked for: stop where the earlier
    // requests stopped. The responder replays a duplicate only from its saved
    // resources; a request reaching past them would get a short answer and
    // wait a timeout for the rest. What follows is asked for as a new part.
    const wire::Psn psn = w.first_psn + qp.sent_packets;
    if (psn < qp.sent_high) {
        rest = std::min(rest, static_cast<std::uint32_t>(distance(qp.sent_high, psn)));
    }
    const std::int32_t in_flight = std::max(distance(w.first_psn + qp.sent_packets, qp.unacked), 0);
    const std::uint32_t window = usable_window(qp);
    const std::uint32_t room = window > static_cast<std::uint32_t>(in_flight) ? window - in_flight : 1;
    return std::min(rest, room);
}

bool Engine::requester_poll(QueuePair& qp, Clock::time_point now) {
    if (!qp.sq.valid()) {
        return false;
    }
    bool worked = false;
    requester_timers(qp, now);
    if (qp.sq.producer() != qp.fetched) {
        fetch_new_wqes(qp, now);
        worked = true;
    }
    if (qp.attr.state == qp::QpState::Err) {
        if (qp.retired != qp.fetched) {
            flush_send_queue(qp);
            worked = true;
        }
        return worked;
    }
    if (!qp.can_send() || qp.rnr_resume_at) {
        retire_done(qp);
        return worked;
    }
    std::uint32_t budget = config_.packets_per_poll;
    while (budget > 0 && qp.sending != qp.fetched && qp.attr.state != qp::QpState::Err && !tx_blocked()) {
        SendWqe& w = qp.wqe(qp.sending);
        if (!w.started) {
            if (qp.attr.state == qp::QpState::Sqd) {
                break;  // SQD (IBA 10.3.1): finish what started, begin nothing new
            }
            if (!start_wqe(qp, w, now)) {
                break;
            }
        }
        if (w.done) {  // local operation, failed, or a READ whose responses all came
            ++qp.sending;
            qp.sent_packets = 0;
            worked = true;
            continue;
        }
        if (w.opcode == WrOpcode::RdmaRead) {
            // A replay may bring more than the part asked for: ask from the
            // first response not received.
            qp.sent_packets = std::max(qp.sent_packets, w.received);
        }
        if (qp.type == qp::QpType::Rc && !window_allows(qp, w)) {
            break;  // window full: wait for ACKs
        }
        const std::uint32_t part = w.opcode == WrOpcode::RdmaRead ? read_part(qp, w) : 1;
        if (!send_packet(qp, w, now)) {
            break;
        }
        --budget;
        worked = true;
        if (w.opcode == WrOpcode::RdmaRead && qp.type == qp::QpType::Rc) {
            qp.sent_packets += part;
            if (qp.sent_packets < w.packets) {
                continue;  // the next part when this one has come
            }
        }
        if (w.is_read_or_atomic()) {
            w.last_sent = true;
            ++qp.sending;
            qp.sent_packets = 0;
            continue;
        }
        if (++qp.sent_packets >= w.packets) {
            w.last_sent = true;
            if (qp.type != qp::QpType::Rc) {
                w.done = true;  // UC and UD complete once sent (IBA 9.8.3, 9.8.4)
            }
            ++qp.sending;
            qp.sent_packets = 0;
        }
    }
    keep_ack_timer(qp, now);
    retire_done(qp);
    return worked;
}

void Engine::retire_done(QueuePair& qp) {
    while (qp.retired != qp.fetched) {
        SendWqe& w = qp.wqe(qp.retired);
        if (!w.done) {
            break;
        }
        // Free the slot before the CQE appears: an application that posts
        // again as soon as it sees the completion must find room
        // (ibv_srq_pingpong runs with one send slot per QP). The engine's
        // own copy of the WQE stays intact until the next fetch.
        ++qp.retired;
        if (static_cast<std::int32_t>(qp.sending - qp.retired) < 0) {
            // The WQE being sent again was acknowledged before its resend
            // went (a go-back-N met an ACK that was late or reordered): go
            // on from the next one. `sending` must never stay on a retired
            // WQE: its slot is freed below and the next fetch fills it with
            // a newer WQE, which would then go out in its place.
            qp.sending = qp.retired;
            qp.sent_packets = 0;
        }
        qp.sq.publish_consumer(qp.retired);
        if (w.signaled(qp.sq_sig_all)) {
            complete_send(qp, w);
        }
    }
}

void Engine::rewind_to(QueuePair& qp, wire::Psn psn) {
    ++counters_.retransmits;
    for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
        SendWqe& w = qp.wqe(i);
        if (!w.started) {
            break;
        }
        if (w.done || w.packets == 0) {
            continue;
        }
        if (psn <= w.last_psn()) {
            qp.sending = i;
            qp.sent_packets = psn >= w.first_psn ? static_cast<std::uint32_t>(distance(psn, w.first_psn)) : 0;
            if (w.opcode == WrOpcode::RdmaRead) {
                qp.sent_packets = w.received;  // READ again from the first byte not yet received
            }
            return;
        }
    }
}

void Engine::requester_timers(QueuePair& qp, Clock::time_point now) {
    if (qp.rnr_resume_at && *qp.rnr_resume_at <= now) {
        qp.rnr_resume_at.reset();
    }
    if (!qp.retransmit_at || *qp.retransmit_at > now) {
        return;
    }
    qp.retransmit_at.reset();
    // Not a timeout while the port holds the QP back: its requests still
    // wait in the engine for the port (their departure starts the timer
    // again), or the port is full and the QP cannot have its turn (the turn
    // starts it again, keep_ack_timer). Local backpressure never costs a retry.
    if (qp.requests_held > 0 || tx_blocked()) {
        return;
    }
    bool outstanding = false;
    SendWqe* oldest = nullptr;
    for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
        SendWqe& w = qp.wqe(i);
        if (!w.started) {
            break;
        }
        if (!w.done && w.packets != 0) {
            outstanding = true;
            oldest = &w;
            break;
        }
    }
    if (!outstanding || qp.attr.state == qp::QpState::Err) {
        return;
    }
    ++counters_.timeouts;
    // IBA 9.7.6.1.3: retry_cnt retries (7 included: only rnr_retry 7 means
    // forever; rdma_rxe retries forever at 7 as well, see docs/congestion.md),
    // then RETRY_EXC_ERR. The timer does not back off: the time to the
    // error stays (retry_cnt + 1) local ACK timeouts after the last
    // progress. What backs off is the volume: the window drops to one packet.
    if (qp.retry_left == 0) {
        complete_wqe_error(qp, *oldest, WcStatus::RetryExcErr, now);
        return;
    }
    --qp.retry_left;
    qp.window.on_timeout(qp.sent_high);
    rewind_to(qp, qp.unacked);
    // The timer starts again when the resend goes on the wire (send_packet,
    // held_request_left, keep_ack_timer), not now: a QP waiting for a
    // transmit turn behind many others must not spend its retries on packets
    // it has not resent.
}

void Engine::note_sent(QueuePair& qp, const SendWqe& w, wire::Psn psn) {
    if (psn < qp.sent_high) {
        ++counters_.retransmitted_packets;
        return;
    }
    // A READ request stands for the PSNs of all the responses it asks for.
    qp.sent_high = (w.opcode == WrOpcode::RdmaRead ? psn + (read_part(qp, w) - 1) : psn) + 1;
}

void Engine::flush_send_queue(QueuePair& qp) {
    // IBA 10.3.1: in the error state every outstanding and newly posted WQE
    // completes with WR_FLUSH_ERR (always generating a CQE).
    if (qp.sq.valid() && qp.sq.producer() != qp.fetched) {
        const std::uint32_t produced = qp.sq.producer();
        if (produced - qp.retired <= qp.sq.entries() && produced - qp.retired >= qp.fetched - qp.retired) {
            while (qp.fetched != produced) {
                SendWqe& w = qp.wqe(qp.fetched);
                if (!fetch_send_wqe(qp.sq, qp.fetched, qp.type, qp.scratch, w).empty()) {
                    w.status = WcStatus::LocQpOpErr;
                }
                w.started = true;
                ++qp.fetched;
            }
        }
    }
    for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
        SendWqe& w = qp.wqe(i);
        if (w.status == WcStatus::Success) {
            w.status = WcStatus::WrFlushErr;  // a WQE that failed keeps its own status
        }
        w.done = true;
    }
    qp.rd_atomic_in_flight = 0;
    qp.sending = qp.fetched;
    qp.sent_packets = 0;
    retire_done(qp);
}

}  // namespace uroce::engine
