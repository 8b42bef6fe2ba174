/*
 * uroce direct-verbs extensions: what a uroce device offers beyond
 * <infiniband/verbs.h>. Plain C. The functions live in the provider plugin
 * liburoce-rdmav34.so, which libibverbs loads itself; a program finds them
 * there with dlsym() rather than linking to the plugin, so it still starts
 * where no uroce device exists (ibv_relaxed_mr.h does that lookup when
 * UROCE_RELAXED_MR_DLSYM is defined).
 *
 * Relaxed memory regions (FMR-style; docs/memory-registration.md): cheap
 * registration from a pre-allocated per-PD pool, no round trip to uroced.
 *  - access is granted to whole pages (the area is rounded out);
 *  - deregistration is deferred: the key keeps working until the daemon
 *    invalidates the slot in a batch (watermark, timer, or a flush);
 *  - uroce_dv_flush_relaxed_mr(pd) invalidates every deregistered slot now.
 * Errors: NULL / a positive errno; EAGAIN means invalidations are pending
 * (flush and retry), ENOMEM that the pool is full.
 */
#ifndef UROCE_DV_H
#define UROCE_DV_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Parent domains (docs/provider.md "Parent domains"): the resource_type the
 * allocator of ibv_alloc_parent_domain(3) is called with, for the provider's
 * host-side state of a QP or a CQ made on the domain. Their rings are the
 * daemon's shared memory and never come from the allocator. The high half
 * ("uroc") keeps the values apart from other providers' types.
 */
#define UROCE_DV_RES_TYPE_QP 0x75726f6300000001ULL
#define UROCE_DV_RES_TYPE_CQ 0x75726f6300000002ULL

struct ibv_mr* uroce_dv_reg_mr_relaxed(struct ibv_pd* pd, void* addr, size_t length, int access);
int uroce_dv_dereg_mr_relaxed(struct ibv_mr* mr);
int uroce_dv_flush_relaxed_mr(struct ibv_pd* pd);

#ifdef __cplusplus
}
#endif

#endif /* UROCE_DV_H */
