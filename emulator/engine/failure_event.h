// Explained failures: what the engine records, in words, when a remote
// request is refused, an access goes through a deregistered relaxed MR, or
// a work request completes in error (docs/explain.md). The record itself is
// the control protocol's uroce_explain_record (abi/control.h), filled only
// on failure paths; these tables name its `kind` and `check` fields, and
// describe() turns one into a sentence, so the daemon's log, `uroce explain`
// and the "text" of its --json output say the same thing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "abi/control.h"

namespace uroce::engine {

enum class FailureKind : std::uint8_t {
    RequestRefused,   // the responder refused a remote request (NAK on RC, dropped on UC)
    StaleAccess,      // an access through a relaxed MR deregistered but not yet invalidated: allowed
    ErrorCompletion,  // a work request completed with an error status
    Count,
};

// Which check failed (refusals, stale accesses), or why a work request
// completed in error. The first values are mr::RefusedCheck's, in its order
// (mr/access_diagnosis.h; static_asserts in failure_report.cc).
enum class FailureCheck : std::uint8_t {
    None,
    // The responder's remote key checks (mr_check.cc, IBA 9.7.5.2.4 / 10.6.7).
    QpAccessNotEnabled,  // the QP was not given the remote right for this operation
    KeyNotFound,         // no MR, window or relaxed slot answers to the rkey
    KeyByteStale,        // the rkey's index is in use, but with another key byte: an earlier registration's key
    WindowNotBound,      // the rkey names a memory window that is not bound
    WindowWrongQp,       // a type 2 window bound to another QP
    RelaxedAfterDereg,   // a relaxed MR used after its deregistration
    PdMismatch,          // the MR or window is in another PD than the QP
    NoRemoteRead,        // the MR or window lacks REMOTE_READ
    NoRemoteWrite,       // ... REMOTE_WRITE
    NoRemoteAtomic,      // ... REMOTE_ATOMIC
    AtomicMisaligned,    // atomic not 8 bytes, or not 8-byte aligned
    OutOfRange,          // [va, va + length) not inside the MR or window
    OdpFault,            // on-demand MR: the address is not mapped now
    // The responder's other checks.
    InvalidRequest,      // opcode sequence or lengths (IBA 9.7.5.1.3 / C9-86..88)
    RemoteOperational,   // the responder could not read or write its client's memory
    // Why a work request completed in error (the requester, or a receive).
    PeerNak,             // the peer NAKed the request (its NAK code in `nak`)
    RetryExceeded,       // no ACK after retry_cnt retransmissions
    RnrRetryExceeded,    // receiver not ready after rnr_retry retries
    LocalProtection,     // an SGE's lkey check failed (lkey, PD, LOCAL_WRITE, range)
    LocalLength,         // the message does not fit the receive WQE, or the WQE's lengths are wrong
    LocalQpOperation,    // a malformed WQE or an operation the QP cannot do
    BadResponse,         // the peer's response does not fit the request
    Flushed,             // the QP is in the error state: outstanding work requests flushed
    MwBind,              // a memory window bind failed
    OtherStatus,         // any other error status (wc_status says which)
    Count,
};

constexpr std::size_t kFailureKindCount = static_cast<std::size_t>(FailureKind::Count);
constexpr std::size_t kFailureCheckCount = static_cast<std::size_t>(FailureCheck::Count);

constexpr std::array<std::string_view, kFailureKindCount> kFailureKindName = {
    "request_refused",
    "stale_access",
    "error_completion",
};

constexpr std::array<std::string_view, kFailureCheckCount> kFailureCheckName = {
    "none",
    "qp_access_not_enabled",
    "key_not_found",
    "key_byte_stale",
    "window_not_bound",
    "window_wrong_qp",
    "relaxed_after_dereg",
    "pd_mismatch",
    "no_remote_read",
    "no_remote_write",
    "no_remote_atomic",
    "atomic_misaligned",
    "out_of_range",
    "odp_fault",
    "invalid_request",
    "remote_operational",
    "peer_nak",
    "retry_exceeded",
    "rnr_retry_exceeded",
    "local_protection",
    "local_length",
    "local_qp_operation",
    "bad_response",
    "flushed",
    "mw_bind",
    "other_status",
};

[[nodiscard]] std::string_view kind_name(std::uint32_t kind);
[[nodiscard]] std::string_view check_name(std::uint32_t check);
// The record's opcode in words: the BTH opcode's name for requests, the
// work completion's opcode for error completions.
[[nodiscard]] std::string opcode_name(const uroce_explain_record& r);
// A NAK code of IBA table 43 in words.
[[nodiscard]] std::string_view nak_name(std::int32_t code);

// One sentence (no newline): what happened, which check, which QP and peer,
// where, and what it became (completion status, NAK).
[[nodiscard]] std::string describe(const uroce_explain_record& r);

}  // namespace uroce::engine
