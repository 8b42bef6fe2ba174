// Relaxed (FMR-style) memory regions, the client's side: registration and
// deregistration by writing the shared pool (abi/relaxed_mr.h), with no round
// trip to the daemon. Safe because a slot can only describe the owning
// process's own memory, in the pool's PD, and the daemon validates each slot
// when a key uses it. Flushing needs the daemon (RelaxedPool::flush).
#pragma once

#include <cstdint>

#include "abi/relaxed_mr.h"

namespace uroce::mr {

struct RelaxedRegistration {
    int error = 0;  // 0, EINVAL, EAGAIN (invalidations pending: retry), ENOMEM (pool full)
    std::uint32_t key = 0;     // lkey == rkey
    std::uint64_t addr = 0;    // the page-rounded area access is granted to
    std::uint64_t length = 0;
};

class RelaxedClient {
public:
    explicit RelaxedClient(uroce_relaxed_pool_header* shared) : shared_(shared) {}

    // ibv_reg_mr_relaxed: access is extended to the enclosing pages.
    RelaxedRegistration reg(std::uint64_t addr, std::uint64_t length, std::uint32_t access, std::uint64_t now_ns);
    // ibv_dereg_mr_relaxed: marks the slot; the key keeps working until the
    // daemon invalidates it. EINVAL when `key` is not a live registration.
    int dereg(std::uint32_t key, std::uint64_t now_ns);

private:
    uroce_relaxed_pool_header* shared_;
    std::uint32_t next_ = 0;  // where the next search for a free slot starts
};

}  // namespace uroce::mr
