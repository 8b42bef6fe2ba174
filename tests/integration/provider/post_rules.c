/* Posting work requests through stock libibverbs against a running uroced
 * (run as `uroce exec -- post_rules`): what ibv_post_send(3) and
 * ibv_post_recv(3) refuse at post time, with *bad_wr at the first refused WR
 * and the WRs before it posted: QP state, opcodes per QP type, SGE counts,
 * inline size, a full ring (ENOMEM), receive queues of QPs with an SRQ,
 * ibv_post_srq_recv. One line per check; the exit status is the number of
 * failures.
 *
 * Rings are filled within one call: the daemon sees nothing of a list
 * before the call publishes it, so "full" does not depend on how fast the
 * daemon works. */
#include <stdint.h>

#include "verbs_check.h"

static struct ibv_pd *pd;
static struct ibv_cq *cq;
static char buf[4096];
static struct ibv_mr *mr;

static struct ibv_qp *new_qp(enum ibv_qp_type type, struct ibv_srq *srq, uint32_t wr, uint32_t inline_size) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.srq = srq;
    a.qp_type = type;
    a.cap.max_send_wr = wr;
    a.cap.max_recv_wr = wr;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    a.cap.max_inline_data = inline_size;
    struct ibv_qp *qp = ibv_create_qp(pd, &a);
    check(qp != NULL, "ibv_create_qp");
    if (qp != NULL) {
        check(a.cap.max_send_wr >= wr && a.cap.max_inline_data >= inline_size, "ibv_create_qp grants what was asked");
    }
    return qp;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state to) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = to;
    a.port_num = 1;
    a.qkey = 0x11111111;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = 0x123;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = 2;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.dgid.raw[10] = 0xff;
    a.ah_attr.grh.dgid.raw[11] = 0xff;
    a.ah_attr.grh.dgid.raw[12] = 192;
    a.ah_attr.grh.dgid.raw[15] = 2;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    const int ud = qp->qp_type == IBV_QPT_UD;
    const int rc = qp->qp_type == IBV_QPT_RC;
    int mask = IBV_QP_STATE;
    if (to == IBV_QPS_INIT) {
        mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    } else if (to == IBV_QPS_RTR && !ud) {
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (rc) {
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
    } else if (to == IBV_QPS_RTS) {
        mask |= IBV_QP_SQ_PSN;
        if (rc) {
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
    }
    return ibv_modify_qp(qp, &a, mask);
}

static void to_rts(struct ibv_qp *qp) {
    check(to_state(qp, IBV_QPS_INIT) == 0 && to_state(qp, IBV_QPS_RTR) == 0 && to_state(qp, IBV_QPS_RTS) == 0,
          "QP to RTS");
}

static struct ibv_send_wr send_wr(enum ibv_wr_opcode op, struct ibv_sge *sge, int num_sge) {
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.opcode = op;
    wr.sg_list = sge;
    wr.num_sge = num_sge;
    wr.send_flags = IBV_SEND_SIGNALED;
    return wr;
}

/* Posts `wr` alone; checks the return value and where bad_wr points. */
static void post_one(struct ibv_qp *qp, struct ibv_send_wr *wr, int want, const char *what) {
    struct ibv_send_wr *bad = NULL;
    const int got = ibv_post_send(qp, wr, &bad);
    check_ret(got, want, what);
    if (want != 0) {
        check(bad == wr, "  bad_wr names it");
    }
}

static void send_side(void) {
    struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
    struct ibv_sge three[3] = {sge, sge, sge};

    struct ibv_qp *rc = new_qp(IBV_QPT_RC, NULL, 4, 64);
    if (rc == NULL) {
        return;
    }
    struct ibv_send_wr wr = send_wr(IBV_WR_SEND, &sge, 1);
    post_one(rc, &wr, EINVAL, "RC: ibv_post_send in RESET");
    check(to_state(rc, IBV_QPS_INIT) == 0, "RC to INIT");
    post_one(rc, &wr, EINVAL, "RC: ibv_post_send in INIT");
    check(to_state(rc, IBV_QPS_RTR) == 0, "RC to RTR");
    post_one(rc, &wr, EINVAL, "RC: ibv_post_send in RTR");
    check(to_state(rc, IBV_QPS_RTS) == 0, "RC to RTS");
    check_ret(ibv_destroy_qp(rc), 0, "ibv_destroy_qp");

    /* Fresh QPs in RTS: per list, the first refused WR stops it. */
    rc = new_qp(IBV_QPT_RC, NULL, 4, 64);
    if (rc == NULL) {
        return;
    }
    to_rts(rc);
    struct ibv_send_wr first = send_wr(IBV_WR_RDMA_WRITE, &sge, 1);
    struct ibv_send_wr second = send_wr(IBV_WR_SEND, three, 3);
    first.next = &second;
    struct ibv_send_wr *bad = NULL;
    check_ret(ibv_post_send(rc, &first, &bad), EINVAL, "RC: a WR with more SGEs than max_send_sge");
    check(bad == &second, "  bad_wr is the second WR (the first was posted)");

    struct ibv_send_wr big = send_wr(IBV_WR_SEND, &sge, 1);
    struct ibv_sge big_sge = {(uintptr_t)buf, 65, 0};
    big.sg_list = &big_sge;
    big.send_flags |= IBV_SEND_INLINE;
    post_one(rc, &big, EINVAL, "RC: inline data beyond max_inline_data");
    struct ibv_send_wr read_inline = send_wr(IBV_WR_RDMA_READ, &sge, 1);
    read_inline.send_flags |= IBV_SEND_INLINE;
    post_one(rc, &read_inline, EINVAL, "RC: an inline RDMA READ");
    struct ibv_send_wr tso = send_wr(IBV_WR_TSO, &sge, 1);
    post_one(rc, &tso, EINVAL, "RC: IBV_WR_TSO");

    check_ret(ibv_destroy_qp(rc), 0, "ibv_destroy_qp");

    /* A fresh QP with a 4-entry send queue: a list of 5 fills it and the
     * fifth does not fit. */
    rc = new_qp(IBV_QPT_RC, NULL, 4, 64);
    if (rc == NULL) {
        return;
    }
    to_rts(rc);
    struct ibv_send_wr list[5];
    for (int i = 0; i < 5; ++i) {
        list[i] = send_wr(IBV_WR_SEND, &sge, 1);
        list[i].send_flags |= IBV_SEND_INLINE;
        list[i].next = i < 4 ? &list[i + 1] : NULL;
    }
    bad = NULL;
    check_ret(ibv_post_send(rc, &list[0], &bad), ENOMEM, "RC: a list that overflows the send queue");
    check(bad == &list[4], "  bad_wr is the first WR that did not fit");
    check_ret(ibv_destroy_qp(rc), 0, "ibv_destroy_qp");

    /* Opcodes each transport does not have. */
    struct ibv_qp *uc = new_qp(IBV_QPT_UC, NULL, 8, 0);
    if (uc != NULL) {
        to_rts(uc);
        struct ibv_send_wr w = send_wr(IBV_WR_RDMA_WRITE_WITH_IMM, &sge, 1);
        post_one(uc, &w, 0, "UC: RDMA WRITE with immediate");
        w = send_wr(IBV_WR_RDMA_READ, &sge, 1);
        post_one(uc, &w, EINVAL, "UC: RDMA READ");
        w = send_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, &sge, 1);
        post_one(uc, &w, EINVAL, "UC: atomic fetch and add");
        check_ret(ibv_destroy_qp(uc), 0, "ibv_destroy_qp");
    }
    struct ibv_qp *ud = new_qp(IBV_QPT_UD, NULL, 8, 0);
    struct ibv_ah_attr aa;
    memset(&aa, 0, sizeof aa);
    aa.is_global = 1;
    aa.port_num = 1;
    aa.grh.sgid_index = 2;
    aa.grh.hop_limit = 64;
    aa.grh.dgid.raw[10] = 0xff;
    aa.grh.dgid.raw[11] = 0xff;
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    check(ah != NULL, "ibv_create_ah");
    if (ud != NULL && ah != NULL) {
        to_rts(ud);
        struct ibv_send_wr w = send_wr(IBV_WR_SEND_WITH_IMM, &sge, 1);
        w.wr.ud.ah = ah;
        w.wr.ud.remote_qpn = 0x42;
        w.wr.ud.remote_qkey = 0x11111111;
        post_one(ud, &w, 0, "UD: SEND with immediate");
        struct ibv_send_wr write = w;
        write.opcode = IBV_WR_RDMA_WRITE;
        post_one(ud, &write, EINVAL, "UD: RDMA WRITE");
        w.wr.ud.ah = NULL;
        post_one(ud, &w, EINVAL, "UD: SEND without an address handle");
    }
    if (ud != NULL) {
        check_ret(ibv_destroy_qp(ud), 0, "ibv_destroy_qp");
    }
    if (ah != NULL) {
        check_ret(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
    }
}

static void receive_side(void) {
    struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
    struct ibv_sge three[3] = {sge, sge, sge};
    struct ibv_qp *qp = new_qp(IBV_QPT_RC, NULL, 4, 0);
    if (qp == NULL) {
        return;
    }
    struct ibv_recv_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    struct ibv_recv_wr *bad = NULL;
    check_ret(ibv_post_recv(qp, &wr, &bad), EINVAL, "ibv_post_recv in RESET");
    check(bad == &wr, "  bad_wr names it");
    check(to_state(qp, IBV_QPS_INIT) == 0, "RC to INIT");
    check_ret(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv in INIT");
    struct ibv_recv_wr list[4];
    for (int i = 0; i < 4; ++i) {
        list[i] = wr;
        list[i].wr_id = (uint64_t)i;
        list[i].next = i < 3 ? &list[i + 1] : NULL;
    }
    list[1].sg_list = three;
    list[1].num_sge = 3;
    check_ret(ibv_post_recv(qp, &list[0], &bad), EINVAL, "ibv_post_recv: more SGEs than max_recv_sge");
    check(bad == &list[1], "  bad_wr is the second WR");
    list[1].sg_list = &sge;
    list[1].num_sge = 1;
    check_ret(ibv_post_recv(qp, &list[1], &bad), ENOMEM, "ibv_post_recv: a list that overflows the receive queue");
    check(bad == &list[3], "  bad_wr is the first WR that did not fit");
    check_ret(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");

    struct ibv_srq_init_attr si;
    memset(&si, 0, sizeof si);
    si.attr.max_wr = 2;
    si.attr.max_sge = 1;
    struct ibv_srq *srq = ibv_create_srq(pd, &si);
    check(srq != NULL && si.attr.max_wr == 2, "ibv_create_srq");
    if (srq == NULL) {
        return;
    }
    struct ibv_qp *sq = new_qp(IBV_QPT_RC, srq, 4, 0);
    if (sq != NULL) {
        check(to_state(sq, IBV_QPS_INIT) == 0, "RC with an SRQ to INIT");
        check_ret(ibv_post_recv(sq, &wr, &bad), EINVAL, "ibv_post_recv on a QP with an SRQ");
        check_ret(ibv_destroy_qp(sq), 0, "ibv_destroy_qp");
    }
    for (int i = 0; i < 3; ++i) {
        list[i].next = i < 2 ? &list[i + 1] : NULL;
    }
    check_ret(ibv_post_srq_recv(srq, &list[0], &bad), ENOMEM, "ibv_post_srq_recv: a list beyond max_wr");
    check(bad == &list[2], "  bad_wr is the third WR");
    check_ret(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device **list;
    struct ibv_context *ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    mr = pd != NULL ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
    check(pd != NULL && cq != NULL && mr != NULL, "ibv_alloc_pd, ibv_create_cq, ibv_reg_mr");
    if (pd == NULL || cq == NULL || mr == NULL) {
        return 1;
    }
    send_side();
    receive_side();
    check_ret(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
    check_ret(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    check_ret(ibv_close_device(ctx), 0, "ibv_close_device");
    ibv_free_device_list(list);
    printf("%d failure(s)\n", check_failures);
    return check_failures;
}
