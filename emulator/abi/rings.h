/*
 * The data-path rings shared by the provider (in the application) and uroced:
 * work queues (SQ, RQ, SRQ) and completion queues. Plain C, fixed sizes,
 * explicit padding; both sides include it.
 *
 * Every ring lives in a memfd the daemon creates and passes with the reply
 * that creates the object (CREATE_QP: SQ then RQ in one memfd; CREATE_SRQ;
 * CREATE_CQ). A ring is a three-cache-line header and then `entries` slots
 * of `stride` bytes; `entries` is a power of two, so slot = counter &
 * (entries-1) with free-running 32-bit counters.
 *
 * Header lines: the first holds what is fixed at creation (and the daemon's
 * rarely written error/overrun flag); the producer index has the second line
 * to itself and the consumer index (with the other fields its writer owns)
 * the third, so the application and the daemon, which write one each, never
 * write the same cache line on the busy path (no false sharing). A line is
 * UROCE_RING_LINE bytes.
 *
 * Work queues: the provider writes a WQE into slot (producer & mask), then
 * stores producer + 1 with release order. The daemon loads producer with
 * acquire order, copies the WQE out of shared memory before looking at it
 * (the client may scribble on it at any time), validates the copy, and only
 * then acts. `consumer` counts WQEs the daemon has retired (completed, with or
 * without a CQE), just before its CQE: slots below it are free again, so at
 * most `entries` WQEs are outstanding, as ibv_post_send(3) promises with
 * ENOMEM. A receive WQE being filled is not retired yet; an SRQ's consumer
 * moves when a QP takes the WQE (SRQ WQEs complete out of order).
 *
 * Doorbell: when the daemon has been idle it stops polling; before sleeping
 * it sets `doorbell_armed` (seq_cst) in every work ring and checks the rings
 * once more. After publishing producer the provider loads doorbell_armed
 * (seq_cst); if it is set, it clears it and writes 1 to the daemon's doorbell
 * eventfd (UROCE_CTRL_DOORBELL). So the common, busy case costs no system call.
 *
 * Completion queues: the daemon writes a CQE into slot (producer & mask) and
 * stores producer + 1 with release; the provider reads entries below producer
 * and stores consumer. The daemon never writes a CQE when producer - consumer
 * equals entries: that is CQ overrun (IBV_EVENT_CQ_ERR), never an overwrite.
 * ibv_req_notify_cq stores notify_request = (next sequence << 1) | solicited
 * only; the daemon sends one event on the CQ's completion channel for the
 * first matching CQE written after it sees a new sequence.
 */
#ifndef UROCE_ABI_RINGS_H
#define UROCE_ABI_RINGS_H

#include <stddef.h> /* offsetof, for the layout checks */
#include <stdint.h>

#define UROCE_RING_VERSION 3u /* 3: CQEs carry completion timestamps (timestamp_ns, wallclock_ns);
                                 producer and consumer on separate cache lines */

#define UROCE_RING_LINE 64u /* bytes: the x86-64 and arm64 cache line */

/* Header of a work-queue ring (SQ, RQ, SRQ). */
struct uroce_wq_ring {
    /* line 0: fixed at creation, and one flag the daemon sets once */
    uint32_t version;
    uint32_t entries;         /* power of two */
    uint32_t stride;          /* bytes per slot, a multiple of 16 */
    uint32_t max_sge;         /* per WQE */
    uint32_t max_inline;      /* SQ: bytes of inline data a WQE may carry */
    uint32_t error;           /* daemon: nonzero once the QP is in error (posts then still complete, flushed) */
    uint8_t pad0[40];
    /* line 1: the provider writes */
    uint32_t producer;        /* provider: WQEs posted */
    uint8_t pad1[60];
    /* line 2: the daemon writes (the provider clears doorbell_armed only when it finds it set) */
    uint32_t consumer;        /* daemon: WQEs retired */
    uint32_t doorbell_armed;  /* daemon sets; provider clears and rings */
    uint8_t pad2[56];
};

/* One scatter/gather element, as struct ibv_sge. */
struct uroce_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

/* A send WQE: this header, then num_sge uroce_sge, or (IBV_SEND_INLINE)
 * inline_len bytes of data copied at post time. */
struct uroce_send_wqe {
    uint64_t wr_id;
    uint8_t opcode;           /* enum ibv_wr_opcode */
    uint8_t num_sge;
    uint16_t reserved;
    uint32_t send_flags;      /* IBV_SEND_* */
    uint32_t imm_data;        /* network order (ibv_send_wr.imm_data), or invalidate_rkey */
    uint32_t inline_len;
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
            uint32_t reserved;
        } rdma;
        struct {
            uint64_t remote_addr;
            uint64_t compare_add;
            uint64_t swap;
            uint32_t rkey;
            uint32_t reserved;
        } atomic;
        struct {
            uint32_t ah;          /* AH handle */
            uint32_t remote_qpn;
            uint32_t remote_qkey;
            uint32_t reserved;
        } ud;
        struct {
            uint64_t addr;
            uint64_t length;
            uint32_t mw_rkey;     /* the window's new rkey */
            uint32_t mr_lkey;
            uint32_t access;
            uint32_t reserved;
        } bind;
    } u;
    uint32_t xrc_remote_srqn; /* XRC send QPs: the SRQ number XRCETH carries (ibv_send_wr.qp_type.xrc) */
    uint32_t reserved2;
};

/* A receive WQE: this header, then num_sge uroce_sge. */
struct uroce_recv_wqe {
    uint64_t wr_id;
    uint32_t num_sge;
    uint32_t reserved;
};

/* Header of a completion-queue ring. */
struct uroce_cq_ring {
    /* line 0: fixed at creation, and one flag the daemon sets once */
    uint32_t version;
    uint32_t entries;         /* power of two */
    uint32_t overrun;         /* daemon: nonzero once a CQE was lost to a full ring */
    uint8_t pad0[52];
    /* line 1: the daemon writes */
    uint32_t producer;        /* daemon: CQEs written */
    uint8_t pad1[60];
    /* line 2: the provider writes */
    uint32_t consumer;        /* provider: CQEs polled */
    uint32_t notify_request;  /* provider: (sequence << 1) | solicited_only */
    uint8_t pad2[56];
};

#define UROCE_CQE_BYTES 64u
/* One completion, as struct ibv_wc. */
struct uroce_cqe {
    uint64_t wr_id;
    uint32_t status;          /* enum ibv_wc_status */
    uint32_t opcode;          /* enum ibv_wc_opcode */
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;        /* network order, or the invalidated rkey */
    uint32_t qp_num;
    uint32_t src_qp;
    uint32_t wc_flags;        /* IBV_WC_* flags */
    uint16_t pkey_index;
    uint16_t slid;
    uint8_t sl;
    uint8_t dlid_path_bits;
    uint8_t reserved[2];
    /* When the daemon wrote the CQE, read with clock_gettime(2) just
     * before: CLOCK_MONOTONIC and CLOCK_REALTIME, in nanoseconds. The
     * first is the device clock ibv_cq_ex read_completion_ts reports
     * (hca_core_clock 1 GHz, completion_timestamp_mask all ones), the
     * second is read_completion_wallclock_ns. Written only for CQs made
     * with UROCE_CQ_TIMESTAMPS (control.h); 0 otherwise, and from a daemon
     * older than these fields (they were reserved, written as zero). */
    uint64_t timestamp_ns;
    uint64_t wallclock_ns;
};

#ifdef __cplusplus
static_assert(sizeof(struct uroce_wq_ring) == 3 * UROCE_RING_LINE, "ring header is three cache lines");
static_assert(offsetof(struct uroce_wq_ring, producer) == 1 * UROCE_RING_LINE, "producer on its own line");
static_assert(offsetof(struct uroce_wq_ring, consumer) == 2 * UROCE_RING_LINE, "consumer on its own line");
static_assert(offsetof(struct uroce_wq_ring, doorbell_armed) == 2 * UROCE_RING_LINE + 4, "armed beside consumer");
static_assert(offsetof(struct uroce_wq_ring, error) == 20, "error on the fixed line");
static_assert(sizeof(struct uroce_cq_ring) == 3 * UROCE_RING_LINE, "ring header is three cache lines");
static_assert(offsetof(struct uroce_cq_ring, producer) == 1 * UROCE_RING_LINE, "producer on its own line");
static_assert(offsetof(struct uroce_cq_ring, consumer) == 2 * UROCE_RING_LINE, "consumer on its own line");
static_assert(offsetof(struct uroce_cq_ring, notify_request) == 2 * UROCE_RING_LINE + 4, "notify beside consumer");
static_assert(offsetof(struct uroce_cq_ring, overrun) == 8, "overrun on the fixed line");
static_assert(sizeof(struct uroce_sge) == 16, "sge layout");
static_assert(sizeof(struct uroce_send_wqe) == 64, "send wqe header layout");
static_assert(sizeof(struct uroce_recv_wqe) == 16, "recv wqe header layout");
static_assert(sizeof(struct uroce_cqe) == UROCE_CQE_BYTES, "cqe layout");
#endif

#endif /* UROCE_ABI_RINGS_H */
