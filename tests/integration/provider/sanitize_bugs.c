/* Commits, on purpose, one of the RDMA bugs the sanitizer reports
 * (docs/sanitizer.md), or none: `sanitize_bugs SCENARIO`, run under
 * `uroce exec --sanitize` against a uroced. Two RC QPs of one device talk to
 * each other; every step is checked (one line each) so that a scenario that
 * did not run as written fails instead of silently reporting nothing.
 *
 *   clean               SEND/RECV, WRITE, READ and atomics used correctly
 *   send-changed        a SEND source changed before its completion
 *   recv-written        a receive buffer written before its completion
 *   dereg-in-flight     an MR deregistered while a receive names it
 *   overlapping-recvs   two receives overlapping in part, posted at once
 *   read-overlap        an RDMA READ into the source of a SEND in flight
 *   cq-overrun          more receives posted than their CQ holds
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verbs_check.h"

enum { kBufBytes = 4096, kCqEntries = 64, kSmallCq = 1 };

struct side {
    struct ibv_cq* cq;
    struct ibv_qp* qp;
    struct ibv_mr* mr;
    uint8_t* buf;
};

static struct ibv_context* ctx;
static struct ibv_pd* pd;

static void new_side(struct side* s, int cq_entries) {
    s->buf = calloc(1, kBufBytes);
    s->mr = ibv_reg_mr(pd, s->buf, kBufBytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC);
    s->cq = ibv_create_cq(ctx, cq_entries, NULL, NULL, 0);
    struct ibv_qp_init_attr init = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .cap = {.max_send_wr = 8, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    s->qp = s->mr != NULL && s->cq != NULL ? ibv_create_qp(pd, &init) : NULL;
    check(s->qp != NULL, "MR, CQ and QP");
    if (s->qp == NULL) {
        exit(1);
    }
}

static void free_side(struct side* s) {
    check_ret(ibv_destroy_qp(s->qp), 0, "ibv_destroy_qp");
    check_ret(ibv_destroy_cq(s->cq), 0, "ibv_destroy_cq");
    if (s->mr != NULL) {
        check_ret(ibv_dereg_mr(s->mr), 0, "ibv_dereg_mr");
    }
    free(s->buf);
}

static void post_recv(struct side* s, uint64_t wr_id, size_t offset, uint32_t length) {
    struct ibv_sge sge = {(uintptr_t)(s->buf + offset), length, s->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
    check_ret(ibv_post_recv(s->qp, &wr, &bad), 0, "ibv_post_recv");
}

static void post(struct side* s, enum ibv_wr_opcode op, uint64_t wr_id, size_t offset, uint32_t length,
                 const struct side* peer) {
    struct ibv_sge sge = {(uintptr_t)(s->buf + offset), length, s->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    wr.wr.rdma.remote_addr = (uintptr_t)(peer->buf + offset);
    wr.wr.rdma.rkey = peer->mr->rkey;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = (uintptr_t)(peer->buf + offset);
        wr.wr.atomic.rkey = peer->mr->rkey;
        wr.wr.atomic.compare_add = 1;
    }
    check_ret(ibv_post_send(s->qp, &wr, &bad), 0, "ibv_post_send");
}

/* Polls `cq` until the completion of `wr_id` (others on the way are taken too). */
static void wait_for(struct ibv_cq* cq, uint64_t wr_id, const char* what) {
    struct ibv_wc wc;
    for (long spins = 0; spins < 200000000L; ++spins) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        if (n == 1 && wc.wr_id == wr_id) {
            char line[128];
            snprintf(line, sizeof line, "%s completes (%s)", what, ibv_wc_status_str(wc.status));
            check(wc.status == IBV_WC_SUCCESS, line);
            return;
        }
    }
    check(0, what);
}

static void clean(struct side* a, struct side* b) {
    post_recv(b, 1, 0, 256);
    memset(a->buf, 0x61, 256);
    post(a, IBV_WR_SEND, 2, 0, 256, b);
    wait_for(a->cq, 2, "SEND");
    wait_for(b->cq, 1, "RECV");
    memset(a->buf, 0x62, 256); /* after the completion: allowed */
    post(a, IBV_WR_RDMA_WRITE, 3, 512, 256, b);
    wait_for(a->cq, 3, "RDMA WRITE");
    post(a, IBV_WR_RDMA_READ, 4, 1024, 256, b);
    wait_for(a->cq, 4, "RDMA READ");
    post(a, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 2048, 8, b);
    wait_for(a->cq, 5, "atomic");
}

static void send_changed(struct side* a, struct side* b) {
    post_recv(b, 1, 0, 256);
    memset(a->buf, 0x61, 256);
    post(a, IBV_WR_SEND, 2, 0, 256, b);
    a->buf[100] = 0x7E; /* the bug: before the SEND's completion */
    wait_for(a->cq, 2, "SEND");
    wait_for(b->cq, 1, "RECV");
}

static void recv_written(struct side* a, struct side* b) {
    post_recv(b, 1, 0, 256);
    b->buf[200] = 0x7E; /* the bug: the receive is posted */
    post(a, IBV_WR_SEND, 2, 1024, 16, b);
    wait_for(a->cq, 2, "SEND");
    wait_for(b->cq, 1, "RECV");
}

static void dereg_in_flight(struct side* a, struct side* b) {
    (void)a;
    post_recv(b, 1, 0, 256);
    check_ret(ibv_dereg_mr(b->mr), 0, "ibv_dereg_mr with a receive posted"); /* the bug */
    b->mr = NULL;
}

static void overlapping_recvs(struct side* a, struct side* b) {
    post_recv(b, 1, 0, 256);
    post_recv(b, 2, 128, 256); /* the bug: half of the first */
    post(a, IBV_WR_SEND, 3, 0, 16, b);
    post(a, IBV_WR_SEND, 4, 0, 16, b);
    wait_for(a->cq, 4, "SENDs");
}

static void read_overlap(struct side* a, struct side* b) {
    post_recv(b, 1, 0, 256);
    post(a, IBV_WR_SEND, 2, 0, 256, b);
    post(a, IBV_WR_RDMA_READ, 3, 0, 256, b); /* the bug: into the SEND's source */
    wait_for(a->cq, 3, "SEND and READ");
}

static void cq_overrun(struct side* a, struct side* b) {
    (void)b;
    /* The bug: one receive more than the CQ holds (the device may round the size up). */
    printf("CQ of %d entries\n", a->cq->cqe);
    for (int i = 0; i <= a->cq->cqe; ++i) {
        post_recv(a, 10 + (uint64_t)i, 0, 64);
    }
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: sanitize_bugs SCENARIO\n");
        return 2;
    }
    const char* scenario = argv[1];
    struct ibv_device** list;
    ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    struct side a, b;
    new_side(&a, strcmp(scenario, "cq-overrun") == 0 ? kSmallCq : kCqEntries);
    new_side(&b, kCqEntries);
    const int rights = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    connect_rc_to_own_address(a.qp, b.qp->qp_num, rights, 14);
    connect_rc_to_own_address(b.qp, a.qp->qp_num, rights, 14);

    static const struct {
        const char* name;
        void (*run)(struct side*, struct side*);
    } scenarios[] = {
        {"clean", clean},
        {"send-changed", send_changed},
        {"recv-written", recv_written},
        {"dereg-in-flight", dereg_in_flight},
        {"overlapping-recvs", overlapping_recvs},
        {"read-overlap", read_overlap},
        {"cq-overrun", cq_overrun},
    };
    int found = 0;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i) {
        if (strcmp(scenarios[i].name, scenario) == 0) {
            scenarios[i].run(&a, &b);
            found = 1;
        }
    }
    check(found, "scenario known");
    free_side(&a);
    free_side(&b);
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures;
}
