/* On-demand paging through stock libibverbs against a running uroced (run as
 * `uroce exec -- odp_advise`): the odp_caps query_device_ex reports, and
 * ibv_advise_mr(3) as mlx5 answers it: EOPNOTSUPP for an unknown advice,
 * EINVAL for unknown flags or an empty list, ENOENT for an lkey that names no
 * on-demand MR of the PD (or a read-only one for PREFETCH_WRITE), EFAULT for
 * a range outside the MR with IBV_ADVISE_MR_FLAG_FLUSH (a hint without it),
 * and a prefetch that really faults the pages in (mincore(2) before and
 * after), PREFETCH_NO_FAULT that does not. One line per check; the exit
 * status is the number of failures. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs_check.h"

enum { kPages = 8 };

static size_t page_bytes;

/* How many of the `pages` pages at `p` are resident. */
static int resident(void* p, size_t pages) {
    unsigned char vec[kPages * 2];
    if (pages > sizeof vec || mincore(p, pages * page_bytes, vec) != 0) {
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < pages; ++i) {
        n += vec[i] & 1;
    }
    return n;
}

static void* fresh_pages(void) {
    void* p = mmap(NULL, kPages * page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int advise(struct ibv_pd* pd, enum ibv_advise_mr_advice advice, uint32_t flags, uint32_t lkey, void* addr,
                  uint32_t length) {
    struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = length, .lkey = lkey};
    return ibv_advise_mr(pd, advice, flags, &sge, 1);
}

static void odp_caps(struct ibv_context* ctx) {
    struct ibv_device_attr_ex a;
    memset(&a, 0, sizeof a);
    check_ret(ibv_query_device_ex(ctx, NULL, &a), 0, "ibv_query_device_ex");
    const uint64_t general = a.odp_caps.general_caps;
    check(general == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT), "general_caps: ODP and implicit ODP");
    const uint32_t common = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
    check(a.odp_caps.per_transport_caps.rc_odp_caps ==
              (common | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC),
          "RC: send, recv, write, read, atomic, SRQ recv");
    check(a.odp_caps.per_transport_caps.uc_odp_caps == (common | IBV_ODP_SUPPORT_WRITE), "UC: send, recv, write, SRQ");
    check(a.odp_caps.per_transport_caps.ud_odp_caps == common, "UD: send, recv, SRQ recv");
}

/* Explicit ODP MRs: the rules of each argument. */
static void advise_rules(struct ibv_context* ctx, struct ibv_pd* pd) {
    uint8_t* buf = fresh_pages();
    uint8_t* pinned_buf = fresh_pages();
    uint8_t* ro_buf = fresh_pages();
    struct ibv_pd* other_pd = ibv_alloc_pd(ctx);
    if (buf == NULL || pinned_buf == NULL || ro_buf == NULL || other_pd == NULL) {
        check(0, "setup");
        return;
    }
    const size_t len = kPages * page_bytes;
    const int lw = IBV_ACCESS_LOCAL_WRITE;
    struct ibv_mr* odp = check_ptr(ibv_reg_mr(pd, buf, len, lw | IBV_ACCESS_ON_DEMAND), 0, "ODP MR");
    struct ibv_mr* odp_ro = check_ptr(ibv_reg_mr(pd, ro_buf, len, IBV_ACCESS_ON_DEMAND), 0, "read-only ODP MR");
    struct ibv_mr* pinned = check_ptr(ibv_reg_mr(pd, pinned_buf, len, lw), 0, "pinned MR");
    struct ibv_mr* odp_other = check_ptr(ibv_reg_mr(other_pd, buf, len, lw | IBV_ACCESS_ON_DEMAND), 0,
                                         "ODP MR of another PD");
    if (odp == NULL || odp_ro == NULL || pinned == NULL || odp_other == NULL) {
        return;
    }
    const uint32_t flush = IBV_ADVISE_MR_FLAG_FLUSH;
    check_ret(advise(pd, (enum ibv_advise_mr_advice)7, flush, odp->lkey, buf, 4096), EOPNOTSUPP, "unknown advice");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1u << 5, odp->lkey, buf, 4096), EINVAL, "unknown flag");
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 4096, .lkey = odp->lkey};
    check_ret(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, &sge, 0), EINVAL, "no SGE");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, pinned->lkey, pinned_buf, 4096), ENOENT,
              "a pinned (not on-demand) MR");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp->lkey ^ 0xFF, buf, 4096), ENOENT, "a stale lkey");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp_other->lkey, buf, 4096), ENOENT,
              "an ODP MR of another PD");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush, odp_ro->lkey, ro_buf, 4096), ENOENT,
              "PREFETCH_WRITE on a read-only ODP MR");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp_ro->lkey, ro_buf, 4096), 0,
              "PREFETCH on a read-only ODP MR");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush, odp->lkey, buf + len - 16, 4096), EFAULT,
              "a range past the MR's end, FLUSH");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, odp->lkey, buf + len - 16, 4096), 0,
              "the same range without FLUSH: a hint");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, pinned->lkey, pinned_buf, 4096), ENOENT,
              "without FLUSH the lkey is still judged");

    /* Pages are faulted in: the first half by PREFETCH_WRITE, nothing by
     * PREFETCH_NO_FAULT. */
    check(resident(buf, kPages) == 0, "fresh pages are not resident");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, flush, odp->lkey, buf, (uint32_t)len), 0,
              "PREFETCH_NO_FAULT");
    check(resident(buf, kPages) == 0, "PREFETCH_NO_FAULT faulted nothing in");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush, odp->lkey, buf, (uint32_t)(len / 2)), 0,
              "PREFETCH_WRITE of the first half");
    check(resident(buf, kPages) == kPages / 2, "the first half, and only it, is resident");
    int zero = 1;
    for (size_t i = 0; i < len; ++i) {
        zero = zero && buf[i] == 0;
    }
    check(zero, "prefetching wrote nothing");

    check_ret(ibv_dereg_mr(odp_other), 0, "dereg");
    check_ret(ibv_dereg_mr(pinned), 0, "dereg");
    check_ret(ibv_dereg_mr(odp_ro), 0, "dereg");
    check_ret(ibv_dereg_mr(odp), 0, "dereg");
    check_ret(ibv_dealloc_pd(other_pd), 0, "dealloc the other PD");
    munmap(buf, len);
    munmap(pinned_buf, len);
    munmap(ro_buf, len);
}

/* Implicit ODP: any address through the one lkey. */
static void implicit_odp(struct ibv_pd* pd) {
    struct ibv_mr* all = check_ptr(ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), 0,
                                   "implicit ODP MR");
    uint8_t* p = fresh_pages();
    if (all == NULL || p == NULL) {
        return;
    }
    const size_t len = kPages * page_bytes;
    check(resident(p, kPages) == 0, "implicit: fresh pages are not resident");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, all->lkey, p, (uint32_t)len), 0,
              "implicit: PREFETCH of fresh pages");
    check(resident(p, kPages) == kPages, "implicit: all of them resident");
    munmap(p, len);
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, all->lkey, p, (uint32_t)len), EFAULT,
              "implicit: an unmapped range, FLUSH");
    check_ret(advise(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, all->lkey, p, (uint32_t)len), 0,
              "implicit: an unmapped range without FLUSH (a hint)");
    check_ret(ibv_dereg_mr(all), 0, "dereg the implicit MR");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    struct ibv_device** list = NULL;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    if (pd == NULL) {
        printf("FAIL ibv_alloc_pd\n");
        return 1;
    }
    odp_caps(ctx);
    advise_rules(ctx, pd);
    implicit_odp(pd);
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures;
}
