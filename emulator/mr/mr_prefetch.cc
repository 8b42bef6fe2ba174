// ibv_advise_mr(3): which SGEs may be prefetched. Only on-demand MRs take
// prefetch advice (a pinned MR has nothing to fault in; mlx5 answers ENOENT
// for one too), and PREFETCH_WRITE needs an MR the device may write. The
// daemon only checks; the provider faults the pages in, in the process that
// owns them (verbs_provider/verbs_odp.cc).
#include <cerrno>
#include <mutex>

#include "access_flags.h"
#include "mr_table.h"

namespace uroce::mr {

PrefetchTarget MrTable::prefetch_target(std::uint32_t owner, std::uint32_t pd, std::uint32_t lkey,
                                        std::uint64_t addr, std::uint64_t length, bool write) const {
    std::lock_guard lock(mutex_);
    const Descriptor* d = owned(MrKey{lkey}, owner);
    if (d == nullptr || d->kind != ObjectKind::Mr || !d->on_demand || d->pd != pd) {
        return {ENOENT, 0};
    }
    if (write && (d->access & Access::kLocalWrite) == 0) {
        return {ENOENT, 0};
    }
    // Inside [iova, iova + length), without overflowing (implicit ODP MRs
    // span the whole 64-bit space).
    if (addr < d->iova || addr - d->iova > d->length || length > d->length - (addr - d->iova)) {
        return {EFAULT, 0};
    }
    return {0, d->host_base + (addr - d->iova)};
}

}  // namespace uroce::mr
