// Why a memory access was refused: one reason per failed check of a local
// SGE or a remote request, each mapped in one place to the work-completion
// status the requester sees and, for remote requests, the NAK the responder
// sends (IBA 9.7.5.2.4 and table 43; the whole table is in docs/wire.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/wc_status.h"
#include "wire/headers.h"

namespace uroce::mr {

enum class CheckStatus : std::uint8_t {
    Ok,
    // Local SGE (lkey) checks: the requester's own buffer.
    LkeyInvalid,            // no such entry, stale key byte, or not an MR
    LocalPdMismatch,        // MR belongs to another PD than the QP
    LocalWriteNotGranted,   // the device writes into an MR without LOCAL_WRITE
    LocalOutOfRange,        // [addr, addr+len) not inside the MR
    LocalOdpFault,          // ON_DEMAND: the address is not mapped now
    // Remote request (rkey) checks: the responder's memory.
    QpAccessNotEnabled,     // the QP was not given REMOTE_READ/WRITE/ATOMIC
    RkeyInvalid,            // no such entry, stale key byte, or window not bound
    RemotePdMismatch,       // MR or window belongs to another PD than the QP
    RemoteAccessNotGranted, // the MR or window lacks the remote right
    RemoteOutOfRange,       // [va, va+len) not inside the MR or window
    AtomicMisaligned,       // atomic address not 8-byte aligned, or length not 8
    WindowWrongQp,          // type 2 window bound to another QP
    RemoteOdpFault,         // ON_DEMAND: the address is not mapped now
    Count,
};

constexpr std::size_t kCheckStatusCount = static_cast<std::size_t>(CheckStatus::Count);

struct CheckStatusInfo {
    std::string_view name;
    WcStatus wc_status;
    std::optional<wire::NakCode> nak;  // remote checks only
};

constexpr std::array<CheckStatusInfo, kCheckStatusCount> kCheckStatusInfo = {{
    {"ok", WcStatus::Success, std::nullopt},
    {"lkey_invalid", WcStatus::LocProtErr, std::nullopt},
    {"local_pd_mismatch", WcStatus::LocProtErr, std::nullopt},
    {"local_write_not_granted", WcStatus::LocProtErr, std::nullopt},
    {"local_out_of_range", WcStatus::LocProtErr, std::nullopt},
    {"local_odp_fault", WcStatus::LocProtErr, std::nullopt},
    // IBA 9.7.5.2.4: an operation the QP does not allow is an invalid request.
    {"qp_access_not_enabled", WcStatus::RemInvReqErr, wire::NakCode::InvalidRequest},
    {"rkey_invalid", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
    {"remote_pd_mismatch", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
    {"remote_access_not_granted", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
    {"remote_out_of_range", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
    // IBA 9.4.5: a misaligned atomic is an invalid request, not an access error.
    {"atomic_misaligned", WcStatus::RemInvReqErr, wire::NakCode::InvalidRequest},
    {"window_wrong_qp", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
    {"remote_odp_fault", WcStatus::RemAccessErr, wire::NakCode::RemoteAccessError},
}};

[[nodiscard]] constexpr const CheckStatusInfo& info(CheckStatus s) {
    return kCheckStatusInfo[static_cast<std::size_t>(s)];
}

// The AETH syndrome a responder sends for a failed remote check.
[[nodiscard]] constexpr std::optional<std::uint8_t> nak_syndrome(CheckStatus s) {
    const auto nak = info(s).nak;
    if (!nak) {
        return std::nullopt;
    }
    return wire::make_syndrome(wire::AckKind::Nak, static_cast<std::uint8_t>(*nak));
}

}  // namespace uroce::mr
