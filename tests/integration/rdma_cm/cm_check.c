/* Stock librdmacm through the emulated rdma_cm device: route resolution
 * replaced by a path record (rdma_set_option RDMA_OPTION_IB_PATH, ucma.c
 * ucma_set_ib_path) and the TIMEWAIT_EXIT event after a disconnection (cma.c
 * cma_ib_handler, IB_CM_TIMEWAIT_EXIT). One process holds both ends of a
 * connection on its own address, each on its own event channel, without
 * QPs (the active side calls rdma_establish, as the kernel expects then).
 *
 * usage: cm_check IPV4_ADDRESS PORT
 * Exit 0 when every check passed; otherwise 1 with the failed check on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENT_WAIT_MS 5000 /* longest wait for one event: far above timewait */
#define GIVEN_HOP_LIMIT 7
#define GIVEN_TRAFFIC_CLASS 0x20
#define GIVEN_FLOW_LABEL 0x12345u
#define GIVEN_LIFETIME 7 /* REQ local ACK timeout 15 (the CA's ACK delay): timewait 2^(15-8) ms */
#define TIMEWAIT_MS 128

static int fail(const char *what)
{
    fprintf(stderr, "cm_check: %s (errno %d: %s)\n", what, errno, strerror(errno));
    return 1;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The next event of `ch`, which must be `expected`; the caller acks it. */
static struct rdma_cm_event *expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type expected)
{
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    if (poll(&p, 1, EVENT_WAIT_MS) != 1) {
        fprintf(stderr, "cm_check: no %s within %d ms\n", rdma_event_str(expected), EVENT_WAIT_MS);
        return NULL;
    }
    struct rdma_cm_event *e = NULL;
    if (rdma_get_cm_event(ch, &e) != 0) {
        fail("rdma_get_cm_event");
        return NULL;
    }
    if (e->event != expected) {
        fprintf(stderr, "cm_check: got %s (status %d), wanted %s\n", rdma_event_str(e->event), e->status,
                rdma_event_str(expected));
        rdma_ack_cm_event(e);
        return NULL;
    }
    return e;
}

static int expect_and_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type expected)
{
    struct rdma_cm_event *e = expect_event(ch, expected);
    if (e == NULL) {
        return 1;
    }
    rdma_ack_cm_event(e);
    return 0;
}

/* Two ibv_path_data entries: an outbound-only one the kernel skips, then the
 * GMP | PRIMARY | BIDIRECTIONAL one it takes. */
static void fill_paths(struct ibv_path_data paths[2], const struct rdma_cm_id *id)
{
    memset(paths, 0, 2 * sizeof paths[0]);
    for (int i = 0; i < 2; ++i) {
        struct ibv_path_record *r = &paths[i].path;
        memcpy(&r->sgid, &id->route.addr.addr.ibaddr.sgid, sizeof r->sgid);
        memcpy(&r->dgid, &id->route.addr.addr.ibaddr.dgid, sizeof r->dgid);
        r->flowlabel_hoplimit = htobe32((GIVEN_FLOW_LABEL << 8) | (i == 0 ? 99 : GIVEN_HOP_LIMIT));
        r->tclass = GIVEN_TRAFFIC_CLASS;
        r->reversible_numpath = 0x80;
        r->pkey = htobe16(0xFFFF);
        r->mtu = (2 << 6) | IBV_MTU_1024;
        r->rate = 2 << 6;
        r->packetlifetime = (2 << 6) | GIVEN_LIFETIME;
    }
    paths[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_OUTBOUND;
    paths[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
}

static int check_given_path(struct rdma_cm_id *id)
{
    struct ibv_path_data paths[2];
    fill_paths(paths, id);
    /* Not whole entries, and no primary bidirectional one: EINVAL. */
    if (rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths, sizeof paths - 1) == 0 || errno != EINVAL) {
        return fail("IB_PATH of 143 bytes was not EINVAL");
    }
    if (rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths, sizeof paths[0]) == 0 || errno != EINVAL) {
        return fail("IB_PATH without a bidirectional entry was not EINVAL");
    }
    if (rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths, sizeof paths) != 0) {
        return fail("rdma_set_option IB_PATH");
    }
    if (expect_and_ack(id->channel, RDMA_CM_EVENT_ROUTE_RESOLVED) != 0) {
        return 1;
    }
    /* librdmacm read the route back (QUERY_ROUTE or QUERY PATH). */
    if (id->route.num_paths != 1) {
        return fail("num_paths is not 1 after IB_PATH");
    }
    const struct ibv_sa_path_rec *p = &id->route.path_rec[0];
    if (p->hop_limit != GIVEN_HOP_LIMIT || p->traffic_class != GIVEN_TRAFFIC_CLASS ||
        be32toh(p->flow_label) != GIVEN_FLOW_LABEL || p->packet_life_time != GIVEN_LIFETIME ||
        p->mtu != IBV_MTU_1024) {
        fprintf(stderr, "cm_check: route after IB_PATH: hop %u tclass %#x flow %#x lifetime %u mtu %u\n", p->hop_limit,
                p->traffic_class, be32toh(p->flow_label), p->packet_life_time, p->mtu);
        return 1;
    }
    return 0;
}

struct ends {
    struct rdma_event_channel *server_ch, *client_ch;
    struct rdma_cm_id *listener, *passive, *active;
};

static int connect_ends(struct ends *e, struct sockaddr_in *addr)
{
    if (rdma_bind_addr(e->listener, (struct sockaddr *)addr) != 0 || rdma_listen(e->listener, 1) != 0) {
        return fail("bind/listen");
    }
    if (rdma_resolve_addr(e->active, NULL, (struct sockaddr *)addr, 2000) != 0) {
        return fail("rdma_resolve_addr");
    }
    if (expect_and_ack(e->client_ch, RDMA_CM_EVENT_ADDR_RESOLVED) != 0 || check_given_path(e->active) != 0) {
        return 1;
    }
    struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                                    .rnr_retry_count = 7, .qp_num = 0x123};
    if (rdma_connect(e->active, &param) != 0) {
        return fail("rdma_connect");
    }
    struct rdma_cm_event *req = expect_event(e->server_ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    if (req == NULL) {
        return 1;
    }
    e->passive = req->id;
    rdma_ack_cm_event(req);
    param.qp_num = 0x456;
    if (rdma_accept(e->passive, &param) != 0) {
        return fail("rdma_accept");
    }
    if (expect_and_ack(e->client_ch, RDMA_CM_EVENT_CONNECT_RESPONSE) != 0) {
        return 1;
    }
    if (rdma_establish(e->active) != 0) {
        return fail("rdma_establish");
    }
    return expect_and_ack(e->server_ch, RDMA_CM_EVENT_ESTABLISHED);
}

/* Disconnect from the active side; each side then gets DISCONNECTED, and
 * TIMEWAIT_EXIT no sooner than the timewait after the DREP. */
static int check_timewait(struct ends *e)
{
    if (rdma_disconnect(e->active) != 0) {
        return fail("rdma_disconnect (active)");
    }
    if (expect_and_ack(e->server_ch, RDMA_CM_EVENT_DISCONNECTED) != 0) {
        return 1;
    }
    const double drep = now_ms();
    if (rdma_disconnect(e->passive) != 0) {
        return fail("rdma_disconnect (passive)");
    }
    if (expect_and_ack(e->client_ch, RDMA_CM_EVENT_DISCONNECTED) != 0 ||
        expect_and_ack(e->client_ch, RDMA_CM_EVENT_TIMEWAIT_EXIT) != 0 ||
        expect_and_ack(e->server_ch, RDMA_CM_EVENT_TIMEWAIT_EXIT) != 0) {
        return 1;
    }
    const double waited = now_ms() - drep;
    if (waited < TIMEWAIT_MS) {
        fprintf(stderr, "cm_check: TIMEWAIT_EXIT after %.1f ms, before the %d ms timewait\n", waited, TIMEWAIT_MS);
        return 1;
    }
    printf("cm_check: IB_PATH route used, TIMEWAIT_EXIT on both sides after %.1f ms\n", waited);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cm_check IPV4_ADDRESS PORT\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        fprintf(stderr, "cm_check: not an IPv4 address: %s\n", argv[1]);
        return 2;
    }
    struct ends e = {0};
    e.server_ch = rdma_create_event_channel();
    e.client_ch = rdma_create_event_channel();
    if (e.server_ch == NULL || e.client_ch == NULL) {
        return fail("rdma_create_event_channel");
    }
    if (rdma_create_id(e.server_ch, &e.listener, NULL, RDMA_PS_TCP) != 0 ||
        rdma_create_id(e.client_ch, &e.active, NULL, RDMA_PS_TCP) != 0) {
        return fail("rdma_create_id");
    }
    int rc = connect_ends(&e, &addr);
    if (rc == 0) {
        rc = check_timewait(&e);
    }
    if (e.passive != NULL) {
        rdma_destroy_id(e.passive);
    }
    rdma_destroy_id(e.active);
    rdma_destroy_id(e.listener);
    rdma_destroy_event_channel(e.client_ch);
    rdma_destroy_event_channel(e.server_ch);
    return rc;
}
