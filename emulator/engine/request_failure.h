// The named results of the responder's checks (IBA 9.7.5.1, in the order
// docs/wire.md "Receiving" lists them) and the one table from each failure
// to what it becomes: the NAK the responder sends, the status its receive
// WQE completes with, the status the requester's WQE completes with when
// that NAK reaches it, and the counter that counts it. The responder reads
// the table forwards (failure to NAK), the completer backwards (NAK code to
// completion status), so the two sides cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/wc_status.h"
#include "engine/drop_reason.h"
#include "wire/headers.h"

namespace uroce::engine {

// The PSN check (IBA 9.7.5.1.2; UC 9.8.3).
enum class PsnCheck : std::uint8_t {
    InOrder,    // the expected PSN: go on with the next check
    Ahead,      // RC: packets were lost; NAKed once (then silence)
    Duplicate,  // RC: seen before; answered from what was saved
    UcDropped,  // UC: part of a message lost to a gap; waiting for FIRST or ONLY
};

// The outcome of the checks after the PSN's: None, or why the request fails.
enum class RequestFailure : std::uint8_t {
    None,
    InvalidRequest,     // opcode sequence, QP access, lengths (C9-80, C9-86..88)
    RemoteAccess,       // the remote key check (mr_check.cc)
    RemoteOperational,  // client memory could not be read or written
    InvalidRdRequest,   // RD only: never sent by this responder, understood when received
    Count,
};

struct FailureOutcome {
    wire::NakCode nak;          // the NAK the responder sends (RC)
    WcStatus receive_status;    // a SEND's receive WQE, when the failure ends its message
    WcStatus requester_status;  // the requester's WQE the NAK reaches
    NakReason counter;          // naks_sent / naks_received
};

// Indexed by RequestFailure (None has no row of its own: index 0 is unused).
inline constexpr std::array<FailureOutcome, static_cast<std::size_t>(RequestFailure::Count)> kFailureOutcome = {{
    {wire::NakCode::InvalidRequest, WcStatus::Success, WcStatus::Success, NakReason::InvalidRequest},  // None
    {wire::NakCode::InvalidRequest, WcStatus::RemInvReqErr, WcStatus::RemInvReqErr, NakReason::InvalidRequest},
    {wire::NakCode::RemoteAccessError, WcStatus::LocProtErr, WcStatus::RemAccessErr, NakReason::RemoteAccessError},
    {wire::NakCode::RemoteOperationalError, WcStatus::RemInvReqErr, WcStatus::RemOpErr,
     NakReason::RemoteOperationalError},
    {wire::NakCode::InvalidRdRequest, WcStatus::RemInvReqErr, WcStatus::RemInvRdReqErr, NakReason::InvalidRdRequest},
}};

[[nodiscard]] constexpr const FailureOutcome& outcome(RequestFailure f) {
    return kFailureOutcome[static_cast<std::size_t>(f)];
}

// The failure a received NAK code stands for; codes the IBA reserves count
// as remote operational errors (the requester cannot retry them either).
[[nodiscard]] constexpr RequestFailure failure_of(wire::NakCode code) {
    for (std::size_t i = 1; i < kFailureOutcome.size(); ++i) {
        if (kFailureOutcome[i].nak == code) {
            return static_cast<RequestFailure>(i);
        }
    }
    return RequestFailure::RemoteOperational;
}

static_assert(failure_of(wire::NakCode::RemoteAccessError) == RequestFailure::RemoteAccess);
static_assert(outcome(failure_of(wire::NakCode::InvalidRdRequest)).requester_status == WcStatus::RemInvRdReqErr);

// The message a responder is in the middle of (IBA 9.7.5.1.3): which
// MIDDLE or LAST may come next.
enum class InboundMessage : std::uint8_t {
    None,     // between messages: only a FIRST or ONLY
    Send,     // a SEND's FIRST or MIDDLE arrived
    Write,    // an RDMA WRITE's FIRST or MIDDLE arrived
    UcLost,   // UC: the message was lost (gap, no WQE, bad request); drop to the next FIRST or ONLY
};

// The receive WQE of the message in progress.
enum class ReceiveWqeState : std::uint8_t {
    None,    // none taken
    Taken,   // taken; the message lands in it
    Failed,  // taken, but the message cannot land (recv_status says why): it completes in error
};

// RC: whether the PSN-sequence NAK for the current gap went (IBA 9.7.5.1.2:
// one NAK per gap, then silence until the expected PSN arrives).
enum class SequenceNak : std::uint8_t { Armed, Sent };

}  // namespace uroce::engine
