/* A receive the daemon had begun to fill when it went, and a thread blocked
 * in ibv_get_cq_event meanwhile (docs/provider.md, "When the daemon goes").
 *
 * Two RC QPs of this process, connected to each other at 192.0.2.1 (GID
 * index 2), path MTU 1024. B posts two receives; A sends a 2048-byte
 * message whose second SGE has an lkey nobody has: the daemon sends the
 * first packet (the first SGE, exactly one MTU), then fails the WQE on A
 * (local protection error) and sends nothing more, so B's first receive
 * stays half filled for good. Its first 1024 bytes arriving in B's buffer
 * show the daemon took it. Prints "ready", arms B's CQ and blocks in
 * ibv_get_cq_event on its completion channel; the test then stops
 * (SIGTERM) or kills (SIGKILL) the daemon. Both receives must complete
 * exactly once with IBV_WC_WR_FLUSH_ERR after the wakeup. SIGALRM ends a
 * wait that never wakes (exit 2). Exit status: the number of failures. */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "verbs_check.h"

enum { MTU = 1024, MESSAGE = 2 * MTU, HALF_ID = 500, UNTOUCHED_ID = 501, WAKE_WITHIN_S = 20 };

static char send_buf[MESSAGE];
static char recv_buf[2][MESSAGE];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void never_woke(int sig) {
    (void)sig;
    static const char msg[] = "FAIL ibv_get_cq_event did not return after the daemon went\n";
    (void)!write(STDOUT_FILENO, msg, sizeof msg - 1);
    _exit(2);
}

static struct ibv_qp* new_rc(struct ibv_pd* pd, struct ibv_cq* cq) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 1;
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    check(qp != NULL, "ibv_create_qp");
    if (qp == NULL) {
        exit(1);
    }
    return qp;
}

/* RESET -> INIT -> RTR -> RTS towards `dest` at our own address. */
static void connect_to(struct ibv_qp* qp, uint32_t dest) { connect_rc_to_own_address(qp, dest, 0, 14); }

static void post_recv(struct ibv_qp* qp, struct ibv_mr* mr, int which, uint64_t id) {
    struct ibv_sge sge = {.addr = (uintptr_t)recv_buf[which], .length = MESSAGE, .lkey = mr->lkey};
    struct ibv_recv_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    check_ret(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv");
}

/* One MTU of good data, then an SGE the daemon refuses when it gets there. */
static void post_broken_send(struct ibv_qp* qp, struct ibv_mr* mr) {
    struct ibv_sge sge[2] = {
        {.addr = (uintptr_t)send_buf, .length = MTU, .lkey = mr->lkey},
        {.addr = (uintptr_t)send_buf + MTU, .length = MTU, .lkey = mr->lkey ^ 0x5a5a00u},
    };
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.sg_list = sge;
    wr.num_sge = 2;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    check_ret(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send");
}

/* Until A's send fails and the first packet is in B's buffer (bounded). */
static void wait_half_received(struct ibv_cq* a_cq) {
    int send_failed = 0;
    int first_half_in = 0;
    const double deadline = now_s() + 20;
    while (!(send_failed && first_half_in) && now_s() < deadline) {
        struct ibv_wc wc;
        if (ibv_poll_cq(a_cq, 1, &wc) == 1) {
            check(wc.wr_id == 1 && wc.status == IBV_WC_LOC_PROT_ERR, "the send fails at its second SGE");
            send_failed = 1;
        }
        first_half_in = memcmp(recv_buf[0], send_buf, MTU) == 0;
    }
    check(send_failed, "the send completed in error");
    check(first_half_in, "its first packet is in the receive buffer");
    check(memcmp(recv_buf[0] + MTU, send_buf + MTU, MTU) != 0, "its second half is not");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    struct ibv_mr* send_mr = pd != NULL ? ibv_reg_mr(pd, send_buf, sizeof send_buf, 0) : NULL;
    struct ibv_mr* recv_mr = pd != NULL ? ibv_reg_mr(pd, recv_buf, sizeof recv_buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
    struct ibv_cq* a_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
    struct ibv_cq* b_cq = channel != NULL ? ibv_create_cq(ctx, 8, NULL, channel, 0) : NULL;
    check(send_mr != NULL && recv_mr != NULL && a_cq != NULL && b_cq != NULL,
          "PD, two MRs, a channel, two CQs (run under uroce exec)");
    if (check_failures != 0) {
        return 1;
    }
    for (int i = 0; i < MESSAGE; ++i) {
        send_buf[i] = (char)(i * 7 + 1);
    }
    struct ibv_qp* a = new_rc(pd, a_cq);
    struct ibv_qp* b = new_rc(pd, b_cq);
    connect_to(a, b->qp_num);
    connect_to(b, a->qp_num);
    post_recv(b, recv_mr, 0, HALF_ID);
    post_recv(b, recv_mr, 1, UNTOUCHED_ID);
    post_broken_send(a, send_mr);
    wait_half_received(a_cq);
    struct ibv_wc wc;
    check(ibv_poll_cq(b_cq, 1, &wc) == 0, "nothing completes on B while the daemon runs");
    check_ret(ibv_req_notify_cq(b_cq, 0), 0, "ibv_req_notify_cq");
    if (check_failures != 0) {
        return check_failures;
    }
    printf("ready\n");

    signal(SIGALRM, never_woke);
    alarm(WAKE_WITHIN_S);
    struct ibv_cq* ev_cq = NULL;
    void* ev_ctx = NULL;
    const double start = now_s();
    const int got_event = ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0;
    alarm(0);
    printf("woke %.3f s after ready\n", now_s() - start);
    check(got_event && ev_cq == b_cq, "ibv_get_cq_event returns B's CQ");
    if (got_event) {
        ibv_ack_cq_events(b_cq, 1);
    }

    int seen[2] = {0, 0};
    int others = 0;
    const double deadline = now_s() + 5;
    while (seen[0] + seen[1] + others < 2 && now_s() < deadline) {
        if (ibv_poll_cq(b_cq, 1, &wc) != 1) {
            continue;
        }
        char line[160];
        snprintf(line, sizeof line, "wr_id %llu: %s, qp 0x%x, IBV_WC_RECV", (unsigned long long)wc.wr_id,
                 ibv_wc_status_str(wc.status), wc.qp_num);
        check(wc.status == IBV_WC_WR_FLUSH_ERR && wc.qp_num == b->qp_num && wc.opcode == IBV_WC_RECV &&
                  (wc.wr_id == HALF_ID || wc.wr_id == UNTOUCHED_ID),
              line);
        if (wc.wr_id == HALF_ID || wc.wr_id == UNTOUCHED_ID) {
            ++seen[wc.wr_id - HALF_ID];
        } else {
            ++others;
        }
    }
    check(seen[0] == 1, "the half-received receive completes exactly once, flushed");
    check(seen[1] == 1, "the untouched receive completes exactly once, flushed");
    check(ibv_poll_cq(b_cq, 1, &wc) == 0 && ibv_poll_cq(a_cq, 1, &wc) == 0, "nothing more completes");
    /* Joins the provider's watcher thread (a hang here times the test out). */
    check_ret(ibv_close_device(ctx), 0, "ibv_close_device");
    ibv_free_device_list(list);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
