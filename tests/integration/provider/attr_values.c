/*
 * Attribute values and completions as software written for kernel RDMA
 * devices expects them (issues 12 and 14), through stock libibverbs under
 * `uroce exec` on a loopback daemon:
 *  - ibv_query_device: a vendor_id of uroce's own, 128 outstanding READ /
 *    atomic both ways (rdma_rxe's figure);
 *  - GID queries on an unused slot are ENODATA, the table lists the used ones;
 *  - grh.flow_label 0xFFFFFFFF (UCX sets it) is taken by ibv_create_ah and
 *    ibv_modify_qp and kept as its low 20 bits; the hop limit of a unicast
 *    path is the route's (64), whatever the AH said;
 *  - max_rd_atomic / max_dest_rd_atomic 128 are accepted;
 *  - a UD receive reports IBV_WC_GRH and, in sl, the packet type mlx5 reports
 *    (RoCE v2 over IPv4: 0xA), with src_qp and the other fields set;
 *  - a QP moved to RESET leaves no completion of its own in a shared CQ,
 *    and the other QP's completion stays.
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "verbs_check.h"

#define UROCE_VENDOR_ID 0x75726F
#define OWN_GID_INDEX 2 /* the daemon's IPv4 address, RoCE v2 */

static int finish(void) {
    printf("%d failure(s)\n", check_failures);
    return check_failures == 0 ? 0 : 1;
}

static void device_attributes(struct ibv_context *ctx) {
    struct ibv_device_attr a;
    check_ret(ibv_query_device(ctx, &a), 0, "ibv_query_device");
    char line[128];
    snprintf(line, sizeof line, "vendor_id 0x%x is uroce's 0x%x", a.vendor_id, UROCE_VENDOR_ID);
    check(a.vendor_id == UROCE_VENDOR_ID, line);
    snprintf(line, sizeof line, "max_qp_rd_atom %d and max_qp_init_rd_atom %d are 128", a.max_qp_rd_atom,
             a.max_qp_init_rd_atom);
    check(a.max_qp_rd_atom == 128 && a.max_qp_init_rd_atom == 128, line);
    check(a.max_mcast_grp == 8192 && a.max_mcast_qp_attach == 56 && a.max_total_mcast_qp_attach == 0x70000,
          "multicast limits are rdma_rxe's");
}

static void gid_queries(struct ibv_context *ctx) {
    struct ibv_gid_entry e;
    check_ret(ibv_query_gid_ex(ctx, 1, OWN_GID_INDEX, &e, 0), 0, "ibv_query_gid_ex on the IPv4 GID");
    check(e.gid_type == IBV_GID_TYPE_ROCE_V2, "its type is RoCE v2");
    check_ret(ibv_query_gid_ex(ctx, 1, 9, &e, 0), ENODATA, "ibv_query_gid_ex on an unused slot");
    struct ibv_gid_entry table[16];
    const ssize_t n = ibv_query_gid_table(ctx, table, 16, 0);
    char line[96];
    snprintf(line, sizeof line, "ibv_query_gid_table lists the 3 used slots (got %zd)", n);
    check(n == 3, line);
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type) {
    struct ibv_qp_init_attr init;
    memset(&init, 0, sizeof init);
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = type;
    init.cap.max_send_wr = 4;
    init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &init);
}

static void wide_values_are_taken(struct ibv_pd *pd, struct ibv_cq *cq) {
    struct ibv_ah_attr ah;
    memset(&ah, 0, sizeof ah);
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = OWN_GID_INDEX;
    ah.grh.flow_label = 0xFFFFFFFF;
    ah.grh.hop_limit = 1;
    ah.sl = 0x13;
    ah.static_rate = 200;
    check_ret(ibv_query_gid(pd->context, 1, OWN_GID_INDEX, &ah.grh.dgid), 0, "ibv_query_gid");
    struct ibv_ah *h = check_ptr(ibv_create_ah(pd, &ah), 0, "ibv_create_ah with flow_label 0xFFFFFFFF");
    if (h != NULL) {
        ibv_destroy_ah(h);
    }

    struct ibv_qp *qp = make_qp(pd, cq, IBV_QPT_RC);
    check(qp != NULL, "ibv_create_qp (RC)");
    if (qp == NULL) {
        return;
    }
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    check_ret(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
              "RC QP to INIT");
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp->qp_num;
    a.ah_attr = ah;
    a.max_dest_rd_atomic = 128;
    a.min_rnr_timer = 12;
    check_ret(ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0, "RTR with flow_label 0xFFFFFFFF, hop_limit 1, max_dest_rd_atomic 128");
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 129;
    const int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC;
    check_ret(ibv_modify_qp(qp, &a, rts_mask), EINVAL, "RTS with max_rd_atomic 129 (above the device's)");
    a.max_rd_atomic = 128;
    check_ret(ibv_modify_qp(qp, &a, rts_mask), 0, "RTS with max_rd_atomic 128");
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;
    check_ret(ibv_query_qp(qp, &q, IBV_QP_AV | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &qi), 0,
              "ibv_query_qp");
    char line[160];
    snprintf(line, sizeof line, "query: flow_label 0x%x (low 20 bits), hop_limit %u (the route's 64), sl %u",
             q.ah_attr.grh.flow_label, q.ah_attr.grh.hop_limit, q.ah_attr.sl);
    check(q.ah_attr.grh.flow_label == 0xFFFFF && q.ah_attr.grh.hop_limit == 64 && q.ah_attr.sl == 3, line);
    check(q.max_rd_atomic == 128 && q.max_dest_rd_atomic == 128, "query: rd_atomic depths 128");
    ibv_destroy_qp(qp);
}

/* Waits (bounded) for the completion event of `cq`, then asks for the next. */
static int wait_event(struct ibv_comp_channel *ch, struct ibv_cq *cq) {
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    if (poll(&p, 1, 5000) != 1) {
        return 0;
    }
    struct ibv_cq *got = NULL;
    void *ctx = NULL;
    if (ibv_get_cq_event(ch, &got, &ctx) != 0 || got != cq) {
        return 0;
    }
    ibv_ack_cq_events(cq, 1);
    return ibv_req_notify_cq(cq, 0) == 0;
}

static int post_write(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t wr_id) {
    struct ibv_sge sge = {.addr = (uintptr_t)mr->addr, .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)mr->addr + 64;
    wr.wr.rdma.rkey = mr->rkey;
    return ibv_post_send(qp, &wr, &bad);
}

static void reset_cleans_the_cq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr) {
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    struct ibv_cq *cq = ch == NULL ? NULL : ibv_create_cq(ctx, 16, NULL, ch, 0);
    check(cq != NULL, "a CQ with a completion channel");
    if (cq == NULL) {
        return;
    }
    struct ibv_qp *reset = make_qp(pd, cq, IBV_QPT_RC);
    struct ibv_qp *kept = make_qp(pd, cq, IBV_QPT_RC);
    check(reset != NULL && kept != NULL, "two RC QPs on one CQ");
    if (reset != NULL && kept != NULL) {
        const int access = IBV_ACCESS_REMOTE_WRITE;
        connect_rc_to_own_address(reset, reset->qp_num, access, 14);
        connect_rc_to_own_address(kept, kept->qp_num, access, 14);
        check_ret(ibv_req_notify_cq(cq, 0), 0, "ibv_req_notify_cq");
        check_ret(post_write(reset, mr, 1), 0, "WRITE on the QP to reset");
        check(wait_event(ch, cq), "its completion is in the CQ (event)");
        check_ret(post_write(kept, mr, 2), 0, "WRITE on the other QP");
        check(wait_event(ch, cq), "its completion is in the CQ (event)");
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof a);
        a.qp_state = IBV_QPS_RESET;
        check_ret(ibv_modify_qp(reset, &a, IBV_QP_STATE), 0, "the first QP to RESET");
        struct ibv_wc wc[4];
        const int n = ibv_poll_cq(cq, 4, wc);
        char line[128];
        snprintf(line, sizeof line, "the CQ holds only the other QP's completion (got %d, first wr_id %llu)", n,
                 n > 0 ? (unsigned long long)wc[0].wr_id : 0ULL);
        check(n == 1 && wc[0].wr_id == 2 && wc[0].qp_num == kept->qp_num && wc[0].status == IBV_WC_SUCCESS, line);
    }
    if (reset != NULL) {
        ibv_destroy_qp(reset);
    }
    if (kept != NULL) {
        ibv_destroy_qp(kept);
    }
    ibv_destroy_cq(cq);
    ibv_destroy_comp_channel(ch);
}

static void ud_receive_completion(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_mr *mr) {
    struct ibv_qp *qp = make_qp(pd, cq, IBV_QPT_UD);
    check(qp != NULL, "ibv_create_qp (UD)");
    if (qp == NULL) {
        return;
    }
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x11111111;
    int ok = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0;
    a.qp_state = IBV_QPS_RTR;
    ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0;
    a.qp_state = IBV_QPS_RTS;
    ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
    check(ok, "UD QP to RTS");
    struct ibv_ah_attr ah;
    memset(&ah, 0, sizeof ah);
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = OWN_GID_INDEX;
    ah.grh.flow_label = 0xFFFFFFFF;
    ibv_query_gid(pd->context, 1, OWN_GID_INDEX, &ah.grh.dgid);
    struct ibv_ah *h = ibv_create_ah(pd, &ah);
    check(h != NULL, "AH to this device");

    char *buf = mr->addr;
    memset(buf + 1024, 0, 40 + 32);
    struct ibv_sge rsge = {.addr = (uintptr_t)buf + 1024, .length = 40 + 32, .lkey = mr->lkey};
    struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &rsge, .num_sge = 1}, *rbad = NULL;
    check_ret(ibv_post_recv(qp, &rwr, &rbad), 0, "ibv_post_recv (UD)");
    memcpy(buf + 2048, "uroce ud datagram, 32 bytes ...", 32);
    struct ibv_sge ssge = {.addr = (uintptr_t)buf + 2048, .length = 32, .lkey = mr->lkey};
    struct ibv_send_wr swr, *sbad = NULL;
    memset(&swr, 0, sizeof swr);
    swr.wr_id = 8;
    swr.sg_list = &ssge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    swr.wr.ud.ah = h;
    swr.wr.ud.remote_qpn = qp->qp_num;
    swr.wr.ud.remote_qkey = 0x11111111;
    check_ret(h == NULL ? EINVAL : ibv_post_send(qp, &swr, &sbad), 0, "ibv_post_send (UD, to itself)");

    struct ibv_wc recv;
    int got_recv = 0;
    const time_t deadline = time(NULL) + 5;
    while (!got_recv && time(NULL) < deadline) {
        struct ibv_wc wc;
        if (ibv_poll_cq(cq, 1, &wc) == 1 && wc.opcode == IBV_WC_RECV) {
            recv = wc;
            got_recv = 1;
        }
    }
    check(got_recv, "the datagram arrived");
    if (got_recv) {
        char line[200];
        snprintf(line, sizeof line,
                 "UD wc: status %d, byte_len %u, src_qp 0x%x, qp_num 0x%x, wc_flags 0x%x, sl 0x%x, pkey_index %u",
                 recv.status, recv.byte_len, recv.src_qp, recv.qp_num, recv.wc_flags, recv.sl, recv.pkey_index);
        check(recv.status == IBV_WC_SUCCESS && recv.byte_len == 40 + 32 && recv.src_qp == qp->qp_num &&
                  recv.qp_num == qp->qp_num && (recv.wc_flags & IBV_WC_GRH) != 0 && recv.sl == 0xA &&
                  recv.pkey_index == 0 && recv.slid == 0 && recv.dlid_path_bits == 0,
              line);
        check(memcmp(buf + 1024 + 40, buf + 2048, 32) == 0, "the payload follows the 40 bytes of GRH");
    }
    if (h != NULL) {
        ibv_destroy_ah(h);
    }
    ibv_destroy_qp(qp);
}

int main(void) {
    struct ibv_device **list = NULL;
    struct ibv_context *ctx = open_uroce(&list);
    device_attributes(ctx);
    gid_queries(ctx);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    static char buf[4096];
    struct ibv_mr *mr = pd == NULL ? NULL
                                   : ibv_reg_mr(pd, buf, sizeof buf,
                                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    check(pd != NULL && cq != NULL && mr != NULL, "PD, CQ and MR");
    if (pd == NULL || cq == NULL || mr == NULL) {
        return finish();
    }
    wide_values_are_taken(pd, cq);
    reset_cleans_the_cq(ctx, pd, mr);
    ud_receive_completion(pd, cq, mr);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return finish();
}
