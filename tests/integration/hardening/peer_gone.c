/* The survivor's side of a peer whose daemon dies mid-transfer
 * (test_peer_daemon_killed.py).
 *
 *   peer_gone -d DEVICE -g GID_INDEX -p TCP_PORT               (server)
 *   peer_gone -d DEVICE -g GID_INDEX -p TCP_PORT -t TIMEOUT -r RETRY_CNT HOST
 *                                                              (client)
 *
 * The server offers a 1 MiB MR to RDMA WRITE and waits for the client to hang
 * up. The client connects an RC QP with the given local ACK timeout and
 * transport retry count and keeps its send queue full of RDMA WRITEs; after
 * 200 have completed it prints "transferring" (the test then kills the
 * server's daemon). From its first failed completion on it posts nothing
 * more and collects the completions of everything outstanding, printing
 *   error K status NAME (N) at SECONDS   for each (CLOCK_MONOTONIC)
 *   last success at SECONDS
 *   outstanding at the first error N
 * and exits 0; the test judges the statuses and the times. It exits 2 when
 * no completion comes for 60 s ("stuck"), 1 on any other failure. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rc_link.h"
#include "side_channel.h"

enum {
    kServerMrBytes = 1 << 20,
    kWriteBytes = 4096,
    kSendDepth = 16,                /* rc_qp_create's max_send_wr */
    kSuccessesBeforeReport = 200,
    kStuckMs = 60000,
    kExitStuck = 2,
};

/* What the server tells the client. */
struct offer {
    struct rc_endpoint endpoint;
    uint64_t addr;
    uint32_t rkey;
    uint32_t reserved;
};

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int serve(struct rc_device *d, uint16_t port) {
    void *buf = calloc(1, kServerMrBytes);
    struct ibv_mr *mr = buf ? ibv_reg_mr(d->pd, buf, kServerMrBytes,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
    struct offer mine = {.addr = (uintptr_t)buf};
    struct ibv_qp *qp = mr ? rc_qp_create(d, &mine.endpoint) : NULL;
    if (qp == NULL) {
        printf("server: FAIL MR or QP\n");
        return 1;
    }
    mine.rkey = mr->rkey;
    const int fd = side_channel_accept(port);
    struct offer theirs;
    if (fd < 0 || side_channel_send(fd, &mine, sizeof mine) != 0 || side_channel_recv(fd, &theirs, sizeof theirs) != 0 ||
        rc_qp_connect(d, qp, &mine.endpoint, &theirs.endpoint) != 0) {
        printf("server: FAIL connect\n");
        return 1;
    }
    printf("server: connected\n");
    char eof;
    (void)side_channel_recv(fd, &eof, 1);  /* returns when the client hangs up */
    printf("server: the client hung up\n");
    return 0;
}

static int post_write(struct ibv_qp *qp, struct ibv_mr *mr, const struct offer *to, uint64_t n) {
    struct ibv_sge s = {.addr = (uintptr_t)mr->addr, .length = kWriteBytes, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.wr_id = n, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = to->addr + (n * kWriteBytes) % (kServerMrBytes - kWriteBytes);
    wr.wr.rdma.rkey = to->rkey;
    struct ibv_send_wr *bad;
    return ibv_post_send(qp, &wr, &bad);
}

/* After the first failed completion: every outstanding WR's completion. */
static int drain(struct rc_device *d, int outstanding, double last_success) {
    printf("outstanding at the first error %d\n", outstanding);
    printf("last success at %.6f\n", last_success);
    for (int k = 2; k <= outstanding; ++k) {
        struct ibv_wc wc;
        const int got = rc_wait(d, &wc, kStuckMs);
        if (got != 1) {
            printf("stuck: %d of %d outstanding completions never came\n", outstanding - k + 1, outstanding);
            return kExitStuck;
        }
        printf("error %d status %s (%d) at %.6f\n", k, ibv_wc_status_str(wc.status), (int)wc.status, now_seconds());
    }
    return 0;
}

static int write_until_error(struct rc_device *d, struct ibv_qp *qp, const struct offer *to) {
    void *buf = calloc(1, kWriteBytes);
    struct ibv_mr *mr = buf ? ibv_reg_mr(d->pd, buf, kWriteBytes, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (mr == NULL) {
        printf("client: FAIL MR\n");
        return 1;
    }
    uint64_t posted = 0, succeeded = 0;
    double last_success = now_seconds();
    for (;;) {
        while (posted - succeeded < kSendDepth) {
            if (post_write(qp, mr, to, posted) != 0) {
                printf("client: FAIL ibv_post_send\n");
                return 1;
            }
            ++posted;
        }
        struct ibv_wc wc;
        const int got = rc_wait(d, &wc, kStuckMs);
        if (got != 1) {
            printf("stuck: %d outstanding, no completion for %d ms\n", (int)(posted - succeeded), kStuckMs);
            return got == 0 ? kExitStuck : 1;
        }
        if (wc.status != IBV_WC_SUCCESS) {
            printf("error 1 status %s (%d) at %.6f\n", ibv_wc_status_str(wc.status), (int)wc.status, now_seconds());
            return drain(d, (int)(posted - succeeded), last_success);
        }
        last_success = now_seconds();
        if (++succeeded == kSuccessesBeforeReport) {
            printf("transferring\n");
        }
    }
}

static int run_client(struct rc_device *d, const char *host, uint16_t port, uint8_t timeout, uint8_t retry_cnt) {
    struct offer mine = {0}, theirs;
    struct ibv_qp *qp = rc_qp_create(d, &mine.endpoint);
    const int fd = qp ? side_channel_connect(host, port, 20) : -1;
    if (fd < 0 || side_channel_recv(fd, &theirs, sizeof theirs) != 0 || side_channel_send(fd, &mine, sizeof mine) != 0 ||
        rc_qp_connect_retry(d, qp, &mine.endpoint, &theirs.endpoint, timeout, retry_cnt) != 0) {
        printf("client: FAIL connect\n");
        return 1;
    }
    printf("client: connected, timeout %u, retry_cnt %u\n", timeout, retry_cnt);
    const int rc = write_until_error(d, qp, &theirs);
    close(fd);
    return rc;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *device = NULL;
    int gid_index = -1, port = 0, timeout = 14, retry_cnt = 7, opt;
    while ((opt = getopt(argc, argv, "d:g:p:t:r:")) != -1) {
        switch (opt) {
            case 'd': device = optarg; break;
            case 'g': gid_index = atoi(optarg); break;
            case 'p': port = atoi(optarg); break;
            case 't': timeout = atoi(optarg); break;
            case 'r': retry_cnt = atoi(optarg); break;
            default: return 2;
        }
    }
    if (device == NULL || gid_index < 0 || port <= 0 || timeout < 0 || timeout > 31 || retry_cnt < 0 ||
        retry_cnt > 7) {
        fprintf(stderr, "usage: %s -d DEVICE -g GID_INDEX -p PORT [-t TIMEOUT] [-r RETRY_CNT] [HOST]\n", argv[0]);
        return 2;
    }
    srandom((unsigned)getpid());
    struct rc_device d;
    if (rc_device_open(&d, device, gid_index) != 0) {
        return 1;
    }
    if (optind < argc) {
        return run_client(&d, argv[optind], (uint16_t)port, (uint8_t)timeout, (uint8_t)retry_cnt);
    }
    return serve(&d, (uint16_t)port);
}
