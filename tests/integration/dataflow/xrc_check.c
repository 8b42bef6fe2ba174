/*
 * xrc_check: XRC through one uroce device, byte for byte (docs/provider.md
 * "XRC"). One process: an XRC send QP connected to an XRC target QP of the
 * same device (its own GID), two XRC SRQs in the target's domain, each
 * completing into a CQ of its own.
 *
 *  - SENDs naming SRQ A and SRQ B land in the buffers of that SRQ's receive
 *    WQE, complete into that SRQ's CQ with qp_num the target QP, and carry
 *    the bytes sent;
 *  - an RDMA WRITE and an RDMA READ through the pair move their bytes;
 *  - a SEND naming an SRQ number no SRQ has completes IBV_WC_REM_INV_REQ_ERR
 *    and a SEND naming an SRQ of another XRC domain IBV_WC_REM_ACCESS_ERR;
 *    neither delivers anything;
 *  - a target QP shared through a domain file: a second context opens it by
 *    number (ibv_open_qp), the creator destroys its handle, and SENDs still
 *    arrive through the opened handle byte for byte; ibv_close_xrcd is
 *    EBUSY while an SRQ or a QP handle made through it lives; the last
 *    close destroys the QP and SENDs to it then fail. A QPN that is not a
 *    target QP of the domain cannot be opened (EINVAL).
 *  - a shared target QP's async events reach every handle: the opener moves
 *    it to ERR and both contexts get IBV_EVENT_QP_LAST_WQE_REACHED, each
 *    naming its own ibv_qp (as the kernel's __ib_shared_qp_event_handler
 *    passes it to each opener).
 *  - one context holding two handles on one target QP (it created the QP and
 *    opened it again by number): destroying the opened handle leaves the
 *    creator's working, SENDs still arrive, and the QP's events name the
 *    creator's ibv_qp (not the destroyed one); destroying that last handle
 *    destroys the QP.
 *
 * usage: xrc_check DEVICE GID_INDEX. Prints "xrc_check: ok" and exits 0, or
 * says what failed and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define BYTES 65536u
#define SEND_A 10000u
#define SEND_B 5000u
#define RDMA_BYTES 20000u
#define NO_SUCH_SRQ 0xFFFFFu
#define DEADLINE_S 10

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_index;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "xrc_check: " __VA_ARGS__);   \
            fprintf(stderr, "\n");                        \
            exit(1);                                      \
        }                                                 \
    } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One completion from `cq` within the deadline. */
static struct ibv_wc poll_one(struct ibv_cq *cq, const char *what) {
    struct ibv_wc wc;
    const double end = now_s() + DEADLINE_S;
    while (now_s() < end) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        CHECK(n >= 0, "%s: ibv_poll_cq failed", what);
        if (n == 1) {
            return wc;
        }
    }
    CHECK(0, "%s: no completion within %d s", what, DEADLINE_S);
    return wc;
}

static void expect_empty(struct ibv_cq *cq, const char *what) {
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "%s: a completion that should not exist (status %d, %u bytes)", what,
          wc.status, wc.byte_len);
}

static struct ibv_mr *region(size_t bytes) {
    void *buf = aligned_alloc(4096, bytes);
    CHECK(buf != NULL, "out of memory");
    memset(buf, 0, bytes);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, bytes,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(mr != NULL, "ibv_reg_mr failed");
    return mr;
}

static void fill(struct ibv_mr *mr, uint32_t len, unsigned seed) {
    uint8_t *p = mr->addr;
    for (uint32_t i = 0; i < len; ++i) {
        p[i] = (uint8_t)((i * 131u + seed * 17u) ^ (i >> 8));
    }
}

static void same_bytes(const struct ibv_mr *a, const struct ibv_mr *b, uint32_t len, const char *what) {
    const uint8_t *x = a->addr, *y = b->addr;
    for (uint32_t i = 0; i < len; ++i) {
        CHECK(x[i] == y[i], "%s: byte %u is 0x%02x, sent 0x%02x", what, i, y[i], x[i]);
    }
}

static void all_zero(const struct ibv_mr *mr, const char *what) {
    const uint8_t *p = mr->addr;
    for (uint32_t i = 0; i < BYTES; ++i) {
        CHECK(p[i] == 0, "%s: byte %u was written", what, i);
    }
}

static struct ibv_xrcd *private_domain(void) {
    struct ibv_xrcd_init_attr a = {0};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = -1;
    a.oflags = O_CREAT;
    struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);
    CHECK(x != NULL, "ibv_open_xrcd failed");
    return x;
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *xrcd, struct ibv_cq *cq, uint32_t *num) {
    struct ibv_srq_init_attr_ex a = {0};
    a.attr.max_wr = 4;
    a.attr.max_sge = 1;
    a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
    a.srq_type = IBV_SRQT_XRC;
    a.xrcd = xrcd;
    a.cq = cq;
    a.pd = pd;
    struct ibv_srq *srq = ibv_create_srq_ex(ctx, &a);
    CHECK(srq != NULL, "ibv_create_srq_ex (XRC) failed");
    CHECK(ibv_get_srq_num(srq, num) == 0, "ibv_get_srq_num failed");
    return srq;
}

static void post_srq(struct ibv_srq *srq, struct ibv_mr *mr, uint64_t wr_id) {
    struct ibv_sge sge = {(uintptr_t)mr->addr, BYTES, mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
    CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0, "ibv_post_srq_recv failed");
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what) {
    CHECK(ibv_modify_qp(qp, a, mask) == 0, "modify %s failed", what);
}

/* An XRC send QP and an XRC target QP of `xrcd`, connected to each other. */
static void xrc_pair(struct ibv_xrcd *xrcd, struct ibv_cq *send_cq, struct ibv_qp **ini, struct ibv_qp **tgt) {
    struct ibv_qp_init_attr_ex t = {0};
    t.qp_type = IBV_QPT_XRC_RECV;
    t.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    t.xrcd = xrcd;
    *tgt = ibv_create_qp_ex(ctx, &t);
    CHECK(*tgt != NULL, "create XRC target QP failed");
    struct ibv_qp_init_attr_ex s = {0};
    s.qp_type = IBV_QPT_XRC_SEND;
    s.send_cq = send_cq;
    s.cap.max_send_wr = 8;
    s.cap.max_send_sge = 1;
    s.comp_mask = IBV_QP_INIT_ATTR_PD;
    s.pd = pd;
    *ini = ibv_create_qp_ex(ctx, &s);
    CHECK(*ini != NULL, "create XRC send QP failed");

    struct ibv_qp_attr a = {0};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    modify(*tgt, &a, init, "target to INIT");
    a.qp_access_flags = 0;
    modify(*ini, &a, init, "send QP to INIT");

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.rq_psn = 0;
    a.min_rnr_timer = 12;
    a.max_dest_rd_atomic = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.dest_qp_num = (*ini)->qp_num;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    modify(*tgt, &a, rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "target to RTR");
    a.dest_qp_num = (*tgt)->qp_num;
    modify(*ini, &a, rtr, "send QP to RTR");

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.sq_psn = 0;
    modify(*tgt, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, "target to RTS");
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    modify(*ini, &a,
           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
               IBV_QP_MAX_QP_RD_ATOMIC,
           "send QP to RTS");
}

static struct ibv_xrcd *file_domain(struct ibv_context *c, int fd, int oflags) {
    struct ibv_xrcd_init_attr a = {0};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = fd;
    a.oflags = oflags;
    struct ibv_xrcd *x = ibv_open_xrcd(c, &a);
    CHECK(x != NULL, "ibv_open_xrcd of a file failed");
    return x;
}

static struct ibv_qp *open_target(struct ibv_context *c, struct ibv_xrcd *xrcd, uint32_t qp_num) {
    struct ibv_qp_open_attr a = {0};
    a.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    a.qp_num = qp_num;
    a.xrcd = xrcd;
    a.qp_type = IBV_QPT_XRC_RECV;
    return ibv_open_qp(c, &a);
}

static void post(struct ibv_qp *ini, enum ibv_wr_opcode op, struct ibv_mr *local, uint32_t len, uint32_t srqn,
                 const struct ibv_mr *remote, uint64_t wr_id) {
    struct ibv_sge sge = {(uintptr_t)local->addr, len, local->lkey};
    struct ibv_send_wr wr = {0}, *bad;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.qp_type.xrc.remote_srqn = srqn;
    if (remote != NULL) {
        wr.wr.rdma.remote_addr = (uintptr_t)remote->addr;
        wr.wr.rdma.rkey = remote->rkey;
    }
    CHECK(ibv_post_send(ini, &wr, &bad) == 0, "ibv_post_send failed");
}

static void expect_send(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, const char *what) {
    const struct ibv_wc wc = poll_one(cq, what);
    CHECK(wc.wr_id == wr_id && wc.status == status, "%s: completion wr_id %llu status %s, expected %s", what,
          (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), ibv_wc_status_str(status));
}

static void expect_recv(struct ibv_cq *cq, uint64_t wr_id, uint32_t bytes, uint32_t qp_num, const char *what) {
    const struct ibv_wc wc = poll_one(cq, what);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == wr_id && wc.byte_len == bytes &&
              wc.qp_num == qp_num,
          "%s: status %s opcode %d wr_id %llu byte_len %u qp_num 0x%x (expected %u bytes on QP 0x%x)", what,
          ibv_wc_status_str(wc.status), wc.opcode, (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num, bytes,
          qp_num);
}

/* A target QP created here and opened by a second context of the device
 * through a domain both opened from one file. */
static void shared_target(struct ibv_cq *send_cq, struct ibv_cq *cq, struct ibv_mr *src, struct ibv_mr *dst,
                          const char *device) {
    struct ibv_context *ctx2 = NULL;
    struct ibv_device **list = ibv_get_device_list(NULL);
    for (struct ibv_device **d = list; *d != NULL && ctx2 == NULL; ++d) {
        if (strcmp(ibv_get_device_name(*d), device) == 0) {
            ctx2 = ibv_open_device(*d);
        }
    }
    ibv_free_device_list(list);
    CHECK(ctx2 != NULL, "cannot open %s a second time", device);
    FILE *file = tmpfile();
    CHECK(file != NULL, "tmpfile failed");
    struct ibv_xrcd *mine = file_domain(ctx, fileno(file), O_CREAT), *theirs = file_domain(ctx2, fileno(file), 0);
    uint32_t num;
    struct ibv_srq *srq = xrc_srq(mine, cq, &num);
    struct ibv_qp *ini, *tgt;
    xrc_pair(mine, send_cq, &ini, &tgt);
    const uint32_t tgt_num = tgt->qp_num;

    errno = 0;
    CHECK(open_target(ctx2, theirs, ini->qp_num) == NULL && errno == EINVAL,
          "ibv_open_qp of a send QP's number: errno %d, expected EINVAL", errno);
    struct ibv_qp *opened = open_target(ctx2, theirs, tgt_num);
    CHECK(opened != NULL && opened->qp_num == tgt_num && opened->qp_type == IBV_QPT_XRC_RECV,
          "ibv_open_qp of the target QP failed (errno %d)", errno);
    CHECK(ibv_close_xrcd(theirs) == EBUSY, "ibv_close_xrcd with an opened QP: expected EBUSY");
    CHECK(ibv_close_xrcd(mine) == EBUSY, "ibv_close_xrcd with an SRQ and a target QP: expected EBUSY");

    /* The creator's handle goes; the opened one keeps the QP. */
    CHECK(ibv_destroy_qp(tgt) == 0, "ibv_destroy_qp of the creator's handle failed");
    post_srq(srq, dst, 400);
    memset(dst->addr, 0, BYTES);
    fill(src, SEND_A, 7);
    post(ini, IBV_WR_SEND, src, SEND_A, num, NULL, 7);
    expect_send(send_cq, 7, IBV_WC_SUCCESS, "SEND through the opened target QP");
    expect_recv(cq, 400, SEND_A, tgt_num, "receive through the opened target QP");
    same_bytes(src, dst, SEND_A, "SEND through the opened target QP");

    /* The last handle goes: so does the QP, and SENDs to it fail. */
    CHECK(ibv_destroy_qp(opened) == 0, "ibv_destroy_qp of the opened handle failed");
    errno = 0;
    CHECK(open_target(ctx2, theirs, tgt_num) == NULL && errno == EINVAL,
          "ibv_open_qp of a destroyed target QP: errno %d, expected EINVAL", errno);
    post_srq(srq, dst, 401);
    post(ini, IBV_WR_SEND, src, SEND_A, num, NULL, 8);
    const struct ibv_wc wc = poll_one(send_cq, "SEND to the destroyed target QP");
    CHECK(wc.wr_id == 8 && wc.status != IBV_WC_SUCCESS, "SEND to the destroyed target QP: status %s",
          ibv_wc_status_str(wc.status));
    expect_empty(cq, "the SRQ after the SEND to the destroyed target QP");

    CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_srq(srq) == 0, "teardown of the shared pair failed");
    CHECK(ibv_close_xrcd(theirs) == 0 && ibv_close_xrcd(mine) == 0, "ibv_close_xrcd of the file's domain failed");
    fclose(file);
    CHECK(ibv_close_device(ctx2) == 0, "ibv_close_device of the second context failed");
}

/* Waits (bounded) for an async event of `type` naming `qp` on `c`; events
 * about other objects (earlier parts of the run) are skipped. */
static void expect_qp_event(struct ibv_context *c, struct ibv_qp *qp, enum ibv_event_type type, const char *who) {
    const double deadline = now_s() + DEADLINE_S;
    while (now_s() < deadline) {
        struct pollfd p = {.fd = c->async_fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        struct ibv_async_event e;
        CHECK(ibv_get_async_event(c, &e) == 0, "ibv_get_async_event (%s) failed", who);
        const int match = e.event_type == type && e.element.qp == qp;
        ibv_ack_async_event(&e);
        if (match) {
            return;
        }
    }
    CHECK(0, "%s: no %s for its handle of the shared target QP", who, ibv_event_type_str(type));
}

/* A shared target QP moved to ERR by the context that opened it: the
 * creator's context and the opener's each get LAST_WQE_REACHED for their
 * own handle. */
static void shared_target_events(struct ibv_cq *send_cq, const char *device) {
    struct ibv_context *ctx2 = NULL;
    struct ibv_device **list = ibv_get_device_list(NULL);
    for (struct ibv_device **d = list; *d != NULL && ctx2 == NULL; ++d) {
        if (strcmp(ibv_get_device_name(*d), device) == 0) {
            ctx2 = ibv_open_device(*d);
        }
    }
    ibv_free_device_list(list);
    CHECK(ctx2 != NULL, "cannot open %s a second time", device);
    FILE *file = tmpfile();
    CHECK(file != NULL, "tmpfile failed");
    struct ibv_xrcd *mine = file_domain(ctx, fileno(file), O_CREAT), *theirs = file_domain(ctx2, fileno(file), 0);
    struct ibv_qp *ini, *tgt;
    xrc_pair(mine, send_cq, &ini, &tgt);
    struct ibv_qp *opened = open_target(ctx2, theirs, tgt->qp_num);
    CHECK(opened != NULL, "ibv_open_qp of the target QP failed (errno %d)", errno);
    struct ibv_qp_attr a = {0};
    a.qp_state = IBV_QPS_ERR;
    modify(opened, &a, IBV_QP_STATE, "the opened target QP to ERR");
    expect_qp_event(ctx2, opened, IBV_EVENT_QP_LAST_WQE_REACHED, "the opener");
    expect_qp_event(ctx, tgt, IBV_EVENT_QP_LAST_WQE_REACHED, "the creator");
    CHECK(ibv_destroy_qp(opened) == 0 && ibv_destroy_qp(tgt) == 0 && ibv_destroy_qp(ini) == 0,
          "teardown of the shared target QP failed");
    CHECK(ibv_close_xrcd(theirs) == 0 && ibv_close_xrcd(mine) == 0, "ibv_close_xrcd of the file's domain failed");
    fclose(file);
    CHECK(ibv_close_device(ctx2) == 0, "ibv_close_device of the second context failed");
}

/* One context, two handles on one target QP: the second one goes, the first
 * keeps the QP and its events. */
static void one_context_two_handles(struct ibv_cq *send_cq, struct ibv_cq *cq, struct ibv_mr *src,
                                    struct ibv_mr *dst) {
    struct ibv_xrcd *xrcd = private_domain();
    uint32_t num;
    struct ibv_srq *srq = xrc_srq(xrcd, cq, &num);
    struct ibv_qp *ini, *tgt;
    xrc_pair(xrcd, send_cq, &ini, &tgt);
    const uint32_t tgt_num = tgt->qp_num;
    struct ibv_qp *opened = open_target(ctx, xrcd, tgt_num);
    CHECK(opened != NULL && opened != tgt && opened->qp_num == tgt_num,
          "ibv_open_qp of the context's own target QP failed (errno %d)", errno);
    CHECK(ibv_destroy_qp(opened) == 0, "ibv_destroy_qp of the second handle failed");

    post_srq(srq, dst, 500);
    memset(dst->addr, 0, BYTES);
    fill(src, SEND_B, 9);
    post(ini, IBV_WR_SEND, src, SEND_B, num, NULL, 9);
    expect_send(send_cq, 9, IBV_WC_SUCCESS, "SEND after the second handle went");
    expect_recv(cq, 500, SEND_B, tgt_num, "receive after the second handle went");
    same_bytes(src, dst, SEND_B, "SEND after the second handle went");

    struct ibv_qp_attr a = {0};
    a.qp_state = IBV_QPS_ERR;
    modify(tgt, &a, IBV_QP_STATE, "the remaining handle to ERR");
    expect_qp_event(ctx, tgt, IBV_EVENT_QP_LAST_WQE_REACHED, "the remaining handle");

    CHECK(ibv_destroy_qp(tgt) == 0, "ibv_destroy_qp of the last handle failed");
    errno = 0;
    CHECK(open_target(ctx, xrcd, tgt_num) == NULL && errno == EINVAL,
          "ibv_open_qp after the last handle went: errno %d, expected EINVAL", errno);
    CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_srq(srq) == 0 && ibv_close_xrcd(xrcd) == 0,
          "teardown of the two-handle case failed");
}

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: xrc_check DEVICE GID_INDEX");
    gid_index = atoi(argv[2]);
    struct ibv_device **list = ibv_get_device_list(NULL);
    CHECK(list != NULL, "no device list");
    for (struct ibv_device **d = list; *d != NULL && ctx == NULL; ++d) {
        if (strcmp(ibv_get_device_name(*d), argv[1]) == 0) {
            ctx = ibv_open_device(*d);
        }
    }
    CHECK(ctx != NULL, "cannot open %s", argv[1]);
    struct ibv_device_attr dev;
    CHECK(ibv_query_device(ctx, &dev) == 0 && (dev.device_cap_flags & IBV_DEVICE_XRC) != 0,
          "IBV_DEVICE_XRC not advertised");
    CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "ibv_query_gid failed");
    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd failed");
    struct ibv_cq *send_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *cq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_cq *cq_other = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(send_cq && cq_a && cq_b && cq_other, "ibv_create_cq failed");
    struct ibv_mr *src = region(BYTES), *dst_a = region(BYTES), *dst_b = region(BYTES), *dst_other = region(BYTES);
    struct ibv_mr *target = region(BYTES), *back = region(BYTES);

    struct ibv_xrcd *xrcd = private_domain(), *other = private_domain();
    uint32_t num_a, num_b, num_other;
    struct ibv_srq *srq_a = xrc_srq(xrcd, cq_a, &num_a), *srq_b = xrc_srq(xrcd, cq_b, &num_b);
    struct ibv_srq *srq_other = xrc_srq(other, cq_other, &num_other);
    CHECK(num_a != num_b && num_a != NO_SUCH_SRQ && num_b != NO_SUCH_SRQ, "SRQ numbers not distinct");
    struct ibv_qp *ini, *tgt;
    xrc_pair(xrcd, send_cq, &ini, &tgt);

    /* SENDs land in the SRQ they name. */
    post_srq(srq_a, dst_a, 100);
    post_srq(srq_b, dst_b, 200);
    post_srq(srq_other, dst_other, 300);
    fill(src, SEND_A, 1);
    post(ini, IBV_WR_SEND, src, SEND_A, num_a, NULL, 1);
    expect_send(send_cq, 1, IBV_WC_SUCCESS, "SEND to SRQ A");
    expect_recv(cq_a, 100, SEND_A, tgt->qp_num, "receive on SRQ A");
    same_bytes(src, dst_a, SEND_A, "SEND to SRQ A");
    fill(src, SEND_B, 2);
    post(ini, IBV_WR_SEND, src, SEND_B, num_b, NULL, 2);
    expect_send(send_cq, 2, IBV_WC_SUCCESS, "SEND to SRQ B");
    expect_recv(cq_b, 200, SEND_B, tgt->qp_num, "receive on SRQ B");
    same_bytes(src, dst_b, SEND_B, "SEND to SRQ B");
    expect_empty(cq_a, "SRQ A after the SEND to SRQ B");

    /* RDMA WRITE and READ through the pair (checked against SRQ A's PD). */
    fill(src, RDMA_BYTES, 3);
    post(ini, IBV_WR_RDMA_WRITE, src, RDMA_BYTES, num_a, target, 3);
    expect_send(send_cq, 3, IBV_WC_SUCCESS, "RDMA WRITE");
    same_bytes(src, target, RDMA_BYTES, "RDMA WRITE");
    post(ini, IBV_WR_RDMA_READ, back, RDMA_BYTES, num_a, target, 4);
    expect_send(send_cq, 4, IBV_WC_SUCCESS, "RDMA READ");
    same_bytes(target, back, RDMA_BYTES, "RDMA READ");

    /* An SRQ number no SRQ has: NAK Invalid Request, nothing delivered. */
    post_srq(srq_a, dst_a, 101);
    memset(dst_a->addr, 0, BYTES);
    post(ini, IBV_WR_SEND, src, SEND_A, NO_SUCH_SRQ, NULL, 5);
    expect_send(send_cq, 5, IBV_WC_REM_INV_REQ_ERR, "SEND to no SRQ");
    expect_empty(cq_a, "SRQ A after the SEND to no SRQ");
    expect_empty(cq_b, "SRQ B after the SEND to no SRQ");

    /* An SRQ of another domain: NAK Remote Access Error, nothing delivered. */
    struct ibv_qp *ini2, *tgt2;
    xrc_pair(xrcd, send_cq, &ini2, &tgt2);
    post(ini2, IBV_WR_SEND, src, SEND_A, num_other, NULL, 6);
    expect_send(send_cq, 6, IBV_WC_REM_ACCESS_ERR, "SEND to another domain's SRQ");
    expect_empty(cq_other, "the other domain's SRQ");
    all_zero(dst_other, "the other domain's SRQ buffer");
    all_zero(dst_a, "SRQ A's buffer after the refused SENDs");

    shared_target(send_cq, cq_a, src, dst_a, argv[1]);
    shared_target_events(send_cq, argv[1]);
    one_context_two_handles(send_cq, cq_b, src, dst_b);

    CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_qp(tgt) == 0 && ibv_destroy_qp(ini2) == 0 &&
              ibv_destroy_qp(tgt2) == 0,
          "ibv_destroy_qp failed");
    CHECK(ibv_destroy_srq(srq_a) == 0 && ibv_destroy_srq(srq_b) == 0 && ibv_destroy_srq(srq_other) == 0,
          "ibv_destroy_srq failed");
    CHECK(ibv_close_xrcd(xrcd) == 0 && ibv_close_xrcd(other) == 0, "ibv_close_xrcd failed");
    printf("xrc_check: ok\n");
    return 0;
}
