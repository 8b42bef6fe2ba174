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

std::uint8_t ack_syndrome() { return wire::make_syndrome(wire::AckKind::Ack, kUnlimitedCredits); }
std::uint8_t nak_syndrome(wire::NakCode code) {
    return wire::make_syndrome(wire::AckKind::Nak, static_cast<std::uint8_t>(code));
}

bool same_gid(const std::array<std::uint8_t, 16>& a, const wire::Gid& b) {
    return std::equal(a.begin(), a.end(), b.begin());
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
    // Silent drops, in the order of docs/wire.md.
    const wire::Gid dst = p.dst_gid();
    bool ours = false;
    for (const auto& g : config_.gids) {
        if (g.type == device::GidType::RoceV2 && g.gid == dst) {
            ours = true;
            break;
        }
    }
    auto it = qps_.find(p.dest_qp());
    if (!ours || it == qps_.end()) {
        ++counters_.rx_dropped;
        return;
    }
    QueuePair& qp = *it->second;
    const wire::OpcodeInfo& info = p.info();
    const bool transport_matches = (qp.type == qp::QpType::Rc && info.transport == wire::Transport::RC) ||
                                   (qp.type == qp::QpType::Uc && info.transport == wire::Transport::UC) ||
                                   (qp.type == qp::QpType::Ud && info.transport == wire::Transport::UD);
    if (!transport_matches || !qp.can_receive()) {
        ++counters_.rx_dropped;
        return;
    }
    if (qp.type != qp::QpType::Ud && !same_gid(qp.attr.ah_attr.dgid, p.src_gid())) {
        ++counters_.rx_dropped;  // not from the connected peer
        return;
    }
    // P_Key: the default partition (the low 15 bits all ones) is the only one.
    if ((p.bth().pkey.get() & 0x7FFF) != 0x7FFF) {
        ++counters_.rx_dropped;
        return;
    }
    if (qp.type == qp::QpType::Ud) {
        const wire::Deth* deth = p.deth();
        if (deth == nullptr || deth->qkey.get() != qp.attr.qkey) {
            ++counters_.rx_dropped;
            return;
        }
    }
    if (!p.icrc_ok()) {
        ++counters_.rx_dropped;
        return;
    }
    if (info.is_request) {
        if (qp.type == qp::QpType::Ud) {
            on_ud_request(qp, p, now);
        } else {
            on_request(qp, p, now);
        }
    } else if (qp.type == qp::QpType::Rc) {
        on_response(qp, p, now);
    } else {
        ++counters_.rx_dropped;
    }
}

void Engine::send_ack(QueuePair& qp, std::uint8_t syndrome, wire::Psn psn, Clock::time_point now) {
    wire::PacketFields f;
    if (!fill_path(qp, qp.attr.ah_attr, f)) {
        return;
    }
    f.bth.opcode = wire::opcode::kRcAcknowledge;
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
    f.bth.opcode = wire::opcode::kRcAtomicAcknowledge;
    f.bth.dest_qp = qp.attr.dest_qp_num;
    f.bth.psn = psn;
    f.ext.aeth.syndrome = ack_syndrome();
    f.ext.aeth.msn = qp.msn & 0xFFFFFF;
    f.ext.atomic_ack_original = original;
    send_frame(qp, f, {}, now);
}

bool Engine::claim_recv(QueuePair& qp, wire::Psn psn, Clock::time_point now) {
    if (take_recv(qp, qp.recv, now)) {
        qp.recv_taken = true;
        qp.recv_failed = false;
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
        ++counters_.rx_dropped;
        qp.uc_resync = true;
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
    cqe.status = static_cast<std::uint32_t>(qp.recv_failed ? qp.recv_status : WcStatus::Success);
    cqe.opcode = static_cast<std::uint32_t>(info.operation == wire::Operation::RdmaWrite ? WcOpcode::RecvRdmaWithImm
                                                                                          : WcOpcode::Recv);
    cqe.byte_len = byte_len;
    cqe.qp_num = qp.qpn;
    cqe.src_qp = qp.type == qp::QpType::Ud ? p.deth()->src_qp.get() : qp.attr.dest_qp_num;
    if (info.has_immediate) {
        cqe.imm_data = __builtin_bswap32(p.immdt()->data.get());  // ibv_wc.imm_data is network order
        cqe.wc_flags |= WcFlag::kWithImm;
    }
    if (info.has_invalidate && !qp.recv_failed) {
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
    qp.recv_taken = false;
    qp.in_send = false;
    retire_own_recv(qp);
    complete(qp.recv_cq, cqe, p.bth().solicited());
}

void Engine::on_ud_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    if (p.info().segment != wire::Segment::Only || p.info().operation != wire::Operation::Send) {
        ++counters_.rx_dropped;
        return;
    }
    if (!take_recv(qp, qp.recv, now)) {
        ++counters_.rx_dropped;  // UD: no receive WQE, the datagram is lost (IBA 9.8.4)
        return;
    }
    qp.recv_taken = true;
    qp.recv_failed = false;
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
        qp.recv_failed = true;
        qp.recv_status = WcStatus::LocLenErr;
    } else {
        WcStatus st = scatter(qp, qp.recv.sge, 0, grh);
        if (st == WcStatus::Success) {
            st = scatter(qp, qp.recv.sge, grh.size(), p.payload());
        }
        if (st != WcStatus::Success) {
            qp.recv_failed = true;
            qp.recv_status = st;
        }
    }
    finish_recv(qp, static_cast<std::uint32_t>(total), p, now);
}

void Engine::on_request(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::OpcodeInfo& info = p.info();
    const wire::Psn psn = p.psn();
    const bool rc = qp.type == qp::QpType::Rc;
    const bool starts = info.segment == wire::Segment::First || info.segment == wire::Segment::Only;
    const bool ends = info.segment == wire::Segment::Last || info.segment == wire::Segment::Only;

    // An RC request that fails a check: NAK it and, for errors the requester
    // cannot fix by retrying, take this QP to the error state as well.
    auto fail = [&](wire::NakCode code) {
        if (rc) {
            send_ack(qp, nak_syndrome(code), psn, now);
            if (qp.in_send && qp.recv_taken) {
                qp.recv_failed = true;
                qp.recv_status = code == wire::NakCode::RemoteAccessError ? WcStatus::LocProtErr
                                                                        : WcStatus::RemInvReqErr;
            }
            move_to_error(qp, now);
        } else {
            ++counters_.rx_dropped;
            qp.uc_resync = true;
            qp.in_send = qp.in_write = false;
            qp.recv_offset = 0;
        }
    };

    if (rc) {
        const std::int32_t d = distance(psn, qp.epsn);
        if (d > 0) {
            // Ahead: a packet was lost. One PSN-sequence NAK, then silence
            // until the expected packet arrives (IBA 9.7.5.1.2).
            if (!qp.sequence_nak_sent) {
                qp.sequence_nak_sent = true;
                ++counters_.seq_naks_sent;
                send_ack(qp, nak_syndrome(wire::NakCode::PsnSequenceError), qp.epsn, now);
            }
            return;
        }
        if (d < 0) {
            ++counters_.duplicates;
            if (info.operation == wire::Operation::RdmaReadRequest ||
                info.operation == wire::Operation::CompareSwap || info.operation == wire::Operation::FetchAdd) {
                // Replay from the saved resources: never execute twice.
                if (info.operation == wire::Operation::RdmaReadRequest) {
                    replay_read(qp, p);
                    return;
                }
                for (const ResponderResource& r : qp.resources) {
                    const std::int32_t from = distance(psn, r.psn);
                    if (r.kind == ResponderResource::Kind::Atomic && from == 0) {
                        send_atomic_ack(qp, r.psn, r.original, now);
                        return;
                    }
                }
                return;  // too old to replay: the requester will time out
            }
            // SEND or WRITE seen before: acknowledge what we have (with the
            // poll's coalesced ACK: a go-back-N burst of duplicates gets one).
            qp.ack_pending = true;
            return;
        }
        qp.sequence_nak_sent = false;
    } else {
        // UC: a gap loses the message in progress; resume at the next FIRST
        // or ONLY (IBA 9.8.3).
        if (psn != qp.epsn) {
            qp.uc_resync = true;
            qp.in_send = qp.in_write = false;
            qp.recv_offset = 0;
            qp.epsn = psn;
        }
        if (qp.uc_resync) {
            if (!starts) {
                ++counters_.rx_dropped;
                qp.epsn = psn + 1;
                return;
            }
            qp.uc_resync = false;
        }
    }

    // Opcode sequence (IBA 9.7.5.1.3 / C9-80): FIRST and ONLY start a
    // message, MIDDLE and LAST continue the one of the same operation.
    const bool is_send = info.operation == wire::Operation::Send;
    const bool is_write = info.operation == wire::Operation::RdmaWrite;
    if (starts ? (qp.in_send || qp.in_write)
               : !((is_send && qp.in_send) || (is_write && qp.in_write))) {
        if (!rc && starts) {
            // UC: the previous message never ended; drop it and start this one.
            qp.in_send = qp.in_write = false;
            qp.recv_offset = 0;
        } else {
            fail(wire::NakCode::InvalidRequest);
            return;
        }
    }

    // QP access flags (ibv_modify_qp(3) qp_access_flags).
    const std::uint32_t access = qp.attr.qp_access_flags;
    if ((is_write && (access & qp::QpAccess::kRemoteWrite) == 0) ||
        (info.operation == wire::Operation::RdmaReadRequest && (access & qp::QpAccess::kRemoteRead) == 0) ||
        ((info.operation == wire::Operation::CompareSwap || info.operation == wire::Operation::FetchAdd) &&
         (access & qp::QpAccess::kRemoteAtomic) == 0)) {
        fail(wire::NakCode::InvalidRequest);
        return;
    }

    const std::size_t payload = p.payload().size();
    // Lengths (C9-86..88): FIRST and MIDDLE carry exactly one MTU, LAST and
    // ONLY at most one.
    if (info.payload_allowed && info.operation != wire::Operation::RdmaReadRequest) {
        const bool full = info.segment == wire::Segment::First || info.segment == wire::Segment::Middle;
        if ((full && payload != qp.mtu) || payload > qp.mtu) {
            fail(wire::NakCode::InvalidRequest);
            return;
        }
    }

    mr::RemoteRequest rr;
    rr.pd = qp.pd;
    rr.qpn = qp.qpn;
    rr.qp_access = access;
    rr.peer.gid = p.src_gid();
    rr.peer.qpn = qp.attr.dest_qp_num;

    if (is_send) {
        if (starts && !qp.recv_taken && !claim_recv(qp, psn, now)) {
            return;
        }
        if (starts) {
            qp.recv_offset = 0;
        }
        qp.in_send = !ends;
        if (!qp.recv_failed) {
            if (qp.recv_offset + payload > qp.recv.capacity) {
                qp.recv_failed = true;
                qp.recv_status = WcStatus::LocLenErr;
            } else {
                const WcStatus st = scatter(qp, qp.recv.sge, qp.recv_offset, p.payload());
                if (st != WcStatus::Success) {
                    qp.recv_failed = true;
                    qp.recv_status = st;
                }
            }
        }
        qp.recv_offset += payload;
        if (qp.recv_failed && rc) {
            // The message cannot be delivered: complete the receive in error,
            // tell the requester, and stop (IBA 9.7.5.1.7).
            const bool length = qp.recv_status == WcStatus::LocLenErr;
            finish_recv(qp, static_cast<std::uint32_t>(qp.recv_offset), p, now);
            send_ack(qp, nak_syndrome(length ? wire::NakCode::InvalidRequest : wire::NakCode::RemoteOperationalError),
                     psn, now);
            move_to_error(qp, now);
            return;
        }
        if (ends) {
            finish_recv(qp, static_cast<std::uint32_t>(qp.recv_offset), p, now);
            ++qp.msn;
        }
    } else if (is_write) {
        if (starts) {
            const wire::Reth* reth = p.reth();
            const std::uint64_t len = reth->dma_length.get();
            if (len > kMaxMessage || (info.segment == wire::Segment::Only && len != payload) ||
                (info.segment == wire::Segment::First && len <= qp.mtu)) {
                fail(wire::NakCode::InvalidRequest);
                return;
            }
            qp.write_va = reth->va.get();
            qp.write_rkey = reth->rkey.get();
            qp.write_remaining = len;
            qp.write_total = len;
            rr.rkey = qp.write_rkey;
            rr.op = mr::RemoteOp::Write;
            rr.va = qp.write_va;
            rr.length = len;
            EpochGuard guard(mrs_.epoch());
            const mr::Translation t = mrs_.check_remote(guard, rr);
            if (!t.ok()) {
                fail(mr::info(t.status).nak.value_or(wire::NakCode::RemoteAccessError));
                return;
            }
        }
        if (payload > qp.write_remaining || (ends && payload != qp.write_remaining)) {
            fail(wire::NakCode::InvalidRequest);
            return;
        }
        // WRITE with immediate consumes a receive WQE: make sure there is one
        // before any byte lands, so an RNR retry repeats nothing partial.
        if (ends && info.has_immediate && !qp.recv_taken && !claim_recv(qp, psn, now)) {
            return;
        }
        if (payload > 0) {
            rr.rkey = qp.write_rkey;
            rr.op = mr::RemoteOp::Write;
            rr.va = qp.write_va;
            rr.length = payload;
            EpochGuard guard(mrs_.epoch());
            const mr::Translation t = mrs_.check_remote(guard, rr);
            dma::ClientMemory* mem = t.ok() && t.desc != nullptr ? memory(t.desc->owner) : nullptr;
            if (!t.ok()) {
                fail(mr::info(t.status).nak.value_or(wire::NakCode::RemoteAccessError));
                return;
            }
            if (mem == nullptr || mem->write(t.host_addr, p.payload().data(), payload) != 0) {
                ++counters_.dma_faults;
                fail(wire::NakCode::RemoteOperationalError);
                return;
            }
        }
        qp.write_va += payload;
        qp.write_remaining -= payload;
        qp.in_write = !ends;
        if (ends) {
            if (info.has_immediate) {
                finish_recv(qp, static_cast<std::uint32_t>(qp.write_total), p, now);
            }
            ++qp.msn;
        }
    } else if (info.operation == wire::Operation::RdmaReadRequest) {
        const wire::Reth* reth = p.reth();
        const std::uint64_t len = reth->dma_length.get();
        if (len > kMaxMessage) {
            fail(wire::NakCode::InvalidRequest);
            return;
        }
        rr.rkey = reth->rkey.get();
        rr.op = mr::RemoteOp::Read;
        rr.va = reth->va.get();
        rr.length = len;
        {
            EpochGuard guard(mrs_.epoch());
            const mr::Translation t = mrs_.check_remote(guard, rr);
            if (!t.ok()) {
                fail(mr::info(t.status).nak.value_or(wire::NakCode::RemoteAccessError));
                return;
            }
        }
        const std::size_t slot = qp.next_resource;
        qp.next_resource = (qp.next_resource + 1) % qp.resources.size();
        qp.pending_reads.erase(std::remove_if(qp.pending_reads.begin(), qp.pending_reads.end(),
                                              [slot](const PendingRead& pr) { return pr.resource == slot; }),
                               qp.pending_reads.end());
        ResponderResource& r = qp.resources[slot];
        r = ResponderResource{};
        r.kind = ResponderResource::Kind::Read;
        r.psn = psn;
        r.packets = static_cast<std::uint32_t>(std::max<std::uint64_t>((len + qp.mtu - 1) / qp.mtu, 1));
        r.va = rr.va;
        r.rkey = rr.rkey;
        r.length = static_cast<std::uint32_t>(len);
        qp.pending_reads.push_back(PendingRead{slot, 0, 0, r.packets});
        ++qp.msn;
        qp.epsn = psn + r.packets;
        return;  // the responses are the acknowledgement
    } else if (info.operation == wire::Operation::CompareSwap || info.operation == wire::Operation::FetchAdd) {
        const wire::AtomicEth* a = p.atomic_eth();
        rr.rkey = a->rkey.get();
        rr.op = mr::RemoteOp::Atomic;
        rr.va = a->va.get();
        rr.length = 8;
        std::uint64_t original = 0;
        {
            EpochGuard guard(mrs_.epoch());
            const mr::Translation t = mrs_.check_remote(guard, rr);
            if (!t.ok()) {
                fail(mr::info(t.status).nak.value_or(wire::NakCode::RemoteAccessError));
                return;
            }
            dma::ClientMemory* mem = t.desc != nullptr ? memory(t.desc->owner) : nullptr;
            int err = EFAULT;
            if (mem != nullptr) {
                err = info.operation == wire::Operation::CompareSwap
                          ? mem->compare_swap(t.host_addr, a->compare.get(), a->swap_add.get(), original)
                          : mem->fetch_add(t.host_addr, a->swap_add.get(), original);
            }
            if (err != 0) {
                ++counters_.dma_faults;
                fail(wire::NakCode::RemoteOperationalError);
                return;
            }
        }
        const std::size_t slot = qp.next_resource;
        qp.next_resource = (qp.next_resource + 1) % qp.resources.size();
        ResponderResource& r = qp.resources[slot];
        r = ResponderResource{};
        r.kind = ResponderResource::Kind::Atomic;
        r.psn = psn;
        r.original = original;
        ++qp.msn;
        qp.epsn = psn + 1;
        send_atomic_ack(qp, psn, original, now);
        return;
    } else {
        fail(wire::NakCode::InvalidRequest);
        return;
    }
    qp.epsn = psn + 1;
    if (rc && p.bth().ack_req()) {
        qp.ack_pending = true;
    }
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
        f.bth.opcode = first && last  ? wire::opcode::kRcRdmaReadResponseOnly
                       : first        ? wire::opcode::kRcRdmaReadResponseFirst
                       : last         ? static_cast<std::uint8_t>(0x0F)
                                      : static_cast<std::uint8_t>(0x0E);
        f.bth.dest_qp = qp.attr.dest_qp_num;
        f.bth.psn = r.psn + i;
        f.ext.aeth.syndrome = ack_syndrome();
        f.ext.aeth.msn = qp.msn & 0xFFFFFF;
        const std::uint64_t offset = std::uint64_t{i} * qp.mtu;
        const std::uint64_t len = std::min<std::uint64_t>(qp.mtu, r.length - std::min<std::uint64_t>(r.length, offset));
        std::span<const std::uint8_t> payload;
        if (len > 0) {
            mr::RemoteRequest rr;
            rr.rkey = r.rkey;
            rr.pd = qp.pd;
            rr.qpn = qp.qpn;
            rr.qp_access = qp.attr.qp_access_flags;
            rr.op = mr::RemoteOp::Read;
            rr.va = r.va + offset;
            rr.length = len;
            EpochGuard guard(mrs_.epoch());
            const mr::Translation t = mrs_.check_remote(guard, rr);
            dma::ClientMemory* mem = t.ok() && t.desc != nullptr ? memory(t.desc->owner) : nullptr;
            const std::size_t at = wire::payload_offset(f);
            std::span<std::uint8_t> room(tx_buffer_.data() + at, len);
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
    if (qp.recv_taken) {
        qp.recv_taken = false;
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
