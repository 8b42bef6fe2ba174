/* What an application's outstanding work requests become when uroced stops
 * or dies under it (docs/provider.md, "When the daemon goes"): every send,
 * receive and SRQ receive posted and not completed completes exactly once,
 * with IBV_WC_WR_FLUSH_ERR and its own wr_id, on the CQ it belongs to
 * (unsignaled sends too); then every post fails with EIO.
 *
 * The sends go to a QP number nobody has, with the longest ACK timeout, so
 * they stay outstanding until the daemon goes. Prints "ready" once
 * everything is posted; the test then stops (SIGTERM) or kills (SIGKILL)
 * the daemon. Exit status: the number of failures. */
#include <poll.h>
#include <time.h>

#include "verbs_check.h"

enum { SENDS = 5, RECVS = 6, SRQ_RECVS = 4, SEND_ID = 100, RECV_ID = 200, SRQ_ID = 300 };

static struct ibv_pd* pd;
static char buf[4096];
static struct ibv_mr* mr;

static struct ibv_qp* new_rc(struct ibv_cq* send_cq, struct ibv_cq* recv_cq, struct ibv_srq* srq) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = send_cq;
    a.recv_cq = recv_cq;
    a.srq = srq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    check(qp != NULL, "ibv_create_qp");
    if (qp == NULL) {
        exit(1);
    }
    return qp;
}

/* RESET -> INIT -> RTR -> RTS towards QP 0x123 at our own address
 * (192.0.2.1, GID index 2): nobody answers, and with timeout 31 (2^31 x
 * 4.096 us, hours) nothing is retransmitted or timed out meanwhile. */
static void to_rts(struct ibv_qp* qp) { connect_rc_to_own_address(qp, 0x123, IBV_ACCESS_REMOTE_WRITE, 31); }

static void post_sends(struct ibv_qp* qp) {
    for (int i = 0; i < SENDS; ++i) {
        struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
        struct ibv_send_wr wr, *bad;
        memset(&wr, 0, sizeof wr);
        wr.wr_id = SEND_ID + (uint64_t)i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        /* The last one unsignaled: a flush completes it all the same. */
        wr.send_flags = i + 1 < SENDS ? IBV_SEND_SIGNALED : 0;
        check_ret(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send");
    }
}

static struct ibv_recv_wr recv_wr(uint64_t id, struct ibv_sge* sge) {
    struct ibv_recv_wr wr;
    memset(&wr, 0, sizeof wr);
    sge->addr = (uintptr_t)buf;
    sge->length = sizeof buf;
    sge->lkey = mr->lkey;
    wr.wr_id = id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    return wr;
}

struct expected {
    struct ibv_cq* cq;
    uint32_t qp_num;
    uint64_t first_id;
    int count;
    enum ibv_wc_opcode opcode;
    int seen[SENDS + RECVS + SRQ_RECVS];
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Polls every CQ until all expected completions came or 20 s passed;
 * returns how many came, counting each wr_id in its record. */
static int collect(struct expected* e, int n_expected, int total) {
    int got = 0;
    char line[256];
    const double deadline = now_s() + 20;
    while (got < total && now_s() < deadline) {
        for (int k = 0; k < n_expected; ++k) {
            struct ibv_wc wc[4];
            const int n = ibv_poll_cq(e[k].cq, 4, wc);
            check(n >= 0, "ibv_poll_cq does not fail");
            for (int i = 0; i < n; ++i) {
                const uint64_t at = wc[i].wr_id - e[k].first_id;
                const int ours = wc[i].wr_id >= e[k].first_id && at < (uint64_t)e[k].count;
                snprintf(line, sizeof line, "wr_id %llu: status %s, qp 0x%x, opcode %d on its own CQ",
                         (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status), wc[i].qp_num,
                         wc[i].opcode);
                check(ours && wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].qp_num == e[k].qp_num &&
                          wc[i].opcode == e[k].opcode,
                      line);
                if (ours) {
                    ++e[k].seen[at];
                }
                ++got;
            }
        }
    }
    return got;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    mr = pd != NULL ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq* send_cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
    struct ibv_cq* recv_cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
    struct ibv_cq* srq_cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
    struct ibv_srq_init_attr sa;
    memset(&sa, 0, sizeof sa);
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    struct ibv_srq* srq = ibv_create_srq(pd, &sa);
    check(mr != NULL && send_cq != NULL && recv_cq != NULL && srq_cq != NULL && srq != NULL,
          "PD, MR, three CQs and an SRQ");
    if (check_failures != 0) {
        return 1;
    }
    struct ibv_qp* qp = new_rc(send_cq, recv_cq, NULL);
    struct ibv_qp* srq_qp = new_rc(send_cq, srq_cq, srq);
    to_rts(qp);
    post_sends(qp);
    for (int i = 0; i < RECVS; ++i) {
        struct ibv_sge sge;
        struct ibv_recv_wr wr = recv_wr(RECV_ID + (uint64_t)i, &sge), *bad;
        check_ret(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv");
    }
    for (int i = 0; i < SRQ_RECVS; ++i) {
        struct ibv_sge sge;
        struct ibv_recv_wr wr = recv_wr(SRQ_ID + (uint64_t)i, &sge), *bad;
        check_ret(ibv_post_srq_recv(srq, &wr, &bad), 0, "ibv_post_srq_recv");
    }
    struct ibv_wc wc;
    check(ibv_poll_cq(send_cq, 1, &wc) == 0 && ibv_poll_cq(recv_cq, 1, &wc) == 0 && ibv_poll_cq(srq_cq, 1, &wc) == 0,
          "nothing completes while the daemon runs");
    printf("ready\n");

    struct expected e[3] = {
        {.cq = send_cq, .qp_num = qp->qp_num, .first_id = SEND_ID, .count = SENDS, .opcode = IBV_WC_SEND},
        {.cq = recv_cq, .qp_num = qp->qp_num, .first_id = RECV_ID, .count = RECVS, .opcode = IBV_WC_RECV},
        {.cq = srq_cq, .qp_num = srq_qp->qp_num, .first_id = SRQ_ID, .count = SRQ_RECVS, .opcode = IBV_WC_RECV},
    };
    const double start = now_s();
    const int got = collect(e, 3, SENDS + RECVS + SRQ_RECVS);
    printf("%d completions %.3f s after ready\n", got, now_s() - start);
    for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < e[k].count; ++i) {
            char line[128];
            snprintf(line, sizeof line, "wr_id %llu completed exactly once (%d)",
                     (unsigned long long)(e[k].first_id + (uint64_t)i), e[k].seen[i]);
            check(e[k].seen[i] == 1, line);
        }
    }
    check(ibv_poll_cq(send_cq, 1, &wc) == 0 && ibv_poll_cq(recv_cq, 1, &wc) == 0 && ibv_poll_cq(srq_cq, 1, &wc) == 0,
          "no completion after the flush");

    /* Later posts fail as on a device in fatal error. */
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr swr, *sbad = NULL;
    memset(&swr, 0, sizeof swr);
    swr.sg_list = &sge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    check_ret(ibv_post_send(qp, &swr, &sbad), EIO, "ibv_post_send after the daemon went");
    check(sbad == &swr, "bad_wr names the first WR");
    struct ibv_recv_wr rwr = recv_wr(1, &sge), *rbad = NULL;
    check_ret(ibv_post_recv(qp, &rwr, &rbad), EIO, "ibv_post_recv after the daemon went");
    check_ret(ibv_post_srq_recv(srq, &rwr, &rbad), EIO, "ibv_post_srq_recv after the daemon went");
    check(ibv_poll_cq(send_cq, 1, &wc) == 0 && ibv_poll_cq(recv_cq, 1, &wc) == 0, "a refused post completes nothing");
    ibv_free_device_list(list);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
