#include "access_flags.h"

#include <cerrno>

namespace uroce::mr {

AccessCheck check_mr_access(std::uint32_t flags) {
    const std::uint32_t unknown = flags & ~Access::kMrKnown;
    if ((unknown & ~Access::kOptionalRange) != 0) {
        return {EINVAL, 0};
    }
    flags &= ~unknown;
    if ((flags & (Access::kRemoteWrite | Access::kRemoteAtomic)) != 0 && (flags & Access::kLocalWrite) == 0) {
        return {EINVAL, 0};
    }
    return {0, flags};
}

AccessCheck check_mw_access(std::uint32_t mw_flags, std::uint32_t parent_mr_flags) {
    // LOCAL_WRITE means nothing for a window (it grants remote rights only);
    // rdma_rxe and mlx5 take it among the flags and ignore it.
    mw_flags &= ~Access::kLocalWrite;
    if ((mw_flags & ~Access::kMwKnown) != 0) {
        return {EINVAL, 0};
    }
    if ((parent_mr_flags & Access::kMwBind) == 0) {
        return {EINVAL, 0};
    }
    if ((mw_flags & (Access::kRemoteWrite | Access::kRemoteAtomic)) != 0 &&
        (parent_mr_flags & Access::kLocalWrite) == 0) {
        return {EINVAL, 0};
    }
    return {0, mw_flags};
}

}  // namespace uroce::mr
