// The engine's state of one QP: the requester (send queue, PSNs, timers),
// the responder (expected PSN, message in progress, saved READ/atomic
// resources) and what both need of the QP's attributes. Only the engine's
// thread touches it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/congestion.h"
#include "engine/request_failure.h"
#include "engine/rings.h"
#include "engine/wqe.h"
#include "qp/qp_attr.h"
#include "wire/headers.h"
#include "wire/psn.h"

namespace uroce::engine {

using Clock = std::chrono::steady_clock;

// A READ or atomic the responder executed, kept so a duplicate request is
// answered from here instead of being executed again (IBA 9.7.5.1.3).
struct ResponderResource {
    enum class Kind : std::uint8_t { Empty, Read, Atomic };
    Kind kind = Kind::Empty;
    wire::Psn psn{};
    std::uint32_t packets = 1;  // READ: response packets
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;
    std::uint64_t original = 0;  // atomic: the value before
};

// READ response packets still to send: [next, end) of a resource. A
// duplicate request is answered with the packets it asks for, [start, end),
// not the rest of the resource (IBA 9.7.5.1.3: the responder answers the
// duplicate's own PSN, address and length), so a requester that retries
// one packet after a timeout gets one packet, not a burst of 64.
struct PendingRead {
    std::size_t resource = 0;
    std::uint32_t start = 0;  // first packet index of this response (FIRST or ONLY)
    std::uint32_t next = 0;   // packet index within the resource
    std::uint32_t end = 1;    // one past the last packet index to send (LAST or ONLY)
};

// Which half of XRC a QP is (IBA annex A14). Both run as RC QPs
// (type Rc); an initiator's requests go out with XRC opcodes and an XRCETH,
// a target delivers each request into the XRC SRQ its XRCETH names.
enum class XrcRole : std::uint8_t { None, Initiator, Target };

// A QP's identity and wiring, fixed at creation (Engine::add_qp).
struct QpSetup {
    std::uint32_t qpn = 0;
    std::uint32_t owner = 0;
    std::uint32_t pd = 0;
    qp::QpType type = qp::QpType::Rc;
    std::uint32_t send_cq = 0;
    std::uint32_t recv_cq = 0;
    std::uint32_t srq = 0;
    bool sq_sig_all = false;
    XrcRole xrc = XrcRole::None;       // set by add_qp from type XrcIni / XrcTgt
    std::uint32_t xrc_domain = 0;      // target: the domain of the SRQs it may deliver to
    std::uint64_t cookie = 0;
    WorkRing sq;
    WorkRing rq;  // invalid when the QP uses an SRQ
};

// Local ACK timeout (IBA 9.7.6.1.3): 4.096 us * 2^timeout; 0 waits forever.
[[nodiscard]] inline std::optional<Clock::duration> ack_timeout(std::uint8_t code) {
    if (code == 0) {
        return std::nullopt;
    }
    const std::uint64_t ns = std::uint64_t{4096} << (code < 31 ? code : 31);
    return std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns));
}

struct QueuePair : QpSetup {
    qp::QpAttr attr;
    std::uint32_t mtu = 1024;  // path MTU in bytes

    // ---- requester ----
    std::vector<SendWqe> wqes;    // by index & (sq entries - 1)
    std::uint32_t fetched = 0;    // WQEs copied out of the ring
    std::uint32_t retired = 0;    // WQEs completed (ring consumer)
    std::uint32_t sending = 0;    // WQE being transmitted (retired <= sending <= fetched)
    std::uint32_t sent_packets = 0;  // packets of WQE `sending` already sent
    wire::Psn next_psn{};         // PSN the next new WQE starts at
    wire::Psn unacked{};          // oldest PSN not acknowledged
    wire::Psn sent_high{};        // one past the highest PSN ever sent (below it: a resend)
    CongestionWindow window;      // PSNs that may be unacknowledged (RC; docs/congestion.md)
    std::uint32_t rd_atomic_in_flight = 0;
    // The READ response PSN last gone back to for a gap: later responses of
    // the same gap do not go back again.
    std::optional<wire::Psn> read_gap;
    std::uint32_t rq_consumed = 0;  // receive WQEs taken from the RQ ring
    std::uint8_t retry_left = 7;
    std::uint8_t rnr_retry_left = 7;
    // Request frames of this QP the port refused and the engine still holds:
    // while any wait, the ACK timer does not expire (they are not on the wire).
    std::uint32_t requests_held = 0;
    std::optional<Clock::time_point> retransmit_at;
    std::optional<Clock::time_point> rnr_resume_at;
    std::uint16_t udp_src_port = 0xC000;
    // The NAK that ended the QP's work, for its error completion's record
    // (failure_report.cc).
    struct PeerNak {
        wire::NakCode code;
        wire::Psn psn;
    };
    std::optional<PeerNak> peer_nak;

    // ---- responder ----
    wire::Psn epsn{};             // expected PSN
    std::uint32_t msn = 0;
    SequenceNak sequence_nak = SequenceNak::Armed;
    // Message in progress (SEND or WRITE spanning packets; UC: lost).
    InboundMessage message = InboundMessage::None;
    ReceiveWqeState recv_state = ReceiveWqeState::None;
    RecvWqe recv;
    std::uint64_t recv_offset = 0;
    WcStatus recv_status = WcStatus::Success;  // ReceiveWqeState::Failed: why
    std::uint64_t write_va = 0;
    std::uint32_t write_rkey = 0;
    std::uint64_t write_remaining = 0;
    std::uint64_t write_total = 0;
    std::vector<ResponderResource> resources;  // max_dest_rd_atomic entries, ring
    std::size_t next_resource = 0;
    std::vector<PendingRead> pending_reads;
    bool ack_pending = false;     // coalesced ACK to send
    // Shared scratch for copying WQEs.
    std::vector<std::uint8_t> scratch;
    // XRC target: the client of the XRC SRQ the current request is for;
    // receive WQEs scatter into its memory (select_xrc_srq).
    std::uint32_t xrc_srq_owner = 0;

    // The client whose memory this QP's own WQEs (send, receive) name.
    [[nodiscard]] std::uint32_t dma_owner() const { return xrc == XrcRole::Target ? xrc_srq_owner : owner; }

    [[nodiscard]] bool can_send() const {
        return attr.state == qp::QpState::Rts || attr.state == qp::QpState::Sqd;
    }
    [[nodiscard]] bool can_receive() const {
        return attr.state == qp::QpState::Rtr || attr.state == qp::QpState::Rts ||
               attr.state == qp::QpState::Sqd;
    }
    SendWqe& wqe(std::uint32_t index) { return wqes[index & (sq.entries() - 1)]; }
    // (Re)starts the retransmit timer from `now`, unless the timeout is infinite.
    void restart_retransmit_timer(Clock::time_point now) {
        if (const auto t = ack_timeout(attr.timeout)) {
            retransmit_at = now + *t;
        }
    }
};

}  // namespace uroce::engine
