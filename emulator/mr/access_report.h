// Who accessed memory and how, and the reports the relaxed-MR sanitizer
// keeps: every access through a relaxed MR that was deregistered but not yet
// invalidated, with the MR's history.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/headers.h"

namespace uroce::mr {

enum class RemoteOp : std::uint8_t { Read, Write, Atomic, Local };

// The other end of an access: the requesting QP's GID and QPN for remote
// requests; for local SGEs the QP that posted the work request.
struct Peer {
    wire::Gid gid{};
    std::uint32_t qpn = 0;
};

struct StaleAccessReport {
    std::uint32_t owner = 0;  // the client whose pool it is
    std::uint32_t pd = 0;
    std::uint32_t key = 0;
    // The registration, as the client recorded it in the pool.
    std::uint64_t user_addr = 0;
    std::uint64_t user_length = 0;
    std::uint64_t granted_addr = 0;  // page-rounded
    std::uint64_t granted_length = 0;
    std::uint32_t access_flags = 0;
    std::uint64_t registered_ns = 0;    // client's CLOCK_MONOTONIC
    std::uint64_t deregistered_ns = 0;
    // The access.
    RemoteOp op = RemoteOp::Read;
    std::uint32_t qpn = 0;  // our QP it arrived on (or that posted it)
    Peer peer;
    std::uint64_t va = 0;
    std::uint64_t length = 0;
    std::uint64_t seen_ns = 0;  // daemon's CLOCK_MONOTONIC
};

// One line, for logs and `uroce stats`.
[[nodiscard]] std::string describe(const StaleAccessReport& r);

// Counters of one PD's relaxed pools.
struct PdStats {
    std::uint64_t stale_accesses = 0;
    std::uint64_t invalidations = 0;
    std::uint64_t invalidation_batches = 0;
    std::uint64_t flushes = 0;
    std::uint64_t eagain = 0;         // as the client counted them
    std::uint64_t corrupt_slots = 0;  // slots whose contents failed validation on access
    std::vector<StaleAccessReport> recent_stale;  // newest last, bounded
};

}  // namespace uroce::mr
