/* One remote access error of a chosen kind, between two RC QPs of this
 * process on the device's own address, for `uroce explain` to explain:
 * run as `uroce exec -- access_errors KIND` with KIND one of bad_rkey,
 * stale_key, wrong_pd, no_remote_write, no_remote_read, no_remote_atomic,
 * out_of_range, relaxed_after_dereg. The requester's work request must
 * complete with IBV_WC_REM_ACCESS_ERR. Prints "qps REQUESTER RESPONDER"
 * (decimal QPNs) and one line per check; the exit status is the number of
 * failures (test_explain.py reads the records it caused). */
#define UROCE_RELAXED_MR_DLSYM
#include <poll.h>

#include "ibv_relaxed_mr.h"
#include "verbs_check.h"

#define REGION 4096u
/* out_of_range writes this many bytes starting this many before the end. */
#define OVERRUN_LENGTH 16u
#define OVERRUN_BY 8u

struct pair {
    struct ibv_context* ctx;
    struct ibv_pd* pd;
    struct ibv_cq* cq;
    struct ibv_qp* requester;
    struct ibv_qp* responder;
    char* local;
    struct ibv_mr* local_mr;
};

static struct ibv_qp* new_qp(struct pair* p) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = p->cq;
    a.recv_cq = p->cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    return ibv_create_qp(p->pd, &a);
}

static void pair_up(struct pair* p, struct ibv_context* ctx) {
    const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    p->ctx = ctx;
    p->pd = ibv_alloc_pd(ctx);
    p->cq = p->pd != NULL ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
    p->requester = p->cq != NULL ? new_qp(p) : NULL;
    p->responder = p->cq != NULL ? new_qp(p) : NULL;
    if (p->requester == NULL || p->responder == NULL) {
        printf("FAIL PD, CQ and QPs\n");
        exit(1);
    }
    connect_rc_to_own_address(p->requester, p->responder->qp_num, remote, 14);
    connect_rc_to_own_address(p->responder, p->requester->qp_num, remote, 14);
    p->local = aligned_alloc(4096, REGION);
    memset(p->local, 0, REGION);
    p->local_mr = ibv_reg_mr(p->pd, p->local, REGION, IBV_ACCESS_LOCAL_WRITE);
    check(p->local_mr != NULL, "the requester's local MR");
    printf("qps %u %u\n", p->requester->qp_num, p->responder->qp_num);
}

/* Posts one signaled work request of `opcode` at remote [addr, +len) with
 * `rkey` and waits (at most 10 s) for its completion's status. */
static int transfer(struct pair* p, enum ibv_wr_opcode opcode, uint64_t addr, uint32_t len, uint32_t rkey) {
    struct ibv_sge sge = {(uintptr_t)p->local, len, p->local_mr->lkey};
    struct ibv_send_wr wr;
    struct ibv_send_wr* bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 0xE1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = addr;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 1;
    } else {
        wr.wr.rdma.remote_addr = addr;
        wr.wr.rdma.rkey = rkey;
    }
    if (ibv_post_send(p->requester, &wr, &bad) != 0) {
        return -1;
    }
    for (int i = 0; i < 10000; ++i) {
        struct ibv_wc wc;
        const int n = ibv_poll_cq(p->cq, 1, &wc);
        if (n < 0) {
            return -1;
        }
        if (n == 1 && wc.wr_id == 0xE1) {
            return (int)wc.status;
        }
        poll(NULL, 0, 1);
    }
    return -2;
}

static void expect_refused(struct pair* p, enum ibv_wr_opcode opcode, uint64_t addr, uint32_t len, uint32_t rkey,
                           const char* what) {
    const int status = transfer(p, opcode, addr, len, rkey);
    char line[256];
    snprintf(line, sizeof line, "%s completes with %s (%d), want IBV_WC_REM_ACCESS_ERR", what,
             status >= 0 ? ibv_wc_status_str((enum ibv_wc_status)status) : "nothing", status);
    check(status == IBV_WC_REM_ACCESS_ERR, line);
}

/* The responder's region, registered in `pd` with `access`. */
static struct ibv_mr* region(struct ibv_pd* pd, int access) {
    void* buf = aligned_alloc(4096, REGION);
    memset(buf, 0, REGION);
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, REGION, access);
    check(mr != NULL, "the responder's MR");
    if (mr == NULL) {
        exit(1);
    }
    return mr;
}

static int run(struct pair* p, const char* kind) {
    const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC;
    if (strcmp(kind, "bad_rkey") == 0) {
        struct ibv_mr* mr = region(p->pd, all);
        /* Key index 0xFFFFFE: beyond any table this test's daemon fills. */
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)mr->addr, 8, 0xFFFFFE00u | 0x5A, "WRITE with an unknown rkey");
    } else if (strcmp(kind, "stale_key") == 0) {
        struct ibv_mr* old = region(p->pd, all);
        const uint32_t stale = old->rkey;
        void* addr = old->addr;
        check_ret(ibv_dereg_mr(old), 0, "deregister the first MR");
        struct ibv_mr* now = ibv_reg_mr(p->pd, addr, REGION, all);
        check(now != NULL && now->rkey >> 8 == stale >> 8 && now->rkey != stale,
              "the next registration reuses its key index with another key byte");
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)addr, 8, stale, "WRITE with the earlier registration's rkey");
    } else if (strcmp(kind, "wrong_pd") == 0) {
        struct ibv_pd* other = ibv_alloc_pd(p->ctx);
        struct ibv_mr* mr = region(other, all);
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)mr->addr, 8, mr->rkey, "WRITE into an MR of another PD");
    } else if (strcmp(kind, "no_remote_write") == 0) {
        struct ibv_mr* mr = region(p->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)mr->addr, 8, mr->rkey, "WRITE into an MR without REMOTE_WRITE");
    } else if (strcmp(kind, "no_remote_read") == 0) {
        struct ibv_mr* mr = region(p->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        expect_refused(p, IBV_WR_RDMA_READ, (uintptr_t)mr->addr, 8, mr->rkey, "READ of an MR without REMOTE_READ");
    } else if (strcmp(kind, "no_remote_atomic") == 0) {
        struct ibv_mr* mr = region(p->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        expect_refused(p, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)mr->addr, 8, mr->rkey,
                       "fetch-and-add on an MR without REMOTE_ATOMIC");
    } else if (strcmp(kind, "out_of_range") == 0) {
        struct ibv_mr* mr = region(p->pd, all);
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)mr->addr + REGION - (OVERRUN_LENGTH - OVERRUN_BY),
                       OVERRUN_LENGTH, mr->rkey, "WRITE ending 8 bytes past the MR");
    } else if (strcmp(kind, "relaxed_after_dereg") == 0) {
        char* buf = aligned_alloc(4096, REGION);
        struct ibv_mr* mr = ibv_reg_mr_relaxed(p->pd, buf, REGION, all & ~IBV_ACCESS_REMOTE_ATOMIC);
        check(mr != NULL, "ibv_reg_mr_relaxed");
        if (mr == NULL) {
            return 1;
        }
        const uint32_t rkey = mr->rkey;
        check_ret(ibv_dereg_mr_relaxed(mr), 0, "ibv_dereg_mr_relaxed");
        /* Invalidated now: the rkey fails, whenever the WRITE arrives. */
        check_ret(ibv_flush_relaxed_mr(p->pd), 0, "ibv_flush_relaxed_mr");
        expect_refused(p, IBV_WR_RDMA_WRITE, (uintptr_t)buf, 8, rkey, "WRITE through the deregistered relaxed MR");
    } else {
        printf("FAIL unknown kind %s\n", kind);
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: %s KIND\n", argv[0]);
        return 2;
    }
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct pair p;
    memset(&p, 0, sizeof p);
    pair_up(&p, ctx);
    run(&p, argv[1]);
    printf("%d failure(s)\n", check_failures);
    /* Exiting closes everything: the daemon reclaims what this process made. */
    return check_failures;
}
