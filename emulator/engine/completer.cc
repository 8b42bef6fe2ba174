// The completer: what comes back to a requester (IBA 9.7.5.2): ACKs and NAKs
// (AETH), READ responses and atomic ACKs. It marks WQEs done, restarts the
// requester at a PSN (go-back-N on a PSN-sequence NAK, RNR waits), and turns
// NAKs into the work-completion errors docs/wire.md ("Completer") lists.
#include <algorithm>
#include <array>
#include <cstring>

#include "engine/engine.h"

#include "wire/opcode.h"

namespace uroce::engine {

namespace {

// IBA table 45: the RNR NAK timer field, in microseconds (code 0 = 655.36 ms).
constexpr std::array<std::uint32_t, 32> kRnrTimerUs = {
    655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};


}  // namespace

void Engine::complete_wqe_error(QueuePair& qp, SendWqe& w, WcStatus status, Clock::time_point now) {
    w.status = status;
    w.done = true;
    if (w.is_read_or_atomic() && qp.rd_atomic_in_flight > 0) {
        --qp.rd_atomic_in_flight;
    }
    move_to_error(qp, now);
}

void Engine::acknowledge_through(QueuePair& qp, wire::Psn psn, Clock::time_point now) {
    for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
        SendWqe& w = qp.wqe(i);
        if (!w.started) {
            break;
        }
        if (w.done || w.packets == 0) {
            // Done before the ACK reached it (a READ whose responses all came
            // while an older READ still waited for its own): acknowledged
            // too, or the oldest unacknowledged PSN would lag behind it.
            if (w.packets != 0 && w.last_psn() > psn) {
                psn = w.last_psn();
            }
            continue;
        }
        if (w.last_psn() > psn) {
            break;
        }
        if (w.is_read_or_atomic()) {
            // An ACK past a READ or atomic whose response never came means
            // the response was lost (IBA 9.7.5.1.4 implied NAK): ask again,
            // and count as acknowledged only what did arrive.
            psn = w.first_psn + w.received - 1;
            qp.window.on_loss(w.first_psn + w.received, qp.sent_high);
            rewind_to(qp, w.first_psn + w.received);
            break;
        }
        w.done = true;
    }
    if (psn >= qp.unacked) {
        qp.window.on_ack(static_cast<std::uint32_t>(distance(psn + 1, qp.unacked)));
        qp.unacked = psn + 1;
        qp.retry_left = qp.attr.retry_cnt;  // progress: the retry budget starts again
        qp.rnr_retry_left = qp.attr.rnr_retry;
    }
    // Keep the timer only while something is still unacknowledged.
    if (qp.unacked == qp.next_psn) {
        qp.retransmit_at.reset();
    } else {
        qp.restart_retransmit_timer(now);
    }
    retire_done(qp);
}

void Engine::on_response(QueuePair& qp, const wire::Packet& p, Clock::time_point now) {
    const wire::OpcodeInfo& info = p.info();
    const wire::Psn psn = p.psn();
    // Responses for PSNs we never sent, or long acknowledged, are dropped.
    if (psn >= qp.next_psn || distance(qp.unacked, psn) > static_cast<std::int32_t>(1u << 22)) {
        drop(DropReason::ResponsePsnNotOutstanding);
        return;
    }
    const wire::Aeth* aeth = p.aeth();
    if (aeth != nullptr) {
        const std::uint8_t syndrome = aeth->syndrome;
        if (const std::optional<NakReason> nak = nak_reason(syndrome)) {
            ++counters_.naks_received[static_cast<std::size_t>(*nak)];
        }
        switch (wire::ack_kind(syndrome)) {
            case wire::AckKind::Ack:
                break;  // handled below, per operation
            case wire::AckKind::RnrNak: {
                ++counters_.rnr_naks_received;
                acknowledge_through(qp, psn - 1, now);
                SendWqe* w = nullptr;
                for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
                    if (!qp.wqe(i).done && qp.wqe(i).started) {
                        w = &qp.wqe(i);
                        break;
                    }
                }
                if (w == nullptr) {
                    return;
                }
                if (qp.rnr_retry_left == 0) {
                    complete_wqe_error(qp, *w, WcStatus::RnrRetryExcErr, now);
                    return;
                }
                if (qp.attr.rnr_retry != 7) {  // 7: retry forever (IBA 9.7.5.2.8)
                    --qp.rnr_retry_left;
                }
                qp.rnr_resume_at = now + std::chrono::microseconds(kRnrTimerUs[wire::syndrome_value(syndrome)]);
                qp.retransmit_at.reset();
                rewind_to(qp, psn);
                return;
            }
            case wire::AckKind::Nak: {
                const auto code = static_cast<wire::NakCode>(wire::syndrome_value(syndrome));
                acknowledge_through(qp, psn - 1, now);
                if (code == wire::NakCode::PsnSequenceError) {
                    // Go back N: everything before psn arrived; send again
                    // from psn, with the window halved (a loss).
                    ++counters_.seq_naks_received;
                    qp.window.on_loss(psn, qp.sent_high);
                    rewind_to(qp, psn);
                    return;
                }
                // The responder's failure table read backwards (request_failure.h).
                const WcStatus status = outcome(failure_of(code)).requester_status;
                qp.peer_nak = QueuePair::PeerNak{code, psn};
                for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
                    SendWqe& w = qp.wqe(i);
                    if (w.started && !w.done && w.packets != 0 && psn <= w.last_psn()) {
                        complete_wqe_error(qp, w, status, now);
                        return;
                    }
                }
                return;
            }
            case wire::AckKind::Reserved:
                drop(DropReason::ResponseReservedSyndrome);
                return;
        }
    }
    switch (info.operation) {
        case wire::Operation::Acknowledge:
            acknowledge_through(qp, psn, now);
            return;
        case wire::Operation::AtomicAcknowledge:
        case wire::Operation::RdmaReadResponse:
            break;
        default:
            drop(DropReason::ResponseNotExpected);
            return;
    }
    // Find the READ or atomic WQE this response belongs to.
    for (std::uint32_t i = qp.retired; i != qp.fetched; ++i) {
        SendWqe& w = qp.wqe(i);
        if (!w.started) {
            break;
        }
        if (w.done || w.packets == 0 || psn > w.last_psn() || psn < w.first_psn) {
            continue;
        }
        if (info.operation == wire::Operation::AtomicAcknowledge) {
            if (w.opcode != WrOpcode::AtomicCmpAndSwp && w.opcode != WrOpcode::AtomicFetchAndAdd) {
                drop(DropReason::ResponseWrongOperation);
                return;
            }
            acknowledge_through(qp, psn - 1, now);
            std::uint8_t original[8];
            const std::uint64_t value = p.atomic_ack_eth()->original.get();
            std::memcpy(original, &value, sizeof value);  // the local buffer gets it in host order
            const WcStatus st = scatter(qp, w.sge, 0, original);
            w.done = true;
            if (qp.rd_atomic_in_flight > 0) {
                --qp.rd_atomic_in_flight;
            }
            if (st != WcStatus::Success) {
                complete_wqe_error(qp, w, st, now);
                return;
            }
            acknowledge_through(qp, psn, now);
            return;
        }
        if (w.opcode != WrOpcode::RdmaRead) {
            drop(DropReason::ResponseWrongOperation);
            return;
        }
        const wire::Psn expected = w.first_psn + w.received;
        if (psn != expected) {
            if (psn > expected) {
                drop(DropReason::ReadResponseOutOfOrder);
                // A response packet went missing: ask for the rest again (once
                // per gap: later packets of the same gap are dropped here).
                if (qp.read_gap != expected) {
                    qp.read_gap = expected;
                    ++counters_.seq_naks_received;
                    qp.window.on_loss(expected, qp.sent_high);
                    rewind_to(qp, expected);
                }
            } else {
                ++counters_.duplicates;
            }
            return;
        }
        // Everything before the READ was received by the responder.
        if (w.received == 0) {
            acknowledge_through(qp, w.first_psn - 1, now);
        }
        const std::uint64_t offset = std::uint64_t{w.received} * qp.mtu;
        const std::uint64_t want = std::min<std::uint64_t>(qp.mtu, w.length - std::min(w.length, offset));
        const bool last_packet = w.received + 1 == w.packets;
        if (p.payload().size() != want || (info.segment == wire::Segment::Middle && last_packet)) {
            complete_wqe_error(qp, w, WcStatus::BadRespErr, now);
            return;
        }
        const WcStatus st = scatter(qp, w.sge, offset, p.payload());
        if (st != WcStatus::Success) {
            complete_wqe_error(qp, w, st, now);
            return;
        }
        ++w.received;
        if (w.received == w.packets) {
            w.done = true;
            if (qp.rd_atomic_in_flight > 0) {
                --qp.rd_atomic_in_flight;
            }
            acknowledge_through(qp, psn, now);
        } else if (psn >= qp.unacked && qp.unacked >= w.first_psn) {
            // In-order progress of the oldest outstanding READ. Not of a
            // later one: an older READ still missing responses keeps the
            // oldest unacknowledged PSN (and the retransmit point) where it is.
            qp.window.on_ack(static_cast<std::uint32_t>(distance(psn + 1, qp.unacked)));
            qp.unacked = psn + 1;
            qp.retry_left = qp.attr.retry_cnt;
            qp.restart_retransmit_timer(now);
        }
        return;
    }
    drop(DropReason::ResponseNoRequest);
}

}  // namespace uroce::engine
