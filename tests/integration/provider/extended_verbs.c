/* The extended verbs through stock libibverbs against a running uroced (run
 * as `uroce exec -- extended_verbs`): every ibv_wr_* operation of
 * ibv_wr_post(3) on RC, UC and UD QPs made with ibv_create_qp_ex, every
 * ibv_cq_ex accessor of ibv_create_cq_ex(3), the data checked byte for byte
 * and each completion field against what the operation must produce;
 * completion timestamps between clock readings taken around the operation;
 * what create_qp_ex / create_cq_ex / ibv_wr_complete refuse (EINVAL,
 * EOPNOTSUPP); ibv_resize_cq keeping unpolled completions. One line per check; the exit status is the number of
 * failures. Completions are awaited with a bounded deadline. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>

#include "verbs_check.h"

enum { kBufBytes = 4096, kGrhBytes = 40, kUdQkey = 0x11111111 };

#define ALL_WC_FLAGS                                                                                           \
    (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |          \
     IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |                                \
     IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

#define RC_OPS                                                                                                 \
    (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                   \
     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |            \
     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |                 \
     IBV_QP_EX_WITH_SEND_WITH_INV)
#define UC_OPS                                                                                                 \
    (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                   \
     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |                        \
     IBV_QP_EX_WITH_SEND_WITH_INV)
#define UD_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

/* Everything the ibv_cq_ex accessors report of one completion. */
struct completion {
    uint64_t wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data; /* network order, or the invalidated rkey */
    uint32_t qp_num;
    uint32_t src_qp;
    unsigned int wc_flags;
    uint32_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
    uint64_t ts;
    uint64_t wallclock_ns;
};

/* One side: a QP with its own CQs and registered buffer. */
struct side {
    struct ibv_cq_ex* send_cq;
    struct ibv_cq_ex* recv_cq;
    struct ibv_qp* qp;
    struct ibv_qp_ex* qpx;
    uint8_t* buf;
    struct ibv_mr* mr;
};

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static uint32_t max_inline;

static uint64_t device_now(void) {
    struct ibv_values_ex v;
    memset(&v, 0, sizeof v);
    v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    if (ibv_query_rt_values_ex(ctx, &v) != 0 || v.comp_mask != IBV_VALUES_MASK_RAW_CLOCK) {
        return 0;
    }
    return (uint64_t)v.raw_clock.tv_sec * 1000000000u + (uint64_t)v.raw_clock.tv_nsec;
}

static uint64_t wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void read_current(struct ibv_cq_ex* cq, struct completion* c) {
    c->wr_id = cq->wr_id;
    c->status = cq->status;
    c->opcode = ibv_wc_read_opcode(cq);
    c->vendor_err = ibv_wc_read_vendor_err(cq);
    c->byte_len = ibv_wc_read_byte_len(cq);
    c->imm_data = ibv_wc_read_imm_data(cq);
    c->qp_num = ibv_wc_read_qp_num(cq);
    c->src_qp = ibv_wc_read_src_qp(cq);
    c->wc_flags = ibv_wc_read_wc_flags(cq);
    c->slid = ibv_wc_read_slid(cq);
    c->sl = ibv_wc_read_sl(cq);
    c->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
    c->ts = ibv_wc_read_completion_ts(cq);
    c->wallclock_ns = ibv_wc_read_completion_wallclock_ns(cq);
}

/* Exactly `n` completions of `cq`, within 5 s, through start/next/end_poll.
 * Returns how many came. */
static int poll_ex(struct ibv_cq_ex* cq, int n, struct completion* out) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int got = 0;
    while (got < n) {
        struct ibv_poll_cq_attr attr = {.comp_mask = 0};
        int ret = ibv_start_poll(cq, &attr);
        if (ret == 0) {
            do {
                read_current(cq, &out[got++]);
            } while (got < n && (ret = ibv_next_poll(cq)) == 0);
            ibv_end_poll(cq);
            if (ret != 0 && ret != ENOENT) {
                printf("FAIL ibv_next_poll -> %d\n", ret);
                ++check_failures;
                return got;
            }
        } else if (ret != ENOENT) {
            printf("FAIL ibv_start_poll -> %d\n", ret);
            ++check_failures;
            return got;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            break;
        }
    }
    return got;
}

/* No completion arrives on `cq` within 50 ms (after an operation that must
 * produce none, followed by one that must produce one, polled first). */
static int cq_empty(struct ibv_cq_ex* cq) {
    struct ibv_poll_cq_attr attr = {.comp_mask = 0};
    const int ret = ibv_start_poll(cq, &attr);
    if (ret == 0) {
        ibv_end_poll(cq);
    }
    return ret == ENOENT;
}

static void expect_completion(struct ibv_cq_ex* cq, uint64_t wr_id, enum ibv_wc_opcode opcode, uint32_t qp_num,
                              uint32_t byte_len, const char* what, struct completion* out) {
    struct completion c;
    memset(&c, 0, sizeof c);
    const int got = poll_ex(cq, 1, &c);
    char line[256];
    snprintf(line, sizeof line,
             "%s: completion (got %d) wr_id %" PRIu64 " status %d opcode %d qp 0x%x byte_len %u vendor_err %u",
             what, got, c.wr_id, c.status, c.opcode, c.qp_num, c.byte_len, c.vendor_err);
    check(got == 1 && c.wr_id == wr_id && c.status == IBV_WC_SUCCESS && c.opcode == opcode && c.qp_num == qp_num &&
              (byte_len == UINT32_MAX || c.byte_len == byte_len) && c.vendor_err == 0,
          line);
    if (out != NULL) {
        *out = c;
    }
}

static struct ibv_cq_ex* new_cq_ex(void) {
    struct ibv_cq_init_attr_ex a;
    memset(&a, 0, sizeof a);
    a.cqe = 64;
    a.wc_flags = ALL_WC_FLAGS;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
    struct ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &a);
    check(cq != NULL, "ibv_create_cq_ex with every offered wc_flag");
    return cq;
}

static void new_side(struct side* s, enum ibv_qp_type type, uint64_t ops) {
    s->send_cq = new_cq_ex();
    s->recv_cq = new_cq_ex();
    s->buf = aligned_alloc(4096, kBufBytes);
    memset(s->buf, 0, kBufBytes);
    s->mr = ibv_reg_mr(pd, s->buf, kBufBytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
    check(s->mr != NULL, "ibv_reg_mr");
    struct ibv_qp_init_attr_ex a;
    memset(&a, 0, sizeof a);
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd;
    a.send_cq = ibv_cq_ex_to_cq(s->send_cq);
    a.recv_cq = ibv_cq_ex_to_cq(s->recv_cq);
    a.qp_type = type;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 3;
    a.cap.max_recv_sge = 2;
    a.cap.max_inline_data = 128;
    a.send_ops_flags = ops;
    s->qp = ibv_create_qp_ex(ctx, &a);
    check_ptr(s->qp, 0, "ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS");
    if (s->qp == NULL) {
        exit(1 + check_failures);
    }
    max_inline = a.cap.max_inline_data;
    check(a.cap.max_send_sge >= 3 && a.cap.max_inline_data >= 128, "create_qp_ex returns the granted caps");
    s->qpx = ibv_qp_to_qp_ex(s->qp);
    check(s->qpx != NULL && &s->qpx->qp_base == s->qp, "ibv_qp_to_qp_ex gives the QP's ibv_qp_ex");
}

static void free_side(struct side* s) {
    check_ret(ibv_destroy_qp(s->qp), 0, "ibv_destroy_qp");
    check_ret(ibv_destroy_cq(ibv_cq_ex_to_cq(s->send_cq)), 0, "ibv_destroy_cq (ex)");
    check_ret(ibv_destroy_cq(ibv_cq_ex_to_cq(s->recv_cq)), 0, "ibv_destroy_cq (ex)");
    check_ret(ibv_dereg_mr(s->mr), 0, "ibv_dereg_mr");
    free(s->buf);
}

/* UC and UD to RTS (RC: verbs_check.h); UC towards `dest` at our own GID. */
static void connect_uc(struct ibv_qp* qp, uint32_t dest) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    int ok = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = 2;
    a.ah_attr.grh.hop_limit = 64;
    ok = ok && ibv_query_gid(ctx, 1, 2, &a.ah_attr.grh.dgid) == 0;
    ok = ok && ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) == 0;
    a.qp_state = IBV_QPS_RTS;
    ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
    check(ok, "UC QP to RTS");
}

static void connect_ud(struct ibv_qp* qp) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = kUdQkey;
    int ok = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0;
    a.qp_state = IBV_QPS_RTR;
    ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0;
    a.qp_state = IBV_QPS_RTS;
    ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
    check(ok, "UD QP to RTS");
}

static void post_recv(struct side* s, uint64_t wr_id, uint32_t offset, uint32_t length) {
    struct ibv_sge sge = {.addr = (uintptr_t)(s->buf + offset), .length = length, .lkey = s->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr* bad = NULL;
    check_ret(ibv_post_recv(s->qp, &wr, &bad), 0, "ibv_post_recv");
}

static void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) {
        p[i] = (uint8_t)(seed + i * 7);
    }
}

static void check_bytes(const uint8_t* got, const uint8_t* want, size_t n, const char* what) {
    char line[256];
    size_t at = 0;
    while (at < n && got[at] == want[at]) {
        ++at;
    }
    snprintf(line, sizeof line, "%s: %zu bytes equal (first difference at %zu)", what, n, at);
    check(at == n, line);
}

/* The fields every completion has the same way on RoCE, and its time. */
static void check_common(const struct completion* c, uint64_t before, uint64_t wall_before, const char* what) {
    char line[256];
    const uint64_t after = device_now();
    const uint64_t wall_after = wall_now();
    snprintf(line, sizeof line, "%s: slid %u dlid_path_bits %u (RoCE has no LIDs)", what, c->slid,
             c->dlid_path_bits);
    check(c->slid == 0 && c->dlid_path_bits == 0, line);
    snprintf(line, sizeof line, "%s: completion_ts %" PRIu64 " within [%" PRIu64 ", %" PRIu64 "]", what, c->ts,
             before, after);
    check(before != 0 && c->ts >= before && c->ts <= after, line);
    snprintf(line, sizeof line, "%s: wallclock %" PRIu64 " within [%" PRIu64 ", %" PRIu64 "]", what,
             c->wallclock_ns, wall_before, wall_after);
    check(c->wallclock_ns >= wall_before && c->wallclock_ns <= wall_after, line);
}

static void test_device_clock(void) {
    struct ibv_device_attr_ex attr;
    memset(&attr, 0, sizeof attr);
    check_ret(ibv_query_device_ex(ctx, NULL, &attr), 0, "ibv_query_device_ex");
    char line[160];
    snprintf(line, sizeof line, "completion_timestamp_mask 0x%" PRIx64 ", hca_core_clock %" PRIu64 " kHz",
             attr.completion_timestamp_mask, attr.hca_core_clock);
    check(attr.completion_timestamp_mask == UINT64_MAX && attr.hca_core_clock == 1000000, line);
    const uint64_t a = device_now();
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    const uint64_t b = device_now();
    const uint64_t m = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    check(a != 0 && a <= m && m <= b, "query_rt_values: the raw clock is CLOCK_MONOTONIC in ns");
    struct ibv_values_ex v;
    memset(&v, 0, sizeof v);
    v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK | (1u << 5);
    check(ibv_query_rt_values_ex(ctx, &v) == 0 && v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK,
          "query_rt_values: only the raw clock is filled in");
}

static void test_creation_rules(void) {
    struct ibv_cq_ex* cq = new_cq_ex();
    struct ibv_qp_init_attr_ex a;
    memset(&a, 0, sizeof a);
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd;
    a.send_cq = a.recv_cq = ibv_cq_ex_to_cq(cq);
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    struct {
        enum ibv_qp_type type;
        uint64_t ops;
        uint32_t extra_mask;
        int want;
        const char* what;
    } cases[] = {
        {IBV_QPT_RC, RC_OPS | IBV_QP_EX_WITH_TSO, 0, EOPNOTSUPP, "RC with TSO"},
        {IBV_QPT_RC, RC_OPS | (1u << 20), 0, EOPNOTSUPP, "RC with an unknown send op"},
        {IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ, 0, EOPNOTSUPP, "UC with RDMA_READ"},
        {IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, 0, EOPNOTSUPP, "UC with an atomic"},
        {IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE, 0, EOPNOTSUPP, "UD with RDMA_WRITE"},
        {IBV_QPT_UD, IBV_QP_EX_WITH_BIND_MW, 0, EOPNOTSUPP, "UD with BIND_MW"},
        {IBV_QPT_RC, IBV_QP_EX_WITH_SEND, IBV_QP_INIT_ATTR_MAX_TSO_HEADER, EOPNOTSUPP, "a TSO header"},
        {IBV_QPT_RAW_PACKET, IBV_QP_EX_WITH_SEND, 0, EOPNOTSUPP, "RAW_PACKET"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        a.qp_type = cases[i].type;
        a.send_ops_flags = cases[i].ops;
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | cases[i].extra_mask;
        char line[128];
        snprintf(line, sizeof line, "ibv_create_qp_ex: %s", cases[i].what);
        check_ptr(ibv_create_qp_ex(ctx, &a), cases[i].want, line);
    }
    a.qp_type = IBV_QPT_RC;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND;
    a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    check_ptr(ibv_create_qp_ex(ctx, &a), EINVAL, "ibv_create_qp_ex without a PD");
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    check_ptr(ibv_create_qp_ex(ctx, &a), EOPNOTSUPP, "ibv_create_qp_ex with a create flag");
    a.create_flags = 0;
    a.send_cq = NULL;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    check_ptr(ibv_create_qp_ex(ctx, &a), EINVAL, "ibv_create_qp_ex without a send CQ");
    a.send_cq = ibv_cq_ex_to_cq(cq);
    /* A QP made without SEND_OPS_FLAGS has no ibv_qp_ex. */
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    struct ibv_qp* plain = ibv_create_qp_ex(ctx, &a);
    check(plain != NULL && ibv_qp_to_qp_ex(plain) == NULL, "a QP without send_ops_flags has no ibv_qp_ex");
    if (plain != NULL) {
        ibv_destroy_qp(plain);
    }

    struct ibv_cq_init_attr_ex c;
    struct {
        uint32_t cqe;
        uint64_t wc_flags;
        uint32_t mask;
        uint32_t flags;
        int want;
        const char* what;
    } cq_cases[] = {
        {0, IBV_WC_EX_WITH_BYTE_LEN, 0, 0, EINVAL, "0 entries"},
        {16, IBV_WC_EX_WITH_CVLAN, 0, 0, EOPNOTSUPP, "WITH_CVLAN"},
        {16, IBV_WC_EX_WITH_FLOW_TAG, 0, 0, EOPNOTSUPP, "WITH_FLOW_TAG"},
        {16, IBV_WC_EX_WITH_TM_INFO, 0, 0, EOPNOTSUPP, "WITH_TM_INFO"},
        {16, IBV_WC_EX_WITH_BYTE_LEN, IBV_CQ_INIT_ATTR_MASK_PD, 0, EINVAL, "PD mask without a parent domain"},
        {16, IBV_WC_EX_WITH_BYTE_LEN, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, EOPNOTSUPP,
         "IGNORE_OVERRUN"},
    };
    for (size_t i = 0; i < sizeof cq_cases / sizeof cq_cases[0]; ++i) {
        memset(&c, 0, sizeof c);
        c.cqe = cq_cases[i].cqe;
        c.wc_flags = cq_cases[i].wc_flags;
        c.comp_mask = cq_cases[i].mask;
        c.flags = cq_cases[i].flags;
        char line[128];
        snprintf(line, sizeof line, "ibv_create_cq_ex: %s", cq_cases[i].what);
        check_ptr(ibv_create_cq_ex(ctx, &c), cq_cases[i].want, line);
    }
    check_ret(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
}

/* Sends of every payload kind, several WRs in one batch. */
static void test_rc_sends(struct side* a, struct side* b) {
    uint8_t* src = a->buf;
    fill(src, 256, 1);
    for (int i = 0; i < 4; ++i) {
        post_recv(b, 100 + (uint64_t)i, (uint32_t)(1024 + i * 256), 256);
    }
    uint8_t inline_data[48];
    fill(inline_data, sizeof inline_data, 50);
    uint8_t piece1[5], piece2[20], piece3[9];
    fill(piece1, sizeof piece1, 90);
    fill(piece2, sizeof piece2, 110);
    fill(piece3, sizeof piece3, 130);
    struct ibv_sge list[2] = {{(uintptr_t)(src + 16), 40, a->mr->lkey}, {(uintptr_t)(src + 100), 24, a->mr->lkey}};
    struct ibv_data_buf bufs[3] = {{piece1, sizeof piece1}, {piece2, sizeof piece2}, {piece3, sizeof piece3}};
    const uint64_t before = device_now(), wall_before = wall_now();
    struct ibv_qp_ex* q = a->qpx;
    ibv_wr_start(q);
    q->wr_id = 1;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(q);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)src, 64);
    q->wr_id = 2;
    ibv_wr_send_imm(q, htonl(0xA1B2C3D4));
    ibv_wr_set_sge_list(q, 2, list);
    q->wr_id = 3;
    ibv_wr_send(q);
    ibv_wr_set_inline_data(q, inline_data, sizeof inline_data);
    q->wr_id = 4;
    ibv_wr_send(q);
    ibv_wr_set_inline_data_list(q, 3, bufs);
    /* Inline data is copied when set: the buffers are ours again. */
    memset(inline_data, 0xEE, sizeof inline_data);
    memset(piece2, 0xEE, sizeof piece2);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of send, send_imm, send inline, send inline list");
    fill(inline_data, sizeof inline_data, 50);
    fill(piece2, sizeof piece2, 110);

    const uint32_t lens[4] = {64, 64, sizeof inline_data, 34};
    struct completion c[4];
    for (int i = 0; i < 4; ++i) {
        char what[64];
        snprintf(what, sizeof what, "RC send %d (sender)", i + 1);
        expect_completion(a->send_cq, (uint64_t)i + 1, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, what, &c[i]);
        check_common(&c[i], before, wall_before, what);
    }
    check(c[0].ts <= c[1].ts && c[1].ts <= c[2].ts && c[2].ts <= c[3].ts, "completion_ts never goes back");
    for (int i = 0; i < 4; ++i) {
        char what[64];
        snprintf(what, sizeof what, "RC send %d (receiver)", i + 1);
        expect_completion(b->recv_cq, 100 + (uint64_t)i, IBV_WC_RECV, b->qp->qp_num, lens[i], what, &c[i]);
        check_common(&c[i], before, wall_before, what);
        snprintf(what, sizeof what, "RC send %d: src_qp 0x%x, wc_flags 0x%x", i + 1, c[i].src_qp, c[i].wc_flags);
        const unsigned want_flags = i == 1 ? IBV_WC_WITH_IMM : 0;
        check(c[i].src_qp == a->qp->qp_num && (c[i].wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) == want_flags,
              what);
    }
    check(c[1].imm_data == htonl(0xA1B2C3D4), "RC send_imm: read_imm_data is the immediate (network order)");
    check_bytes(b->buf + 1024, src, 64, "RC wr_send + wr_set_sge data");
    uint8_t want[64];
    memcpy(want, src + 16, 40);
    memcpy(want + 40, src + 100, 24);
    check_bytes(b->buf + 1280, want, 64, "RC wr_send_imm + wr_set_sge_list data");
    check_bytes(b->buf + 1536, inline_data, sizeof inline_data, "RC wr_set_inline_data data");
    memcpy(want, piece1, 5);
    memcpy(want + 5, piece2, 20);
    memcpy(want + 25, piece3, 9);
    check_bytes(b->buf + 1792, want, 34, "RC wr_set_inline_data_list data");
}

static void test_rc_rdma(struct side* a, struct side* b) {
    struct ibv_qp_ex* q = a->qpx;
    uint8_t* src = a->buf + 256;
    fill(src, 512, 3);
    memset(b->buf, 0, 1024);
    post_recv(b, 200, 2048, 16);
    const uint64_t before = device_now(), wall_before = wall_now();
    ibv_wr_start(q);
    q->wr_id = 10;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(q, b->mr->rkey, (uintptr_t)(b->buf + 8));
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)src, 300);
    q->wr_id = 11;
    ibv_wr_rdma_write_imm(q, b->mr->rkey, (uintptr_t)(b->buf + 512), htonl(0x01020304));
    ibv_wr_set_inline_data(q, src + 300, 100);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of rdma_write, rdma_write_imm (inline)");
    struct completion c;
    expect_completion(a->send_cq, 10, IBV_WC_RDMA_WRITE, a->qp->qp_num, UINT32_MAX, "RC wr_rdma_write", &c);
    check_common(&c, before, wall_before, "RC wr_rdma_write");
    expect_completion(a->send_cq, 11, IBV_WC_RDMA_WRITE, a->qp->qp_num, UINT32_MAX, "RC wr_rdma_write_imm", &c);
    expect_completion(b->recv_cq, 200, IBV_WC_RECV_RDMA_WITH_IMM, b->qp->qp_num, 100,
                      "RC wr_rdma_write_imm (receiver)", &c);
    check_common(&c, before, wall_before, "RC wr_rdma_write_imm (receiver)");
    check(c.imm_data == htonl(0x01020304) && (c.wc_flags & IBV_WC_WITH_IMM) != 0 && c.src_qp == a->qp->qp_num,
          "RC wr_rdma_write_imm: immediate, IBV_WC_WITH_IMM and src_qp");
    check_bytes(b->buf + 8, src, 300, "RC wr_rdma_write data");
    check_bytes(b->buf + 512, src + 300, 100, "RC wr_rdma_write_imm data");

    /* READ back what was written, into another place. */
    uint8_t* dst = a->buf + 1024;
    memset(dst, 0, 400);
    ibv_wr_start(q);
    q->wr_id = 12;
    ibv_wr_rdma_read(q, b->mr->rkey, (uintptr_t)(b->buf + 8));
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)dst, 300);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of rdma_read");
    expect_completion(a->send_cq, 12, IBV_WC_RDMA_READ, a->qp->qp_num, 300, "RC wr_rdma_read", &c);
    check_bytes(dst, src, 300, "RC wr_rdma_read data");

    /* Atomics on a 64-bit word of b. */
    uint64_t* word = (uint64_t*)(void*)(b->buf + 3072);
    uint64_t* old = (uint64_t*)(void*)(a->buf + 3072);
    *word = 1000;
    old[0] = old[1] = 0;
    ibv_wr_start(q);
    q->wr_id = 13;
    ibv_wr_atomic_fetch_add(q, b->mr->rkey, (uintptr_t)word, 234);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)&old[0], 8);
    q->wr_id = 14;
    ibv_wr_atomic_cmp_swp(q, b->mr->rkey, (uintptr_t)word, 1234, 0xFEEDFACECAFEBEEFull);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)&old[1], 8);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of fetch_add, cmp_swp");
    expect_completion(a->send_cq, 13, IBV_WC_FETCH_ADD, a->qp->qp_num, 8, "RC wr_atomic_fetch_add", &c);
    expect_completion(a->send_cq, 14, IBV_WC_COMP_SWAP, a->qp->qp_num, 8, "RC wr_atomic_cmp_swp", &c);
    char line[160];
    snprintf(line, sizeof line, "atomics: fetch_add returned %" PRIu64 ", cmp_swp returned %" PRIu64
             ", word now 0x%" PRIx64, old[0], old[1], *word);
    check(old[0] == 1000 && old[1] == 1234 && *word == 0xFEEDFACECAFEBEEFull, line);
}

/* Type 2 windows on b: bound by b's wr_bind_mw, written through by a,
 * invalidated by a's wr_send_inv and by b's wr_local_inv. A type 2 window
 * binds only from the free state (IBA 10.6.7.2.2), so a successful second
 * bind proves the invalidation. */
static void bind_window(struct side* b, struct ibv_mw* mw, uint32_t rkey, uint64_t wr_id, const char* what) {
    struct ibv_mw_bind_info info = {.mr = b->mr, .addr = (uintptr_t)(b->buf + 2048), .length = 512,
                                    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE};
    ibv_wr_start(b->qpx);
    b->qpx->wr_id = wr_id;
    b->qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_bind_mw(b->qpx, mw, rkey, &info);
    check_ret(ibv_wr_complete(b->qpx), 0, what);
    expect_completion(b->send_cq, wr_id, IBV_WC_BIND_MW, b->qp->qp_num, UINT32_MAX, what, NULL);
    mw->rkey = rkey;
}

static void test_rc_windows(struct side* a, struct side* b) {
    struct ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    check(mw != NULL, "ibv_alloc_mw type 2");
    if (mw == NULL) {
        return;
    }
    bind_window(b, mw, ibv_inc_rkey(mw->rkey), 20, "wr_bind_mw");
    uint8_t* src = a->buf + 512;
    fill(src, 64, 77);
    struct ibv_qp_ex* q = a->qpx;
    post_recv(b, 201, 3584, 64);
    ibv_wr_start(q);
    q->wr_id = 21;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(q, mw->rkey, (uintptr_t)(b->buf + 2048 + 100));
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)src, 64);
    q->wr_id = 22;
    ibv_wr_send_inv(q, mw->rkey);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)src, 16);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of a write through the window, send_inv");
    struct completion c;
    expect_completion(a->send_cq, 21, IBV_WC_RDMA_WRITE, a->qp->qp_num, UINT32_MAX, "write through the window", &c);
    expect_completion(a->send_cq, 22, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "wr_send_inv (sender)", &c);
    expect_completion(b->recv_cq, 201, IBV_WC_RECV, b->qp->qp_num, 16, "wr_send_inv (receiver)", &c);
    check((c.wc_flags & IBV_WC_WITH_INV) != 0 && c.imm_data == mw->rkey,
          "wr_send_inv: IBV_WC_WITH_INV and the invalidated rkey");
    check_bytes(b->buf + 2048 + 100, src, 64, "write through a bound window data");
    check_bytes(b->buf + 3584, src, 16, "wr_send_inv data");
    bind_window(b, mw, ibv_inc_rkey(mw->rkey), 23, "wr_bind_mw again after send_inv (the window was freed)");
    ibv_wr_start(b->qpx);
    b->qpx->wr_id = 24;
    b->qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_local_inv(b->qpx, mw->rkey);
    check_ret(ibv_wr_complete(b->qpx), 0, "ibv_wr_complete of local_inv");
    expect_completion(b->send_cq, 24, IBV_WC_LOCAL_INV, b->qp->qp_num, UINT32_MAX, "wr_local_inv", NULL);
    bind_window(b, mw, ibv_inc_rkey(mw->rkey), 25, "wr_bind_mw again after local_inv (the window was freed)");
    ibv_wr_start(b->qpx);
    b->qpx->wr_id = 26;
    ibv_wr_local_inv(b->qpx, mw->rkey);
    check_ret(ibv_wr_complete(b->qpx), 0, "ibv_wr_complete of local_inv");
    expect_completion(b->send_cq, 26, IBV_WC_LOCAL_INV, b->qp->qp_num, UINT32_MAX, "wr_local_inv", NULL);
    check_ret(ibv_dealloc_mw(mw), 0, "ibv_dealloc_mw");
}

/* Mistakes: ibv_wr_complete returns the first, and posts nothing of the
 * batch; wr_abort drops a batch. A signaled marker send afterwards must be
 * the only completion on either side. */
static void test_rc_mistakes(struct side* a, struct side* b, struct side* uc) {
    struct ibv_qp_ex* q = a->qpx;
    struct ibv_sge three[4];
    for (int i = 0; i < 4; ++i) {
        three[i] = (struct ibv_sge){(uintptr_t)a->buf, 8, a->mr->lkey};
    }
    uint8_t big[512] = {0};
    struct {
        int step;
        int want;
        const char* what;
    } cases[] = {
        {0, EINVAL, "wr_set_sge before any opcode"},
        {1, EINVAL, "wr_set_sge_list with more SGEs than max_send_sge"},
        {2, EINVAL, "wr_set_inline_data beyond max_inline_data"},
        {3, EINVAL, "wr_set_ud_addr on an RC QP"},
        {4, EOPNOTSUPP, "wr_send_tso"},
        {5, EINVAL, "an opcode not in send_ops_flags (READ on UC)"},
        {6, EINVAL, "a good WR before a bad one: nothing posted"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        struct ibv_qp_ex* target = cases[i].step == 5 ? uc->qpx : q;
        ibv_wr_start(target);
        target->wr_id = 900;
        target->wr_flags = IBV_SEND_SIGNALED;
        switch (cases[i].step) {
            case 0:
                ibv_wr_set_sge(target, a->mr->lkey, (uintptr_t)a->buf, 8);
                break;
            case 1:
                ibv_wr_send(target);
                ibv_wr_set_sge_list(target, 4, three);
                break;
            case 2:
                ibv_wr_send(target);
                ibv_wr_set_inline_data(target, big, max_inline + 1);
                break;
            case 3:
                ibv_wr_send(target);
                ibv_wr_set_ud_addr(target, NULL, 1, 1);
                break;
            case 4:
                ibv_wr_send_tso(target, big, 16, 100);
                break;
            case 5:
                ibv_wr_rdma_read(target, 1, 0);
                ibv_wr_set_sge(target, a->mr->lkey, (uintptr_t)a->buf, 8);
                break;
            case 6:
                ibv_wr_send(target);
                ibv_wr_set_sge(target, a->mr->lkey, (uintptr_t)a->buf, 8);
                ibv_wr_send(target);
                ibv_wr_set_sge_list(target, 4, three);
                break;
        }
        check_ret(ibv_wr_complete(target), cases[i].want, cases[i].what);
    }
    check_ret(ibv_wr_complete(q), EINVAL, "ibv_wr_complete without ibv_wr_start");
    ibv_wr_start(q);
    q->wr_id = 901;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(q);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 8);
    ibv_wr_abort(q);

    fill(a->buf, 8, 200);
    post_recv(b, 300, 0, 64);
    ibv_wr_start(q);
    q->wr_id = 902;
    ibv_wr_send(q);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 8);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete after the mistakes");
    expect_completion(a->send_cq, 902, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "the marker send is the next", NULL);
    expect_completion(b->recv_cq, 300, IBV_WC_RECV, b->qp->qp_num, 8, "the marker arrives alone", NULL);
    check(cq_empty(a->send_cq) && cq_empty(b->recv_cq) && cq_empty(uc->send_cq),
          "no refused or aborted WR was posted");

    /* Classic post_send still works on an extended QP, and ibv_poll_cq on an extended CQ. */
    post_recv(b, 301, 0, 64);
    struct ibv_sge s = {(uintptr_t)a->buf, 8, a->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 903, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr* bad = NULL;
    check_ret(ibv_post_send(a->qp, &wr, &bad), 0, "ibv_post_send on an extended QP");
    struct ibv_wc wc;
    int n = 0;
    for (int tries = 0; tries < 5000000 && n == 0; ++tries) {
        n = ibv_poll_cq(ibv_cq_ex_to_cq(a->send_cq), 1, &wc);
    }
    check(n == 1 && wc.wr_id == 903 && wc.status == IBV_WC_SUCCESS, "ibv_poll_cq on an extended CQ");
    expect_completion(b->recv_cq, 301, IBV_WC_RECV, b->qp->qp_num, 8, "classic send arrives", NULL);
}

/* ibv_resize_cq keeps the completions not polled yet, in order: b's
 * receive CQ holds 6 when it is resized (too small first: EINVAL). */
static void test_resize(struct side* a, struct side* b) {
    struct ibv_qp_ex* q = a->qpx;
    fill(a->buf, 64, 150);
    for (int i = 0; i < 6; ++i) {
        post_recv(b, 600 + (uint64_t)i, (uint32_t)(i * 64), 64);
    }
    ibv_wr_start(q);
    q->wr_flags = IBV_SEND_SIGNALED;
    for (int i = 0; i < 6; ++i) {
        q->wr_id = 60 + (uint64_t)i;
        ibv_wr_send(q);
        ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)(a->buf + i), (uint32_t)(10 + i));
    }
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete of 6 sends");
    struct completion c[6];
    /* RC: a send completes once its receive has completed. */
    check(poll_ex(a->send_cq, 6, c) == 6, "6 send completions");
    struct ibv_cq* cq = ibv_cq_ex_to_cq(b->recv_cq);
    check_ret(ibv_resize_cq(cq, 4), EINVAL, "ibv_resize_cq below the unpolled completions");
    check_ret(ibv_resize_cq(cq, 0), EINVAL, "ibv_resize_cq to 0 entries");
    check_ret(ibv_resize_cq(cq, 200), 0, "ibv_resize_cq with 6 completions unpolled");
    check(cq->cqe >= 200, "ibv_resize_cq sets cqe to the granted size");
    const int got = poll_ex(b->recv_cq, 6, c);
    int in_order = got == 6;
    for (int i = 0; i < got; ++i) {
        in_order = in_order && c[i].wr_id == 600 + (uint64_t)i && c[i].byte_len == (uint32_t)(10 + i) &&
                   c[i].status == IBV_WC_SUCCESS && c[i].opcode == IBV_WC_RECV;
    }
    check(in_order, "the unpolled completions survive the resize, in order, with their fields");
    for (int i = 0; i < 6; ++i) {
        check_bytes(b->buf + i * 64, a->buf + i, (size_t)(10 + i), "data of a receive completed before the resize");
    }
    check(cq_empty(b->recv_cq), "nothing more after them");
    post_recv(b, 606, 1024, 64);
    ibv_wr_start(q);
    q->wr_id = 66;
    ibv_wr_send(q);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 7);
    check_ret(ibv_wr_complete(q), 0, "ibv_wr_complete after the resize");
    expect_completion(a->send_cq, 66, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "send after the resize", NULL);
    expect_completion(b->recv_cq, 606, IBV_WC_RECV, b->qp->qp_num, 7, "the resized CQ takes new completions", NULL);
    check_ret(ibv_resize_cq(cq, 16), 0, "ibv_resize_cq down, nothing unpolled");
    check(cq->cqe >= 16 && cq->cqe < 200, "the CQ shrank");
}

static void test_uc(struct side* a, struct side* b) {
    struct ibv_qp_ex* q = a->qpx;
    fill(a->buf, 512, 9);
    memset(b->buf, 0, kBufBytes);
    post_recv(b, 400, 1024, 128);
    post_recv(b, 401, 1280, 128);
    const uint64_t before = device_now(), wall_before = wall_now();
    ibv_wr_start(q);
    q->wr_id = 30;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(q, htonl(77));
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 100);
    q->wr_id = 31;
    ibv_wr_rdma_write(q, b->mr->rkey, (uintptr_t)(b->buf + 16));
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)(a->buf + 100), 200);
    q->wr_id = 32;
    ibv_wr_rdma_write_imm(q, b->mr->rkey, (uintptr_t)(b->buf + 2048), htonl(78));
    ibv_wr_set_inline_data(q, a->buf + 300, 60);
    check_ret(ibv_wr_complete(q), 0, "UC ibv_wr_complete of send_imm, rdma_write, rdma_write_imm");
    struct completion c;
    expect_completion(a->send_cq, 30, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "UC wr_send_imm", &c);
    check_common(&c, before, wall_before, "UC wr_send_imm");
    expect_completion(a->send_cq, 31, IBV_WC_RDMA_WRITE, a->qp->qp_num, UINT32_MAX, "UC wr_rdma_write", NULL);
    expect_completion(a->send_cq, 32, IBV_WC_RDMA_WRITE, a->qp->qp_num, UINT32_MAX, "UC wr_rdma_write_imm", NULL);
    expect_completion(b->recv_cq, 400, IBV_WC_RECV, b->qp->qp_num, 100, "UC send_imm (receiver)", &c);
    check(c.imm_data == htonl(77) && (c.wc_flags & IBV_WC_WITH_IMM) != 0, "UC send_imm: immediate");
    expect_completion(b->recv_cq, 401, IBV_WC_RECV_RDMA_WITH_IMM, b->qp->qp_num, 60, "UC write_imm (receiver)", &c);
    check_common(&c, before, wall_before, "UC write_imm (receiver)");
    check(c.imm_data == htonl(78), "UC write_imm: immediate");
    check_bytes(b->buf + 1024, a->buf, 100, "UC wr_send_imm data");
    check_bytes(b->buf + 16, a->buf + 100, 200, "UC wr_rdma_write data");
    check_bytes(b->buf + 2048, a->buf + 300, 60, "UC wr_rdma_write_imm data");
}

static void test_ud(struct side* a, struct side* b) {
    struct ibv_ah_attr ah_attr;
    memset(&ah_attr, 0, sizeof ah_attr);
    ah_attr.is_global = 1;
    ah_attr.port_num = 1;
    ah_attr.grh.sgid_index = 2;
    ah_attr.grh.hop_limit = 64;
    ibv_query_gid(ctx, 1, 2, &ah_attr.grh.dgid);
    struct ibv_ah* ah = ibv_create_ah(pd, &ah_attr);
    check(ah != NULL, "ibv_create_ah");
    if (ah == NULL) {
        return;
    }
    fill(a->buf, 256, 33);
    memset(b->buf, 0, kBufBytes);
    post_recv(b, 500, 0, kGrhBytes + 256);
    post_recv(b, 501, 512, kGrhBytes + 256);
    struct ibv_qp_ex* q = a->qpx;
    const uint64_t before = device_now(), wall_before = wall_now();
    ibv_wr_start(q);
    q->wr_id = 40;
    q->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(q);
    ibv_wr_set_ud_addr(q, ah, b->qp->qp_num, kUdQkey);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 200);
    q->wr_id = 41;
    ibv_wr_send_imm(q, htonl(0x5150));
    ibv_wr_set_inline_data(q, a->buf + 200, 56);
    ibv_wr_set_ud_addr(q, ah, b->qp->qp_num, kUdQkey); /* after the payload: any order */
    check_ret(ibv_wr_complete(q), 0, "UD ibv_wr_complete of send, send_imm");
    struct completion c;
    expect_completion(a->send_cq, 40, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "UD wr_send", &c);
    check_common(&c, before, wall_before, "UD wr_send");
    expect_completion(a->send_cq, 41, IBV_WC_SEND, a->qp->qp_num, UINT32_MAX, "UD wr_send_imm", NULL);
    expect_completion(b->recv_cq, 500, IBV_WC_RECV, b->qp->qp_num, kGrhBytes + 200, "UD send (receiver)", &c);
    check_common(&c, before, wall_before, "UD send (receiver)");
    char line[128];
    snprintf(line, sizeof line, "UD: src_qp 0x%x (want 0x%x), IBV_WC_GRH in wc_flags 0x%x", c.src_qp,
             a->qp->qp_num, c.wc_flags);
    check(c.src_qp == a->qp->qp_num && (c.wc_flags & IBV_WC_GRH) != 0, line);
    expect_completion(b->recv_cq, 501, IBV_WC_RECV, b->qp->qp_num, kGrhBytes + 56, "UD send_imm (receiver)", &c);
    check(c.imm_data == htonl(0x5150) && (c.wc_flags & IBV_WC_WITH_IMM) != 0 && c.src_qp == a->qp->qp_num,
          "UD send_imm: immediate and src_qp");
    check_bytes(b->buf + kGrhBytes, a->buf, 200, "UD wr_send data (after the GRH)");
    check_bytes(b->buf + 512 + kGrhBytes, a->buf + 200, 56, "UD wr_send_imm inline data (after the GRH)");

    /* A UD WR without an address is refused. */
    ibv_wr_start(q);
    q->wr_id = 42;
    ibv_wr_send(q);
    ibv_wr_set_sge(q, a->mr->lkey, (uintptr_t)a->buf, 8);
    check_ret(ibv_wr_complete(q), EINVAL, "UD wr_send without wr_set_ud_addr");
    check_ret(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
}

int main(void) {
    struct ibv_device** list;
    ctx = open_uroce(&list);
    pd = ibv_alloc_pd(ctx);
    check(pd != NULL, "ibv_alloc_pd");
    test_device_clock();
    test_creation_rules();

    struct side a, b, ua, ub, da, db;
    new_side(&a, IBV_QPT_RC, RC_OPS);
    new_side(&b, IBV_QPT_RC, RC_OPS);
    connect_rc_to_own_address(a.qp, b.qp->qp_num,
                              IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 14);
    connect_rc_to_own_address(b.qp, a.qp->qp_num,
                              IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 14);
    new_side(&ua, IBV_QPT_UC, UC_OPS);
    new_side(&ub, IBV_QPT_UC, UC_OPS);
    connect_uc(ua.qp, ub.qp->qp_num);
    connect_uc(ub.qp, ua.qp->qp_num);
    new_side(&da, IBV_QPT_UD, UD_OPS);
    new_side(&db, IBV_QPT_UD, UD_OPS);
    connect_ud(da.qp);
    connect_ud(db.qp);

    test_rc_sends(&a, &b);
    test_rc_rdma(&a, &b);
    test_rc_windows(&a, &b);
    test_rc_mistakes(&a, &b, &ua);
    test_resize(&a, &b);
    test_uc(&ua, &ub);
    test_ud(&da, &db);

    free_side(&a);
    free_side(&b);
    free_side(&ua);
    free_side(&ub);
    free_side(&da);
    free_side(&db);
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures;
}
