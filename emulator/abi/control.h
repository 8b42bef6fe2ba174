/*
 * The control protocol between the provider (in the application) and uroced.
 * Plain C, fixed sizes, explicit padding, versioned: both sides include it.
 *
 * Transport: a Unix SOCK_SEQPACKET socket (one message per datagram, so a
 * message is never split or merged), at <state-dir>/<device>.sock, whose path
 * the daemon also writes into the device's sysfs directory (file
 * "uroce_control_socket"). Shared memory (rings, relaxed pools) travels as
 * file descriptors in SCM_RIGHTS ancillary data of the reply.
 *
 * Every message starts with uroce_ctrl_hdr; `length` is the whole message.
 * The daemon checks magic, version, op and that `length` equals both the
 * datagram size and the size the op expects; anything else ends that
 * client's connection (and destroys what it owned), never the daemon.
 * Replies echo op and seq and carry a status: 0 or a positive errno.
 */
#ifndef UROCE_ABI_CONTROL_H
#define UROCE_ABI_CONTROL_H

#include <stdint.h>

#include "rings.h"

#define UROCE_CTRL_MAGIC 0x434F5255u /* "UROC" little-endian */
#define UROCE_CTRL_VERSION 8u /* 3: HELLO carries the client's process files; 4: rdma_cm ops (40-42), RESIZE_CQ (60), STATS_REASONS (80), CQ creation flags; 5: faults (90-94), capture (95-96), EXPLAIN_FETCH (100), ADVISE_MR (110), bind_mw posted on the send queue; 6: XRC (120-123, CREATE_QP of XRC_SEND), multicast attach (130-131), DESTROY_QP EBUSY while attached, LOOP_STALLS (140); 7: CM command options carry a 72-byte path record (RDMA_OPTION_IB_PATH), REG_MR of a dma-buf maps it; 8: CM_LIST_IDS (150), MEMBERSHIP (152), CLOSE_XRC_TGT (153), XRC target QPs destroyed by handle */
#define UROCE_CTRL_MAX_MESSAGE 512u

enum uroce_ctrl_op {
    UROCE_CTRL_HELLO = 1,
    UROCE_CTRL_QUERY_DEVICE = 2,
    UROCE_CTRL_QUERY_PORT = 3,
    UROCE_CTRL_ALLOC_PD = 4,
    UROCE_CTRL_DEALLOC_PD = 5,
    UROCE_CTRL_REG_MR = 6,
    UROCE_CTRL_REREG_MR = 7,
    UROCE_CTRL_DEREG_MR = 8,
    UROCE_CTRL_ALLOC_MW = 9,
    UROCE_CTRL_DEALLOC_MW = 10,
    UROCE_CTRL_BIND_MW = 11,
    UROCE_CTRL_CREATE_RELAXED_POOL = 12,
    UROCE_CTRL_FLUSH_RELAXED = 13,
    UROCE_CTRL_STATUS = 14,
    UROCE_CTRL_CREATE_CQ = 15,
    UROCE_CTRL_DESTROY_CQ = 16,
    UROCE_CTRL_CREATE_QP = 17,
    UROCE_CTRL_MODIFY_QP = 18,
    UROCE_CTRL_QUERY_QP = 19,
    UROCE_CTRL_DESTROY_QP = 20,
    UROCE_CTRL_CREATE_SRQ = 21,
    UROCE_CTRL_MODIFY_SRQ = 22,
    UROCE_CTRL_QUERY_SRQ = 23,
    UROCE_CTRL_DESTROY_SRQ = 24,
    UROCE_CTRL_CREATE_AH = 25,
    UROCE_CTRL_DESTROY_AH = 26,
    UROCE_CTRL_DOORBELL = 27,
    UROCE_CTRL_STATS = 28,
    UROCE_CTRL_LIST_MRS = 29,
    /* Op 60: resizing a CQ. */
    UROCE_CTRL_RESIZE_CQ = 60,
    /* Ops 80-89: statistics by reason. */
    UROCE_CTRL_STATS_REASONS = 80,
    /* Ops 90-94: fault injection (docs/fault-injection.md). */
    UROCE_CTRL_FAULT_ADD = 90,
    UROCE_CTRL_FAULT_LIST = 91,
    UROCE_CTRL_FAULT_CLEAR = 92,
    UROCE_CTRL_FAULT_SEED = 93,
    UROCE_CTRL_FAULT_TOTALS = 94,
    /* Ops 95-99: packet capture (docs/capture.md). */
    UROCE_CTRL_CAPTURE_START = 95,
    UROCE_CTRL_CAPTURE_STOP = 96,
    /* Ops 100-104: explained failures (docs/explain.md). */
    UROCE_CTRL_EXPLAIN_FETCH = 100,
    /* Ops 110-119: verbs beyond the core set (on-demand paging, XRC). */
    UROCE_CTRL_ADVISE_MR = 110,
    /* Ops 120-129: XRC (docs/provider.md "XRC"). */
    UROCE_CTRL_OPEN_XRCD = 120,
    UROCE_CTRL_CLOSE_XRCD = 121,
    UROCE_CTRL_CREATE_XRC_SRQ = 122,
    UROCE_CTRL_CREATE_XRC_TGT = 123,
    UROCE_CTRL_OPEN_XRC_TGT = 124,
    /* Ops 130-139: multicast (docs/provider.md). */
    UROCE_CTRL_ATTACH_MCAST = 130,
    UROCE_CTRL_DETACH_MCAST = 131,
    /* Ops 140-149: the daemon's loop (docs/daemon.md "Loop stalls"). */
    UROCE_CTRL_LOOP_STALLS = 140,
    /* Ops 150-151: the rdma_cm ids, as `rdma resource show cm_id` lists them (docs/rdmacm-device.md). */
    UROCE_CTRL_CM_LIST_IDS = 150,
    /* Op 152: multicast membership, IGMP / MLD (docs/stats.md "membership"). */
    UROCE_CTRL_MEMBERSHIP = 152,
    /* Op 153: closing one handle of an XRC target QP (docs/provider.md "XRC"). */
    UROCE_CTRL_CLOSE_XRC_TGT = 153,
};

struct uroce_ctrl_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t op;
    uint32_t length;  /* bytes of the whole message */
    uint32_t seq;     /* echoed in the reply */
    int32_t status;   /* replies: 0 or a positive errno; requests: 0 */
    uint32_t reserved;
};

/* HELLO: the first message. It carries two file descriptors (SCM_RIGHTS, in
 * this order) that the client opened itself: /proc/self/mem, read-write, and
 * /proc/self/maps. They are how the daemon reaches the client's memory (never
 * by pid: docs/security.md); without them, or with anything else, HELLO
 * fails with EINVAL, and a second HELLO with EALREADY. Until a HELLO
 * succeeds the client's memory is unreachable: REG_MR of process memory
 * fails with EFAULT. The reply carries the read end of the client's
 * async-event pipe. Every other request carries at most one fd. */
struct uroce_ctrl_hello {
    struct uroce_ctrl_hdr hdr;
    uint32_t abi_version;  /* UROCE_CTRL_VERSION */
    uint32_t reserved;
};
struct uroce_ctrl_hello_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t client_id;
    uint32_t reserved;
};

/* Device and port attributes: what query_device_ex and query_port report. */
struct uroce_ctrl_device_attr {
    struct uroce_ctrl_hdr hdr;
    uint64_t node_guid;
    uint64_t sys_image_guid;
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    uint32_t max_qp;
    uint32_t max_qp_wr;
    uint32_t device_cap_flags;
    uint32_t max_sge;
    uint32_t max_cq;
    uint32_t max_cqe;
    uint32_t max_mr;
    uint32_t max_pd;
    uint32_t max_qp_rd_atom;
    uint32_t max_qp_init_rd_atom;
    uint32_t max_mw;
    uint32_t max_srq;
    uint32_t max_srq_wr;
    uint32_t max_srq_sge;
    uint32_t max_ah;
    uint32_t max_inline_data;
    uint32_t atomic_cap;    /* enum ibv_atomic_cap */
    char fw_ver[64];
    uint32_t max_sge_rd;
    uint32_t max_res_rd_atom;
    uint32_t max_pkeys;
    uint8_t local_ca_ack_delay;
    uint8_t phys_port_cnt;
    uint8_t reserved[2];
};

struct uroce_ctrl_port_attr {
    struct uroce_ctrl_hdr hdr;
    uint32_t state;         /* enum ibv_port_state */
    uint32_t max_mtu;       /* enum ibv_mtu */
    uint32_t active_mtu;
    uint32_t gid_tbl_len;
    uint32_t max_msg_sz;
    uint32_t phys_state;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t link_layer;     /* IBV_LINK_LAYER_ETHERNET */
    uint8_t reserved[5];
    uint8_t mac[8];
    uint32_t port_cap_flags; /* IBV_PORT_* capability bits */
    uint16_t pkey_tbl_len;
    uint8_t max_vl_num;
    uint8_t reserved2;
};

/* Objects are named by 32-bit handles (PD) or keys (MR, MW). */
struct uroce_ctrl_handle {
    struct uroce_ctrl_hdr hdr;
    uint32_t handle;
    uint32_t reserved;
};

struct uroce_ctrl_reg_mr {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t access;
    uint64_t addr;
    uint64_t length;
    uint64_t iova;
    uint32_t flags;          /* UROCE_REG_* */
    uint32_t rereg_flags;    /* REREG_MR: IBV_REREG_MR_* */
    uint32_t lkey;           /* REREG_MR: the MR */
    uint32_t reserved;
    /* UROCE_REG_SHARED: the attached fd holds client addresses
     * [shared_addr, shared_addr + shared_length) from shared_offset on
     * (page-aligned, covering [addr, addr + length)): the provider made or
     * found a shared mapping there, and the daemon maps the same bytes. */
    uint64_t shared_addr;
    uint64_t shared_length;
    uint64_t shared_offset;
};
#define UROCE_REG_HAS_IOVA 0x1u   /* iova is meaningful (reg_mr_iova) */
#define UROCE_REG_DMABUF 0x2u     /* fd in SCM_RIGHTS; addr is the offset */
#define UROCE_REG_SHARED 0x4u     /* fd in SCM_RIGHTS: a shared mapping of the range */

struct uroce_ctrl_mr_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t lkey;
    uint32_t rkey;
};

struct uroce_ctrl_alloc_mw {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t type;  /* 1 or 2 */
};

struct uroce_ctrl_bind_mw {
    struct uroce_ctrl_hdr hdr;
    uint32_t mw_rkey;
    uint32_t mr_lkey;
    uint64_t addr;
    uint64_t length;
    uint32_t access;
    uint32_t qp_pd;
};

/* ADVISE_MR: ibv_advise_mr(3), one SGE per request. The daemon checks, as
 * mlx5 does, that `lkey` names an on-demand MR of `pd` (ENOENT otherwise,
 * or when `write` is 1 and the MR is not writable) and that [addr, addr +
 * length) lies inside it (EFAULT). The reply gives the client address of the
 * SGE's first byte; the provider faults the pages in itself. */
struct uroce_ctrl_advise_mr {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t lkey;
    uint64_t addr;
    uint32_t length;
    uint32_t write;   /* 1: IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE */
};
struct uroce_ctrl_advise_mr_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t host_addr;
};

/* ATTACH_MCAST / DETACH_MCAST: ibv_attach_mcast(3) and ibv_detach_mcast of
 * QP `qpn` (one of the caller's) to the group `gid`, as the kernel's
 * ib_attach_mcast checks them: EINVAL when the QP is unknown or not UD, or
 * the GID is no multicast address (ff00::/8 or ::ffff:224.0.0.0/100); `lid`
 * is ignored on RoCE. Attaching twice is 0; detaching a QP not attached is
 * EINVAL; past the limits below ENOMEM (rdma_rxe's). DESTROY_QP of a QP still
 * attached is EBUSY, as for a kernel device; a client's end detaches all. */
struct uroce_ctrl_mcast {
    struct uroce_ctrl_hdr hdr;
    uint32_t qpn;
    uint16_t lid;
    uint16_t reserved;
    uint8_t gid[16];        /* network byte order */
};
#define UROCE_MAX_MCAST_GRP 8192u             /* groups on the device */
#define UROCE_MAX_MCAST_QP_ATTACH 56u         /* QPs per group */
#define UROCE_MAX_TOTAL_MCAST_QP_ATTACH 0x70000u  /* attachments on the device */

struct uroce_ctrl_relaxed_pool {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t capacity;
    uint32_t dirty_watermark;
    uint32_t invalidate_after_us;
};

struct uroce_ctrl_status_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t clients;
    uint32_t pds;
    uint32_t mrs;
    uint32_t mws;
    uint32_t relaxed_pools;
    uint32_t reserved;
    uint64_t clients_closed;
    uint64_t objects_reclaimed;
    uint64_t bad_messages;
    uint32_t cqs;
    uint32_t qps;
    uint32_t srqs;
    uint32_t ahs;
};

/*
 * Completion queues. CREATE_CQ's reply passes a memfd holding the CQ ring
 * (rings.h uroce_cq_ring, then `cqe` slots of UROCE_CQE_BYTES), mapped by both
 * sides. With a completion channel the request carries the channel's notify
 * fd (SCM_RIGHTS) and `cookie`, the struct ibv_cq pointer: the daemon writes
 * the cookie into that fd for each event, which is what ibv_get_cq_event
 * reads.
 */
struct uroce_ctrl_create_cq {
    struct uroce_ctrl_hdr hdr;
    uint32_t cqe;           /* entries asked for (ibv_create_cq's cqe) */
    uint32_t comp_vector;
    uint64_t cookie;        /* the ibv_cq pointer, echoed in completion events */
    uint32_t has_channel;   /* 1: an fd is attached */
    uint32_t flags;         /* UROCE_CQ_*; other bits: EINVAL */
};
/* Stamp every CQE with the time it is written (rings.h timestamp_ns and
 * wallclock_ns): asked by ibv_create_cq_ex with a completion timestamp in
 * wc_flags; two clock reads per CQE, so other CQs go without. */
#define UROCE_CQ_TIMESTAMPS 1u
struct uroce_ctrl_cq_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t handle;
    uint32_t cqe;           /* entries granted (>= asked) */
    uint64_t ring_bytes;    /* size of the memfd */
};

/* RESIZE_CQ: ibv_resize_cq. The reply (a uroce_ctrl_cq_reply) passes the
 * memfd of a new CQ ring that holds, from slot 0 on, the completions the
 * client had not polled from the old one (its consumer to producer, in
 * order), and the old ring's pending notify request. The client must not
 * poll the old ring from the request on and unmaps it after the reply.
 * EINVAL when `cqe` is 0, beyond max_cqe, or fewer than the unpolled
 * completions. */
struct uroce_ctrl_resize_cq {
    struct uroce_ctrl_hdr hdr;
    uint32_t handle;
    uint32_t cqe;           /* entries asked for */
};

/* DOORBELL: a header-only request; the reply (a uroce_ctrl_handle) passes
 * the daemon's doorbell eventfd (rings.h). */

/* Queue pairs. Enum values are verbs.h's (qp_type, states, MTU, masks). */
struct uroce_ctrl_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
    uint32_t reserved;
};

/* struct ibv_ah_attr with its GRH flattened in. */
struct uroce_ctrl_ah_attr {
    uint8_t dgid[16];       /* network byte order */
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
    uint8_t is_global;
    uint16_t dlid;
    uint8_t sl;
    uint8_t src_path_bits;
    uint8_t static_rate;
    uint8_t port_num;
    uint8_t reserved[2];
};

/* struct ibv_qp_attr without the alternate path (RoCE has no APM). */
struct uroce_ctrl_qp_attr {
    uint32_t qp_state;
    uint32_t cur_qp_state;
    uint32_t path_mtu;
    uint32_t path_mig_state;
    uint32_t qkey;
    uint32_t rq_psn;
    uint32_t sq_psn;
    uint32_t dest_qp_num;
    uint32_t qp_access_flags;
    uint32_t rate_limit;
    uint16_t pkey_index;
    uint8_t en_sqd_async_notify;
    uint8_t sq_draining;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t port_num;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t reserved[5];
    struct uroce_ctrl_qp_cap cap;
    struct uroce_ctrl_ah_attr ah_attr;
};

struct uroce_ctrl_create_qp {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t send_cq;
    uint32_t recv_cq;
    uint32_t srq;           /* 0: none */
    uint8_t qp_type;        /* IBV_QPT_RC, UC or UD */
    uint8_t sq_sig_all;
    uint8_t reserved[6];
    struct uroce_ctrl_qp_cap cap;
    uint64_t cookie;        /* the ibv_qp pointer, echoed in async events */
};
/* The reply passes a memfd of ring_bytes: the SQ ring at sq_offset and, for
 * a QP without an SRQ, the RQ ring at rq_offset (0: none). */
struct uroce_ctrl_create_qp_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t qpn;
    uint32_t reserved;
    struct uroce_ctrl_qp_cap cap;  /* granted */
    uint64_t ring_bytes;
    uint32_t sq_offset;
    uint32_t rq_offset;
};

struct uroce_ctrl_modify_qp {
    struct uroce_ctrl_hdr hdr;
    uint32_t qpn;
    uint32_t attr_mask;     /* enum ibv_qp_attr_mask */
    struct uroce_ctrl_qp_attr attr;
};

/* QUERY_QP: the request is a uroce_ctrl_handle naming the QPN. */
struct uroce_ctrl_query_qp_reply {
    struct uroce_ctrl_hdr hdr;
    struct uroce_ctrl_qp_attr attr;
};

/* Shared receive queues: CREATE_SRQ (pd, max_wr, max_sge, srq_limit),
 * MODIFY_SRQ (handle, attr_mask of IBV_SRQ_MAX_WR / IBV_SRQ_LIMIT, values),
 * and the replies of CREATE_SRQ and QUERY_SRQ (a uroce_ctrl_handle request).
 * CREATE_SRQ's reply passes a memfd of ring_bytes holding the SRQ ring;
 * its request carries the ibv_srq pointer as cookie (async events). */
struct uroce_ctrl_srq {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t handle;
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
    uint32_t attr_mask;
    uint64_t cookie;
    uint64_t ring_bytes;
};

/* XRC domains (ibv_open_xrcd(3)). OPEN_XRCD: `has_inode` 0 makes a domain
 * of this connection alone; 1: the request carries the file the application
 * passed (SCM_RIGHTS; EBADF without), the daemon takes its st_dev and
 * st_ino, and every opener of the same file shares one domain (`dev` and
 * `ino` are the provider's fstat of it, for logs only). `create` 1 (O_CREAT) makes the file's domain when
 * there is none, `exclusive` 1 (O_EXCL) fails with EEXIST when there is one;
 * without `create` a missing domain is ENOENT. The reply is a
 * uroce_ctrl_handle: this connection's reference, which CLOSE_XRCD (a
 * uroce_ctrl_handle) drops. A domain lives while a reference, an XRC SRQ or
 * an XRC target QP names it. */
struct uroce_ctrl_open_xrcd {
    struct uroce_ctrl_hdr hdr;
    uint64_t dev;
    uint64_t ino;
    uint8_t has_inode;
    uint8_t create;
    uint8_t exclusive;
    uint8_t reserved[5];
};

/* CREATE_XRC_SRQ: an SRQ of type IBV_SRQT_XRC, in `xrcd` (this connection's
 * reference), completing into `cq`; otherwise as CREATE_SRQ, and the reply
 * is CREATE_SRQ's (its handle is the SRQ number that XRCETH carries). */
struct uroce_ctrl_create_xrc_srq {
    struct uroce_ctrl_srq srq;
    uint32_t xrcd;
    uint32_t cq;
};

/* CREATE_XRC_TGT: an XRC target QP (IBV_QPT_XRC_RECV) of `xrcd`: no PD, no
 * CQ, no rings. The reply is a uroce_ctrl_handle carrying the QPN; the QP is
 * then modified and queried as any other. The QP belongs to no connection:
 * the create and every OPEN_XRC_TGT is a handle, CLOSE_XRC_TGT (or
 * DESTROY_QP, or the end of the connection) closes one, and the last close
 * destroys the QP. While a
 * handle made through `xrcd` lives, CLOSE_XRCD of it is EBUSY. */
struct uroce_ctrl_create_xrc_tgt {
    struct uroce_ctrl_hdr hdr;
    uint32_t xrcd;
    uint32_t reserved;
    uint64_t cookie;  /* the ibv_qp pointer, echoed in async events */
};

/* OPEN_XRC_TGT (ibv_open_qp(3)): one more handle on target QP `qpn` of the
 * domain of reference `xrcd`; EINVAL when `qpn` is no target QP of that
 * domain. The reply is a uroce_ctrl_handle carrying the QPN. */
struct uroce_ctrl_open_xrc_tgt {
    struct uroce_ctrl_hdr hdr;
    uint32_t xrcd;
    uint32_t qpn;
    uint64_t cookie;  /* the ibv_qp pointer, for logs */
};

/* CLOSE_XRC_TGT (ibv_destroy_qp(3) of a target QP handle): closes the
 * handle on target QP `qpn` that this connection made or opened with
 * `cookie`. One connection may hold several handles on one QP (it created
 * it and opened it again): DESTROY_QP, naming only the QPN, would close any
 * of them, and the QP's events would then go to the destroyed ibv_qp.
 * EINVAL when the connection has no such handle; the last close destroys
 * the QP. A status-only reply. */
struct uroce_ctrl_close_xrc_tgt {
    struct uroce_ctrl_hdr hdr;
    uint32_t qpn;
    uint32_t reserved;
    uint64_t cookie;  /* the handle's ibv_qp pointer, as created or opened */
};

/* Address handles: CREATE_AH replies with a uroce_ctrl_handle. */
struct uroce_ctrl_create_ah {
    struct uroce_ctrl_hdr hdr;
    uint32_t pd;
    uint32_t reserved;
    struct uroce_ctrl_ah_attr attr;
};

/*
 * STATS (a header-only request): the device's counters since the daemon
 * started, for `uroce stats` (docs/stats.md). Each group mirrors one counter
 * struct of the daemon; the MR counts are of the MRs registered now.
 */
struct uroce_stats_engine {     /* emulator/engine/engine.h EngineCounters */
    uint64_t rx_packets;
    uint64_t tx_packets;
    uint64_t rx_dropped;
    uint64_t retransmits;
    uint64_t timeouts;
    uint64_t rnr_naks_sent;
    uint64_t rnr_naks_received;
    uint64_t seq_naks_sent;
    uint64_t seq_naks_received;
    uint64_t duplicates;
    uint64_t bad_wqes;
    uint64_t cq_overruns;
    uint64_t dma_faults;
    uint64_t retransmitted_packets;
    uint64_t tx_deferred;
};
struct uroce_stats_frames {     /* tools/uroced/datapath.h: received frames sorted */
    uint64_t rx_roce;
    uint64_t rx_other;          /* ARP, ND, anything not for UDP port 4791 */
    uint64_t rx_malformed;      /* UDP 4791 that failed to parse */
};
struct uroce_stats_port {       /* emulator/net/port.h PortCounters */
    uint64_t rx_frames;
    uint64_t rx_bytes;
    uint64_t tx_frames;
    uint64_t tx_bytes;
    uint64_t tx_dropped;
};
struct uroce_stats_neighbours { /* emulator/net/neighbours.h NeighbourCounters */
    uint64_t arp_requests_sent;
    uint64_t arp_replies_sent;
    uint64_t ns_sent;
    uint64_t na_sent;
    uint64_t resolved;
    uint64_t learned;
    uint64_t ignored;
    uint64_t malformed;
    uint64_t frames_queued;
    uint64_t frames_released;
    uint64_t queue_overflow;
    uint64_t unresolved_dropped;
    uint64_t resolution_failures;
    uint64_t no_entry_dropped;
    uint64_t entries;           /* now, not since start */
    uint64_t evicted;           /* entries pushed out for newer ones */
    uint64_t answers_limited;   /* requests unanswered: same source answered < 100 ms before */
};
struct uroce_stats_dma {        /* emulator/dma/client_memory.h DmaCounters, all clients */
    uint64_t shared_ops;
    uint64_t shared_bytes;
    uint64_t copy_ops;
    uint64_t copy_bytes;
    uint64_t faults;
    uint64_t shared_mappings;   /* now: mappings of client memory the daemon holds */
};
struct uroce_stats_idle {       /* tools/uroced/idle_wait.h IdleCounters */
    uint64_t sleeps;
    uint64_t woken_by_fd;
    uint64_t slept_ns;
};
struct uroce_ctrl_stats_reply {
    struct uroce_ctrl_hdr hdr;
    struct uroce_stats_engine engine;
    struct uroce_stats_frames frames;
    struct uroce_stats_port port;
    struct uroce_stats_neighbours neighbours;
    struct uroce_stats_dma dma;
    struct uroce_stats_idle idle;
    uint32_t mrs_shared;        /* MRs whose whole range a shared mapping serves */
    uint32_t mrs_copy;          /* MRs served by copies (the client's /proc/self/mem) */
    uint32_t mrs_unserved;      /* MRs the DMA interface does not reach (dma-buf) */
    uint32_t reserved;
};

/*
 * STATS_REASONS (a header-only request): every drop and NAK counted by
 * reason, the detail behind STATS' rx_malformed, rx_dropped and NAK
 * counters. Each array is indexed by the value of the enumeration named
 * beside it (names in the same order as `uroce stats` prints them); entries
 * past the enumeration's count are 0.
 */
#define UROCE_STATS_PARSE_REASONS 24u   /* wire/parse_status.h ParseStatus */
#define UROCE_STATS_DROP_REASONS 24u    /* engine/drop_reason.h DropReason */
#define UROCE_STATS_NAK_REASONS 6u      /* engine/drop_reason.h NakReason */

struct uroce_ctrl_stats_reasons_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t frames_malformed[UROCE_STATS_PARSE_REASONS]; /* frames.rx_malformed by parse outcome */
    uint64_t engine_dropped[UROCE_STATS_DROP_REASONS];    /* engine.rx_dropped by reason */
    uint64_t naks_sent[UROCE_STATS_NAK_REASONS];          /* NAKs and RNR NAKs the responder sent */
    uint64_t naks_received[UROCE_STATS_NAK_REASONS];      /* ... and the completer received */
};

/*
 * LOOP_STALLS (a header-only request): rounds of the daemon's loop that took
 * longer than its stall threshold (uroced --stall-ms), counted by cause and
 * by the phase of the round that took longest (tools/uroced/loop_stalls.h;
 * arrays indexed by its StallCause and LoopPhase, names in the order `uroce
 * stats` prints them), and every round by length. A daemon without the
 * watch answers ENOTSUP.
 */
#define UROCE_LOOP_STALL_CAUSES 8u   /* loop_stalls.h StallCause: cpu_wait on_cpu asked_sleep off_cpu */
#define UROCE_LOOP_PHASES 8u         /* loop_stalls.h LoopPhase: data_path control housekeeping spin sleep */

/*
 * MEMBERSHIP (a header-only request): what the daemon told the link about
 * the multicast groups its QPs attach to (IGMP for IPv4, MLD for IPv6;
 * emulator/net/group_membership.h). dropped[] is indexed by
 * net/igmp.h's QueryDropReason (names in the order `uroce stats` prints
 * them; entry 0, none, stays 0). The versions are the ones reports go out in
 * now: 3 (IGMPv3) or 2 (MLDv2) normally, lower while an older querier is
 * present (RFC 3376 7.2.1, RFC 3810 8.2.1). ENODEV without a data path.
 */
#define UROCE_MEMBERSHIP_DROP_REASONS 8u  /* igmp.h QueryDropReason: none length checksum hop_limit fragment source group */

struct uroce_ctrl_membership_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t reports_sent;      /* report frames: joins and answers to queries */
    uint64_t leaves_sent;       /* leave (done) frames */
    uint64_t queries;           /* well-formed queries received */
    uint64_t queries_answered;  /* of them: a report went or is due */
    uint64_t older_queries;     /* of them: IGMPv1/v2 or MLDv1 */
    uint64_t queries_dropped;   /* malformed: the sum of dropped[] */
    uint64_t tx_refused;        /* frames the port refused */
    uint64_t groups;            /* groups reported now */
    uint64_t dropped[UROCE_MEMBERSHIP_DROP_REASONS];
    uint8_t igmp_version;       /* 1, 2 or 3 */
    uint8_t mld_version;        /* 1 or 2 */
    uint8_t reserved[6];
};

struct uroce_ctrl_loop_stalls_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t threshold_ns;
    uint64_t rounds;            /* rounds of the loop since the daemon started */
    uint64_t stalls;            /* rounds longer than threshold_ns */
    uint64_t longest_ns;        /* the longest stalled round */
    uint64_t stalled_ns;        /* the stalled rounds' time, summed */
    uint64_t by_cause[UROCE_LOOP_STALL_CAUSES];
    uint64_t by_phase[UROCE_LOOP_PHASES];
    uint64_t rounds_over_20ms;  /* every round by length, whatever the threshold */
    uint64_t rounds_over_100ms;
    uint64_t rounds_over_1s;
};

/*
 * Fault injection (ops 90-94, docs/fault-injection.md). ADD, CLEAR and SEED
 * change what the daemon does to every client's traffic: only root and the
 * user the daemon runs as may use them (SO_PEERCRED); anyone else gets
 * EPERM. LIST and TOTALS are open to every user, like STATS. A daemon
 * started without the fault hook (--no-fault-hook) answers every fault op
 * with ENOTSUP.
 *
 * FAULT_ADD: one rule in the text syntax (NUL-terminated). The reply's
 * status is 0 with the new rule's id, or EINVAL with the parser's message.
 */
#define UROCE_FAULT_RULE_MAX 248u   /* rule text, NUL included (the parser takes 240 characters) */
#define UROCE_FAULT_MESSAGE_MAX 256u
#define UROCE_FAULT_ACTIONS 8u      /* fault/rule.h Action: drop duplicate reorder delay corrupt truncate down silent */

struct uroce_ctrl_fault_add {
    struct uroce_ctrl_hdr hdr;
    char rule[UROCE_FAULT_RULE_MAX];
};
struct uroce_ctrl_fault_add_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t id;
    uint32_t reserved;
    char message[UROCE_FAULT_MESSAGE_MAX]; /* EINVAL: what is wrong with the rule */
};

/* FAULT_LIST: the rule at position `index` (0: the first) with its counters;
 * the reply's `rules` is how many there are (index >= rules: status ENOENT). */
enum uroce_fault_rule_state {
    UROCE_FAULT_RULE_ACTIVE = 0,
    UROCE_FAULT_RULE_DONE = 1,  /* nth/count used up, or its window closed */
};
struct uroce_ctrl_fault_list {
    struct uroce_ctrl_hdr hdr;
    uint32_t index;
    uint32_t reserved;
};
struct uroce_ctrl_fault_list_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t rules;
    uint32_t id;
    uint64_t seen;              /* frames the rule's filters admitted */
    uint64_t injected;          /* frames it acted on */
    uint64_t seed;              /* the daemon's fault seed */
    uint8_t state;              /* enum uroce_fault_rule_state */
    uint8_t reserved[7];
    char rule[UROCE_FAULT_RULE_MAX];
};

/* FAULT_CLEAR: removes rule `id`, or every rule when id is 0 (ENOENT: no
 * such rule). Frames already held are still delivered. */
struct uroce_ctrl_fault_clear {
    struct uroce_ctrl_hdr hdr;
    uint32_t id;
    uint32_t reserved;
};

/* FAULT_SEED: every rule's random stream and count starts again from `seed`
 * (and rules added later draw from it). */
struct uroce_ctrl_fault_seed {
    struct uroce_ctrl_hdr hdr;
    uint64_t seed;
};

/* FAULT_TOTALS (a header-only request): frames acted on since the daemon
 * started, by action (removed rules included), for `uroce stats`. */
struct uroce_ctrl_fault_totals_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t injected[UROCE_FAULT_ACTIONS];
    uint64_t held;              /* frames held (delayed or reordered) now */
    uint32_t rules;             /* rules installed now */
    uint32_t reserved;
};

/*
 * EXPLAIN_FETCH: the failure records the daemon keeps in a bounded ring
 * (newest overwrite oldest), each numbered by a sequence that only grows:
 * every remote request the responder refused, every access through a
 * deregistered relaxed MR, every error completion. The request asks for
 * records after sequence `after` (0: from the oldest kept), optionally of
 * one QP; the reply carries up to UROCE_EXPLAIN_PER_REPLY of them, `last`
 * (the sequence to ask after next: records filtered out or not visible to
 * the caller are skipped, not returned again) and `missed` (records after
 * `after` already overwritten). A caller that is neither root nor the
 * daemon's user sees only the records of its own uid's QPs and pools.
 * The fields' enumerations are engine/failure_event.h's (FailureKind,
 * FailureCheck); docs/explain.md describes every field.
 */
#define UROCE_EXPLAIN_PER_REPLY 2u
#define UROCE_EXPLAIN_ANY_QP 0xFFFFFFFFu
#define UROCE_EXPLAIN_NO_NAK (-1)
#define UROCE_EXPLAIN_UID_UNKNOWN 0xFFFFFFFFu
/* uroce_explain_record.flags */
#define UROCE_EXPLAIN_REGION_KNOWN (1u << 0)   /* region_* describe what the key names */
#define UROCE_EXPLAIN_BEFORE_START (1u << 1)   /* out of range: overrun bytes before the region's start */
#define UROCE_EXPLAIN_SEND_QUEUE (1u << 2)     /* error completion of a send WQE (else a receive) */
#define UROCE_EXPLAIN_HISTORY (1u << 3)        /* registered_ns / deregistered_ns: a relaxed MR's history */

struct uroce_explain_record {
    uint64_t seq;
    uint64_t time_ns;       /* CLOCK_REALTIME when recorded */
    uint32_t kind;          /* FailureKind */
    uint32_t check;         /* FailureCheck: which check failed, or why the WQE completed in error */
    uint32_t client;        /* the client owning the QP (or relaxed pool) */
    uint32_t uid;           /* that client's uid (UROCE_EXPLAIN_UID_UNKNOWN: gone) */
    uint32_t qpn;           /* our QP */
    uint32_t remote_qpn;    /* the peer's QP */
    uint8_t peer_gid[16];   /* the peer's GID (IPv4-mapped for IPv4) */
    uint32_t opcode;        /* requests: the BTH opcode; completions: the ibv_wc_opcode */
    uint32_t psn;           /* the request's PSN, or the NAK's */
    uint64_t va;            /* remote address the request (or WQE) names */
    uint64_t length;
    uint32_t rkey;
    uint32_t wc_status;     /* the completion status (refusals: the one the requester gets) */
    int32_t nak;            /* NAK code sent or received, UROCE_EXPLAIN_NO_NAK for none */
    uint32_t count;         /* 1, or the flushed completions coalesced into this record */
    uint64_t wr_id;         /* error completions */
    uint32_t qp_pd;         /* PD of our QP */
    uint32_t region_pd;     /* what the key names (UROCE_EXPLAIN_REGION_KNOWN) */
    uint64_t region_start;
    uint64_t region_length;
    uint64_t overrun;       /* out of range: bytes past the end (or before the start) */
    uint64_t registered_ns; /* relaxed MR history (UROCE_EXPLAIN_HISTORY), client's CLOCK_MONOTONIC */
    uint64_t deregistered_ns;
    uint32_t region_access; /* ibv_access_flags the region grants */
    uint32_t flags;
};

struct uroce_ctrl_explain_fetch {
    struct uroce_ctrl_hdr hdr;
    uint64_t after;         /* sequence already seen (0: none) */
    uint32_t qpn;           /* one QP, or UROCE_EXPLAIN_ANY_QP */
    uint32_t reserved;
};

struct uroce_ctrl_explain_reply {
    struct uroce_ctrl_hdr hdr;
    uint64_t last;          /* ask after this next time */
    uint64_t missed;        /* records after `after` overwritten before this fetch */
    uint32_t count;         /* records[0, count) are filled */
    uint32_t reserved;
    struct uroce_explain_record records[UROCE_EXPLAIN_PER_REPLY];
};

/*
 * LIST_MRS: the MRs registered now, with the DMA way that serves each, a
 * page at a time in key-index order (lkey >> 8). The request names the key
 * index to start at (0: from the first); the reply's next_index is where
 * the next page starts, 0 after the last page.
 */
enum uroce_mr_way {
    UROCE_MR_WAY_UNSERVED = 0,  /* no data path serves it */
    UROCE_MR_WAY_SHARED = 1,    /* a shared mapping: memcpy */
    UROCE_MR_WAY_COPY = 2,      /* pread / pwrite on the client's /proc/self/mem */
};
#define UROCE_LIST_MRS_PER_REPLY 8u

struct uroce_ctrl_list_mrs {
    struct uroce_ctrl_hdr hdr;
    uint32_t first_index;
    uint32_t reserved;
};
struct uroce_ctrl_mr_entry {
    uint32_t lkey;
    uint32_t pd;
    uint32_t client;            /* the owner's client id (HELLO) */
    uint32_t access;            /* ibv_access_flags */
    uint64_t addr;              /* the owner's address of the first byte (dma-buf: the offset) */
    uint64_t length;
    uint8_t way;                /* enum uroce_mr_way */
    uint8_t reserved[7];
};
struct uroce_ctrl_list_mrs_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t count;             /* entries filled */
    uint32_t next_index;
    struct uroce_ctrl_mr_entry entries[UROCE_LIST_MRS_PER_REPLY];
};

/*
 * Packet capture (ops 95-99, docs/capture.md). A capture shows every user's
 * traffic: only root and the daemon's own uid (SO_PEERCRED) may start one;
 * anyone else gets EPERM.
 *
 * CAPTURE_START carries one end of an AF_UNIX SOCK_SEQPACKET socketpair
 * (SCM_RIGHTS); the daemon writes one message per frame into it, a
 * uroce_capture_record, then note_length bytes of note (why the frame was
 * dropped, in words; no terminating NUL), then frame_length bytes of the
 * Ethernet frame. It never waits for the reader: a message the socket cannot
 * take at once is lost and counted. The session ends at CAPTURE_STOP, when
 * the reader's end closes, or when the connection that started it ends.
 * Reply: a uroce_ctrl_capture_reply naming the session.
 *
 * CAPTURE_STOP: a uroce_ctrl_handle naming the session (of this connection);
 * the daemon closes its end. Reply: the session's totals.
 */
#define UROCE_CAPTURE_ANY_QP 0xFFFFFFFFu

struct uroce_ctrl_capture_start {
    struct uroce_ctrl_hdr hdr;
    uint32_t qpn;        /* frames of this QP only (docs/capture.md), or UROCE_CAPTURE_ANY_QP */
    uint32_t reserved;
};
struct uroce_ctrl_capture_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t session;
    uint32_t reserved;
    uint64_t frames_sent;  /* records the socket took */
    uint64_t frames_lost;  /* records the socket could not take at once (a slow reader) */
};

enum uroce_capture_direction {
    UROCE_CAPTURE_RECEIVED = 1,
    UROCE_CAPTURE_SENT = 2,
};
enum uroce_capture_verdict {
    UROCE_CAPTURE_PASSED = 0,   /* sent, or received and taken */
    UROCE_CAPTURE_DROPPED = 1,  /* dropped; the note says why */
};
struct uroce_capture_record {
    uint64_t time_ns;       /* CLOCK_REALTIME */
    uint32_t frame_length;
    uint16_t note_length;
    uint8_t direction;      /* enum uroce_capture_direction */
    uint8_t verdict;        /* enum uroce_capture_verdict */
};

/*
 * rdma_cm (ops 40-59): the emulated ucma device /dev/infiniband/rdma_cm
 * (docs/rdmacm-device.md). The preload library (liburoce-preload.so) turns each
 * open() of the device into CM_OPEN_CHANNEL and each write() into
 * CM_COMMAND; GET_EVENT reads one doorbell byte from the channel fd, then
 * asks CM_GET_EVENT.
 *
 * CM_OPEN_CHANNEL: a header-only request carrying one end of an AF_UNIX
 * SOCK_SEQPACKET socketpair (SCM_RIGHTS); the program keeps the other end
 * as its channel fd. The daemon writes one byte into it per event queued,
 * and destroys the channel's ids when the program's end closes. Reply: a
 * uroce_ctrl_handle naming the channel.
 */
enum uroce_ctrl_cm_op {
    UROCE_CTRL_CM_OPEN_CHANNEL = 40,
    UROCE_CTRL_CM_COMMAND = 41,
    UROCE_CTRL_CM_GET_EVENT = 42,
};
#define UROCE_CM_COMMAND_MAX 312u  /* ucma header (8) + the largest body (ACCEPT with ECE, 296) and spare */
#define UROCE_CM_OPTION_MAX 72u    /* level RDMA_OPTION_ID: at most 4 bytes; IB_PATH: one ib_path_rec_data */
#define UROCE_CM_ANSWER_MAX 440u   /* QUERY(PATH) with 6 path records */
#define UROCE_CM_EVENT_BYTES 336u  /* struct rdma_ucm_event_resp */

/* CM_COMMAND: the bytes the program wrote (at most UROCE_CM_COMMAND_MAX),
 * and for SET_OPTION the value its optval pointed to (for RDMA_OPTION_IB_PATH
 * only the entry the kernel takes: the first whose flags are GMP | PRIMARY |
 * BIDIRECTIONAL, or nothing when there is none). MIGRATE_ID's fd field
 * carries the old channel's handle instead of its fd number. The reply's
 * status is the command's errno (0: write() returns its length) and answer
 * holds `answer_length` bytes for the command's response pointer. */
struct uroce_ctrl_cm_command {
    struct uroce_ctrl_hdr hdr;
    uint32_t channel;
    uint16_t command_length;
    uint16_t option_length;
    uint8_t command[UROCE_CM_COMMAND_MAX];
    uint8_t option[UROCE_CM_OPTION_MAX];
};
struct uroce_ctrl_cm_answer {
    struct uroce_ctrl_hdr hdr;
    uint32_t answer_length;
    uint32_t reserved;
    uint8_t answer[UROCE_CM_ANSWER_MAX];
};

/* CM_GET_EVENT: the request is a uroce_ctrl_handle naming the channel; the
 * reply's status is ENOENT when no event is queued (it was purged after its
 * doorbell rang), else 0 with the event. */
struct uroce_ctrl_cm_event {
    struct uroce_ctrl_hdr hdr;
    uint8_t event[UROCE_CM_EVENT_BYTES];
};

/*
 * CM_LIST_IDS (op 150): the device's rdma_cm ids, as Linux's `rdma resource
 * show cm_id` (iproute2 rdma/res-cmid.c, nldev.c fill_res_cm_id_entry) lists
 * the kernel's, a page at a time in handle order. The request names the
 * handle to start at (0: from the first). The reply holds up to
 * UROCE_CM_LIST_IDS_PER_REPLY ids; `more` is 1 when ids follow, from
 * `next_handle` on (ask again with first_handle = next_handle). A client sees
 * the ids of its own user's channels; root and the daemon's owner every id
 * (as STATS, docs/stats.md). Ids come and go between pages: a page shows the
 * ids as they were when it was asked.
 */
enum uroce_cm_id_state {  /* cma.c enum rdma_cm_state, whose numbers netlink carries */
    UROCE_CM_STATE_IDLE = 0,
    UROCE_CM_STATE_ADDR_QUERY = 1,
    UROCE_CM_STATE_ADDR_RESOLVED = 2,
    UROCE_CM_STATE_ROUTE_QUERY = 3,
    UROCE_CM_STATE_ROUTE_RESOLVED = 4,
    UROCE_CM_STATE_CONNECT = 5,     /* connecting or connected (and rejected, unreachable) */
    UROCE_CM_STATE_DISCONNECT = 6,  /* DISCONNECTED reported */
    UROCE_CM_STATE_ADDR_BOUND = 7,
    UROCE_CM_STATE_LISTEN = 8,
};
#define UROCE_CM_LIST_IDS_PER_REPLY 6u
#define UROCE_CM_COMM_BYTES 16u  /* TASK_COMM_LEN */

struct uroce_ctrl_cm_list_ids {
    struct uroce_ctrl_hdr hdr;
    uint32_t first_handle;
    uint32_t reserved;
};
struct uroce_ctrl_cm_id_entry {
    uint32_t handle;        /* the id's handle (`cm-idn`) */
    uint32_t pid;           /* the channel owner's process (SO_PEERCRED at connect), 0: unknown */
    uint32_t lqpn;          /* the QP the id connects (CONNECT/ACCEPT), 0: none yet */
    uint16_t port_space;    /* RDMA_PS_* */
    uint8_t qp_type;        /* enum ibv_qp_type */
    uint8_t state;          /* enum uroce_cm_id_state */
    uint8_t port;           /* the device port the id is bound to (1), 0: none yet */
    uint8_t src_family;     /* AF_INET, AF_INET6, AF_IB; 0: no address */
    uint8_t dst_family;
    uint8_t reserved;
    uint16_t src_port;      /* host order */
    uint16_t dst_port;
    uint8_t src_addr[16];   /* network order; IPv4 in the first 4 bytes; AF_IB: the GID */
    uint8_t dst_addr[16];
    char comm[UROCE_CM_COMM_BYTES];  /* the process's name, NUL-padded */
};
struct uroce_ctrl_cm_list_ids_reply {
    struct uroce_ctrl_hdr hdr;
    uint32_t count;         /* entries[0, count) are filled */
    uint32_t more;          /* 1: more ids from next_handle on */
    uint32_t next_handle;
    uint32_t reserved;
    struct uroce_ctrl_cm_id_entry entries[UROCE_CM_LIST_IDS_PER_REPLY];
};

#ifdef __cplusplus
static_assert(sizeof(struct uroce_ctrl_hdr) == 24, "header layout");
static_assert(sizeof(struct uroce_ctrl_reg_mr) % 8 == 0, "explicit padding");
static_assert(sizeof(struct uroce_ctrl_device_attr) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_device_attr) == 216, "device attr layout");
static_assert(sizeof(struct uroce_ctrl_port_attr) == 72, "port attr layout");
static_assert(sizeof(struct uroce_ctrl_status_reply) == 88, "status layout");
static_assert(sizeof(struct uroce_ctrl_create_cq) == 48, "create cq layout");
static_assert(sizeof(struct uroce_ctrl_cq_reply) == 40, "cq reply layout");
static_assert(sizeof(struct uroce_ctrl_resize_cq) == 32, "resize cq layout");
static_assert(sizeof(struct uroce_ctrl_qp_cap) == 24, "qp cap layout");
static_assert(sizeof(struct uroce_ctrl_ah_attr) == 32, "ah attr layout");
static_assert(sizeof(struct uroce_ctrl_qp_attr) == 112, "qp attr layout");
static_assert(sizeof(struct uroce_ctrl_create_qp) == 80, "create qp layout");
static_assert(sizeof(struct uroce_ctrl_create_qp_reply) == 72, "create qp reply layout");
static_assert(sizeof(struct uroce_ctrl_modify_qp) == 144, "modify qp layout");
static_assert(sizeof(struct uroce_ctrl_query_qp_reply) == 136, "query qp reply layout");
static_assert(sizeof(struct uroce_ctrl_srq) == 64, "srq layout");
static_assert(sizeof(struct uroce_ctrl_create_ah) == 64, "create ah layout");
static_assert(sizeof(struct uroce_ctrl_open_xrcd) == 48, "open xrcd layout");
static_assert(sizeof(struct uroce_ctrl_create_xrc_srq) == 72, "create xrc srq layout");
static_assert(sizeof(struct uroce_ctrl_create_xrc_tgt) == 40, "create xrc tgt layout");
static_assert(sizeof(struct uroce_ctrl_open_xrc_tgt) == 40, "open xrc tgt layout");
static_assert(sizeof(struct uroce_ctrl_close_xrc_tgt) == 40, "close xrc tgt layout");
static_assert(sizeof(struct uroce_ctrl_stats_reply) == 432, "stats layout");
static_assert(sizeof(struct uroce_ctrl_stats_reply) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_stats_reasons_reply) == 504, "stats reasons layout");
static_assert(sizeof(struct uroce_ctrl_stats_reasons_reply) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_loop_stalls_reply) == 216, "loop stalls layout");
static_assert(sizeof(struct uroce_ctrl_membership_reply) == 160, "membership layout");
static_assert(sizeof(struct uroce_explain_record) == 160, "explain record layout");
static_assert(sizeof(struct uroce_ctrl_explain_fetch) == 40, "explain fetch layout");
static_assert(sizeof(struct uroce_ctrl_explain_reply) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_list_mrs) == 32, "list mrs layout");
static_assert(sizeof(struct uroce_ctrl_fault_add) == 272, "fault add layout");
static_assert(sizeof(struct uroce_ctrl_fault_add_reply) == 288, "fault add reply layout");
static_assert(sizeof(struct uroce_ctrl_fault_list) == 32, "fault list layout");
static_assert(sizeof(struct uroce_ctrl_fault_list_reply) == 312, "fault list reply layout");
static_assert(sizeof(struct uroce_ctrl_fault_clear) == 32, "fault clear layout");
static_assert(sizeof(struct uroce_ctrl_fault_seed) == 32, "fault seed layout");
static_assert(sizeof(struct uroce_ctrl_fault_totals_reply) == 104, "fault totals layout");
static_assert(sizeof(struct uroce_ctrl_mr_entry) == 40, "mr entry layout");
static_assert(sizeof(struct uroce_ctrl_list_mrs_reply) == 352, "list mrs reply layout");
static_assert(sizeof(struct uroce_ctrl_cm_command) == 416, "cm command layout");
static_assert(sizeof(struct uroce_ctrl_cm_answer) == 472, "cm answer layout");
static_assert(sizeof(struct uroce_ctrl_cm_event) == 360, "cm event layout");
static_assert(sizeof(struct uroce_ctrl_cm_answer) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_mcast) == 48, "mcast layout");
static_assert(sizeof(struct uroce_ctrl_cm_list_ids) == 32, "cm list ids layout");
static_assert(sizeof(struct uroce_ctrl_cm_id_entry) == 72, "cm id entry layout");
static_assert(sizeof(struct uroce_ctrl_cm_list_ids_reply) == 472, "cm list ids reply layout");
static_assert(sizeof(struct uroce_ctrl_cm_list_ids_reply) <= UROCE_CTRL_MAX_MESSAGE, "fits a message");
static_assert(sizeof(struct uroce_ctrl_capture_start) == 32, "capture start layout");
static_assert(sizeof(struct uroce_ctrl_capture_reply) == 48, "capture reply layout");
static_assert(sizeof(struct uroce_capture_record) == 16, "capture record layout");
#endif

#endif /* UROCE_ABI_CONTROL_H */
