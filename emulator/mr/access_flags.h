// Memory access flags and the rules ibv_reg_mr(3) and ibv_bind_mw(3) give
// them. The values are those of enum ibv_access_flags (rdma-core verbs.h) so
// they travel from the provider unchanged.
#pragma once

#include <cstdint>

namespace uroce::mr {

// A struct rather than a namespace: `access` would collide with POSIX access(2)
// wherever a using-directive brings it in.
struct Access {
    static constexpr std::uint32_t kLocalWrite = 1u << 0;
    static constexpr std::uint32_t kRemoteWrite = 1u << 1;
    static constexpr std::uint32_t kRemoteRead = 1u << 2;
    static constexpr std::uint32_t kRemoteAtomic = 1u << 3;
    static constexpr std::uint32_t kMwBind = 1u << 4;
    static constexpr std::uint32_t kZeroBased = 1u << 5;
    static constexpr std::uint32_t kOnDemand = 1u << 6;
    static constexpr std::uint32_t kHugetlb = 1u << 7;
// Bits 20-29 are "optional" flags (verbs.h IBV_ACCESS_OPTIONAL_RANGE): a
// device that does not know one ignores it instead of failing.
    static constexpr std::uint32_t kOptionalRange = 0x3FF00000u;
    static constexpr std::uint32_t kRelaxedOrdering = 1u << 20;

    static constexpr std::uint32_t kRemoteMask = kRemoteWrite | kRemoteRead | kRemoteAtomic;
    static constexpr std::uint32_t kMrKnown =
        kLocalWrite | kRemoteMask | kMwBind | kZeroBased | kOnDemand | kHugetlb | kRelaxedOrdering;
// What a memory window may grant (ibv_bind_mw(3)).
    static constexpr std::uint32_t kMwKnown = kRemoteMask | kZeroBased;
};

struct AccessCheck {
    int error = 0;            // 0 or EINVAL
    std::uint32_t flags = 0;  // the flags in force: unknown optional bits dropped
};

// ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC need LOCAL_WRITE; unknown
// non-optional bits are EINVAL. Local read is always allowed.
[[nodiscard]] AccessCheck check_mr_access(std::uint32_t flags);

// ibv_bind_mw(3): only remote rights and ZERO_BASED (LOCAL_WRITE is taken
// and dropped, as rdma_rxe and mlx5 do); REMOTE_WRITE or
// REMOTE_ATOMIC on the window need LOCAL_WRITE on the parent MR, and the
// parent must have been registered with MW_BIND.
[[nodiscard]] AccessCheck check_mw_access(std::uint32_t mw_flags, std::uint32_t parent_mr_flags);

}  // namespace uroce::mr
