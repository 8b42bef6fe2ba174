/* The client of the kill test (test_kill_clients.py): it builds up what a
 * verbs application holds in the daemon, then moves data until it is killed.
 *
 *   churn -d DEVICE -g GID_INDEX                  alone: two QPs of its own
 *   churn -d DEVICE -g GID_INDEX -p PORT          the passive end of a pair
 *   churn -d DEVICE -g GID_INDEX -p PORT HOST     the active end of a pair
 *
 * Alone, its two QPs are connected to each other through the device. In a
 * pair (two daemons, one per network namespace) each end has one QP, the
 * ends exchange their addresses over TCP, and the active end RDMA WRITEs
 * into the passive end's MR and READs it back, every byte compared; the
 * passive end waits.
 *
 * As it enters each phase it prints one line, line-buffered, so the test can
 * tell where its SIGKILL landed:
 *   phase registration  the device, a PD, MRs of several sizes (two large)
 *   phase connection    CQs (one with a completion channel), an SRQ, an AH,
 *                       the RC QPs, connected
 *   phase transfer      the data moving as above (alone: RDMA WRITE, RDMA READ
 *                       and SENDs both ways between its two QPs), every byte
 *                       checked, in a loop; after the first round it prints
 *                       "data checked"
 * It never ends by itself: "FAIL ..." and exit 1 mean the daemon failed it. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rc_link.h"
#include "side_channel.h"

enum phase { kRegistration, kConnection, kTransfer };
enum role { kAlone, kPassive, kActive };
static const char *const kPhaseNames[] = {"registration", "connection", "transfer"};

enum {
    kPort = 1,
    kCqDepth = 64,
    kQueueDepth = 16,
    kChunk = 64 * 1024,         /* largest transfer, and the stride of the buffers' slots */
    kCompletionTimeoutMs = 20000,
    kTouchStride = 64 * 1024,   /* the large MRs get one written byte per 64 KiB */
};

/* Sizes of the MRs: a page, an odd size, the two transfer buffers, and two
 * large ones that make registration (and its shared mapping) take time. */
static const size_t kMrSizes[] = {4096, 65536 + 3, 4 * kChunk, 4 * kChunk, 16u << 20, 8u << 20};
enum { kMrCount = sizeof kMrSizes / sizeof kMrSizes[0], kMrA = 2, kMrB = 3 };

/* Slots of the transfer buffers, kChunk bytes each. A: WRITE source, READ
 * destination, receive buffer, SEND source. B: WRITE target, SRQ receive
 * buffer, SEND source. */
enum { kSlotWriteSrc = 0, kSlotReadDst = 1, kSlotRecv = 2, kSlotSendSrc = 3 };
enum { kSlotWriteDst = 0, kSlotSrqRecv = 1, kSlotBSendSrc = 2 };

/* What one end of a pair tells the other. */
struct offer {
    struct rc_endpoint endpoint;
    uint64_t addr;   /* slot kSlotWriteDst of its MR B */
    uint32_t rkey;
    uint32_t reserved;
};

struct churn {
    struct rc_device dev;
    struct ibv_mr *mr[kMrCount];
    uint8_t *buf[kMrCount];
    struct ibv_comp_channel *channel;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq;
    struct ibv_srq *srq;
    struct ibv_qp *qp_a;   /* its own receive queue */
    struct ibv_qp *qp_b;   /* receives through the SRQ */
    struct ibv_ah *ah;
    int side_channel;  /* pairs: the TCP connection to the other end */
    struct offer peer; /* pairs: what the other end offered */
};

static void enter(enum phase p) { printf("phase %s\n", kPhaseNames[p]); }

static void fail(const char *what) {
    printf("FAIL %s\n", what);
    exit(1);
}

static void register_memory(struct churn *c, const char *device, int gid_index) {
    if (rc_device_open(&c->dev, device, gid_index) != 0) {
        fail("open the device and allocate a PD");
    }
    for (int i = 0; i < kMrCount; ++i) {
        void *p = mmap(NULL, kMrSizes[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            fail("mmap");
        }
        c->buf[i] = p;
        for (size_t off = 0; off < kMrSizes[i]; off += kTouchStride) {
            c->buf[i][off] = (uint8_t)(off >> 16);
        }
        c->mr[i] = ibv_reg_mr(c->dev.pd, p, kMrSizes[i],
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        if (c->mr[i] == NULL) {
            fail("ibv_reg_mr");
        }
    }
}

static struct ibv_qp *create_qp(struct churn *c, struct ibv_srq *srq, struct rc_endpoint *self) {
    struct ibv_qp_init_attr init = {
        .send_cq = c->send_cq,
        .recv_cq = c->recv_cq,
        .srq = srq,
        .cap = {.max_send_wr = kQueueDepth, .max_recv_wr = srq ? 0 : kQueueDepth, .max_send_sge = 1,
                .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(c->dev.pd, &init);
    if (qp == NULL) {
        fail("ibv_create_qp");
    }
    memset(self, 0, sizeof *self);
    self->qpn = qp->qp_num;
    self->psn = ((uint32_t)getpid() * 2654435761u + qp->qp_num) & 0xFFFFFF;
    memcpy(self->gid, c->dev.gid.raw, sizeof self->gid);
    self->mtu = c->dev.mtu;
    self->max_rd_atomic = c->dev.max_rd_atomic;
    return qp;
}

static void create_queues(struct churn *c) {
    c->channel = ibv_create_comp_channel(c->dev.ctx);
    c->send_cq = c->channel ? ibv_create_cq(c->dev.ctx, kCqDepth, NULL, c->channel, 0) : NULL;
    c->recv_cq = ibv_create_cq(c->dev.ctx, kCqDepth, NULL, NULL, 0);
    if (c->send_cq == NULL || c->recv_cq == NULL || ibv_req_notify_cq(c->send_cq, 0) != 0) {
        fail("completion channel and CQs");
    }
    struct ibv_srq_init_attr srq_init = {.attr = {.max_wr = kQueueDepth, .max_sge = 1}};
    c->srq = ibv_create_srq(c->dev.pd, &srq_init);
    if (c->srq == NULL) {
        fail("ibv_create_srq");
    }
    struct ibv_ah_attr ah_attr = {.is_global = 1, .port_num = kPort};
    ah_attr.grh.dgid = c->dev.gid;
    ah_attr.grh.sgid_index = (uint8_t)c->dev.gid_index;
    ah_attr.grh.hop_limit = 1;
    c->ah = ibv_create_ah(c->dev.pd, &ah_attr);
    if (c->ah == NULL) {
        fail("ibv_create_ah");
    }
}

static void connect_alone(struct churn *c) {
    struct rc_endpoint a, b;
    c->qp_a = create_qp(c, NULL, &a);
    c->qp_b = create_qp(c, c->srq, &b);
    if (rc_qp_connect(&c->dev, c->qp_a, &a, &b) != 0 || rc_qp_connect(&c->dev, c->qp_b, &b, &a) != 0) {
        fail("connect the two QPs");
    }
}

/* One QP (qp_a at the active end, qp_b on the SRQ at the passive end),
 * connected to the other end's over the TCP side channel. */
static void connect_pair(struct churn *c, enum role role, const char *host, uint16_t port) {
    struct offer mine = {.reserved = 0}, theirs;
    struct ibv_qp *qp = create_qp(c, role == kPassive ? c->srq : NULL, &mine.endpoint);
    *(role == kPassive ? &c->qp_b : &c->qp_a) = qp;
    mine.addr = (uintptr_t)(c->buf[kMrB] + (size_t)kSlotWriteDst * kChunk);
    mine.rkey = c->mr[kMrB]->rkey;
    c->side_channel = role == kPassive ? side_channel_accept(port) : side_channel_connect(host, port, 30);
    if (c->side_channel < 0 || side_channel_send(c->side_channel, &mine, sizeof mine) != 0 ||
        side_channel_recv(c->side_channel, &theirs, sizeof theirs) != 0) {
        fail("exchange addresses with the other end");
    }
    if (rc_qp_connect(&c->dev, qp, &mine.endpoint, &theirs.endpoint) != 0) {
        fail("connect the QP to the other end");
    }
    /* The active end WRITEs into and READs from the MR the passive end offered. */
    c->peer = theirs;
}

static uint8_t *slot(struct churn *c, int mr, int index) { return c->buf[mr] + (size_t)index * kChunk; }

static struct ibv_sge sge(struct churn *c, int mr, int index, uint32_t len) {
    return (struct ibv_sge){.addr = (uintptr_t)slot(c, mr, index), .length = len, .lkey = c->mr[mr]->lkey};
}

static void post_recv(struct churn *c, uint32_t len) {
    struct ibv_sge to_a = sge(c, kMrA, kSlotRecv, len);
    struct ibv_sge to_b = sge(c, kMrB, kSlotSrqRecv, len);
    struct ibv_recv_wr wr_a = {.wr_id = 1, .sg_list = &to_a, .num_sge = 1};
    struct ibv_recv_wr wr_b = {.wr_id = 2, .sg_list = &to_b, .num_sge = 1};
    struct ibv_recv_wr *bad;
    if (ibv_post_recv(c->qp_a, &wr_a, &bad) != 0 || ibv_post_srq_recv(c->srq, &wr_b, &bad) != 0) {
        fail("post receives");
    }
}

static void post_send(struct ibv_qp *qp, struct ibv_sge *s, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey) {
    struct ibv_send_wr wr = {.wr_id = op, .sg_list = s, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    struct ibv_send_wr *bad;
    if (ibv_post_send(qp, &wr, &bad) != 0) {
        fail("ibv_post_send");
    }
}

static long elapsed_ms(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* Waits for `want` successful completions on `cq`. */
static void complete(struct ibv_cq *cq, int want) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (want > 0) {
        struct ibv_wc wc[8];
        const int n = ibv_poll_cq(cq, 8, wc);
        if (n < 0) {
            fail("ibv_poll_cq");
        }
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                printf("FAIL completion of wr_id %llu: %s\n", (unsigned long long)wc[i].wr_id,
                       ibv_wc_status_str(wc[i].status));
                exit(1);
            }
        }
        want -= n;
        if (n == 0 && elapsed_ms(&start) > kCompletionTimeoutMs) {
            fail("no completion within the time limit");
        }
    }
}

/* One round: A writes a chunk into B and reads it back, A and B send each
 * other a chunk; every byte that arrived is compared with what was sent. */
static void transfer_once(struct churn *c, uint32_t round) {
    const uint32_t len = 1 + (round * 7919u) % kChunk;
    memset(slot(c, kMrA, kSlotWriteSrc), (int)(round * 3 + 1), len);
    memset(slot(c, kMrA, kSlotSendSrc), (int)(round * 5 + 2), len);
    memset(slot(c, kMrB, kSlotBSendSrc), (int)(round * 7 + 3), len);
    post_recv(c, len);
    struct ibv_sge write_src = sge(c, kMrA, kSlotWriteSrc, len);
    struct ibv_sge read_dst = sge(c, kMrA, kSlotReadDst, len);
    struct ibv_sge send_a = sge(c, kMrA, kSlotSendSrc, len);
    struct ibv_sge send_b = sge(c, kMrB, kSlotBSendSrc, len);
    const uint64_t b_addr = (uintptr_t)slot(c, kMrB, kSlotWriteDst);
    post_send(c->qp_a, &write_src, IBV_WR_RDMA_WRITE, b_addr, c->mr[kMrB]->rkey);
    post_send(c->qp_a, &read_dst, IBV_WR_RDMA_READ, b_addr, c->mr[kMrB]->rkey);
    post_send(c->qp_a, &send_a, IBV_WR_SEND, 0, 0);
    post_send(c->qp_b, &send_b, IBV_WR_SEND, 0, 0);
    complete(c->send_cq, 4);
    complete(c->recv_cq, 2);
    if (memcmp(slot(c, kMrA, kSlotReadDst), slot(c, kMrA, kSlotWriteSrc), len) != 0 ||
        memcmp(slot(c, kMrB, kSlotWriteDst), slot(c, kMrA, kSlotWriteSrc), len) != 0) {
        fail("RDMA WRITE then READ: the bytes differ");
    }
    if (memcmp(slot(c, kMrB, kSlotSrqRecv), slot(c, kMrA, kSlotSendSrc), len) != 0 ||
        memcmp(slot(c, kMrA, kSlotRecv), slot(c, kMrB, kSlotBSendSrc), len) != 0) {
        fail("SEND: the bytes received differ");
    }
}

/* The active end of a pair: WRITE a chunk into the passive end's MR, READ
 * it back, compare. */
static void transfer_to_peer(struct churn *c, uint32_t round) {
    const uint32_t len = 1 + (round * 7919u) % kChunk;
    memset(slot(c, kMrA, kSlotWriteSrc), (int)(round * 3 + 1), len);
    struct ibv_sge write_src = sge(c, kMrA, kSlotWriteSrc, len);
    struct ibv_sge read_dst = sge(c, kMrA, kSlotReadDst, len);
    post_send(c->qp_a, &write_src, IBV_WR_RDMA_WRITE, c->peer.addr, c->peer.rkey);
    post_send(c->qp_a, &read_dst, IBV_WR_RDMA_READ, c->peer.addr, c->peer.rkey);
    complete(c->send_cq, 2);
    if (memcmp(slot(c, kMrA, kSlotReadDst), slot(c, kMrA, kSlotWriteSrc), len) != 0) {
        fail("RDMA WRITE then READ to the other end: the bytes differ");
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *device = NULL;
    int gid_index = -1, port = 0;
    int opt;
    while ((opt = getopt(argc, argv, "d:g:p:")) != -1) {
        if (opt == 'd') {
            device = optarg;
        } else if (opt == 'g') {
            gid_index = atoi(optarg);
        } else if (opt == 'p') {
            port = atoi(optarg);
        } else {
            break;
        }
    }
    const char *host = optind < argc ? argv[optind] : NULL;
    const enum role role = port == 0 ? kAlone : host == NULL ? kPassive : kActive;
    if (device == NULL || gid_index < 0 || port < 0 || port > 65535 || (host != NULL && port == 0)) {
        fprintf(stderr, "usage: %s -d DEVICE -g GID_INDEX [-p PORT [HOST]]\n", argv[0]);
        return 2;
    }
    struct churn c;
    memset(&c, 0, sizeof c);
    enter(kRegistration);
    register_memory(&c, device, gid_index);
    enter(kConnection);
    create_queues(&c);
    if (role == kAlone) {
        connect_alone(&c);
    } else {
        connect_pair(&c, role, host, (uint16_t)port);
    }
    enter(kTransfer);
    if (role == kPassive) {
        char eof;
        (void)side_channel_recv(c.side_channel, &eof, 1);  /* the active end never sends: wait to be killed */
        fail("the active end hung up");
    }
    for (uint32_t round = 0;; ++round) {
        if (role == kAlone) {
            transfer_once(&c, round);
        } else {
            transfer_to_peer(&c, round);
        }
        if (round == 0) {
            printf("data checked\n");  /* the first round's bytes all arrived */
        }
    }
}
