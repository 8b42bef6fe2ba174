/* ibv_attach_mcast / ibv_detach_mcast through stock libibverbs and uroced:
 * the kernel's refusals (an RC QP, a unicast GID, a QP not attached, a QP
 * destroyed while attached), then UD SENDs to an IPv4 group (::ffff:
 * 239.1.2.3) that two attached QPs each receive byte for byte, a third
 * attached QP with another Q_Key and the unattached sender do not, a
 * detached QP stops receiving, and an IPv6 group (ff0e::1:2). Delivery to
 * the members happens in one pass over the group, so once the members that
 * must receive have every message, a member that must not has had its
 * chance: no waiting for silence. One line per check, "N failures" last.
 *
 * mcast_check --hold GID (an IPv6 text address or a dotted IPv4 group):
 * one UD QP attached to the group, "attached" printed, held until a line
 * (or EOF) on stdin, then detached, "detached" printed. The dataflow suite
 * watches a snooping bridge's group table meanwhile (test_mcast_snooping.py). */
#include <arpa/inet.h>
#include <time.h>

#include "verbs_check.h"

#define MESSAGES 16
#define PAYLOAD 256
#define GRH_BYTES 40
#define SLOT (GRH_BYTES + PAYLOAD)
#define GROUP_QKEY 0x11111111u
#define OTHER_QKEY 0x22222222u
#define MULTICAST_QPN 0xFFFFFFu
#define IPV4_GID_INDEX 2 /* the daemon's IPv4 address, RoCE v2 */
#define IPV6_GID_INDEX 1 /* its link-local IPv6 address, RoCE v2 */

struct ud_end {
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    unsigned char *buf; /* MESSAGES receive slots, or the sender's payload */
};

static const union ibv_gid group4 = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 1, 2, 3}};
static const union ibv_gid group6 = {.raw = {0xFF, 0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2}};
static const union ibv_gid unicast = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1}};

static unsigned char pattern(int message, int byte) { return (unsigned char)(message * 31 + byte * 7 + 1); }

static int to_rts(struct ibv_qp *qp, uint32_t qkey) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = qkey;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) {
        return -1;
    }
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != 0) {
        return -1;
    }
    a.qp_state = IBV_QPS_RTS;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static struct ud_end make_ud(struct ibv_context *ctx, struct ibv_pd *pd, uint32_t qkey, const char *what) {
    struct ud_end e;
    memset(&e, 0, sizeof e);
    e.cq = ibv_create_cq(ctx, 2 * MESSAGES, NULL, NULL, 0);
    struct ibv_qp_init_attr init;
    memset(&init, 0, sizeof init);
    init.send_cq = e.cq;
    init.recv_cq = e.cq;
    init.qp_type = IBV_QPT_UD;
    init.cap.max_send_wr = MESSAGES;
    init.cap.max_recv_wr = MESSAGES;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    e.qp = e.cq != NULL ? ibv_create_qp(pd, &init) : NULL;
    e.buf = calloc(MESSAGES, SLOT);
    e.mr = ibv_reg_mr(pd, e.buf, MESSAGES * SLOT, IBV_ACCESS_LOCAL_WRITE);
    char line[128];
    snprintf(line, sizeof line, "%s: a UD QP in RTS with Q_Key 0x%x", what, qkey);
    check(e.qp != NULL && e.mr != NULL && to_rts(e.qp, qkey) == 0, line);
    if (e.qp == NULL || e.mr == NULL) {
        exit(1);
    }
    return e;
}

static void post_receives(struct ud_end *e) {
    for (int i = 0; i < MESSAGES; ++i) {
        struct ibv_sge sge = {(uintptr_t)(e->buf + (size_t)i * SLOT), SLOT, e->mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1};
        struct ibv_recv_wr *bad = NULL;
        if (ibv_post_recv(e->qp, &wr, &bad) != 0) {
            check(0, "ibv_post_recv");
        }
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Polls until `want` completions arrived or 10 s passed; returns how many. */
static int poll_until(struct ibv_cq *cq, struct ibv_wc *wcs, int want) {
    int got = 0;
    const double deadline = now_s() + 10.0;
    while (got < want && now_s() < deadline) {
        const int n = ibv_poll_cq(cq, want - got, wcs + got);
        if (n < 0) {
            return -1;
        }
        got += n;
    }
    return got;
}

/* Completions already in the CQ, without waiting. */
static int poll_now(struct ibv_cq *cq) {
    struct ibv_wc wc[MESSAGES];
    const int n = ibv_poll_cq(cq, MESSAGES, wc);
    return n < 0 ? -1 : n;
}

static void send_messages(struct ud_end *s, struct ibv_ah *ah, int first, int count) {
    int ok = 1;
    for (int m = first; m < first + count; ++m) {
        for (int b = 0; b < PAYLOAD; ++b) {
            s->buf[b] = pattern(m, b);
        }
        struct ibv_sge sge = {(uintptr_t)s->buf, PAYLOAD, s->mr->lkey};
        struct ibv_send_wr wr;
        memset(&wr, 0, sizeof wr);
        wr.wr_id = (uint64_t)m;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = MULTICAST_QPN;
        wr.wr.ud.remote_qkey = GROUP_QKEY;
        struct ibv_send_wr *bad = NULL;
        struct ibv_wc wc;
        ok &= ibv_post_send(s->qp, &wr, &bad) == 0 && poll_until(s->cq, &wc, 1) == 1 && wc.status == IBV_WC_SUCCESS;
    }
    char line[128];
    snprintf(line, sizeof line, "%d SENDs to the group complete successfully", count);
    check(ok, line);
}

/* `count` receives of messages first.. in order, byte for byte, from `sender`. */
static void check_received(struct ud_end *r, const char *who, int first, int count, uint32_t sender,
                           const union ibv_gid *group, int ipv4) {
    struct ibv_wc wc[MESSAGES];
    const int got = poll_until(r->cq, wc, count);
    char line[160];
    snprintf(line, sizeof line, "%s receives %d of %d messages", who, got, count);
    check(got == count, line);
    int ok = 1;
    for (int i = 0; i < got; ++i) {
        const unsigned char *slot = r->buf + wc[i].wr_id * SLOT;
        ok &= wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RECV && wc[i].byte_len == SLOT &&
              wc[i].src_qp == sender && (wc[i].wc_flags & IBV_WC_GRH) != 0;
        for (int b = 0; b < PAYLOAD; ++b) {
            ok &= slot[GRH_BYTES + b] == pattern(first + i, b);
        }
        /* The GRH slot: the IPv4 header in its last 20 bytes (destination at
         * 36), or the IPv6 header (destination at 24). */
        ok &= ipv4 ? memcmp(slot + 36, group->raw + 12, 4) == 0 : memcmp(slot + 24, group->raw, 16) == 0;
    }
    snprintf(line, sizeof line, "%s: each copy is byte-exact, from QP 0x%x, with the group in its GRH", who, sender);
    check(got == count && ok, line);
}

static struct ibv_ah *group_ah(struct ibv_pd *pd, const union ibv_gid *group, uint8_t sgid_index) {
    struct ibv_ah_attr a;
    memset(&a, 0, sizeof a);
    a.is_global = 1;
    a.port_num = 1;
    a.grh.dgid = *group;
    a.grh.sgid_index = sgid_index;
    a.grh.hop_limit = 64;
    return ibv_create_ah(pd, &a);
}

/* --hold: attach one UD QP to `text`, wait for stdin, detach. */
static int hold(const char *text) {
    union ibv_gid group;
    memset(&group, 0, sizeof group);
    struct in_addr v4;
    if (inet_pton(AF_INET, text, &v4) == 1) {
        group.raw[10] = group.raw[11] = 0xFF;
        memcpy(&group.raw[12], &v4, sizeof v4);
    } else if (inet_pton(AF_INET6, text, group.raw) != 1) {
        fprintf(stderr, "mcast_check --hold: %s is no address\n", text);
        return 2;
    }
    struct ibv_device **list = NULL;
    struct ibv_context *ctx = open_uroce(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ud_end member = make_ud(ctx, pd, GROUP_QKEY, "member");
    if (ibv_attach_mcast(member.qp, &group, 0) != 0) {
        fprintf(stderr, "mcast_check --hold: ibv_attach_mcast failed\n");
        return 1;
    }
    printf("attached\n");
    fflush(stdout);
    char line[16];
    (void)fgets(line, sizeof line, stdin);
    const int detached = ibv_detach_mcast(member.qp, &group, 0);
    printf(detached == 0 ? "detached\n" : "detach failed\n");
    fflush(stdout);
    ibv_destroy_qp(member.qp);
    ibv_dereg_mr(member.mr);
    ibv_destroy_cq(member.cq);
    free(member.buf);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return detached == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--hold") == 0) {
        return hold(argv[2]);
    }
    struct ibv_device **list = NULL;
    struct ibv_context *ctx = open_uroce(&list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_device_attr attr;
    check(ibv_query_device(ctx, &attr) == 0 && attr.max_mcast_grp > 0 && attr.max_mcast_qp_attach >= 3,
          "the device advertises multicast groups");

    struct ud_end sender = make_ud(ctx, pd, GROUP_QKEY, "sender");
    struct ud_end r1 = make_ud(ctx, pd, GROUP_QKEY, "receiver 1");
    struct ud_end r2 = make_ud(ctx, pd, GROUP_QKEY, "receiver 2");
    struct ud_end other = make_ud(ctx, pd, OTHER_QKEY, "receiver with another Q_Key");

    /* The kernel's ib_attach_mcast / uverbs refusals. */
    struct ibv_qp_init_attr rc_init;
    memset(&rc_init, 0, sizeof rc_init);
    rc_init.send_cq = sender.cq;
    rc_init.recv_cq = sender.cq;
    rc_init.qp_type = IBV_QPT_RC;
    rc_init.cap.max_send_wr = rc_init.cap.max_recv_wr = 1;
    rc_init.cap.max_send_sge = rc_init.cap.max_recv_sge = 1;
    struct ibv_qp *rc = ibv_create_qp(pd, &rc_init);
    check(rc != NULL, "an RC QP");
    check_ret(ibv_attach_mcast(rc, &group4, 0), EINVAL, "ibv_attach_mcast of an RC QP");
    check_ret(ibv_attach_mcast(r1.qp, &unicast, 0), EINVAL, "ibv_attach_mcast to a unicast GID");
    check_ret(ibv_detach_mcast(r1.qp, &group4, 0), EINVAL, "ibv_detach_mcast of a QP not attached");
    check_ret(ibv_attach_mcast(r1.qp, &group4, 0), 0, "ibv_attach_mcast receiver 1");
    check_ret(ibv_attach_mcast(r1.qp, &group4, 0), 0, "ibv_attach_mcast receiver 1 again");
    check_ret(ibv_attach_mcast(r2.qp, &group4, 0xC001), 0, "ibv_attach_mcast receiver 2 (the LID means nothing on RoCE)");
    check_ret(ibv_attach_mcast(other.qp, &group4, 0), 0, "ibv_attach_mcast the receiver with another Q_Key");
    check_ret(ibv_destroy_qp(r1.qp), EBUSY, "ibv_destroy_qp of an attached QP");
    check_ret(ibv_destroy_qp(rc), 0, "ibv_destroy_qp of the RC QP");

    post_receives(&r1);
    post_receives(&r2);
    post_receives(&other);
    post_receives(&sender);
    struct ibv_ah *ah4 = group_ah(pd, &group4, IPV4_GID_INDEX);
    check(ah4 != NULL, "an address handle for 239.1.2.3");
    if (ah4 == NULL) {
        return 1;
    }
    send_messages(&sender, ah4, 0, MESSAGES / 2);
    check_received(&r1, "receiver 1", 0, MESSAGES / 2, sender.qp->qp_num, &group4, 1);
    check_received(&r2, "receiver 2", 0, MESSAGES / 2, sender.qp->qp_num, &group4, 1);
    check(poll_now(other.cq) == 0, "the member with another Q_Key received nothing");
    check(poll_now(sender.cq) == 0, "the sender (not attached) received nothing");

    /* Detached, receiver 2 gets nothing of what follows. */
    check_ret(ibv_detach_mcast(r2.qp, &group4, 0), 0, "ibv_detach_mcast receiver 2");
    check_ret(ibv_detach_mcast(r2.qp, &group4, 0), EINVAL, "ibv_detach_mcast receiver 2 again");
    send_messages(&sender, ah4, MESSAGES / 2, MESSAGES / 2);
    check_received(&r1, "receiver 1 after the detach", MESSAGES / 2, MESSAGES / 2, sender.qp->qp_num, &group4, 1);
    check(poll_now(r2.cq) == 0, "receiver 2, detached, received nothing");

    /* An IPv6 group, from the link-local address. */
    check_ret(ibv_attach_mcast(r2.qp, &group6, 0), 0, "ibv_attach_mcast receiver 2 to ff0e::1:2");
    struct ibv_ah *ah6 = group_ah(pd, &group6, IPV6_GID_INDEX);
    check(ah6 != NULL, "an address handle for ff0e::1:2");
    if (ah6 != NULL) {
        send_messages(&sender, ah6, 0, 1);
        check_received(&r2, "receiver 2 in the IPv6 group", 0, 1, sender.qp->qp_num, &group6, 0);
        check(poll_now(r1.cq) == 0, "receiver 1, not in the IPv6 group, received nothing");
        ibv_destroy_ah(ah6);
    }

    check_ret(ibv_detach_mcast(r1.qp, &group4, 0), 0, "ibv_detach_mcast receiver 1");
    check_ret(ibv_detach_mcast(other.qp, &group4, 0), 0, "ibv_detach_mcast the other member");
    check_ret(ibv_detach_mcast(r2.qp, &group6, 0), 0, "ibv_detach_mcast receiver 2 from ff0e::1:2");
    ibv_destroy_ah(ah4);
    struct ud_end *all[] = {&sender, &r1, &r2, &other};
    int ok = 1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        ok &= ibv_destroy_qp(all[i]->qp) == 0 && ibv_dereg_mr(all[i]->mr) == 0 && ibv_destroy_cq(all[i]->cq) == 0;
        free(all[i]->buf);
    }
    check(ok, "every QP, once detached, is destroyed");
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures == 0 ? 0 : 1;
}
