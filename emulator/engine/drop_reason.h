// Why the engine dropped a received packet (or a frame it made), and which
// NAKs it sent and received: every drop and NAK has its own counter, so
// `uroce stats` can say why packets went missing. The tables are by value,
// like wire/parse_status.h; the STATS_REASONS reply carries them in this
// order (emulator/abi/control.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace uroce::engine {

enum class DropReason : std::uint8_t {
    // The silent drops of receive(), in the order of docs/wire.md.
    NotOurGid,              // destination GID is not one of the device's RoCEv2 GIDs
    UnknownQp,              // destination QP does not exist
    WrongTransport,         // opcode's transport is not the QP's type
    QpNotReceiving,         // QP not in RTR, RTS or SQD
    NotFromPeer,            // RC/UC: source GID is not the connected peer's
    BadPkey,                // P_Key is not the default partition
    BadQkey,                // UD: Q_Key differs (or no DETH)
    BadIcrc,                // invariant CRC does not verify
    // Requests.
    UdNotSendOnly,          // UD carries SEND ONLY only
    UdNoReceiveWqe,         // UD: no receive WQE, the datagram is lost (IBA 9.8.4)
    UcNoReceiveWqe,         // UC: no receive WQE, the message is lost
    UcResync,               // UC: waiting for the next FIRST or ONLY after a loss
    UcInvalidRequest,       // UC: a request RC would NAK (no NAKs on UC)
    // Responses.
    ResponseOnUnreliable,   // a response to a UC or UD QP
    ResponsePsnNotOutstanding,  // PSN never sent or long acknowledged
    ResponseReservedSyndrome,   // AETH syndrome of the reserved kind
    ResponseNotExpected,    // an opcode no request waits for
    ResponseWrongOperation, // atomic ACK for a non-atomic WQE, READ response for a non-READ
    ResponseNoRequest,      // no outstanding READ or atomic covers its PSN
    // Frames the engine made.
    FrameNotBuilt,          // the builder refused it (too long)
    HeldFramesFull,         // the port refused it and the engine holds too many already
    // Sequence gaps (appended: the STATS_REASONS array keeps its order).
    RequestPsnAhead,        // RC: a request past the expected PSN (one before it lost; NAKed once per gap)
    DuplicateNotReplayable, // a duplicate READ or atomic whose saved result is gone (the requester retries)
    ReadResponseOutOfOrder, // a READ response after a missing one (the READ is asked again from the gap)
    Count,
};

constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::Count);

constexpr std::array<std::string_view, kDropReasonCount> kDropReasonName = {
    "not_our_gid",
    "unknown_qp",
    "wrong_transport",
    "qp_not_receiving",
    "not_from_peer",
    "bad_pkey",
    "bad_qkey",
    "bad_icrc",
    "ud_not_send_only",
    "ud_no_receive_wqe",
    "uc_no_receive_wqe",
    "uc_resync",
    "uc_invalid_request",
    "response_on_unreliable",
    "response_psn_not_outstanding",
    "response_reserved_syndrome",
    "response_not_expected",
    "response_wrong_operation",
    "response_no_request",
    "frame_not_built",
    "held_frames_full",
    "request_psn_ahead",
    "duplicate_not_replayable",
    "read_response_out_of_order",
};

[[nodiscard]] constexpr std::string_view name(DropReason r) { return kDropReasonName[static_cast<std::size_t>(r)]; }

// NAKs by kind: the five NAK codes of IBA table 43 (same values as
// wire::NakCode) and the RNR NAK (IBA 9.7.5.2.8).
enum class NakReason : std::uint8_t {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    ReceiverNotReady,
    Count,
};

constexpr std::size_t kNakReasonCount = static_cast<std::size_t>(NakReason::Count);

constexpr std::array<std::string_view, kNakReasonCount> kNakReasonName = {
    "psn_sequence_error", "invalid_request", "remote_access_error", "remote_operational_error",
    "invalid_rd_request", "receiver_not_ready",
};

[[nodiscard]] constexpr std::string_view name(NakReason r) { return kNakReasonName[static_cast<std::size_t>(r)]; }

// Every name is filled in (an entry missing from a table leaves an empty one).
constexpr bool all_named() {
    for (std::string_view n : kDropReasonName) {
        if (n.empty()) {
            return false;
        }
    }
    for (std::string_view n : kNakReasonName) {
        if (n.empty()) {
            return false;
        }
    }
    return true;
}
static_assert(all_named());

}  // namespace uroce::engine
