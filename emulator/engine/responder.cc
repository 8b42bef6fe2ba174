// The responder: requests arriving at a QP (IBA 9.7.5.1), checked in the
// order of docs/wire.md ("Receiving"): silent drops first (receive()), then PSN (sequence
// NAK once, duplicates re-ACKed or replayed from saved resources, atomics
// never executed twice), opcode sequence, QP access, receive WQE (RNR NAK),
// lengths, rkey; then the data moves and an ACK is due (coalesced: one ACK
// per poll for everything received in order).
#include <algorithm>
#include <cstring>

#include "engine/engine.h"

#include "common/epoch.h"
#include "wire/opcode.h"

namespace uroce::engine {

namespace {

// AETH credit field 0x1F: end-to-end credits not used (IBA 9.7.7.2.5).
constexpr std::uint8_t kUnlimitedCredits = 0x1F;

// The opcodes the responder sends (IBA 9.2 table 38), from the table: an
// XRC target answers with XRC's response opcodes, every other QP with RC's.
wire::Transport response_transport(const QueuePair& qp) {
    return qp.xrc == XrcRole::Target ? wire::Transport::XRC : wire::Transport::RC;
}
std::uint8_t ack_opcode(const QueuePair& qp) {
    return *wire::find_opcode({response_transport(qp), wire::Operation::Acknowledge, wire::Segment::Only});
}
std::uint8_t atomic_ack_opcode(const QueuePair& qp) {
    return *wire::find_opcode({response_transport(qp), wire::Operation::AtomicAcknowledge, wire::Segment::Only});
}

// The READ response packet that is `segment` of its response.
std::uint8_t read_response_opcode(const QueuePair& qp, wire::Segment segment) {
    return *wire::find_opcode({response_transport(qp), wire::Operation::RdmaReadResponse, segment});
}

std::uint8_t ack_syndrome() { return wire::make_syndrome(wire::AckKind::Ack, kUnlimitedCredits); }
std::uint8_t nak_syndrome(wire::NakCode code) {
    return wire::make_syndrome(wire::AckKind::Nak, static_cast<std::uint8_t>(code));
}

// An XRC QP takes XRC packets only: requests (target) or responses (initiator).
bool transport_matches(const QueuePair& qp, const wire::OpcodeInfo& info) {
    const qp::QpType type = qp.type;
    const wire::Transport transport = info.transport;
    if (qp.xrc != XrcRole::None) {
        return transport == wire::Transport::XRC && info.is_request == (qp.xrc == XrcRole::Target);
    }
    return (type == qp::QpType::Rc && transport == wire::Transport::RC) ||
           (type == qp::QpType::Uc && transport == wire::Transport::UC) ||
           (type == qp::QpType::Ud && transport == wire::Transport::UD);
}

// A receive WQE of the QP's own RQ is retired (the ring's consumer passes
// it) when it completes, just before its CQE, not when it is taken: a WQE
// the daemon is still filling (a multi-packet SEND half received) then
// stays between consumer and producer, and the provider flushes it should
// the daemon die (docs/provider.md). RQ WQEs complete in the order they are
// taken, so the count taken is the count retired at each completion. An
// SRQ's consumer moves at take: its WQEs complete out of order across QPs.
void retire_own_recv(QueuePair& qp) {
    if (qp.srq == 0 && qp.rq.valid()) {
        qp.rq.publish_consumer(qp.rq_consumed);
    }
}

}  // namespace

void Engine::receive(const wire::Packet& p, Clock::time_point now) {
    ++counters_.rx_packets;
    if (p.dest_qp() == kMulticastQpn) {
        receive_multicast(p, now);  // multicast.cc
        return;
    }
    QueuePair* qp = nullptr;
    if (const std::optional<DropReason> reason = check_silent_drops(p, qp)) {
        drop(*reason);
        return;
    }
    if (p.info().is_request) {
        if (qp->type == qp::QpType::Ud) {
            on_ud_request(*qp, p, now);
        } else {
            on_request(*qp, p, now);
        }
    } else if (qp->type == qp::QpType::Rc) {
        on_response(*qp, p, now);
    } else {
        drop(DropReason::ResponseOnUnreliable);
    }
}

std::optional<DropReason> Engine::check_silent_drops(const wire::Packet& p, QueuePair*& qp_out) {
    // In the order of docs/wire.md ("Receiving: silent drops").
    const wire::Gid dst = p.dst_gid();
    const bool ours = std::any_of(config_.gids.begin(), config_.gids.end(), [&dst](const device::GidEntry& g) {
        return g.type == device::GidType::RoceV2 && wire::same_gid(g.gid, dst);
    });
    if (!ours) {
        return DropReason::NotOurGid;
    }
    auto it = qps_.find(p.dest_qp());
    if (it == qps_.end()) {
        return DropReason::UnknownQp;
    }
    QueuePair& qp = *it->second;
    if (!transport_matches(qp, p.info())) {
        return DropReason::WrongTransport;
    }
    if (!qp.can_receive()) {
        return DropReason::QpNotReceiving;
    }
    if (qp.type != qp::QpType::Ud && !wire::same_gid(qp.attr.ah_attr.dgid, p.src_gid())) {
        return DropReason::NotFromPeer;
    }
    // P_Key: the default partition (the low 15 bits all ones) is the only one.
    if ((p.bth().pkey.get() & 0x7FFF) != 0x7FFF) {
        return DropReason::BadPkey;
    }
    if (qp.type == qp::QpType::Ud) {
        const wire::Deth* deth = p.deth();
        if (deth == nullptr || deth->qkey.get() != qp.attr.qkey) {
            return DropReason::BadQkey;
        }
    }
    if (!p.icrc_ok()) {
        return DropReason::BadIcrc;
    }
    qp_out = &qp;
    return std::nullopt;
}

void Engine::send_ack(QueuePair& qp, std::uint8_t syndrome, wire::Psn psn, Clock::time_point now) {
    if (const std::optional<NakReason> nak = nak_reason(syndrome)) {
        ++counters_.naks_sent[static_cast<std::size_t>(*nak)];
    }
    wire::PacketFields f;
    if (!fill_path(qp, qp.attr.ah_attr, f)) {
        return;
    }
    f.bth.opcode = ack_opcode(qp);
    f.bth.dest_qp = qp.attr.dest_qp_num;
    f.bth.psn = psn;
    f.ext.aeth.syndrome = syndrome;
    f.ext.aeth.msn = qp.msn & 0xFFFFFF;
    send_frame(qp, f, {}, now);
}

void Engine::send_atomic_ack(QueuePair& qp, wire::Psn psn, std::uint64_t original, Clock::time_point now) {
    wire::PacketFields f;
    if (!fill_path(qp, qp.attr.ah_attr, f)) {
        return;
    }
    f.bth.opcode = atomic_ack_opcode(qp);
    f.bth.dest_qp = qp.attr.dest_qp_num;
    f.bth.psn = psn;
    f.ext.aeth.syndrome = ack_syndrome();
    f.ext.aeth.msn = qp.msn & 0xFFFFFF;
    f.ext.atomic_ack_original = original;
    send_frame(qp, f, {}, now);
}

bool Engine::claim_recv(QueuePair& qp, wire::Psn psn, Clock::time_point now) {
    if (take_recv(qp, qp.recv, now)) {
        qp.recv_state = ReceiveWqeState::Taken;
        return true;
    }
    if (qp.attr.state == qp::QpState::Err) {
        return false;  // the RQ itself was broken: the QP is in error now
    }
    if (qp.type == qp::QpType::Rc) {
        // Receiver not ready (IBA 9.7.5.2.8): the requester waits
        // min_rnr_timer and sends this PSN again.
        ++counters_.rnr_naks_sent;
        send_ack(qp, wire::make_syndrome(wire::AckKind::RnrNak, qp.attr.min_rnr_timer), psn, now);
    } else {
        // UC: the message is lost; resume at the next FIRST or ONLY.
        drop(DropReason::UcNoReceiveWqe);
        qp.message = InboundMessage::UcLost;
        qp.epsn = psn + 1;
    }
    return false;
}

bool Engine::take_recv(QueuePair& qp, RecvWqe& out, Clock::time_point now) {
    WorkRing* ring = nullptr;
    std::uint32_t* consumed = nullptr;
    std::vector<std::uint8_t>* scratch = &qp.scratch;
    SharedReceiveQueue* srq = nullptr;
    if (qp.srq != 0) {
        auto it = srqs_.find(qp.srq);
        if (it == srqs_.end()) {
            return false;
        }
        srq = &it->second;
        ring = &srq->ring;
        consumed = &srq->consumed;
        scratch = &srq->scratch;
    } else {
        if (!qp.rq.valid()) {
            return false;
        }
        ring = &qp.rq;
        consumed = &qp.rq_consumed;
    }
    const std::uint32_t produced = ring->producer();
    if (produced == *consumed) {
        return false;
    }
    if (produced - *consumed > ring->entries()) {
        // The producer index is garbage; the client's own receive queue is broken.
        ++counters_.bad_wqes;
        *consumed = produced;
        ring->publish_consumer(produced);
        if (srq == nullptr) {
            move_to_error(qp, now);
        }
        return false;
    }
    const WqeProblem problem = fetch_recv_wqe(*ring, *consumed, *scratch, out);
    ++*consumed;
    if (srq != nullptr) {
        ring->publish_consumer(*consumed);  // the QP's own RQ: retire_own_recv at completion
    }
    if (srq != nullptr && srq->limit != 0 && produced - *consumed < srq->limit) {
        // IBV_EVENT_SRQ_LIMIT_REACHED, once per arming (ibv_modify_srq(3)).
        srq->limit = 0;
        if (async_event_) {
            async_event_(srq->owner, srq->cookie, AsyncEvent::SrqLimitReached);
        }
    }
    if (!problem.empty()) {
        ++counters_.bad_wqes;
        uroce_cqe cqe{};
        cqe.wr_id = out.wr_id;
        cqe.status = static_cast<std::uint32_t>(WcStatus::LocQpOpErr);
        cqe.opcode = static_cast<std::uint32_t>(WcOpcode::Recv);
        cqe.qp_num = qp.qpn;
        retire_own_recv(qp);
        complete(qp.recv_cq, cqe, false);
        move_to_error(qp, now);
        return false;
    }
    return true;
}

void Engine::finish_recv(QueuePair& qp, std::uint32_t byte_len, const wire::Packet& p, Clock::time_point now) {
    (void)now;
    const wire::OpcodeInfo& info = p.info();
    uroce_cqe cqe{};
    cqe.wr_id = qp.recv.wr_id;
    const bool failed = qp.recv_state == ReceiveWqeState::Failed;
    cqe.status = static_cast<std::uint32_t>(failed ? qp.recv_status : WcStatus::Success);
    cqe.opcode = static_cast<std::uint32_t>(info.operation == wire::Operation::RdmaWrite ? WcOpcode::RecvRdmaWithImm
                                                                                          : WcOpcode::Recv);
    cqe.byte_len = byte_len;
    cqe.qp_num = qp.qpn;
    cqe.src_qp = qp.type == qp::QpType::Ud ? p.deth()->src_qp.get() : qp.attr.dest_qp_num;
    if (info.has_immediate) {
        cqe.imm_data = __builtin_bswap32(p.immdt()->data.get());  // ibv_wc.imm_data is network order
        cqe.wc_flags |= WcFlag::kWithImm;
    }
    if (info.has_invalidate && !failed) {
        const std::uint32_t rkey = p.ieth()->rkey.get();
        if (mrs_.invalidate(rkey, qp.pd, qp.qpn) == 0) {
            cqe.imm_data = rkey;  // ibv_wc.invalidated_rkey shares the field
            cqe.wc_flags |= WcFlag::kWithInv;
        }
    }
    if (qp.type == qp::QpType::Ud) {
        cqe.wc_flags |= WcFlag::kGrh;
        cqe.sl = p.ip_version() == wire::IpVersion::V4 ? RoceWcSl::kRoceV2Ipv4 : RoceWcSl::kRoceV2Ipv6;
    }
    cqe.pkey_index = 0;
    qp.recv_state = ReceiveWqeState::None;
    retire_own_recv(qp);
    complete(qp.recv_cq, cqe, p.bth().solicited());
}

void Engine::on_ud_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    if (p.info().segment != wire::Segment::Only || p.info().operation != wire::Operation::Send) {
        drop(DropReason::UdNotSendOnly);
        return;
    }
    if (!take_recv(qp, qp.recv, now)) {
        drop(DropReason::UdNoReceiveWqe);  // the datagram is lost (IBA 9.8.4)
        return;
    }
    qp.recv_state = ReceiveWqeState::Taken;
    // The first 40 bytes of the buffer get the GRH (IBA 11.4.1.2): the IPv6
    // header, or for IPv4 the IPv4 header in its last 20 bytes (as rdma_rxe).
    std::array<std::uint8_t, 40> grh{};
    const auto frame = p.frame();
    if (p.ip_version() == wire::IpVersion::V6) {
        std::memcpy(grh.data(), frame.data() + p.l3_offset(), 40);
    } else {
        std::memcpy(grh.data() + 20, frame.data() + p.l3_offset(), 20);
    }
    const std::size_t total = grh.size() + p.payload().size();
    if (total > qp.recv.capacity) {
        qp.recv_state = ReceiveWqeState::Failed;
        qp.recv_status = WcStatus::LocLenErr;
    } else {
        WcStatus st = scatter(qp, qp.recv.sge, 0, grh);
        if (st == WcStatus::Success) {
            st = scatter(qp, qp.recv.sge, grh.size(), p.payload());
        }
        if (st != WcStatus::Success) {
            qp.recv_state = ReceiveWqeState::Failed;
            qp.recv_status = st;
        }
    }
    finish_recv(qp, static_cast<std::uint32_t>(total), p, now);
}

// ---- requests: the checks in IBA order, then execution ----

void Engine::on_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    // The request fail_request's record describes (failure_report.cc), until this returns.
    struct Forget {
        const wire::Packet*& request;
        ~Forget() { request = nullptr; }
    } forget{current_request_ = &p};
    if (check_psn(qp, p, now) != PsnCheck::InOrder) {
        return;
    }
    RequestFailure failure = qp.xrc == XrcRole::Target ? select_xrc_srq(qp, p) : RequestFailure::None;
    if (failure == RequestFailure::None) {
        failure = check_opcode_sequence(qp, p.info());
    }
    if (failure == RequestFailure::None) {
        failure = check_qp_access(qp, p.info());
    }
    if (failure == RequestFailure::None) {
        failure = check_lengths(qp, p);
    }
    if (failure != RequestFailure::None) {
        fail_request(qp, p.psn(), failure, now);
        return;
    }
    switch (p.info().operation) {
        case wire::Operation::Send:
            if (!receive_send(qp, p, now)) {
                return;
            }
            break;
        case wire::Operation::RdmaWrite:
            if (!receive_write(qp, p, now)) {
                return;
            }
            break;
        case wire::Operation::RdmaReadRequest:
            execute_read(qp, p, now);
            return;  // the responses are the acknowledgement
        case wire::Operation::CompareSwap:
        case wire::Operation::FetchAdd:
            execute_atomic(qp, p, now);
            return;
        default:
            fail_request(qp, p.psn(), RequestFailure::InvalidRequest, now);
            return;
    }
    qp.epsn = p.psn() + 1;
    if (qp.type == qp::QpType::Rc && p.bth().ack_req()) {
        qp.ack_pending = true;
    }
}

PsnCheck Engine::check_psn(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::Psn psn = p.psn();
    const wire::Segment segment = p.info().segment;
    const bool starts = segment == wire::Segment::First || segment == wire::Segment::Only;
    if (qp.type != qp::QpType::Rc) {
        // UC: a gap loses the message in progress; resume at the next FIRST
        // or ONLY (IBA 9.8.3).
        if (psn != qp.epsn) {
            qp.message = InboundMessage::UcLost;
            qp.recv_offset = 0;
            qp.epsn = psn;
        }
        if (qp.message == InboundMessage::UcLost) {
            if (!starts) {
                drop(DropReason::UcResync);
                qp.epsn = psn + 1;
                return PsnCheck::UcDropped;
            }
            qp.message = InboundMessage::None;
        }
        return PsnCheck::InOrder;
    }
    const std::int32_t d = distance(psn, qp.epsn);
    if (d > 0) {
        // Ahead: a packet was lost. One PSN-sequence NAK, then silence
        // until the expected packet arrives (IBA 9.7.5.1.2).
        drop(DropReason::RequestPsnAhead);
        if (qp.sequence_nak == SequenceNak::Armed) {
            qp.sequence_nak = SequenceNak::Sent;
            ++counters_.seq_naks_sent;
            send_ack(qp, nak_syndrome(wire::NakCode::PsnSequenceError), qp.epsn, now);
        }
        return PsnCheck::Ahead;
    }
    if (d < 0) {
        ++counters_.duplicates;
        answer_duplicate(qp, p, now);
        return PsnCheck::Duplicate;
    }
    qp.sequence_nak = SequenceNak::Armed;
    return PsnCheck::InOrder;
}

void Engine::answer_duplicate(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::Operation op = p.info().operation;
    if (op == wire::Operation::RdmaReadRequest) {
        replay_read(qp, p);  // from the saved resources: never executed twice
        return;
    }
    if (op == wire::Operation::CompareSwap || op == wire::Operation::FetchAdd) {
        for (const ResponderResource& r : qp.resources) {
            if (r.kind == ResponderResource::Kind::Atomic && distance(p.psn(), r.psn) == 0) {
                send_atomic_ack(qp, r.psn, r.original, now);  // the saved result (C9-106)
                return;
            }
        }
        drop(DropReason::DuplicateNotReplayable);
        return;  // too old to replay: the requester will time out
    }
    // SEND or WRITE seen before (IBA 9.7.5.1.2, C9-104): acknowledge what we
    // have (coalesced), and only for a duplicate that asks (AckReq) or ends
    // its message. An ACK for every packet of a restarted message is a storm;
    // an ACK for its first packet reaches the requester mid-resend, and
    // rdma_rxe (6.1) then completes the WQE it is still resending and stops
    // mid-message (docs/interop.md). The resent message's end is ACKed.
    const wire::Segment segment = p.info().segment;
    if (p.bth().ack_req() || segment == wire::Segment::Last || segment == wire::Segment::Only) {
        qp.ack_pending = true;
    }
}

RequestFailure Engine::check_opcode_sequence(QueuePair& qp, const wire::OpcodeInfo& info) {
    // IBA 9.7.5.1.3 / C9-80: FIRST and ONLY start a message, MIDDLE and LAST
    // continue the one of the same operation.
    const bool starts = info.segment == wire::Segment::First || info.segment == wire::Segment::Only;
    const bool continues = (info.operation == wire::Operation::Send && qp.message == InboundMessage::Send) ||
                           (info.operation == wire::Operation::RdmaWrite && qp.message == InboundMessage::Write);
    if (starts ? qp.message == InboundMessage::None : continues) {
        return RequestFailure::None;
    }
    if (qp.type != qp::QpType::Rc && starts) {
        // UC: the previous message never ended; drop it and start this one.
        qp.message = InboundMessage::None;
        qp.recv_offset = 0;
        return RequestFailure::None;
    }
    return RequestFailure::InvalidRequest;
}

RequestFailure Engine::check_qp_access(const QueuePair& qp, const wire::OpcodeInfo& info) const {
    // ibv_modify_qp(3) qp_access_flags.
    std::uint32_t needed = 0;
    switch (info.operation) {
        case wire::Operation::RdmaWrite:
            needed = qp::QpAccess::kRemoteWrite;
            break;
        case wire::Operation::RdmaReadRequest:
            needed = qp::QpAccess::kRemoteRead;
            break;
        case wire::Operation::CompareSwap:
        case wire::Operation::FetchAdd:
            needed = qp::QpAccess::kRemoteAtomic;
            break;
        default:
            return RequestFailure::None;
    }
    return (qp.attr.qp_access_flags & needed) != 0 ? RequestFailure::None : RequestFailure::InvalidRequest;
}

RequestFailure Engine::check_lengths(const QueuePair& qp, const wire::Packet& p) const {
    const wire::OpcodeInfo& info = p.info();
    const std::size_t payload = p.payload().size();
    // C9-86..88: FIRST and MIDDLE carry exactly one MTU, LAST and ONLY at most one.
    if (info.payload_allowed && info.operation != wire::Operation::RdmaReadRequest) {
        const bool full = info.segment == wire::Segment::First || info.segment == wire::Segment::Middle;
        if ((full && payload != qp.mtu) || payload > qp.mtu) {
            return RequestFailure::InvalidRequest;
        }
    }
    const wire::Reth* reth = p.reth();
    if (reth == nullptr) {
        return RequestFailure::None;
    }
    // The RETH's length: at most the largest message; a WRITE ONLY carries
    // all of it, a WRITE FIRST more than one packet's worth.
    const std::uint64_t len = reth->dma_length.get();
    const bool bad = len > kMaxMessage || (info.operation == wire::Operation::RdmaWrite &&
                                           ((info.segment == wire::Segment::Only && len != payload) ||
                                            (info.segment == wire::Segment::First && len <= qp.mtu)));
    return bad ? RequestFailure::InvalidRequest : RequestFailure::None;
}

RequestFailure Engine::check_remote_key(const QueuePair& qp, EpochGuard& guard, const RemoteKeyUse& use,
                                        mr::Translation& out) {
    mr::RemoteRequest rr;
    rr.pd = PdHandle{qp.pd};
    rr.qpn = Qpn{qp.qpn};
    rr.qp_access = qp.attr.qp_access_flags;
    if (use.peer != nullptr) {
        rr.peer.gid = *use.peer;
        rr.peer.qpn = qp.attr.dest_qp_num;
    }
    rr.rkey = MrKey{use.rkey};
    rr.op = use.op;
    rr.va = use.va;
    rr.length = use.length;
    out = mrs_.check_remote(guard, rr);
    if (out.ok()) {
        return RequestFailure::None;
    }
    if (use.peer != nullptr) {
        note_key_refusal(qp, guard, rr, out.status);
    }
    return failure_of(mr::info(out.status).nak.value_or(wire::NakCode::RemoteAccessError));
}

void Engine::fail_request(QueuePair& qp, wire::Psn psn, RequestFailure failure, Clock::time_point now) {
    note_refusal(qp, psn, failure);
    if (qp.type == qp::QpType::Rc) {
        // RC: NAK it; none of these can be fixed by retrying, so the QP
        // goes to the error state as well (its receive WQE is flushed).
        send_ack(qp, nak_syndrome(outcome(failure).nak), psn, now);
        move_to_error(qp, now);
        return;
    }
    // UC has no NAK: the message is lost.
    drop(DropReason::UcInvalidRequest);
    qp.message = InboundMessage::UcLost;
    qp.recv_offset = 0;
}

bool Engine::receive_send(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::Segment segment = p.info().segment;
    const bool starts = segment == wire::Segment::First || segment == wire::Segment::Only;
    const bool ends = segment == wire::Segment::Last || segment == wire::Segment::Only;
    if (starts && qp.recv_state == ReceiveWqeState::None && !claim_recv(qp, p.psn(), now)) {
        return false;
    }
    if (starts) {
        qp.recv_offset = 0;
    }
    qp.message = ends ? InboundMessage::None : InboundMessage::Send;
    const std::size_t payload = p.payload().size();
    if (qp.recv_state == ReceiveWqeState::Taken) {
        WcStatus st = WcStatus::LocLenErr;
        if (qp.recv_offset + payload <= qp.recv.capacity) {
            st = scatter(qp, qp.recv.sge, qp.recv_offset, p.payload());
        }
        if (st != WcStatus::Success) {
            qp.recv_state = ReceiveWqeState::Failed;
            qp.recv_status = st;
        }
    }
    qp.recv_offset += payload;
    if (qp.recv_state == ReceiveWqeState::Failed && qp.type == qp::QpType::Rc) {
        // The message cannot be delivered: complete the receive in error,
        // tell the requester, and stop (IBA 9.7.5.1.7).
        const bool length = qp.recv_status == WcStatus::LocLenErr;
        finish_recv(qp, static_cast<std::uint32_t>(qp.recv_offset), p, now);
        send_ack(qp, nak_syndrome(length ? wire::NakCode::InvalidRequest : wire::NakCode::RemoteOperationalError),
                 p.psn(), now);
        move_to_error(qp, now);
        return false;
    }
    if (ends) {
        finish_recv(qp, static_cast<std::uint32_t>(qp.recv_offset), p, now);
        ++qp.msn;
    }
    return true;
}

bool Engine::receive_write(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::OpcodeInfo& info = p.info();
    const bool starts = info.segment == wire::Segment::First || info.segment == wire::Segment::Only;
    const bool ends = info.segment == wire::Segment::Last || info.segment == wire::Segment::Only;
    const std::size_t payload = p.payload().size();
    const wire::Gid peer = p.src_gid();
    // One guard for the packet: the translation checked below stays valid
    // until its bytes are written.
    EpochGuard guard(mrs_.epoch());
    mr::Translation t;
    if (starts) {
        const wire::Reth* reth = p.reth();
        qp.write_va = reth->va.get();
        qp.write_rkey = reth->rkey.get();
        qp.write_remaining = reth->dma_length.get();
        qp.write_total = qp.write_remaining;
        const RequestFailure f = check_remote_key(
            qp, guard, {mr::RemoteOp::Write, qp.write_rkey, qp.write_va, qp.write_total, &peer}, t);
        if (f != RequestFailure::None) {
            fail_request(qp, p.psn(), f, now);
            return false;
        }
    }
    if (payload > qp.write_remaining || (ends && payload != qp.write_remaining)) {
        fail_request(qp, p.psn(), RequestFailure::InvalidRequest, now);
        return false;
    }
    // WRITE with immediate consumes a receive WQE: make sure there is one
    // before any byte lands, so an RNR retry repeats nothing partial.
    if (ends && info.has_immediate && qp.recv_state == ReceiveWqeState::None && !claim_recv(qp, p.psn(), now)) {
        return false;
    }
    if (payload > 0) {
        // The first packet's bytes start at the checked message's address and
        // lie inside it (payload <= write_remaining == write_total): its
        // translation serves them. Later packets are checked on their own,
        // so a key invalidated mid-message stops the rest.
        const RequestFailure f =
            starts ? RequestFailure::None
                   : check_remote_key(qp, guard, {mr::RemoteOp::Write, qp.write_rkey, qp.write_va, payload, &peer}, t);
        if (f != RequestFailure::None) {
            fail_request(qp, p.psn(), f, now);
            return false;
        }
        dma::ClientMemory* mem = t.desc != nullptr ? memory(t.desc->owner) : nullptr;
        if (mem == nullptr || mem->write(t.host_addr, p.payload().data(), payload) != 0) {
            ++counters_.dma_faults;
            fail_request(qp, p.psn(), RequestFailure::RemoteOperational, now);
            return false;
        }
    }
    qp.write_va += payload;
    qp.write_remaining -= payload;
    qp.message = ends ? InboundMessage::None : InboundMessage::Write;
    if (ends) {
        if (info.has_immediate) {
            finish_recv(qp, static_cast<std::uint32_t>(qp.write_total), p, now);
        }
        ++qp.msn;
    }
    return true;
}

void Engine::execute_read(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::Reth* reth = p.reth();
    const std::uint64_t len = reth->dma_length.get();
    const wire::Gid peer = p.src_gid();
    {
        EpochGuard guard(mrs_.epoch());
        mr::Translation t;
        const RequestFailure f =
            check_remote_key(qp, guard, {mr::RemoteOp::Read, reth->rkey.get(), reth->va.get(), len, &peer}, t);
        if (f != RequestFailure::None) {
            fail_request(qp, p.psn(), f, now);
            return;
        }
    }
    // Resources (IBA 9.7.5.1.3): the oldest saved READ or atomic makes room.
    const std::size_t slot = take_resource(qp);
    ResponderResource& r = qp.resources[slot];
    r.kind = ResponderResource::Kind::Read;
    r.psn = p.psn();
    r.packets = static_cast<std::uint32_t>(std::max<std::uint64_t>((len + qp.mtu - 1) / qp.mtu, 1));
    r.va = reth->va.get();
    r.rkey = reth->rkey.get();
    r.length = static_cast<std::uint32_t>(len);
    qp.pending_reads.push_back(PendingRead{slot, 0, 0, r.packets});
    ++qp.msn;
    qp.epsn = p.psn() + r.packets;
}

void Engine::execute_atomic(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::AtomicEth* a = p.atomic_eth();
    const wire::Gid peer = p.src_gid();
    std::uint64_t original = 0;
    {
        EpochGuard guard(mrs_.epoch());
        mr::Translation t;
        const RequestFailure f =
            check_remote_key(qp, guard, {mr::RemoteOp::Atomic, a->rkey.get(), a->va.get(), 8, &peer}, t);
        if (f != RequestFailure::None) {
            fail_request(qp, p.psn(), f, now);
            return;
        }
        dma::ClientMemory* mem = t.desc != nullptr ? memory(t.desc->owner) : nullptr;
        int err = EFAULT;
        if (mem != nullptr) {
            err = p.info().operation == wire::Operation::CompareSwap
                      ? mem->compare_swap(t.host_addr, a->compare.get(), a->swap_add.get(), original)
                      : mem->fetch_add(t.host_addr, a->swap_add.get(), original);
        }
        if (err != 0) {
            ++counters_.dma_faults;
            fail_request(qp, p.psn(), RequestFailure::RemoteOperational, now);
            return;
        }
    }
    ResponderResource& r = qp.resources[take_resource(qp)];
    r.kind = ResponderResource::Kind::Atomic;
    r.psn = p.psn();
    r.original = original;
    ++qp.msn;
    qp.epsn = p.psn() + 1;
    send_atomic_ack(qp, p.psn(), original, now);
}

std::size_t Engine::take_resource(QueuePair& qp) {
    const std::size_t slot = qp.next_resource;
    qp.next_resource = (qp.next_resource + 1) % qp.resources.size();
    qp.pending_reads.erase(std::remove_if(qp.pending_reads.begin(), qp.pending_reads.end(),
                                          [slot](const PendingRead& pr) { return pr.resource == slot; }),
                           qp.pending_reads.end());
    qp.resources[slot] = ResponderResource{};
    return slot;
}

void Engine::replay_read(QueuePair& qp, const wire::Packet& p) {
    // The packets the duplicate asks for, from its PSN: they may span several
    // saved resources (the parts of one READ, or READs that followed it).
    const std::uint64_t length = p.reth()->dma_length.get();
    std::uint64_t wanted = std::max<std::uint64_t>((length + qp.mtu - 1) / qp.mtu, 1);
    wire::Psn psn = p.psn();
    while (wanted > 0) {
        const auto found = std::find_if(qp.resources.begin(), qp.resources.end(), [psn](const ResponderResource& r) {
            const std::int32_t from = distance(psn, r.psn);
            return r.kind == ResponderResource::Kind::Read && from >= 0 && from < static_cast<std::int32_t>(r.packets);
        });
        if (found == qp.resources.end()) {
            drop(DropReason::DuplicateNotReplayable);
            return;  // too old to replay: the requester will time out
        }
        const std::size_t i = static_cast<std::size_t>(found - qp.resources.begin());
        const auto from = static_cast<std::uint32_t>(distance(psn, found->psn));
        const auto count = static_cast<std::uint32_t>(std::min<std::uint64_t>(wanted, found->packets - from));
        // A response of this resource still being sent is restarted at the
        // duplicate's PSN; it still runs to its own end.
        std::uint32_t end = from + count;
        const auto sending = std::find_if(qp.pending_reads.begin(), qp.pending_reads.end(),
                                          [i](const PendingRead& pr) { return pr.resource == i; });
        if (sending != qp.pending_reads.end()) {
            end = std::max(end, sending->end);
            qp.pending_reads.erase(sending);
        }
        qp.pending_reads.push_back(PendingRead{i, from, from, end});
        psn += count;
        wanted -= count;
    }
}

void Engine::send_read_responses(QueuePair& qp, Clock::time_point now) {
    std::uint32_t budget = config_.packets_per_poll;
    while (budget > 0 && !qp.pending_reads.empty() && !tx_blocked()) {
        PendingRead& pr = qp.pending_reads.front();
        const ResponderResource& r = qp.resources[pr.resource];
        wire::PacketFields f;
        if (!fill_path(qp, qp.attr.ah_attr, f)) {
            qp.pending_reads.clear();
            return;
        }
        const std::uint32_t i = pr.next;
        const bool first = i == pr.start;
        const bool last = i + 1 == pr.end;
        f.bth.opcode = read_response_opcode(qp, first && last ? wire::Segment::Only
                                            : first       ? wire::Segment::First
                                            : last        ? wire::Segment::Last
                                                          : wire::Segment::Middle);
        f.bth.dest_qp = qp.attr.dest_qp_num;
        f.bth.psn = r.psn + i;
        f.ext.aeth.syndrome = ack_syndrome();
        f.ext.aeth.msn = qp.msn & 0xFFFFFF;
        const std::uint64_t offset = std::uint64_t{i} * qp.mtu;
        const std::uint64_t len = std::min<std::uint64_t>(qp.mtu, r.length - std::min<std::uint64_t>(r.length, offset));
        std::span<const std::uint8_t> payload;
        if (len > 0) {
            EpochGuard guard(mrs_.epoch());
            mr::Translation t;
            const RequestFailure checked =
                check_remote_key(qp, guard, {mr::RemoteOp::Read, r.rkey, r.va + offset, len, nullptr}, t);
            dma::ClientMemory* mem =
                checked == RequestFailure::None && t.desc != nullptr ? memory(t.desc->owner) : nullptr;
            const std::size_t at = wire::payload_offset(f);
            std::span<std::uint8_t> room(frame_room(f, len).data() + at, len);
            if (mem == nullptr || mem->read(t.host_addr, room.data(), len) != 0) {
                // The region went away after the request was checked: stop;
                // the requester's retry will be checked (and NAKed) afresh.
                ++counters_.dma_faults;
                qp.pending_reads.erase(qp.pending_reads.begin());
                continue;
            }
            payload = room;
        }
        send_frame(qp, f, payload, now);
        --budget;
        if (++pr.next >= pr.end) {
            qp.pending_reads.erase(qp.pending_reads.begin());
        }
    }
}

void Engine::responder_poll(QueuePair& qp, Clock::time_point now) {
    if (qp.attr.state == qp::QpState::Err) {
        flush_receive_queue(qp);
        return;
    }
    // A port that refuses frames gets no new ones; the coalesced ACK waits
    // (and then covers more).
    if (qp.ack_pending && !tx_blocked()) {
        qp.ack_pending = false;
        send_ack(qp, ack_syndrome(), qp.epsn - 1, now);
    }
}

void Engine::flush_receive_queue(QueuePair& qp) {
    auto flush = [&](std::uint64_t wr_id) {
        uroce_cqe cqe{};
        cqe.wr_id = wr_id;
        cqe.status = static_cast<std::uint32_t>(WcStatus::WrFlushErr);
        cqe.opcode = static_cast<std::uint32_t>(WcOpcode::Recv);
        cqe.qp_num = qp.qpn;
        complete(qp.recv_cq, cqe, false);
    };
    if (qp.recv_state != ReceiveWqeState::None) {
        qp.recv_state = ReceiveWqeState::None;
        retire_own_recv(qp);
        flush(qp.recv.wr_id);
    }
    if (qp.srq != 0 || !qp.rq.valid()) {
        return;  // an SRQ's WQEs belong to the other QPs as well
    }
    const std::uint32_t produced = qp.rq.producer();
    if (produced - qp.rq_consumed > qp.rq.entries()) {
        qp.rq_consumed = produced;
        qp.rq.publish_consumer(produced);
        return;
    }
    RecvWqe w;
    while (qp.rq_consumed != produced) {
        const WqeProblem problem = fetch_recv_wqe(qp.rq, qp.rq_consumed, qp.scratch, w);
        (void)problem;  // flushed either way
        ++qp.rq_consumed;
        flush(w.wr_id);
    }
    qp.rq.publish_consumer(qp.rq_consumed);
}

}  // namespace uroce::engine
