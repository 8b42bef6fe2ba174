/* One RC queue pair on a named verbs device, connected to a peer whose QP
 * number, PSN, GID and MTU came over the side channel, with RoCE v2
 * addressing (a global route to the peer's GID). Stock libibverbs only. */
#ifndef UROCE_TEST_RC_LINK_H
#define UROCE_TEST_RC_LINK_H

#include <infiniband/verbs.h>
#include <stdint.h>

struct rc_device {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    int gid_index;
    union ibv_gid gid;
    enum ibv_mtu mtu;          /* the port's active MTU */
    uint8_t max_rd_atomic;     /* RDMA READs in flight, from the device */
};

/* What one end tells the other to connect (host byte order). */
struct rc_endpoint {
    uint32_t qpn;
    uint32_t psn;
    uint8_t gid[16];
    uint32_t mtu; /* enum ibv_mtu */
    uint32_t max_rd_atomic;
};

/* Opens device `name`, a PD and a CQ; reads GID `gid_index` of port 1.
 * Returns 0, or -1 (reason printed). */
int rc_device_open(struct rc_device *d, const char *name, int gid_index);
void rc_device_close(struct rc_device *d);

/* A new RC QP in RESET on the device's PD and CQ; *self describes it (random
 * PSN). Returns NULL (reason printed) on failure. */
struct ibv_qp *rc_qp_create(struct rc_device *d, struct rc_endpoint *self);

/* INIT -> RTR -> RTS towards `peer`, at the smaller of both MTUs, every
 * remote access allowed by the QP (the MRs decide), 7 transport retries and
 * RNR retries forever (rnr_retry 7). Returns 0, or -1 (reason printed). */
int rc_qp_connect(struct rc_device *d, struct ibv_qp *qp, const struct rc_endpoint *self,
                  const struct rc_endpoint *peer);

/* The same with the requester's local ACK timeout (IBTA: 4.096 us *
 * 2^timeout) and transport retry count of the caller's choosing. */
int rc_qp_connect_retry(struct rc_device *d, struct ibv_qp *qp, const struct rc_endpoint *self,
                        const struct rc_endpoint *peer, uint8_t timeout, uint8_t retry_cnt);

/* Bytes of an IB MTU enum value: 256 << (mtu - 1). */
uint32_t rc_mtu_bytes(enum ibv_mtu mtu);

/* Polls the CQ for one completion for up to timeout_ms. Returns 1 (in *wc),
 * 0 when none came in time, -1 when polling failed. */
int rc_wait(struct rc_device *d, struct ibv_wc *wc, int timeout_ms);

#endif
