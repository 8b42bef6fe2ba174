/* The rules of ibv_reg_mr(3) and its relatives, through stock libibverbs,
 * against a running uroced: run as `uroce exec -- mr_rules`. One line per
 * check; the exit status is the number of failures. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "verbs_check.h"

#define BUF_LEN (64u * 1024u)
#define IOVA 0x100000u
#define UNKNOWN_ACCESS (1 << 12)

struct fake_mr { /* what libibverbs reads: ibv_mr, then the verbs_mr tail */
    struct ibv_mr mr;
    uint32_t mr_type;
    int access;
};

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &a);
}

/* The bind's completion within 5 s: -1 if none came. */
static int bind_status(struct ibv_qp* qp) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct ibv_wc wc;
    int n = 0;
    do {
        n = ibv_poll_cq(qp->send_cq, 1, &wc);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (n == 0 && now.tv_sec - start.tv_sec <= 5);
    return n == 1 && wc.opcode == IBV_WC_BIND_MW ? (int)wc.status : -1;
}

/* ibv_bind_mw(3) posts the bind to the QP: returns 0 when it completes
 * successfully, EINVAL when it is refused at once or completes
 * IBV_WC_MW_BIND_ERR (then the QP, in the error state, is connected again). */
static int bind(struct ibv_qp* qp, struct ibv_mw* mw, struct ibv_mr* mr, uint64_t addr, uint64_t len, unsigned acc) {
    struct ibv_mw_bind b;
    memset(&b, 0, sizeof b);
    b.wr_id = 1;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info.mr = mr;
    b.bind_info.addr = addr;
    b.bind_info.length = len;
    b.bind_info.mw_access_flags = acc;
    const int err = ibv_bind_mw(qp, mw, &b);
    if (err != 0) {
        return err;
    }
    const int status = bind_status(qp);
    if (status == IBV_WC_MW_BIND_ERR) {
        struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
        ibv_modify_qp(qp, &reset, IBV_QP_STATE);
        connect_rc_to_own_address(qp, qp->qp_num, 0, 14);
        return EINVAL;
    }
    return status == IBV_WC_SUCCESS ? 0 : -1;
}

/* A second process cannot name the first one's objects: it gets EINVAL as
 * if they did not exist. The child opens its own context (its own client of
 * the daemon) and hands it the parent's keys and handles. */
static int child_isolation(struct ibv_device* dev, struct ibv_mr* mr, struct ibv_pd* parent_pd, struct ibv_mw* mw,
                           void* buf) {
    struct ibv_context* ctx = ibv_open_device(dev);
    check(ctx != NULL, "child: opens its own context");
    if (ctx == NULL) {
        return 1;
    }
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    check(pd != NULL, "child: allocates its own PD");

    struct fake_mr f;
    memset(&f, 0, sizeof f);
    f.mr = *mr;
    f.mr.context = ctx;
    f.mr.pd = pd;
    check_ret(ibv_dereg_mr(&f.mr), EINVAL, "child: ibv_dereg_mr of the parent's lkey");

    /* The provider's PD object is larger than ibv_pd (a plain PD or a
     * parent domain): zeroed room after it, as for the MR, reads as a
     * plain PD nothing else uses. */
    struct {
        struct ibv_pd pd;
        char provider_part[256];
    } fake_pd;
    memset(&fake_pd, 0, sizeof fake_pd);
    fake_pd.pd = *parent_pd;
    fake_pd.pd.context = ctx;
    check_ptr(ibv_reg_mr(&fake_pd.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE), EINVAL, "child: ibv_reg_mr in the parent's PD");
    check_ret(ibv_dealloc_pd(&fake_pd.pd), EINVAL, "child: ibv_dealloc_pd of the parent's PD");

    struct ibv_mw fake_mw = *mw;
    fake_mw.context = ctx;
    fake_mw.pd = pd;
    check_ret(ibv_dealloc_mw(&fake_mw), EINVAL, "child: ibv_dealloc_mw of the parent's window");

    /* Its own objects work. */
    struct ibv_mr* own = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    check(own != NULL, "child: registers its own MR");
    if (own != NULL) {
        check_ret(ibv_dereg_mr(own), 0, "child: deregisters its own MR");
    }
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return check_failures;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    check(pd != NULL, "ibv_alloc_pd");
    if (pd == NULL) {
        return 1;
    }
    char* buf = aligned_alloc(4096, BUF_LEN);
    char* buf2 = aligned_alloc(4096, BUF_LEN);
    memset(buf, 0, BUF_LEN);
    memset(buf2, 0, BUF_LEN);
    const int lw = IBV_ACCESS_LOCAL_WRITE;

    /* EINVAL cases. */
    check_ptr(ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_REMOTE_WRITE), EINVAL, "REMOTE_WRITE without LOCAL_WRITE");
    check_ptr(ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_REMOTE_ATOMIC), EINVAL, "REMOTE_ATOMIC without LOCAL_WRITE");
    check_ptr(ibv_reg_mr(pd, buf, BUF_LEN, lw | UNKNOWN_ACCESS), EINVAL, "an unknown access flag");
    check_ptr(ibv_reg_mr(pd, buf, 0, lw), EINVAL, "length 0");

    /* Plain registration. */
    struct ibv_mr* mr = check_ptr(ibv_reg_mr(pd, buf, BUF_LEN, lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                                                  IBV_ACCESS_MW_BIND),
                                  0, "ibv_reg_mr LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|MW_BIND");
    if (mr == NULL) {
        return 1;
    }
    check(mr->addr == buf && mr->length == BUF_LEN && mr->pd == pd && mr->context == ctx && mr->lkey != 0,
          "the ibv_mr describes the registration");

    /* Windows are bound through a QP (type 1: ibv_bind_mw posts the bind to
     * its send queue), here one connected to itself. */
    struct ibv_cq* cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    check(cq != NULL, "ibv_create_cq");
    struct ibv_qp* qp = cq != NULL ? make_qp(pd, cq) : NULL;
    check(qp != NULL, "ibv_create_qp RC");
    if (qp == NULL) {
        return 1;
    }
    connect_rc_to_own_address(qp, qp->qp_num, 0, 14);

    /* iova honoured: windows bind in the MR's iova space, not at its address. */
    struct ibv_mr* mr_iova = check_ptr(ibv_reg_mr_iova(pd, buf2, BUF_LEN, IOVA, lw | IBV_ACCESS_MW_BIND), 0,
                                       "ibv_reg_mr_iova at iova 0x100000");
    struct ibv_mw* mw = check_ptr(ibv_alloc_mw(pd, IBV_MW_TYPE_1), 0, "ibv_alloc_mw type 1");
    if (mr_iova != NULL && mw != NULL) {
        check_ret(bind(qp, mw, mr_iova, IOVA + 4096, 4096, IBV_ACCESS_REMOTE_READ), 0,
                  "bind inside the iova range [0x100000, +64K)");
        check_ret(bind(qp, mw, mr_iova, (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_READ), EINVAL,
                  "bind at the buffer's own address (outside the iova range)");
        check_ret(bind(qp, mw, NULL, 0, 0, 0), 0, "unbind (no MR, length 0)");
        check_ret(ibv_dereg_mr(mr_iova), 0, "ibv_dereg_mr of the iova MR");
    }
    struct ibv_mr* mr_iova2 = check_ptr(ibv_reg_mr_iova2(pd, buf2, BUF_LEN, IOVA, (unsigned)(lw | IBV_ACCESS_MW_BIND)),
                                        0, "ibv_reg_mr_iova2 at iova 0x100000");
    if (mr_iova2 != NULL && mw != NULL) {
        check_ret(bind(qp, mw, mr_iova2, IOVA, BUF_LEN, IBV_ACCESS_REMOTE_READ), 0, "bind the whole iova2 range");
        check_ret(bind(qp, mw, NULL, 0, 0, 0), 0, "unbind");
        check_ret(ibv_dereg_mr(mr_iova2), 0, "ibv_dereg_mr of the iova2 MR");
    }

    /* ZERO_BASED: keys address from 0. */
    struct ibv_mr* zb = check_ptr(ibv_reg_mr(pd, buf2, BUF_LEN, lw | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND), 0,
                                  "ibv_reg_mr ZERO_BASED");
    if (zb != NULL && mw != NULL) {
        check_ret(bind(qp, mw, zb, 0, 4096, IBV_ACCESS_REMOTE_READ), 0, "bind at offset 0 of the ZERO_BASED MR");
        check_ret(bind(qp, mw, zb, 0, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED), EINVAL,
                  "a ZERO_BASED type 1 window (IBA o10-36.2.2)");
        check_ret(bind(qp, mw, zb, BUF_LEN, 4096, IBV_ACCESS_REMOTE_READ), EINVAL, "bind past its end");
        check_ret(bind(qp, mw, NULL, 0, 0, 0), 0, "unbind");
        check_ret(ibv_dereg_mr(zb), 0, "ibv_dereg_mr of the ZERO_BASED MR");
    }

    /* dma-buf: the fd travels to the daemon by SCM_RIGHTS, which maps it
     * (dmabuf_mr.c moves data through such MRs). A memfd sealed against
     * shrinking stands in for a dma-buf; an unsealed one is refused as the
     * kernel refuses a file that is no dma-buf. */
    const int dfd = memfd_create("uroce-test-dmabuf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    check(dfd >= 0 && ftruncate(dfd, BUF_LEN) == 0, "a memfd stands in for a dma-buf");
    check_ptr(ibv_reg_dmabuf_mr(pd, 0, BUF_LEN, 0, dfd, lw), EINVAL, "ibv_reg_dmabuf_mr on an unsealed memfd");
    check(fcntl(dfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0, "seal it against shrinking");
    struct ibv_mr* dm = check_ptr(ibv_reg_dmabuf_mr(pd, 0, BUF_LEN, 0, dfd, lw), 0, "ibv_reg_dmabuf_mr on a sealed memfd");
    if (dm != NULL) {
        check_ret(ibv_dereg_mr(dm), 0, "ibv_dereg_mr of the dma-buf MR");
    }
    check_ptr(ibv_reg_dmabuf_mr(pd, 0, 0, 0, dfd, lw), EINVAL, "ibv_reg_dmabuf_mr of length 0");
    check_ptr(ibv_reg_dmabuf_mr(pd, 4096, BUF_LEN, 0, dfd, lw), EINVAL, "ibv_reg_dmabuf_mr past the end of the buffer");
    close(dfd);

    /* Implicit ODP: the whole address space, on demand. libibverbs passes
     * addr 0 / SIZE_MAX through unchanged (no fork protection for ODP). */
    struct ibv_mr* odp = check_ptr(ibv_reg_mr(pd, NULL, SIZE_MAX, lw | IBV_ACCESS_ON_DEMAND), 0,
                                   "implicit ODP: ibv_reg_mr(NULL, SIZE_MAX, ON_DEMAND)");
    if (odp != NULL) {
        check_ret(ibv_dereg_mr(odp), 0, "ibv_dereg_mr of the implicit ODP MR");
    }

    /* ibv_rereg_mr keeps the keys. */
    const uint32_t lkey = mr->lkey;
    check_ret(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                           lw | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND),
              0, "ibv_rereg_mr CHANGE_ACCESS");
    check_ret(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
              IBV_REREG_MR_ERR_CMD, "ibv_rereg_mr to REMOTE_WRITE without LOCAL_WRITE");
    check(errno == EINVAL, "... with errno EINVAL");
    check_ret(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf2, BUF_LEN, 0), 0,
              "ibv_rereg_mr CHANGE_TRANSLATION");
    check(mr->lkey == lkey && mr->addr == buf2, "keys kept, the new address recorded");

    /* A bound window pins its MR. */
    if (mw != NULL) {
        const uint32_t old_rkey = mw->rkey;
        check_ret(bind(qp, mw, mr, (uintptr_t)buf2, 4096, IBV_ACCESS_REMOTE_READ), 0, "ibv_bind_mw type 1");
        check(mw->rkey != old_rkey, "the bind gave the window a new rkey");
        check_ret(ibv_dereg_mr(mr), EBUSY, "ibv_dereg_mr while a window is bound");
    }

    /* Isolation between processes. */
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        _exit(child_isolation(ctx->device, mr, pd, mw, buf2));
    }
    int status = 0;
    waitpid(child, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the second process could name none of our objects");

    if (mw != NULL) {
        check_ret(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw");
    }
    check_ret(ibv_dereg_mr(mr), 0, "ibv_dereg_mr once the window is gone");
    check_ret(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd while a QP uses it");
    check_ret(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
    check_ret(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    free(buf);
    free(buf2);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
