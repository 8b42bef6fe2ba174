/* QP, CQ, SRQ and AH verbs through stock libibverbs against a running
 * uroced (run as `uroce exec -- qp_states`): every legal ibv_modify_qp
 * transition for RC, UC and UD, illegal transitions and wrong attribute
 * masks failing with EINVAL, ibv_query_qp returning what was set, SRQ
 * create/modify/query/destroy, AH create/destroy, ibv_fork_init.
 * One line per check; the exit status is the number of failures. */
#include <stdint.h>

#include "verbs_check.h"

static struct ibv_pd* pd;
static struct ibv_cq* cq;

static struct ibv_qp* new_qp(enum ibv_qp_type type, struct ibv_srq* srq) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.srq = srq;
    a.qp_type = type;
    a.cap.max_send_wr = 8;
    a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    check(qp != NULL && qp->state == IBV_QPS_RESET && qp->qp_num > 1 && qp->pd == pd && qp->send_cq == cq,
          "ibv_create_qp: a QP in RESET with a QPN");
    return qp;
}

static const char* name(enum ibv_qp_type t) { return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : "UD"; }

static void modify(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask, int want, const char* what) {
    char line[200];
    snprintf(line, sizeof line, "%s: %s", name(qp->qp_type), what);
    check_ret(ibv_modify_qp(qp, a, mask), want, line);
}

/* The attributes each transition needs. */
static void fill(struct ibv_qp_attr* a, enum ibv_qp_state to) {
    memset(a, 0, sizeof *a);
    a->qp_state = to;
    a->pkey_index = 0;
    a->port_num = 1;
    a->qkey = 0x11111111;
    a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    a->path_mtu = IBV_MTU_1024;
    a->dest_qp_num = 0x123;
    a->rq_psn = 0x1234;
    a->max_dest_rd_atomic = 4;
    a->min_rnr_timer = 12;
    a->ah_attr.is_global = 1;
    a->ah_attr.port_num = 1;
    a->ah_attr.grh.sgid_index = 2;
    a->ah_attr.grh.hop_limit = 64;
    a->ah_attr.grh.dgid.raw[10] = 0xff;
    a->ah_attr.grh.dgid.raw[11] = 0xff;
    a->ah_attr.grh.dgid.raw[12] = 192;
    a->ah_attr.grh.dgid.raw[15] = 2;
    a->timeout = 14;
    a->retry_cnt = 7;
    a->rnr_retry = 7;
    a->sq_psn = 0x5678;
    a->max_rd_atomic = 4;
}

static int init_mask(enum ibv_qp_type t) {
    return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
}
static int rtr_mask(enum ibv_qp_type t) {
    if (t == IBV_QPT_UD) {
        return IBV_QP_STATE;
    }
    int m = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    return t == IBV_QPT_RC ? m | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : m;
}
static int rts_mask(enum ibv_qp_type t) {
    int m = IBV_QP_STATE | IBV_QP_SQ_PSN;
    return t == IBV_QPT_RC ? m | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : m;
}

static void walk(enum ibv_qp_type t) {
    struct ibv_qp* qp = new_qp(t, NULL);
    if (qp == NULL) {
        return;
    }
    struct ibv_qp_attr a;
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;

    /* Illegal from RESET. */
    fill(&a, IBV_QPS_RTR);
    modify(qp, &a, rtr_mask(t), EINVAL, "RESET -> RTR is illegal");
    fill(&a, IBV_QPS_RTS);
    modify(qp, &a, rts_mask(t), EINVAL, "RESET -> RTS is illegal");
    fill(&a, IBV_QPS_ERR);
    modify(qp, &a, IBV_QP_STATE, EINVAL, "RESET -> ERR is refused (as Linux does)");
    /* Wrong masks for RESET -> INIT. */
    fill(&a, IBV_QPS_INIT);
    modify(qp, &a, init_mask(t) & ~IBV_QP_PORT, EINVAL, "RESET -> INIT without PORT");
    modify(qp, &a, init_mask(t) | (t == IBV_QPT_UD ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY), EINVAL,
           "RESET -> INIT with an attribute the type does not have");
    modify(qp, &a, init_mask(t) | IBV_QP_SQ_PSN, EINVAL, "RESET -> INIT with SQ_PSN");
    a.port_num = 2;
    modify(qp, &a, init_mask(t), EINVAL, "RESET -> INIT on port 2");
    fill(&a, IBV_QPS_INIT);
    modify(qp, &a, init_mask(t), 0, "RESET -> INIT");
    check(qp->state == IBV_QPS_INIT, "qp->state is INIT");
    modify(qp, &a, init_mask(t) & ~IBV_QP_STATE, 0, "INIT -> INIT (no STATE bit: modify in place)");
    modify(qp, &a, init_mask(t), 0, "INIT -> INIT");

    fill(&a, IBV_QPS_RTS);
    modify(qp, &a, rts_mask(t), EINVAL, "INIT -> RTS is illegal");
    fill(&a, IBV_QPS_RTR);
    if (t != IBV_QPT_UD) {
        modify(qp, &a, rtr_mask(t) & ~IBV_QP_AV, EINVAL, "INIT -> RTR without AV");
        a.path_mtu = IBV_MTU_4096;
        modify(qp, &a, rtr_mask(t), EINVAL, "INIT -> RTR with a path MTU above the port's active MTU");
        a.path_mtu = IBV_MTU_1024;
        a.ah_attr.is_global = 0;
        modify(qp, &a, rtr_mask(t), EINVAL, "INIT -> RTR without a GRH");
        a.ah_attr.is_global = 1;
    }
    modify(qp, &a, rtr_mask(t) | IBV_QP_TIMEOUT, EINVAL, "INIT -> RTR with TIMEOUT");
    modify(qp, &a, rtr_mask(t), 0, "INIT -> RTR");

    fill(&a, IBV_QPS_RTS);
    if (t == IBV_QPT_RC) {
        modify(qp, &a, rts_mask(t) & ~IBV_QP_RETRY_CNT, EINVAL, "RTR -> RTS without RETRY_CNT");
        /* rdma_rxe refuses a local ACK timeout above 31; a retry count above 7
         * it takes (uroce keeps the low 3 bits, attr_values.c). */
        a.timeout = 32;
        modify(qp, &a, rts_mask(t), EINVAL, "RTR -> RTS with timeout 32");
        a.timeout = 14;
    }
    modify(qp, &a, rts_mask(t), 0, "RTR -> RTS");

    /* Everything set is reported back. */
    memset(&q, 0, sizeof q);
    check_ret(ibv_query_qp(qp, &q, IBV_QP_STATE | IBV_QP_CAP, &qi), 0, "ibv_query_qp");
    check(q.qp_state == IBV_QPS_RTS && q.cur_qp_state == IBV_QPS_RTS, "query: state RTS");
    check(q.sq_psn == 0x5678 && q.port_num == 1 && q.pkey_index == 0, "query: sq_psn, port, pkey_index");
    if (t == IBV_QPT_UD) {
        check(q.qkey == 0x11111111, "query: qkey");
    } else {
        check(q.qp_access_flags == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ), "query: access flags");
        check(q.dest_qp_num == 0x123 && q.rq_psn == 0x1234 && q.path_mtu == IBV_MTU_1024,
              "query: dest_qp_num, rq_psn, path_mtu");
        check(q.ah_attr.is_global == 1 && q.ah_attr.grh.sgid_index == 2 && q.ah_attr.grh.hop_limit == 64 &&
                  q.ah_attr.grh.dgid.raw[12] == 192 && q.ah_attr.grh.dgid.raw[15] == 2 && q.ah_attr.port_num == 1,
              "query: the address vector");
    }
    if (t == IBV_QPT_RC) {
        check(q.timeout == 14 && q.retry_cnt == 7 && q.rnr_retry == 7 && q.max_rd_atomic == 4 &&
                  q.max_dest_rd_atomic == 4 && q.min_rnr_timer == 12,
              "query: timeout, retry counts, rd_atomic depths, RNR timer");
    }
    check(q.cap.max_send_wr == 8 && q.cap.max_recv_wr == 8 && q.cap.max_send_sge == 2 && qi.cap.max_recv_sge == 2,
          "query: the queue sizes");
    check(qi.qp_type == t && qi.send_cq == cq && qi.recv_cq == cq, "query: init attributes");

    fill(&a, IBV_QPS_RTS);
    a.cur_qp_state = IBV_QPS_RTS;
    modify(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE, 0, "RTS -> RTS (CUR_STATE)");
    a.cur_qp_state = IBV_QPS_INIT;
    modify(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE, EINVAL, "RTS -> RTS with a wrong CUR_STATE");
    fill(&a, IBV_QPS_RTR);
    modify(qp, &a, IBV_QP_STATE, EINVAL, "RTS -> RTR is illegal");
    fill(&a, IBV_QPS_SQD);
    modify(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY, 0, "RTS -> SQD");
    modify(qp, &a, IBV_QP_STATE, 0, "SQD -> SQD");
    fill(&a, IBV_QPS_RTS);
    modify(qp, &a, IBV_QP_STATE, 0, "SQD -> RTS");
    fill(&a, IBV_QPS_ERR);
    modify(qp, &a, IBV_QP_STATE | IBV_QP_PORT, EINVAL, "RTS -> ERR with another attribute");
    modify(qp, &a, IBV_QP_STATE, 0, "RTS -> ERR");
    fill(&a, IBV_QPS_INIT);
    modify(qp, &a, init_mask(t), EINVAL, "ERR -> INIT is illegal");
    fill(&a, IBV_QPS_RESET);
    modify(qp, &a, IBV_QP_STATE, 0, "ERR -> RESET");

    /* Every state can go to ERR and to RESET. */
    enum ibv_qp_state path[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD};
    int masks[] = {init_mask(t), rtr_mask(t), rts_mask(t), IBV_QP_STATE};
    for (int to_reset = 0; to_reset < 2; ++to_reset) {
        for (int depth = 1; depth <= 4; ++depth) {
            for (int i = 0; i < depth; ++i) {
                fill(&a, path[i]);
                char what[64];
                snprintf(what, sizeof what, "walk to state %d", path[i]);
                modify(qp, &a, masks[i], 0, what);
            }
            fill(&a, to_reset ? IBV_QPS_RESET : IBV_QPS_ERR);
            modify(qp, &a, IBV_QP_STATE, 0, to_reset ? "-> RESET" : "-> ERR");
            if (!to_reset) {
                fill(&a, IBV_QPS_RESET);
                modify(qp, &a, IBV_QP_STATE, 0, "ERR -> RESET");
            }
        }
    }
    check_ret(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_ret(ibv_fork_init(), 0, "ibv_fork_init");
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    check(pd != NULL && cq != NULL && cq->cqe >= 64, "ibv_alloc_pd, ibv_create_cq");
    if (pd == NULL || cq == NULL) {
        return 1;
    }
    check_ptr(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL, "ibv_create_cq with 0 entries");
    check_ptr(ibv_create_cq(ctx, 4, NULL, NULL, 1), EINVAL, "ibv_create_cq on a vector that does not exist");
    struct ibv_wc wc;
    check(ibv_poll_cq(cq, 1, &wc) == 0, "ibv_poll_cq: no completions");
    check_ret(ibv_req_notify_cq(cq, 0), 0, "ibv_req_notify_cq");

    walk(IBV_QPT_RC);
    walk(IBV_QPT_UC);
    walk(IBV_QPT_UD);

    /* A QP holds its CQ. */
    struct ibv_qp* qp = new_qp(IBV_QPT_RC, NULL);
    check_ret(ibv_destroy_cq(cq), EBUSY, "ibv_destroy_cq while a QP uses it");
    struct ibv_qp_init_attr big;
    memset(&big, 0, sizeof big);
    big.send_cq = cq;
    big.recv_cq = cq;
    big.qp_type = IBV_QPT_RC;
    big.cap.max_send_wr = 1u << 30;
    check_ptr(ibv_create_qp(pd, &big), EINVAL, "ibv_create_qp beyond max_qp_wr");
    check_ret(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");

    /* SRQ. */
    struct ibv_srq_init_attr si;
    memset(&si, 0, sizeof si);
    si.attr.max_wr = 32;
    si.attr.max_sge = 2;
    struct ibv_srq* srq = check_ptr(ibv_create_srq(pd, &si), 0, "ibv_create_srq");
    si.attr.max_wr = 1u << 30;
    check_ptr(ibv_create_srq(pd, &si), EINVAL, "ibv_create_srq beyond max_srq_wr");
    if (srq != NULL) {
        struct ibv_srq_attr sa = {.max_wr = 0, .max_sge = 0, .srq_limit = 8};
        check_ret(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0, "ibv_modify_srq LIMIT 8");
        sa.srq_limit = 1000;
        check_ret(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), EINVAL, "ibv_modify_srq LIMIT above max_wr");
        memset(&sa, 0, sizeof sa);
        check_ret(ibv_query_srq(srq, &sa), 0, "ibv_query_srq");
        check(sa.max_wr == 32 && sa.max_sge == 2 && sa.srq_limit == 8, "query_srq returns what was set");
        struct ibv_qp* sq = new_qp(IBV_QPT_RC, srq);
        check_ret(ibv_destroy_srq(srq), EBUSY, "ibv_destroy_srq while a QP uses it");
        if (sq != NULL) {
            check_ret(ibv_destroy_qp(sq), 0, "ibv_destroy_qp of the SRQ's QP");
        }
        check_ret(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
    }

    /* AH. */
    struct ibv_ah_attr ah;
    memset(&ah, 0, sizeof ah);
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = 2;
    ah.grh.hop_limit = 64;
    ah.grh.dgid.raw[10] = 0xff;
    ah.grh.dgid.raw[11] = 0xff;
    struct ibv_ah* h = check_ptr(ibv_create_ah(pd, &ah), 0, "ibv_create_ah");
    ah.grh.sgid_index = 16;
    check_ptr(ibv_create_ah(pd, &ah), EINVAL, "ibv_create_ah with a GID index beyond the table");
    ah.grh.sgid_index = 2;
    ah.is_global = 0;
    check_ptr(ibv_create_ah(pd, &ah), EINVAL, "ibv_create_ah without a GRH (RoCE needs one)");
    if (h != NULL) {
        check_ret(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd while an AH uses it");
        check_ret(ibv_destroy_ah(h), 0, "ibv_destroy_ah");
    }

    check_ret(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    check_ret(ibv_close_device(ctx), 0, "ibv_close_device");
    ibv_free_device_list(list);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
