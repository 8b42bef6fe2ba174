/* Thread domains and parent domains through stock libibverbs against a
 * running uroced (run as `uroce exec -- parent_domain`), as
 * ibv_alloc_td(3) and ibv_alloc_parent_domain(3) describe them: a parent
 * domain with a TD and counting alloc/free callbacks; a CQ made with
 * ibv_create_cq_ex on it (IBV_CQ_INIT_ATTR_MASK_PD) and two RC QPs on it
 * connected over the loopback port; MRs and an AH registered against it;
 * SEND, RDMA WRITE and RDMA READ checked byte for byte; every allocation
 * the provider asked for is freed again. Then the errors: unknown comp_mask
 * bits, a PD or TD of another context, a parent domain over a parent
 * domain, and EBUSY for a PD, TD or parent domain still in use. One line
 * per check; the exit status is the number of failures. Completions are
 * awaited with a bounded deadline. */
#include <stdint.h>
#include <time.h>

#include "uroce_dv.h"
#include "verbs_check.h"

enum { kBufBytes = 4096, kSendBytes = 1000, kWriteBytes = 3000, kReadBytes = 2500 };

/* What the allocator callbacks saw. */
struct alloc_counts {
    int allocs;
    int frees;
    int qp_allocs;
    int cq_allocs;
    int other_types;
    int wrong_context;
    int wrong_pd;
    size_t outstanding_bytes;
};

static struct alloc_counts counts;
static struct ibv_pd* parent;  /* the domain the callbacks must be called for */
static int pd_context_tag;     /* its pd_context points here */

/* Each block carries, just before the pointer handed out, its size and
 * where the block starts, so free can account for it. */
static void* counting_alloc(struct ibv_pd* pd, void* pd_context, size_t size, size_t alignment,
                            uint64_t resource_type) {
    counts.allocs++;
    counts.qp_allocs += resource_type == UROCE_DV_RES_TYPE_QP;
    counts.cq_allocs += resource_type == UROCE_DV_RES_TYPE_CQ;
    counts.other_types += resource_type != UROCE_DV_RES_TYPE_QP && resource_type != UROCE_DV_RES_TYPE_CQ;
    counts.wrong_context += pd_context != &pd_context_tag;
    counts.wrong_pd += pd != parent;
    const size_t align = alignment < 64 ? 64 : alignment;
    uint8_t* block = aligned_alloc(align, align + ((size + align - 1) / align) * align);
    if (block == NULL) {
        return NULL;
    }
    memcpy(block + align - sizeof size, &size, sizeof size);
    memcpy(block + align - sizeof size - sizeof block, &block, sizeof block);
    counts.outstanding_bytes += size;
    return block + align;
}

static void counting_free(struct ibv_pd* pd, void* pd_context, void* ptr, uint64_t resource_type) {
    (void)resource_type;
    counts.frees++;
    counts.wrong_context += pd_context != &pd_context_tag;
    counts.wrong_pd += pd != parent;
    uint8_t* block;
    size_t size;
    memcpy(&size, (uint8_t*)ptr - sizeof size, sizeof size);
    memcpy(&block, (uint8_t*)ptr - sizeof size - sizeof block, sizeof block);
    counts.outstanding_bytes -= size;
    free(block);
}

static int default_calls;
static void* default_alloc(struct ibv_pd* pd, void* pd_context, size_t size, size_t alignment,
                           uint64_t resource_type) {
    (void)pd, (void)pd_context, (void)size, (void)alignment, (void)resource_type;
    default_calls++;
    return IBV_ALLOCATOR_USE_DEFAULT;
}
static int default_frees;
static void default_free(struct ibv_pd* pd, void* pd_context, void* ptr, uint64_t resource_type) {
    (void)pd, (void)pd_context, (void)ptr, (void)resource_type;
    default_frees++;
}

/* Up to `n` completions of `cq` within 5 s into `wc`; returns how many. */
static int poll_ex(struct ibv_cq_ex* cq, int n, struct ibv_wc* wc) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int got = 0;
    while (got < n) {
        struct ibv_poll_cq_attr attr = {0};
        int ret = ibv_start_poll(cq, &attr);
        const int started = ret == 0;
        while (ret == 0 && got < n) {
            wc[got].wr_id = cq->wr_id;
            wc[got].status = cq->status;
            wc[got].opcode = ibv_wc_read_opcode(cq);
            wc[got].byte_len = ibv_wc_read_byte_len(cq);
            got++;
            ret = got < n ? ibv_next_poll(cq) : 0;
        }
        if (started) {
            ibv_end_poll(cq);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            break;
        }
    }
    return got;
}

static void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) {
        p[i] = (uint8_t)(seed + i * 7);
    }
}

static int post(struct ibv_qp* qp, enum ibv_wr_opcode op, struct ibv_mr* mr, void* addr, uint32_t len,
                struct ibv_mr* remote, void* remote_addr, uint64_t wr_id) {
    struct ibv_sge sge = {(uintptr_t)addr, len, mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (remote != NULL) {
        wr.wr.rdma.remote_addr = (uintptr_t)remote_addr;
        wr.wr.rdma.rkey = remote->rkey;
    }
    return ibv_post_send(qp, &wr, &bad);
}

/* SEND, WRITE and READ between two QPs of `pd_for_qps` that complete on
 * `cq`; `mr_a` and `mr_b` are the two sides' buffers. */
static void move_data(struct ibv_cq_ex* cq, struct ibv_qp* a, struct ibv_qp* b, struct ibv_mr* mr_a,
                      struct ibv_mr* mr_b) {
    uint8_t* src = mr_a->addr;
    uint8_t* dst = mr_b->addr;
    struct ibv_wc wc[2];

    fill(src, kSendBytes, 11);
    memset(dst, 0, kBufBytes);
    struct ibv_sge rsge = {(uintptr_t)dst, kBufBytes, mr_b->lkey};
    struct ibv_recv_wr rwr = {.wr_id = 100, .sg_list = &rsge, .num_sge = 1}, *rbad;
    check_ret(ibv_post_recv(b, &rwr, &rbad), 0, "post a receive on QP b");
    check_ret(post(a, IBV_WR_SEND, mr_a, src, kSendBytes, NULL, NULL, 1), 0, "post a SEND on QP a");
    const int n = poll_ex(cq, 2, wc);
    check(n == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS, "SEND and its receive complete");
    int recv_len_ok = 0;
    for (int i = 0; i < n; ++i) {
        recv_len_ok |= wc[i].wr_id == 100 && wc[i].opcode == IBV_WC_RECV && wc[i].byte_len == kSendBytes;
    }
    check(recv_len_ok, "the receive reports 1000 bytes");
    check(memcmp(src, dst, kSendBytes) == 0, "SEND: every byte arrived");

    fill(src, kWriteBytes, 99);
    memset(dst, 0, kBufBytes);
    check_ret(post(a, IBV_WR_RDMA_WRITE, mr_a, src, kWriteBytes, mr_b, dst + 512, 2), 0, "post an RDMA WRITE");
    check(poll_ex(cq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 2, "RDMA WRITE completes");
    check(memcmp(src, dst + 512, kWriteBytes) == 0, "RDMA WRITE: every byte arrived");
    int outside_clean = 1;
    for (int i = 0; i < 512; ++i) {
        outside_clean &= dst[i] == 0;
    }
    check(outside_clean, "RDMA WRITE: nothing before the target range");

    fill(dst, kReadBytes, 201);
    memset(src, 0, kBufBytes);
    check_ret(post(a, IBV_WR_RDMA_READ, mr_a, src, kReadBytes, mr_b, dst, 3), 0, "post an RDMA READ");
    check(poll_ex(cq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 3, "RDMA READ completes");
    check(memcmp(src, dst, kReadBytes) == 0, "RDMA READ: every byte arrived");
}

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq_ex* cq) {
    struct ibv_qp_init_attr_ex a;
    memset(&a, 0, sizeof a);
    a.send_cq = ibv_cq_ex_to_cq(cq);
    a.recv_cq = ibv_cq_ex_to_cq(cq);
    a.cap.max_send_wr = 8;
    a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = pd;
    return ibv_create_qp_ex(pd->context, &a);
}

static struct ibv_cq_ex* make_cq(struct ibv_context* ctx, struct ibv_pd* domain) {
    struct ibv_cq_init_attr_ex a;
    memset(&a, 0, sizeof a);
    a.cqe = 16;
    a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
    a.parent_domain = domain;
    return ibv_create_cq_ex(ctx, &a);
}

static void data_through_parent_domain(struct ibv_context* ctx, struct ibv_pd* pd, struct ibv_td* td) {
    struct ibv_parent_domain_init_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.pd = pd;
    pa.td = td;
    pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    pa.alloc = counting_alloc;
    pa.free = counting_free;
    pa.pd_context = &pd_context_tag;
    parent = check_ptr(ibv_alloc_parent_domain(ctx, &pa), 0, "ibv_alloc_parent_domain with a TD and allocators");
    if (parent == NULL) {
        return;
    }
    check(parent->context == ctx, "the parent domain belongs to the context");
    check_ret(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd of the PD under a parent domain");
    check_ret(ibv_dealloc_td(td), EBUSY, "ibv_dealloc_td of a TD a parent domain names");

    struct ibv_cq_ex* cq = check_ptr(make_cq(ctx, parent), 0, "ibv_create_cq_ex on the parent domain");
    struct ibv_qp* a = cq != NULL ? check_ptr(make_qp(parent, cq), 0, "RC QP a on the parent domain") : NULL;
    struct ibv_qp* b = cq != NULL ? check_ptr(make_qp(parent, cq), 0, "RC QP b on the parent domain") : NULL;
    check(a != NULL && a->pd == parent, "QP a names the parent domain as its PD");
    check(counts.cq_allocs == 1 && counts.qp_allocs == 2 && counts.other_types == 0,
          "the allocator was asked for one CQ and two QPs");
    check(counts.wrong_context == 0 && counts.wrong_pd == 0, "callbacks got the parent domain and its pd_context");

    uint8_t* buf_a = calloc(1, kBufBytes);
    uint8_t* buf_b = calloc(1, kBufBytes);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    /* One MR on the parent domain, one on the PD under it: one domain. */
    struct ibv_mr* mr_a = check_ptr(ibv_reg_mr(parent, buf_a, kBufBytes, access), 0, "ibv_reg_mr on the parent domain");
    struct ibv_mr* mr_b = check_ptr(ibv_reg_mr(pd, buf_b, kBufBytes, access), 0, "ibv_reg_mr on its PD");
    if (a != NULL && b != NULL && mr_a != NULL && mr_b != NULL) {
        check_ret(ibv_dealloc_pd(parent), EBUSY, "ibv_dealloc_pd of a parent domain its QPs use");
        connect_rc_to_own_address(a, b->qp_num, access, 14);
        connect_rc_to_own_address(b, a->qp_num, access, 14);
        move_data(cq, a, b, mr_a, mr_b);
    }
    struct ibv_ah_attr ah_attr;
    memset(&ah_attr, 0, sizeof ah_attr);
    ah_attr.is_global = 1;
    ah_attr.port_num = 1;
    ah_attr.grh.sgid_index = 2;
    ah_attr.grh.hop_limit = 64;
    ibv_query_gid(ctx, 1, 2, &ah_attr.grh.dgid);
    struct ibv_ah* ah = check_ptr(ibv_create_ah(parent, &ah_attr), 0, "ibv_create_ah on the parent domain");
    if (ah != NULL) {
        check_ret(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
    }
    if (mr_a != NULL) {
        check_ret(ibv_dereg_mr(mr_a), 0, "ibv_dereg_mr of the parent domain's MR");
    }
    if (mr_b != NULL) {
        check_ret(ibv_dereg_mr(mr_b), 0, "ibv_dereg_mr of the PD's MR");
    }
    if (a != NULL) {
        check_ret(ibv_destroy_qp(a), 0, "ibv_destroy_qp a");
    }
    if (b != NULL) {
        check_ret(ibv_destroy_qp(b), 0, "ibv_destroy_qp b");
    }
    if (cq != NULL) {
        check_ret(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
    }
    check(counts.allocs == 3 && counts.frees == counts.allocs && counts.outstanding_bytes == 0,
          "every block the allocator gave was freed");
    free(buf_a);
    free(buf_b);
    check_ret(ibv_dealloc_pd(parent), 0, "ibv_dealloc_pd of the parent domain, now unused");
}

/* A parent domain whose allocator answers IBV_ALLOCATOR_USE_DEFAULT: the
 * CQ is made the default way and free is never called for it. */
static void allocator_use_default(struct ibv_context* ctx, struct ibv_pd* pd) {
    struct ibv_parent_domain_init_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.pd = pd;
    pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
    pa.alloc = default_alloc;
    pa.free = default_free;
    struct ibv_pd* d = check_ptr(ibv_alloc_parent_domain(ctx, &pa), 0, "a parent domain without a TD");
    if (d == NULL) {
        return;
    }
    struct ibv_cq_ex* cq = check_ptr(make_cq(ctx, d), 0, "ibv_create_cq_ex with IBV_ALLOCATOR_USE_DEFAULT");
    check(default_calls == 1, "the allocator was asked once");
    if (cq != NULL) {
        check_ret(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
    }
    check(default_frees == 0, "free is not called for default memory");
    check_ret(ibv_dealloc_pd(d), 0, "ibv_dealloc_pd of that parent domain");
}

static void bad_input(struct ibv_context* ctx, struct ibv_pd* pd, struct ibv_td* td) {
    struct ibv_td_init_attr ta = {.comp_mask = 1};
    check_ptr(ibv_alloc_td(ctx, &ta), EINVAL, "ibv_alloc_td with an unknown comp_mask bit");

    struct ibv_parent_domain_init_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.pd = pd;
    pa.comp_mask = 1u << 7;
    check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "ibv_alloc_parent_domain with an unknown comp_mask bit");
    pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
    pa.alloc = counting_alloc;
    check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "allocators without a free callback");
    pa.comp_mask = 0;
    pa.pd = NULL;
    check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "no PD");

    pa.pd = pd;
    struct ibv_pd* d = check_ptr(ibv_alloc_parent_domain(ctx, &pa), 0, "a plain parent domain");
    if (d != NULL) {
        pa.pd = d;
        check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "a parent domain over a parent domain");
        check_ret(ibv_dealloc_pd(d), 0, "ibv_dealloc_pd of it");
    }
    check_ptr(make_cq(ctx, pd), EINVAL, "ibv_create_cq_ex with a PD that is not a parent domain");
    check_ptr(make_cq(ctx, NULL), EINVAL, "ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD and no PD");

    /* Objects of another context. */
    struct ibv_device** list2;
    struct ibv_context* other = open_uroce(&list2);
    struct ibv_td* other_td = check_ptr(ibv_alloc_td(other, &(struct ibv_td_init_attr){0}), 0, "a TD of a second context");
    struct ibv_pd* other_pd = check_ptr(ibv_alloc_pd(other), 0, "a PD of a second context");
    pa.pd = pd;
    pa.td = other_td;
    check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "a TD of another context");
    pa.pd = other_pd;
    pa.td = td;
    check_ptr(ibv_alloc_parent_domain(ctx, &pa), EINVAL, "a PD of another context");
    if (other_td != NULL) {
        check_ret(ibv_dealloc_td(other_td), 0, "ibv_dealloc_td of the second context's TD");
    }
    if (other_pd != NULL) {
        check_ret(ibv_dealloc_pd(other_pd), 0, "ibv_dealloc_pd of the second context's PD");
    }
    ibv_close_device(other);
    ibv_free_device_list(list2);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = check_ptr(ibv_alloc_pd(ctx), 0, "ibv_alloc_pd");
    struct ibv_td* td = check_ptr(ibv_alloc_td(ctx, &(struct ibv_td_init_attr){0}), 0, "ibv_alloc_td");
    if (pd != NULL && td != NULL) {
        check(td->context == ctx, "the TD belongs to the context");
        data_through_parent_domain(ctx, pd, td);
        allocator_use_default(ctx, pd);
        bad_input(ctx, pd, td);
        check_ret(ibv_dealloc_td(td), 0, "ibv_dealloc_td, now unused");
        check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd, now unused");
    }
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failures\n", check_failures);
    return check_failures;
}
