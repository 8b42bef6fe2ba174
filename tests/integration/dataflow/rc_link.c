#include "rc_link.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    kPort = 1,
    kCqDepth = 64,
    kQueueDepth = 16,
    /* IBTA: 4.096 us * 2^14 = 67 ms before a retransmission. */
    kLocalAckTimeout = 14,
    kRetryCount = 7,
    kRnrRetryForever = 7,
    /* IBTA table of RNR timer values: 12 = 0.64 ms. */
    kMinRnrTimer = 12,
    kHopLimit = 64,
};

int rc_device_open(struct rc_device *d, const char *name, int gid_index) {
    memset(d, 0, sizeof *d);
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL) {
        fprintf(stderr, "ibv_get_device_list: %s\n", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n && d->ctx == NULL; ++i) {
        if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
            d->ctx = ibv_open_device(list[i]);
            if (d->ctx == NULL) {
                fprintf(stderr, "ibv_open_device %s: %s\n", name, strerror(errno));
            }
        }
    }
    ibv_free_device_list(list);
    if (d->ctx == NULL) {
        fprintf(stderr, "device %s not found or not opened (%d devices listed)\n", name, n);
        return -1;
    }
    struct ibv_device_attr dev_attr;
    struct ibv_port_attr port_attr;
    if (ibv_query_device(d->ctx, &dev_attr) != 0 || ibv_query_port(d->ctx, kPort, &port_attr) != 0) {
        fprintf(stderr, "ibv_query_device/ibv_query_port failed\n");
        return -1;
    }
    d->mtu = port_attr.active_mtu;
    d->max_rd_atomic = (uint8_t)(dev_attr.max_qp_rd_atom > 16 ? 16 : dev_attr.max_qp_rd_atom);
    d->gid_index = gid_index;
    if (ibv_query_gid(d->ctx, kPort, gid_index, &d->gid) != 0) {
        fprintf(stderr, "ibv_query_gid index %d failed\n", gid_index);
        return -1;
    }
    d->pd = ibv_alloc_pd(d->ctx);
    d->cq = d->pd != NULL ? ibv_create_cq(d->ctx, kCqDepth, NULL, NULL, 0) : NULL;
    if (d->cq == NULL) {
        fprintf(stderr, "ibv_alloc_pd/ibv_create_cq: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

void rc_device_close(struct rc_device *d) {
    if (d->cq != NULL) {
        ibv_destroy_cq(d->cq);
    }
    if (d->pd != NULL) {
        ibv_dealloc_pd(d->pd);
    }
    if (d->ctx != NULL) {
        ibv_close_device(d->ctx);
    }
    memset(d, 0, sizeof *d);
}

struct ibv_qp *rc_qp_create(struct rc_device *d, struct rc_endpoint *self) {
    struct ibv_qp_init_attr init = {
        .send_cq = d->cq,
        .recv_cq = d->cq,
        .cap = {.max_send_wr = kQueueDepth, .max_recv_wr = kQueueDepth, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(d->pd, &init);
    if (qp == NULL) {
        fprintf(stderr, "ibv_create_qp: %s\n", strerror(errno));
        return NULL;
    }
    memset(self, 0, sizeof *self);
    self->qpn = qp->qp_num;
    self->psn = (uint32_t)random() & 0xFFFFFF;
    memcpy(self->gid, d->gid.raw, sizeof self->gid);
    self->mtu = d->mtu;
    self->max_rd_atomic = d->max_rd_atomic;
    return qp;
}

int rc_qp_connect(struct rc_device *d, struct ibv_qp *qp, const struct rc_endpoint *self,
                  const struct rc_endpoint *peer) {
    return rc_qp_connect_retry(d, qp, self, peer, kLocalAckTimeout, kRetryCount);
}

int rc_qp_connect_retry(struct rc_device *d, struct ibv_qp *qp, const struct rc_endpoint *self,
                        const struct rc_endpoint *peer, uint8_t timeout, uint8_t retry_cnt) {
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = kPort,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
    };
    int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        fprintf(stderr, "modify QP to INIT: %s\n", strerror(rc));
        return -1;
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = (enum ibv_mtu)(peer->mtu < self->mtu ? peer->mtu : self->mtu);
    attr.dest_qp_num = peer->qpn;
    attr.rq_psn = peer->psn;
    attr.max_dest_rd_atomic = d->max_rd_atomic;
    attr.min_rnr_timer = kMinRnrTimer;
    attr.ah_attr.is_global = 1;
    memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, sizeof peer->gid);
    attr.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
    attr.ah_attr.grh.hop_limit = kHopLimit;
    attr.ah_attr.port_num = kPort;
    rc = ibv_modify_qp(qp, &attr,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
        fprintf(stderr, "modify QP to RTR: %s\n", strerror(rc));
        return -1;
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = timeout;
    attr.retry_cnt = retry_cnt;
    attr.rnr_retry = kRnrRetryForever;
    attr.sq_psn = self->psn;
    attr.max_rd_atomic = (uint8_t)(peer->max_rd_atomic < d->max_rd_atomic ? peer->max_rd_atomic : d->max_rd_atomic);
    rc = ibv_modify_qp(qp, &attr,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
        fprintf(stderr, "modify QP to RTS: %s\n", strerror(rc));
        return -1;
    }
    return 0;
}

uint32_t rc_mtu_bytes(enum ibv_mtu mtu) { return 256u << ((unsigned)mtu - 1u); }

int rc_wait(struct rc_device *d, struct ibv_wc *wc, int timeout_ms) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        const int n = ibv_poll_cq(d->cq, 1, wc);
        if (n != 0) {
            return n < 0 ? -1 : 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        const long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed_ms >= timeout_ms) {
            return 0;
        }
        sched_yield();  // two cores: leave them to the daemons between polls
    }
}
