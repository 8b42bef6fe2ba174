/* Relaxed memory regions through the Solaris-named compatibility header
 * (verbs_provider/ibv_relaxed_mr.h), the functions found with dlsym in the
 * plugin libibverbs loaded. Run as `uroce exec -- relaxed_mr`. One line per
 * check; the exit status is the number of failures. */
#define UROCE_RELAXED_MR_DLSYM
#include "ibv_relaxed_mr.h"
#include "verbs_check.h"

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    check(pd != NULL, "ibv_alloc_pd");
    if (pd == NULL) {
        return 1;
    }
    char* buf = aligned_alloc(4096, 8 * 4096);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    check_ret(ibv_flush_relaxed_mr(pd), 0, "ibv_flush_relaxed_mr with no pool yet");
    struct ibv_mr* mr = check_ptr(ibv_reg_mr_relaxed(pd, buf + 100, 5000, access), 0,
                                  "ibv_reg_mr_relaxed (the pool is created on first use)");
    check_ptr(ibv_reg_mr_relaxed(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE), EINVAL,
              "ibv_reg_mr_relaxed REMOTE_WRITE without LOCAL_WRITE");
    check_ptr(ibv_reg_mr_relaxed(pd, buf, 0, access), EINVAL, "ibv_reg_mr_relaxed of length 0");
    if (mr != NULL) {
        check(mr->lkey == mr->rkey && mr->lkey != 0 && mr->addr == buf + 100 && mr->length == 5000 && mr->pd == pd,
              "the relaxed ibv_mr describes the registration");
        struct ibv_mr* second = check_ptr(ibv_reg_mr_relaxed(pd, buf, 4096, access), 0, "a second relaxed MR");
        check(second == NULL || second->lkey != mr->lkey, "... with its own key");
        check_ret(ibv_dereg_mr_relaxed(mr), 0, "ibv_dereg_mr_relaxed");
        if (second != NULL) {
            check_ret(ibv_dereg_mr_relaxed(second), 0, "ibv_dereg_mr_relaxed of the second");
        }
    }
    check_ret(ibv_flush_relaxed_mr(pd), 0, "ibv_flush_relaxed_mr invalidates the deregistered slots");
    /* Many registrations: no round trip each, the pool recycles flushed slots. */
    int ok = 1;
    for (int i = 0; i < 3000 && ok; ++i) {
        struct ibv_mr* m = ibv_reg_mr_relaxed(pd, buf + (i % 8) * 4096, 4096, access);
        if (m == NULL && errno == EAGAIN) {
            ok = ibv_flush_relaxed_mr(pd) == 0;
            continue;
        }
        ok = m != NULL && ibv_dereg_mr_relaxed(m) == 0;
    }
    check(ok, "3000 register/deregister cycles through a 1024-slot pool");
    check_ret(ibv_flush_relaxed_mr(pd), 0, "a final flush");
    check_ret(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd while its relaxed pool exists");
    check_ret(ibv_close_device(ctx), 0, "ibv_close_device (the daemon reclaims the pool and PD)");
    ibv_free_device_list(list);
    free(buf);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
