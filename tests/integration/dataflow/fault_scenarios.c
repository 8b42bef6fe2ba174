/*
 * fault_scenarios: RDMA operations whose outcome is known exactly, for the
 * fault-injection tests (test_faults.py, docs/fault-injection.md). The test
 * installs fault rules in the daemons (uroce fault add) before each run;
 * this program moves the data and checks every byte and every atomic result.
 *
 *   fault_scenarios -d DEV -g GID -p PORT [-t TIMEOUT -r RETRY]              the server
 *   fault_scenarios -d DEV -g GID -p PORT [-t TIMEOUT -r RETRY] -o OPS HOST  the client
 *
 * OPS, a comma-separated list run in order by the client against the
 * server's memory, each waiting for its completion:
 *   write:N    RDMA WRITE of N bytes, then the server checks them
 *   read:N     RDMA READ of N bytes from the server's pattern, checked here
 *   fadd:N     N FETCH_AND_ADDs of 1 on a counter: each must return the count
 *              before it, and the server's counter must end at N (each
 *              applied exactly once, duplicates or not)
 *   cswap:N    N COMPARE_AND_SWAPs of a value v to v+1, each expected to succeed
 *   lost:1     one RDMA WRITE that must fail: the client prints its status and
 *              how long it took ("lost: status N (NAME) after M ms"), exits 0
 *              when it is IBV_WC_RETRY_EXC_ERR
 *   rnr:N      an RNR storm: N SENDs of RNR_MSG bytes, one at a time, to a
 *              server that posts each receive only RNR_DELAY_MS after it was
 *              asked to, so every SEND meets receiver-not-ready NAKs (IBA
 *              9.7.5.2.8) until its receive comes; rnr_retry is 7 (retry
 *              forever), so each must complete, and the server checks every
 *              byte it received
 * -t and -r set the requester's local ACK timeout (4.096 us * 2^t) and
 * retry count (defaults 14 and 7, as rc_link.h).
 *
 * Prints "ok   OP" or "FAIL OP: why" per op and "N op(s), F failure(s)".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "rc_link.h"
#include "side_channel.h"

#define REGION_LEN ((size_t)(1u << 20))
#define WAIT_MS 60000
#define PATTERN_SEED 0x5EEDF00Du
#define WRITE_SEED 0xC0FFEE11u
#define RNR_MSG 1024u
/* Longer than the RNR timer the QPs announce (min_rnr_timer 12: 0.64 ms,
 * IBA table 45), so each SEND is NAKed several times before its receive. */
#define RNR_DELAY_MS 20

struct memory_info {
    uint32_t rkey;
    uint32_t counter_rkey;
    uint64_t addr;
    uint64_t counter_addr;
    struct rc_endpoint endpoint;
};

enum command_op { CMD_VERIFY_WRITE = 1, CMD_VERIFY_COUNTER, CMD_DONE, CMD_RNR_STORM };

struct command {
    uint32_t op;
    uint32_t reserved;
    uint64_t value; /* WRITE: bytes written; COUNTER: the value expected */
};

struct reply {
    int32_t ok;
    uint32_t reserved;
    char text[200];
};

struct side {
    struct rc_device dev;
    struct ibv_qp *qp;
    struct rc_endpoint self;
    uint8_t *buffer;
    uint64_t *counter;
    struct ibv_mr *mr, *counter_mr;
    int fd;
};

static int ops, failures;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void setup(struct side *s, const char *device, int gid_index) {
    if (rc_device_open(&s->dev, device, gid_index) != 0) {
        exit(2);
    }
    s->buffer = aligned_alloc(4096, REGION_LEN);
    s->counter = aligned_alloc(4096, 4096);
    if (s->buffer == NULL || s->counter == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                       IBV_ACCESS_REMOTE_ATOMIC;
    s->mr = ibv_reg_mr(s->dev.pd, s->buffer, REGION_LEN, access);
    s->counter_mr = ibv_reg_mr(s->dev.pd, s->counter, 4096, access);
    s->qp = s->mr && s->counter_mr ? rc_qp_create(&s->dev, &s->self) : NULL;
    if (s->qp == NULL) {
        fprintf(stderr, "ibv_reg_mr / QP: %s\n", strerror(errno));
        exit(2);
    }
}

/* CMD_RNR_STORM: `count` receives, each posted RNR_DELAY_MS late, each
 * waited for and its message checked. */
static void receive_slowly(struct side *s, uint64_t count, struct reply *r) {
    for (uint64_t i = 0; i < count && r->ok; ++i) {
        uint8_t *slot = s->buffer + i * RNR_MSG;
        memset(slot, 0, RNR_MSG);
        usleep(RNR_DELAY_MS * 1000);
        struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = RNR_MSG, .lkey = s->mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
        struct ibv_recv_wr *bad = NULL;
        struct ibv_wc wc;
        if (ibv_post_recv(s->qp, &wr, &bad) != 0 || rc_wait(&s->dev, &wc, WAIT_MS) != 1 ||
            wc.status != IBV_WC_SUCCESS || wc.byte_len != RNR_MSG) {
            r->ok = 0;
            snprintf(r->text, sizeof r->text, "receive %llu did not complete with %u bytes", (unsigned long long)i,
                     RNR_MSG);
            return;
        }
        for (uint32_t j = 0; j < RNR_MSG; ++j) {
            if (slot[j] != pattern_byte(WRITE_SEED, i * RNR_MSG + j)) {
                r->ok = 0;
                snprintf(r->text, sizeof r->text, "message %llu byte %u is 0x%02x, want 0x%02x",
                         (unsigned long long)i, j, slot[j], pattern_byte(WRITE_SEED, i * RNR_MSG + j));
                return;
            }
        }
    }
    pattern_fill(s->buffer, REGION_LEN, PATTERN_SEED, 0); /* the READ pattern again */
}

static int serve(struct side *s) {
    for (;;) {
        struct command c;
        if (side_channel_recv(s->fd, &c, sizeof c) != 0) {
            fprintf(stderr, "server: the client went away\n");
            return 1;
        }
        struct reply r = {.ok = 1};
        if (c.op == CMD_DONE) {
            printf("server: done\n");
            return side_channel_send(s->fd, &r, sizeof r) == 0 ? 0 : 1;
        }
        if (c.op == CMD_VERIFY_WRITE) {
            for (uint64_t i = 0; i < c.value && i < REGION_LEN; ++i) {
                if (s->buffer[i] != pattern_byte(WRITE_SEED, i)) {
                    r.ok = 0;
                    snprintf(r.text, sizeof r.text, "byte %llu is 0x%02x, want 0x%02x", (unsigned long long)i,
                             s->buffer[i], pattern_byte(WRITE_SEED, i));
                    break;
                }
            }
            pattern_fill(s->buffer, REGION_LEN, PATTERN_SEED, 0);  /* the READ pattern again */
        } else if (c.op == CMD_RNR_STORM) {
            receive_slowly(s, c.value, &r);
        } else if (c.op == CMD_VERIFY_COUNTER) {
            if (*s->counter != c.value) {
                r.ok = 0;
                snprintf(r.text, sizeof r.text, "counter is %llu, want %llu", (unsigned long long)*s->counter,
                         (unsigned long long)c.value);
            }
            *s->counter = 0;
        }
        if (side_channel_send(s->fd, &r, sizeof r) != 0) {
            return 1;
        }
    }
}

static void report(int ok, const char *op, const char *why) {
    ++ops;
    if (ok) {
        printf("ok   %s\n", op);
    } else {
        ++failures;
        printf("FAIL %s: %s\n", op, why);
    }
    fflush(stdout);
}

/* Posts one work request and waits for its completion; the status, or -1. */
static int post_wait(struct side *s, struct ibv_send_wr *wr, struct ibv_wc *wc) {
    struct ibv_send_wr *bad = NULL;
    wr->send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(s->qp, wr, &bad) != 0) {
        return -1;
    }
    if (rc_wait(&s->dev, wc, WAIT_MS) != 1) {
        return -1;
    }
    return (int)wc->status;
}

static int ask(struct side *s, uint32_t op, uint64_t value, struct reply *r) {
    struct command c = {.op = op, .value = value};
    return side_channel_send(s->fd, &c, sizeof c) == 0 && side_channel_recv(s->fd, r, sizeof *r) == 0 ? 0 : -1;
}

static void run_op(struct side *s, const struct memory_info *peer, const char *name, uint64_t n) {
    char op[64], why[256] = "";
    snprintf(op, sizeof op, "%s:%llu", name, (unsigned long long)n);
    struct ibv_sge sge = {.addr = (uintptr_t)s->buffer, .lkey = s->mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1};
    struct ibv_wc wc;
    struct reply r;
    if (strcmp(name, "write") == 0 || strcmp(name, "lost") == 0) {
        n = strcmp(name, "lost") == 0 ? 4096 : n;
        pattern_fill(s->buffer, n, WRITE_SEED, 0);
        sge.length = (uint32_t)n;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = peer->addr;
        wr.wr.rdma.rkey = peer->rkey;
        const double start = now_ms();
        const int st = post_wait(s, &wr, &wc);
        if (strcmp(name, "lost") == 0) {
            printf("lost: status %d (%s) after %.0f ms\n", st, st >= 0 ? ibv_wc_status_str((enum ibv_wc_status)st) : "none",
                   now_ms() - start);
            snprintf(why, sizeof why, "status %d, want IBV_WC_RETRY_EXC_ERR", st);
            report(st == IBV_WC_RETRY_EXC_ERR, op, why);
            return;
        }
        if (st != IBV_WC_SUCCESS) {
            snprintf(why, sizeof why, "completion status %d", st);
        } else if (ask(s, CMD_VERIFY_WRITE, n, &r) != 0 || !r.ok) {
            snprintf(why, sizeof why, "server: %s", r.text);
        }
    } else if (strcmp(name, "read") == 0) {
        memset(s->buffer, 0, n);
        sge.length = (uint32_t)n;
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = peer->addr;
        wr.wr.rdma.rkey = peer->rkey;
        const int st = post_wait(s, &wr, &wc);
        if (st != IBV_WC_SUCCESS) {
            snprintf(why, sizeof why, "completion status %d", st);
        }
        for (uint64_t i = 0; st == IBV_WC_SUCCESS && i < n && why[0] == 0; ++i) {
            if (s->buffer[i] != pattern_byte(PATTERN_SEED, i)) {
                snprintf(why, sizeof why, "byte %llu is 0x%02x, want 0x%02x", (unsigned long long)i, s->buffer[i],
                         pattern_byte(PATTERN_SEED, i));
            }
        }
    } else if (strcmp(name, "fadd") == 0 || strcmp(name, "cswap") == 0) {
        const int fadd = name[0] == 'f';
        sge.length = 8;
        wr.opcode = fadd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = peer->counter_addr;
        wr.wr.atomic.rkey = peer->counter_rkey;
        for (uint64_t i = 0; i < n && why[0] == 0; ++i) {
            wr.wr.atomic.compare_add = fadd ? 1 : i;
            wr.wr.atomic.swap = i + 1;
            uint64_t *old = (uint64_t *)s->buffer;
            *old = ~0ull;
            const int st = post_wait(s, &wr, &wc);
            if (st != IBV_WC_SUCCESS) {
                snprintf(why, sizeof why, "atomic %llu: completion status %d", (unsigned long long)i, st);
            } else if (*old != i) {
                snprintf(why, sizeof why, "atomic %llu returned %llu, want %llu", (unsigned long long)i,
                         (unsigned long long)*old, (unsigned long long)i);
            }
        }
        if (why[0] == 0 && (ask(s, CMD_VERIFY_COUNTER, n, &r) != 0 || !r.ok)) {
            snprintf(why, sizeof why, "server: %s", r.text);
        }
    } else if (strcmp(name, "rnr") == 0) {
        n = n > REGION_LEN / RNR_MSG ? REGION_LEN / RNR_MSG : n;
        memset(&r, 0, sizeof r);
        pattern_fill(s->buffer, n * RNR_MSG, WRITE_SEED, 0);
        /* The server starts posting its receives, slowly; the SENDs go now. */
        struct command storm = {.op = CMD_RNR_STORM, .value = n};
        if (side_channel_send(s->fd, &storm, sizeof storm) != 0) {
            snprintf(why, sizeof why, "the server went away");
        }
        for (uint64_t i = 0; i < n && why[0] == 0; ++i) {
            sge.addr = (uintptr_t)(s->buffer + i * RNR_MSG);
            sge.length = RNR_MSG;
            wr.opcode = IBV_WR_SEND;
            const int st = post_wait(s, &wr, &wc);
            if (st != IBV_WC_SUCCESS) {
                snprintf(why, sizeof why, "SEND %llu: completion status %d", (unsigned long long)i, st);
            }
        }
        if (why[0] == 0 && (side_channel_recv(s->fd, &r, sizeof r) != 0 || !r.ok)) {
            snprintf(why, sizeof why, "server: %s", r.text);
        }
    } else {
        snprintf(why, sizeof why, "unknown op");
    }
    report(why[0] == 0, op, why);
}

static int drive(struct side *s, const struct memory_info *peer, char *list) {
    for (char *item = strtok(list, ","); item != NULL; item = strtok(NULL, ",")) {
        char *colon = strchr(item, ':');
        if (colon == NULL) {
            fprintf(stderr, "op %s: expected NAME:N\n", item);
            return 2;
        }
        *colon = 0;
        run_op(s, peer, item, strtoull(colon + 1, NULL, 0));
    }
    struct reply r;
    ask(s, CMD_DONE, 0, &r);
    printf("%d op(s), %d failure(s)\n", ops, failures);
    return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *device = NULL;
    char *op_list = NULL;
    int gid_index = 0, port = 0, timeout = 14, retry = 7, c;
    while ((c = getopt(argc, argv, "d:g:p:o:t:r:")) != -1) {
        switch (c) {
            case 'd': device = optarg; break;
            case 'g': gid_index = atoi(optarg); break;
            case 'p': port = atoi(optarg); break;
            case 'o': op_list = optarg; break;
            case 't': timeout = atoi(optarg); break;
            case 'r': retry = atoi(optarg); break;
            default: return 2;
        }
    }
    const char *host = optind < argc ? argv[optind] : NULL;
    if (device == NULL || port == 0 || (host != NULL) != (op_list != NULL)) {
        fprintf(stderr, "usage: %s -d DEV -g GID -p PORT [-t T -r R] [-o OPS HOST]\n", argv[0]);
        return 2;
    }
    struct side s = {0};
    setup(&s, device, gid_index);
    /* The server's memory is ready before the client can reach it. */
    pattern_fill(s.buffer, REGION_LEN, PATTERN_SEED, 0);
    *s.counter = 0;
    struct memory_info mine = {.rkey = s.mr->rkey, .counter_rkey = s.counter_mr->rkey,
                               .addr = (uintptr_t)s.buffer, .counter_addr = (uintptr_t)s.counter,
                               .endpoint = s.self};
    struct memory_info peer;
    s.fd = host ? side_channel_connect(host, (uint16_t)port, 30) : side_channel_accept((uint16_t)port);
    if (s.fd < 0 || side_channel_send(s.fd, &mine, sizeof mine) != 0 || side_channel_recv(s.fd, &peer, sizeof peer) != 0) {
        return 2;
    }
    if (rc_qp_connect_retry(&s.dev, s.qp, &s.self, &peer.endpoint, (uint8_t)timeout, (uint8_t)retry) != 0) {
        return 2;
    }
    /* Both QPs ready before the first request: no frame is lost to a QP
     * still in INIT, so a rule's nth counts only the scenario's frames. */
    int ready = 1;
    if (side_channel_send(s.fd, &ready, sizeof ready) != 0 || side_channel_recv(s.fd, &ready, sizeof ready) != 0) {
        return 2;
    }
    return host ? drive(&s, &peer, op_list) : serve(&s);
}
