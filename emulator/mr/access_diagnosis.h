// Why a remote request failed its key check, in more detail than the
// CheckStatus the data path answers with: which of the conditions behind
// RkeyInvalid it was (no such key, a stale key byte, an unbound window, a
// relaxed MR used after its deregistration), what the key names, and by how
// many bytes a range missed. Worked out only after a check failed
// (MrTable::diagnose_remote), so the data path pays nothing for it.
#pragma once

#include <cstdint>

#include "access_report.h"
#include "check_status.h"

namespace uroce::mr {

enum class RefusedCheck : std::uint8_t {
    None,
    QpAccessNotEnabled,  // the QP lacks the remote right
    KeyNotFound,         // no entry, or an entry with no object
    KeyByteStale,        // the entry holds a later registration (another key byte)
    WindowNotBound,
    WindowWrongQp,
    RelaxedAfterDereg,   // a relaxed slot whose key byte moved on: deregistered and invalidated
    PdMismatch,
    NoRemoteRead,
    NoRemoteWrite,
    NoRemoteAtomic,
    AtomicMisaligned,
    OutOfRange,
    OdpFault,
    Count,
};

struct AccessDiagnosis {
    RefusedCheck check = RefusedCheck::None;
    bool region_known = false;  // the fields below describe what the key names
    std::uint32_t region_pd = 0;
    std::uint64_t region_start = 0;
    std::uint64_t region_length = 0;
    std::uint32_t region_access = 0;
    // OutOfRange: the bytes outside the region, before its start or past its end.
    bool before_start = false;
    std::uint64_t overrun = 0;
    // RelaxedAfterDereg: the registration as the client recorded it in its slot.
    bool has_history = false;
    std::uint64_t registered_ns = 0;
    std::uint64_t deregistered_ns = 0;
};

}  // namespace uroce::mr
