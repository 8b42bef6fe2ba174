/* ibv_bind_mw on type 1 windows through stock libibverbs against a running
 * uroced (run as `uroce exec -- mw_bind`), as ibv_bind_mw(3) describes it:
 * the bind is posted to the QP's send queue, completes as IBV_WC_BIND_MW
 * with its wr_id when signaled (by IBV_SEND_SIGNALED or the QP's
 * sq_sig_all), in order with the other send WRs, and gives the window the
 * next rkey at once. LOCAL_WRITE among the window's flags is taken (as
 * rdma_rxe and mlx5 do); ZERO_BASED and type 2 windows are EINVAL; a bind
 * the device finds invalid completes IBV_WC_MW_BIND_ERR. One line per check;
 * the exit status is the number of failures. Completions are awaited with a
 * bounded deadline. */
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include "verbs_check.h"

enum { kBufBytes = 8192, kWindowOffset = 1024, kWindowBytes = 2048 };

struct side {
    struct ibv_cq* cq;
    struct ibv_qp* qp;
    uint8_t* buf;
    struct ibv_mr* mr;
};

static struct ibv_context* ctx;
static struct ibv_pd* pd;

/* Up to `n` completions of `cq` within 5 s; returns how many came. */
static int poll_n(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int got = 0;
    while (got < n) {
        const int r = ibv_poll_cq(cq, n - got, wc + got);
        if (r < 0) {
            return got;
        }
        got += r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            break;
        }
    }
    return got;
}

static int make_side(struct side* s, int sq_sig_all) {
    memset(s, 0, sizeof *s);
    s->cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
    s->buf = calloc(1, kBufBytes);
    if (s->cq == NULL || s->buf == NULL) {
        return -1;
    }
    s->mr = ibv_reg_mr(pd, s->buf, kBufBytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = s->cq;
    a.recv_cq = s->cq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = sq_sig_all;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    s->qp = ibv_create_qp(pd, &a);
    return s->mr != NULL && s->qp != NULL ? 0 : -1;
}

static int bind(struct side* s, struct ibv_mw* mw, uint64_t wr_id, unsigned send_flags, uint64_t addr,
                uint64_t length, unsigned access) {
    struct ibv_mw_bind b;
    memset(&b, 0, sizeof b);
    b.wr_id = wr_id;
    b.send_flags = send_flags;
    b.bind_info.mr = length != 0 ? s->mr : NULL;
    b.bind_info.addr = addr;
    b.bind_info.length = length;
    b.bind_info.mw_access_flags = access;
    return ibv_bind_mw(s->qp, mw, &b);
}

static int post_send(struct side* s, uint64_t wr_id, unsigned send_flags) {
    struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = 16, .lkey = s->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = send_flags;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_send(s->qp, &wr, &bad);
}

static int post_recv(struct side* s, uint64_t wr_id) {
    struct ibv_sge sge = {.addr = (uintptr_t)s->buf + 4096, .length = 64, .lkey = s->mr->lkey};
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(s->qp, &wr, &bad);
}

/* One signaled RDMA WRITE of `len` bytes of from->buf to `remote_addr` /
 * `rkey`; returns its completion status (-1: no completion). */
static int write_through(struct side* from, uint64_t remote_addr, uint32_t rkey, uint32_t len) {
    struct ibv_sge sge = {.addr = (uintptr_t)from->buf, .length = len, .lkey = from->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 0x77;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    if (ibv_post_send(from->qp, &wr, &bad) != 0) {
        return -1;
    }
    struct ibv_wc wc;
    return poll_n(from->cq, 1, &wc) == 1 ? (int)wc.status : -1;
}

static void check_wc(const struct ibv_wc* wc, uint64_t wr_id, enum ibv_wc_opcode opcode, enum ibv_wc_status status,
                     uint32_t qp_num, const char* what) {
    char line[256];
    snprintf(line, sizeof line, "%s: wr_id %" PRIu64 " opcode %d status %d (%s) qp 0x%x", what, wc->wr_id,
             (int)wc->opcode, (int)wc->status, ibv_wc_status_str(wc->status), wc->qp_num);
    check(wc->wr_id == wr_id && wc->status == status && (status != IBV_WC_SUCCESS || wc->opcode == opcode) &&
              wc->qp_num == qp_num,
          line);
}

/* Binding on b, written through from a. */
static void signaled_bind_and_data(struct side* a, struct side* b, struct ibv_mw* mw) {
    const uint32_t before = mw->rkey;
    const uint64_t base = (uintptr_t)b->buf + kWindowOffset;
    check_ret(bind(b, mw, 1, IBV_SEND_SIGNALED, base, kWindowBytes,
                   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE),
              0, "ibv_bind_mw type 1, signaled, LOCAL_WRITE among the flags");
    check(mw->rkey == ibv_inc_rkey(before), "the window holds the next rkey (ibv_inc_rkey) as soon as it returns");
    struct ibv_wc wc;
    check(poll_n(b->cq, 1, &wc) == 1, "a signaled bind produces a completion");
    check_wc(&wc, 1, IBV_WC_BIND_MW, IBV_WC_SUCCESS, b->qp->qp_num, "bind completion");

    memset(a->buf, 0x5A, kWindowBytes);
    memset(b->buf, 0, kBufBytes);
    check_ret(write_through(a, base, mw->rkey, kWindowBytes), IBV_WC_SUCCESS, "RDMA WRITE through the window");
    int same = 1;
    for (int i = 0; i < kBufBytes; ++i) {
        const int inside = i >= kWindowOffset && i < kWindowOffset + kWindowBytes;
        same = same && b->buf[i] == (inside ? 0x5A : 0);
    }
    check(same, "the window's bytes, and only those, were written");
}

/* SEND, bind, SEND on b: three completions in posting order. */
static void bind_in_order(struct side* a, struct side* b, struct ibv_mw* mw) {
    for (int i = 0; i < 2; ++i) {
        check_ret(post_recv(a, 100 + (uint64_t)i), 0, "ibv_post_recv on a");
    }
    check_ret(post_send(b, 11, IBV_SEND_SIGNALED), 0, "SEND 11");
    check_ret(bind(b, mw, 12, IBV_SEND_SIGNALED, (uintptr_t)b->buf, 4096, IBV_ACCESS_REMOTE_READ), 0, "bind 12");
    check_ret(post_send(b, 13, IBV_SEND_SIGNALED), 0, "SEND 13");
    struct ibv_wc wc[3];
    check(poll_n(b->cq, 3, wc) == 3, "three send-queue completions");
    check_wc(&wc[0], 11, IBV_WC_SEND, IBV_WC_SUCCESS, b->qp->qp_num, "first: SEND 11");
    check_wc(&wc[1], 12, IBV_WC_BIND_MW, IBV_WC_SUCCESS, b->qp->qp_num, "second: bind 12");
    check_wc(&wc[2], 13, IBV_WC_SEND, IBV_WC_SUCCESS, b->qp->qp_num, "third: SEND 13");
    check(poll_n(a->cq, 2, wc) == 2 && wc[0].wr_id == 100 && wc[1].wr_id == 101, "a received both SENDs");
}

/* sq_sig_all = 0: an unsignaled bind completes silently; the signaled SEND
 * after it is the next completion. */
static void unsignaled_bind(struct side* a, struct side* b, struct ibv_mw* mw) {
    check_ret(post_recv(a, 102), 0, "ibv_post_recv on a");
    const uint32_t before = mw->rkey;
    check_ret(bind(b, mw, 21, 0, (uintptr_t)b->buf, 4096, IBV_ACCESS_REMOTE_READ), 0, "unsignaled bind 21");
    check(mw->rkey == ibv_inc_rkey(before), "unsignaled bind: next rkey");
    check_ret(post_send(b, 22, IBV_SEND_SIGNALED), 0, "SEND 22");
    struct ibv_wc wc;
    check(poll_n(b->cq, 1, &wc) == 1, "one completion");
    check_wc(&wc, 22, IBV_WC_SEND, IBV_WC_SUCCESS, b->qp->qp_num, "the SEND after the unsignaled bind, none for it");
    check(poll_n(a->cq, 1, &wc) == 1 && wc.wr_id == 102, "a received SEND 22");
}

/* Length 0 unbinds, also as a completed WR. */
static void unbind(struct side* b, struct ibv_mw* mw) {
    check_ret(bind(b, mw, 61, IBV_SEND_SIGNALED, 0, 0, 0), 0, "unbind (length 0)");
    struct ibv_wc wc;
    check(poll_n(b->cq, 1, &wc) == 1, "the unbind completes");
    check_wc(&wc, 61, IBV_WC_BIND_MW, IBV_WC_SUCCESS, b->qp->qp_num, "unbind completion");
}

/* A rebind retires the old rkey: writing with it is a remote access error
 * (this leaves a's QP in the error state, so it runs last on a). */
static void old_rkey_refused(struct side* a, struct side* b, struct ibv_mw* mw) {
    const uint32_t old = mw->rkey;
    check_ret(bind(b, mw, 31, IBV_SEND_SIGNALED, (uintptr_t)b->buf, 4096, IBV_ACCESS_REMOTE_WRITE), 0,
              "rebind 31");
    struct ibv_wc wc;
    check(poll_n(b->cq, 1, &wc) == 1 && wc.wr_id == 31 && wc.status == IBV_WC_SUCCESS, "rebind completed");
    check_ret(write_through(a, (uintptr_t)b->buf, mw->rkey, 64), IBV_WC_SUCCESS, "write with the new rkey");
    check_ret(write_through(a, (uintptr_t)b->buf, old, 64), IBV_WC_REM_ACCESS_ERR, "write with the old rkey");
}

/* A QP with sq_sig_all = 1, connected to itself: every bind completes. An
 * invalid bind (outside its MR) completes IBV_WC_MW_BIND_ERR. */
static void sig_all_and_bind_error(struct side* c, struct ibv_mw* mw) {
    check_ret(bind(c, mw, 41, 0, (uintptr_t)c->buf, 4096, IBV_ACCESS_REMOTE_READ), 0,
              "bind 41 without IBV_SEND_SIGNALED on a sq_sig_all QP");
    struct ibv_wc wc;
    check(poll_n(c->cq, 1, &wc) == 1, "sq_sig_all: the bind completes");
    check_wc(&wc, 41, IBV_WC_BIND_MW, IBV_WC_SUCCESS, c->qp->qp_num, "sq_sig_all bind completion");
    check_ret(bind(c, mw, 42, IBV_SEND_SIGNALED, (uintptr_t)c->buf + kBufBytes - 16, 4096, IBV_ACCESS_REMOTE_READ),
              0, "bind 42 past the end of its MR is posted");
    check(poll_n(c->cq, 1, &wc) == 1, "the invalid bind completes");
    check_wc(&wc, 42, IBV_WC_BIND_MW, IBV_WC_MW_BIND_ERR, c->qp->qp_num, "IBV_WC_MW_BIND_ERR");
}

static void refused_at_once(struct side* a, struct side* reset_side, struct ibv_mw* mw) {
    const uint32_t before = mw->rkey;
    check_ret(bind(a, mw, 51, IBV_SEND_SIGNALED, (uintptr_t)a->buf, 4096,
                   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED),
              EINVAL, "ZERO_BASED type 1 window (IBA o10-36.2.2)");
    check(mw->rkey == before, "a refused bind leaves the rkey");
    check_ret(bind(reset_side, mw, 52, IBV_SEND_SIGNALED, (uintptr_t)reset_side->buf, 4096, IBV_ACCESS_REMOTE_READ),
              EINVAL, "bind posted on a QP in RESET");
    struct ibv_mw* mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    if (mw2 != NULL) {
        check_ret(bind(a, mw2, 53, IBV_SEND_SIGNALED, (uintptr_t)a->buf, 4096, IBV_ACCESS_REMOTE_READ), EINVAL,
                  "ibv_bind_mw on a type 2 window");
        ibv_dealloc_mw(mw2);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list = NULL;
    ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    struct side a, b, c, idle;
    if (pd == NULL || make_side(&a, 0) != 0 || make_side(&b, 0) != 0 || make_side(&c, 1) != 0 ||
        make_side(&idle, 0) != 0) {
        printf("FAIL setting up the QPs: %s\n", strerror(errno));
        return 1;
    }
    const int rights = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    connect_rc_to_own_address(a.qp, b.qp->qp_num, rights, 14);
    connect_rc_to_own_address(b.qp, a.qp->qp_num, rights, 14);
    connect_rc_to_own_address(c.qp, c.qp->qp_num, rights, 14);
    struct ibv_mw* mw = check_ptr(ibv_alloc_mw(pd, IBV_MW_TYPE_1), 0, "ibv_alloc_mw type 1");
    struct ibv_mw* mw_c = check_ptr(ibv_alloc_mw(pd, IBV_MW_TYPE_1), 0, "ibv_alloc_mw type 1 (for c)");
    if (mw == NULL || mw_c == NULL) {
        return 1;
    }
    refused_at_once(&a, &idle, mw);
    signaled_bind_and_data(&a, &b, mw);
    bind_in_order(&a, &b, mw);
    unsignaled_bind(&a, &b, mw);
    unbind(&b, mw);
    old_rkey_refused(&a, &b, mw);
    sig_all_and_bind_error(&c, mw_c);

    check_ret(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw");
    check_ret(ibv_dealloc_mw(mw_c), 0, "ibv_dealloc_mw (c)");
    struct side* sides[] = {&a, &b, &c, &idle};
    for (int i = 0; i < 4; ++i) {
        check_ret(ibv_destroy_qp(sides[i]->qp), 0, "ibv_destroy_qp");
        check_ret(ibv_dereg_mr(sides[i]->mr), 0, "ibv_dereg_mr");
        check_ret(ibv_destroy_cq(sides[i]->cq), 0, "ibv_destroy_cq");
        free(sides[i]->buf);
    }
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures;
}
