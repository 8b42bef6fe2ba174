/*
 * byte_check: every byte of RDMA WRITE, RDMA READ and SEND transfers through
 * a verbs device, at sizes around path-MTU boundaries and at unaligned
 * offsets, and remote access errors (bad rkey, an MR without REMOTE_WRITE,
 * one byte out of range) that must complete with IBV_WC_REM_ACCESS_ERR
 * without changing a byte anywhere.
 *
 *   byte_check -d DEVICE -g GID_INDEX -p TCP_PORT              the server (target)
 *   byte_check -d DEVICE -g GID_INDEX -p TCP_PORT SERVER_HOST  the client (requester)
 *
 * Like ibv_rc_pingpong, the two processes meet over TCP (side_channel.h) and
 * may use one device (the loopback port) or two daemons on the two ends of a
 * link. The client drives: for each case it asks the server to lay out its
 * memory, posts the transfer, waits for its completion and asks the server
 * to check every byte of its buffers. Every buffer is an arena (arena.h):
 * the MR covers only the middle, guard bytes around it must stay untouched.
 *
 * The client prints one line per case and "N case(s), F failure(s)"; both
 * exit 0 only when nothing failed. A transfer that cannot be posted or does
 * not complete within TRANSFER_TIMEOUT_MS stops the run (nothing after it
 * could complete either).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "rc_link.h"
#include "side_channel.h"

/* The region of every arena: past 1 MiB (the largest transfer) with room
 * for offsets, and not a multiple of the page size, so the guard after it
 * shares the region's last page. */
#define REGION_LEN ((size_t)(1u << 20) + 4099u)
#define TRANSFER_TIMEOUT_MS 30000
#define PROTOCOL_MAGIC 0x4B434842u /* "BHCK" */

/* The server's memory, told to the client once. */
struct memory_info {
    uint32_t magic;
    uint32_t target_rkey;   /* LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ */
    uint32_t readonly_rkey; /* REMOTE_READ only: no REMOTE_WRITE */
    uint32_t other_keys[3]; /* keys of its other MRs: never used as the "bad" rkey */
    uint64_t target_addr;
    uint64_t readonly_addr;
    uint64_t region_len;
};

enum command_op { CMD_CONNECT = 1, CMD_RESET, CMD_VERIFY, CMD_POST_RECV, CMD_CHECK_RECV, CMD_DONE };
enum region_id { REGION_TARGET, REGION_READONLY };

struct command {
    uint32_t op;
    uint32_t region;
    uint32_t seed;
    uint32_t background;
    uint64_t off;
    uint64_t len;
    struct rc_endpoint endpoint; /* CMD_CONNECT: the client's new QP */
};

struct reply {
    int32_t ok;
    uint32_t reserved;
    struct rc_endpoint endpoint; /* CMD_CONNECT: the server's new QP */
    char text[256];              /* what was wrong, when !ok */
};

/* One end: the device, its QP and its four arenas. */
struct side {
    struct rc_device dev;
    struct ibv_qp *qp;
    struct rc_endpoint self;
    struct arena target, readonly, local, src;
    struct ibv_mr *target_mr, *readonly_mr, *local_mr, *src_mr;
    int fd;
};

static int cases, failures;

static void report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) {
        ++failures;
    }
}

static int finish(void) {
    printf("%d case(s), %d failure(s)\n", cases, failures);
    return failures == 0 ? 0 : 1;
}

static void stop_run(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void stop_run(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL ");
    vprintf(fmt, ap);
    printf(" -- stopping: nothing after this could complete\n");
    va_end(ap);
    ++failures;
    finish();
    exit(1);
}

static struct ibv_mr *register_region(struct side *s, struct arena *a, int access, const char *what) {
    if (arena_alloc(a, REGION_LEN) != 0) {
        stop_run("cannot allocate the %s arena", what);
    }
    arena_reset(a, background_seed(0));
    struct ibv_mr *mr = ibv_reg_mr(s->dev.pd, arena_region(a), a->len, access);
    if (mr == NULL) {
        stop_run("ibv_reg_mr(%s): %s", what, strerror(errno));
    }
    /* Registration may remap the pages (docs: DMA into client memory); the
     * contents, guards included, must stay as they were. */
    char why[256] = "";
    if (arena_verify(a, 0, 0, background_seed(0), background_seed(0), why, sizeof why) != 0) {
        report(0, "registering the %s MR changed the memory: %s", what, why);
    }
    return mr;
}

static void side_setup(struct side *s, const char *device, int gid_index) {
    if (rc_device_open(&s->dev, device, gid_index) != 0) {
        stop_run("cannot open %s", device);
    }
    s->target_mr = register_region(s, &s->target, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                      IBV_ACCESS_REMOTE_READ, "target");
    s->readonly_mr = register_region(s, &s->readonly, IBV_ACCESS_REMOTE_READ, "read-only");
    s->local_mr = register_region(s, &s->local, IBV_ACCESS_LOCAL_WRITE, "local");
    s->src_mr = register_region(s, &s->src, IBV_ACCESS_LOCAL_WRITE, "source");
}

/* A fresh QP, in RESET; the old one (perhaps in the error state) goes. */
static void side_new_qp(struct side *s) {
    if (s->qp != NULL) {
        ibv_destroy_qp(s->qp);
        struct ibv_wc wc;
        while (ibv_poll_cq(s->dev.cq, 1, &wc) > 0) {
            /* completions of the old QP (flushed WQEs) do not belong to the next case */
        }
    }
    s->qp = rc_qp_create(&s->dev, &s->self);
    if (s->qp == NULL) {
        stop_run("cannot create a QP");
    }
}

/* ---- server ------------------------------------------------------------ */

static struct arena *server_region(struct side *s, uint32_t region) {
    return region == REGION_READONLY ? &s->readonly : &s->target;
}

static void server_post_recv(struct side *s, const struct command *c, struct reply *r) {
    arena_reset(&s->local, c->background);
    struct ibv_sge sge = {.addr = (uintptr_t)arena_region(&s->local), .length = (uint32_t)c->len,
                          .lkey = s->local_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad = NULL;
    const int rc = ibv_post_recv(s->qp, &wr, &bad);
    r->ok = rc == 0;
    if (rc != 0) {
        snprintf(r->text, sizeof r->text, "server: ibv_post_recv: %s (%d)", strerror(rc), rc);
    }
}

static void server_check_recv(struct side *s, const struct command *c, struct reply *r) {
    struct ibv_wc wc;
    const int got = rc_wait(&s->dev, &wc, TRANSFER_TIMEOUT_MS);
    r->ok = 0;
    if (got <= 0) {
        snprintf(r->text, sizeof r->text, "server: %s", got == 0 ? "no receive completion" : "ibv_poll_cq failed");
    } else if (wc.status != IBV_WC_SUCCESS) {
        snprintf(r->text, sizeof r->text, "server: receive completed with %s (%d)", ibv_wc_status_str(wc.status),
                 wc.status);
    } else if (wc.opcode != IBV_WC_RECV || wc.wr_id != 7 || wc.byte_len != c->len) {
        snprintf(r->text, sizeof r->text, "server: receive completion opcode %d wr_id %llu byte_len %u, want %d 7 %llu",
                 wc.opcode, (unsigned long long)wc.wr_id, wc.byte_len, IBV_WC_RECV, (unsigned long long)c->len);
    } else {
        r->ok = arena_verify(&s->local, 0, c->len, c->seed, c->background, r->text, sizeof r->text) == 0;
    }
}

static int run_server(struct side *s, uint16_t port) {
    s->fd = side_channel_accept(port);
    if (s->fd < 0) {
        return 1;
    }
    struct memory_info info = {
        .magic = PROTOCOL_MAGIC,
        .target_rkey = s->target_mr->rkey,
        .readonly_rkey = s->readonly_mr->rkey,
        .other_keys = {s->local_mr->rkey, s->src_mr->lkey, s->target_mr->lkey},
        .target_addr = (uintptr_t)arena_region(&s->target),
        .readonly_addr = (uintptr_t)arena_region(&s->readonly),
        .region_len = REGION_LEN,
    };
    if (side_channel_send(s->fd, &info, sizeof info) != 0) {
        fprintf(stderr, "the client went away\n");
        return 1;
    }
    for (;;) {
        struct command c;
        if (side_channel_recv(s->fd, &c, sizeof c) != 0) {
            printf("FAIL the client went away before it said it was done\n");
            return 1;
        }
        struct reply r = {.ok = 1};
        switch (c.op) {
        case CMD_CONNECT:
            side_new_qp(s);
            r.endpoint = s->self;
            r.ok = rc_qp_connect(&s->dev, s->qp, &s->self, &c.endpoint) == 0;
            if (!r.ok) {
                snprintf(r.text, sizeof r.text, "server: cannot connect its QP (see its output)");
            }
            break;
        case CMD_RESET:
            arena_reset(server_region(s, c.region), c.background);
            break;
        case CMD_VERIFY:
            r.ok = arena_verify(server_region(s, c.region), c.off, c.len, c.seed, c.background, r.text,
                                sizeof r.text) == 0;
            break;
        case CMD_POST_RECV:
            server_post_recv(s, &c, &r);
            break;
        case CMD_CHECK_RECV:
            server_check_recv(s, &c, &r);
            break;
        case CMD_DONE:
            break;
        default:
            printf("FAIL unknown command %u\n", c.op);
            return 1;
        }
        if (side_channel_send(s->fd, &r, sizeof r) != 0) {
            printf("FAIL the client went away\n");
            return 1;
        }
        if (c.op == CMD_DONE) {
            printf("server: done\n");
            return 0;
        }
    }
}

/* ---- client ------------------------------------------------------------ */

struct client {
    struct side side;
    struct memory_info server;
    uint32_t bad_rkey;
    uint32_t mtu;
    uint64_t next_wr_id;
};

static struct reply call(struct client *c, struct command cmd) {
    struct reply r;
    if (side_channel_send(c->side.fd, &cmd, sizeof cmd) != 0 || side_channel_recv(c->side.fd, &r, sizeof r) != 0) {
        stop_run("the server went away (command %u)", cmd.op);
    }
    return r;
}

static void server_reset(struct client *c, uint32_t region, uint32_t background) {
    struct reply r = call(c, (struct command){.op = CMD_RESET, .region = region, .background = background});
    if (!r.ok) {
        stop_run("server reset: %s", r.text);
    }
}

/* The server's check of a whole arena (see arena_verify); on failure,
 * why holds the server's description. */
static int server_verify(struct client *c, uint32_t region, size_t off, size_t n, uint32_t seed, uint32_t background,
                         char *why, size_t why_len) {
    struct reply r = call(c, (struct command){.op = CMD_VERIFY, .region = region, .seed = seed,
                                              .background = background, .off = off, .len = n});
    if (!r.ok) {
        snprintf(why, why_len, "server %s arena: %s", region == REGION_READONLY ? "read-only" : "target", r.text);
    }
    return r.ok;
}

/* The client's check of its own local arena (the RDMA READ landing zone). */
static int local_verify(struct client *c, size_t off, size_t n, uint32_t seed, uint32_t background, char *why,
                        size_t why_len) {
    char text[256] = "";
    if (arena_verify(&c->side.local, off, n, seed, background, text, sizeof text) == 0) {
        return 1;
    }
    snprintf(why, why_len, "client local arena: %s", text);
    return 0;
}

static void connect_qps(struct client *c) {
    side_new_qp(&c->side);
    struct reply r = call(c, (struct command){.op = CMD_CONNECT, .endpoint = c->side.self});
    if (!r.ok) {
        stop_run("%s", r.text);
    }
    if (rc_qp_connect(&c->side.dev, c->side.qp, &c->side.self, &r.endpoint) != 0) {
        stop_run("cannot connect the client's QP");
    }
    c->mtu = rc_mtu_bytes((enum ibv_mtu)(r.endpoint.mtu < c->side.self.mtu ? r.endpoint.mtu : c->side.self.mtu));
}

static const char *opcode_name(enum ibv_wr_opcode op) {
    return op == IBV_WR_RDMA_WRITE ? "RDMA WRITE" : op == IBV_WR_RDMA_READ ? "RDMA READ" : "SEND";
}

/* Posts one signaled work request and waits for its completion. */
static struct ibv_wc transfer(struct client *c, enum ibv_wr_opcode op, void *local, size_t n, uint32_t lkey,
                              uint64_t remote_addr, uint32_t rkey) {
    struct ibv_sge sge = {.addr = (uintptr_t)local, .length = (uint32_t)n, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = ++c->next_wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED};
    if (op != IBV_WR_SEND) {
        wr.wr.rdma.remote_addr = remote_addr;
        wr.wr.rdma.rkey = rkey;
    }
    struct ibv_send_wr *bad = NULL;
    const int rc = ibv_post_send(c->side.qp, &wr, &bad);
    if (rc != 0) {
        stop_run("ibv_post_send(%s, %zu B): %s (%d)", opcode_name(op), n, strerror(rc), rc);
    }
    struct ibv_wc wc;
    const int got = rc_wait(&c->side.dev, &wc, TRANSFER_TIMEOUT_MS);
    if (got == 0) {
        stop_run("%s of %zu B: no completion within %d ms", opcode_name(op), n, TRANSFER_TIMEOUT_MS);
    }
    if (got < 0) {
        stop_run("ibv_poll_cq failed");
    }
    if (wc.wr_id != wr.wr_id) {
        stop_run("%s of %zu B: completion for wr_id %llu, want %llu", opcode_name(op), n,
                 (unsigned long long)wc.wr_id, (unsigned long long)wr.wr_id);
    }
    return wc;
}

/* A successful completion of `op`, or a failure line (and fresh QPs, since
 * an error completion leaves the QP in the error state). */
static int completed_ok(struct client *c, const struct ibv_wc *wc, enum ibv_wc_opcode want, const char *what) {
    if (wc->status == IBV_WC_SUCCESS && wc->opcode == want) {
        return 1;
    }
    report(0, "%s: completed with %s (%d), opcode %d; want success, opcode %d", what, ibv_wc_status_str(wc->status),
           wc->status, wc->opcode, want);
    if (wc->status != IBV_WC_SUCCESS) {
        connect_qps(c);
    }
    return 0;
}

static uint32_t next_seed(void) { return (uint32_t)++cases; }

static void case_write(struct client *c, size_t n, size_t off) {
    const uint32_t seed = next_seed(), bg = background_seed((uint32_t)cases);
    char what[96], why[320] = "";
    snprintf(what, sizeof what, "RDMA WRITE %zu B at offset %zu, pattern %u", n, off, seed % 5);
    server_reset(c, REGION_TARGET, bg);
    pattern_fill(arena_region(&c->side.src), n, seed, off);
    struct ibv_wc wc = transfer(c, IBV_WR_RDMA_WRITE, arena_region(&c->side.src), n, c->side.src_mr->lkey,
                                c->server.target_addr + off, c->server.target_rkey);
    if (completed_ok(c, &wc, IBV_WC_RDMA_WRITE, what)) {
        const int ok = server_verify(c, REGION_TARGET, off, n, seed, bg, why, sizeof why);
        report(ok, "%s%s%s", what, ok ? ": every byte in place, none outside it changed" : ": ", why);
    }
}

static void case_read(struct client *c, uint32_t region, size_t n, size_t off) {
    const uint32_t seed = next_seed(), bg = background_seed((uint32_t)cases);
    const int ro = region == REGION_READONLY;
    char what[128], why[320] = "";
    snprintf(what, sizeof what, "RDMA READ %zu B from offset %zu%s, pattern %u", n, off,
             ro ? " of the MR without REMOTE_WRITE" : "", seed % 5);
    server_reset(c, region, seed);
    arena_reset(&c->side.local, bg);
    struct ibv_wc wc = transfer(c, IBV_WR_RDMA_READ, arena_region(&c->side.local) + off, n, c->side.local_mr->lkey,
                                (ro ? c->server.readonly_addr : c->server.target_addr) + off,
                                ro ? c->server.readonly_rkey : c->server.target_rkey);
    if (completed_ok(c, &wc, IBV_WC_RDMA_READ, what)) {
        int ok = local_verify(c, off, n, seed, bg, why, sizeof why) &&
                 server_verify(c, region, 0, 0, seed, seed, why, sizeof why);
        report(ok, "%s%s%s", what, ok ? ": every byte in place, the source unchanged" : ": ", why);
    }
}

static void case_send(struct client *c, size_t n) {
    const uint32_t seed = next_seed(), bg = background_seed((uint32_t)cases);
    char what[96];
    snprintf(what, sizeof what, "SEND %zu B into a %zu-byte receive buffer, pattern %u", n, n + 5, seed % 5);
    struct reply r = call(c, (struct command){.op = CMD_POST_RECV, .background = bg, .len = n + 5});
    if (!r.ok) {
        stop_run("%s", r.text);
    }
    pattern_fill(arena_region(&c->side.src), n, seed, 0);
    struct ibv_wc wc = transfer(c, IBV_WR_SEND, arena_region(&c->side.src), n, c->side.src_mr->lkey, 0, 0);
    if (completed_ok(c, &wc, IBV_WC_SEND, what)) {
        r = call(c, (struct command){.op = CMD_CHECK_RECV, .seed = seed, .background = bg, .len = n});
        report(r.ok, "%s%s%s", what, r.ok ? ": every byte in place, byte_len right, nothing else changed" : ": ",
               r.text);
    }
}

/* An access the server's MRs do not allow: the requester's completion is
 * IBV_WC_REM_ACCESS_ERR, and no byte of any arena on either side changed.
 * Runs on fresh QPs, after a READ that shows the new connection works. */
static void case_access_error(struct client *c, const char *why_bad, enum ibv_wr_opcode op, size_t n,
                              uint64_t remote_addr, uint32_t rkey) {
    const uint32_t seed = next_seed();
    const uint32_t bg_target = background_seed(3 * (uint32_t)cases), bg_ro = background_seed(3 * (uint32_t)cases + 1),
                   bg_local = background_seed(3 * (uint32_t)cases + 2);
    char what[160], why[320] = "";
    snprintf(what, sizeof what, "%s of %zu B %s", opcode_name(op), n, why_bad);
    connect_qps(c);
    server_reset(c, REGION_TARGET, bg_target);
    server_reset(c, REGION_READONLY, bg_ro);
    arena_reset(&c->side.local, bg_local);

    uint8_t *control = arena_region(&c->side.src);
    struct ibv_wc wc = transfer(c, IBV_WR_RDMA_READ, control, 8, c->side.src_mr->lkey, c->server.target_addr,
                                c->server.target_rkey);
    if (!completed_ok(c, &wc, IBV_WC_RDMA_READ, "control READ of 8 B on a fresh connection")) {
        return;
    }
    for (uint64_t k = 0; k < 8; ++k) {
        if (control[k] != pattern_byte(bg_target, k)) {
            report(0, "control READ of 8 B: byte %llu is 0x%02x, want 0x%02x", (unsigned long long)k, control[k],
                   pattern_byte(bg_target, k));
            return;
        }
    }

    pattern_fill(arena_region(&c->side.src), n, seed, 0);
    void *local = op == IBV_WR_RDMA_READ ? (void *)arena_region(&c->side.local) : (void *)arena_region(&c->side.src);
    const uint32_t lkey = op == IBV_WR_RDMA_READ ? c->side.local_mr->lkey : c->side.src_mr->lkey;
    wc = transfer(c, op, local, n, lkey, remote_addr, rkey);
    const int unchanged = server_verify(c, REGION_TARGET, 0, 0, bg_target, bg_target, why, sizeof why) &&
                          server_verify(c, REGION_READONLY, 0, 0, bg_ro, bg_ro, why, sizeof why) &&
                          local_verify(c, 0, 0, bg_local, bg_local, why, sizeof why);
    if (wc.status != IBV_WC_REM_ACCESS_ERR) {
        report(0, "%s: completed with %s (%d), want IBV_WC_REM_ACCESS_ERR%s%s", what, ibv_wc_status_str(wc.status),
               wc.status, unchanged ? "" : "; and a byte changed: ", why);
    } else {
        report(unchanged, "%s: IBV_WC_REM_ACCESS_ERR%s%s", what,
               unchanged ? ", no byte changed on either side" : ", but a byte changed: ", why);
    }
}

/* An rkey no MR of either side has. */
static uint32_t pick_bad_rkey(const struct client *c) {
    const uint32_t taken[] = {c->server.target_rkey, c->server.readonly_rkey, c->server.other_keys[0],
                              c->server.other_keys[1], c->server.other_keys[2], c->side.target_mr->rkey,
                              c->side.readonly_mr->rkey, c->side.local_mr->rkey, c->side.src_mr->lkey};
    uint32_t key = c->server.target_rkey ^ 0x5A5A5A00u;
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof taken / sizeof taken[0]; ++i) {
            if (key == taken[i]) {
                key += 0x01000001u;
                again = 1;
            }
        }
    }
    return key;
}

static int run_client(struct client *c, const char *host, uint16_t port) {
    c->side.fd = side_channel_connect(host, port, 20);
    if (c->side.fd < 0 || side_channel_recv(c->side.fd, &c->server, sizeof c->server) != 0) {
        stop_run("no side channel to %s:%u", host, port);
    }
    if (c->server.magic != PROTOCOL_MAGIC || c->server.region_len != REGION_LEN) {
        stop_run("the server is not a byte_check of this version");
    }
    c->bad_rkey = pick_bad_rkey(c);
    connect_qps(c);
    const size_t mtu = c->mtu, end = REGION_LEN;
    printf("path MTU %zu B, region %zu B with %u guard bytes on each side\n", mtu, end, ARENA_GUARD);

    const size_t sizes[] = {1, 2, mtu - 1, mtu, mtu + 1, 2 * mtu - 1, 2 * mtu, 2 * mtu + 1, 4096 + 3, 65536 + 3,
                            (size_t)1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        const size_t n = sizes[i];
        const size_t offsets[] = {0, 1, end - n}; /* aligned, unaligned, ending at the MR's last byte */
        for (size_t j = 0; j < 3; ++j) {
            case_write(c, n, offsets[j]);
            case_read(c, REGION_TARGET, n, offsets[j]);
        }
        case_send(c, n);
    }
    case_read(c, REGION_READONLY, 2 * mtu + 1, 3); /* REMOTE_READ alone allows reading */

    const uint64_t target = c->server.target_addr, ro = c->server.readonly_addr;
    const uint32_t rkey = c->server.target_rkey, ro_rkey = c->server.readonly_rkey;
    const size_t multi = 2 * mtu + 1;
    case_access_error(c, "with an rkey no MR has", IBV_WR_RDMA_WRITE, 1, target, c->bad_rkey);
    case_access_error(c, "with an rkey no MR has", IBV_WR_RDMA_WRITE, multi, target, c->bad_rkey);
    case_access_error(c, "with an rkey no MR has", IBV_WR_RDMA_READ, 1, target, c->bad_rkey);
    case_access_error(c, "into the MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, 1, ro, ro_rkey);
    case_access_error(c, "into the MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, multi, ro + 5, ro_rkey);
    case_access_error(c, "starting one byte past the MR's end", IBV_WR_RDMA_WRITE, 1, target + end, rkey);
    case_access_error(c, "ending one byte past the MR's end", IBV_WR_RDMA_WRITE, multi, target + end - multi + 1,
                      rkey);
    case_access_error(c, "starting one byte before the MR", IBV_WR_RDMA_WRITE, 2, target - 1, rkey);
    case_access_error(c, "starting one byte before the MR", IBV_WR_RDMA_WRITE, multi, target - 1, rkey);
    case_access_error(c, "ending one byte past the MR's end", IBV_WR_RDMA_READ, mtu + 1, target + end - mtu, rkey);
    case_access_error(c, "starting one byte before the MR", IBV_WR_RDMA_READ, 1, target - 1, rkey);

    struct reply r = call(c, (struct command){.op = CMD_DONE});
    (void)r;
    return finish();
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s -d DEVICE -g GID_INDEX -p TCP_PORT [SERVER_HOST]\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    const char *device = NULL;
    int gid_index = -1;
    long port = -1;
    for (int opt; (opt = getopt(argc, argv, "d:g:p:")) != -1;) {
        switch (opt) {
        case 'd':
            device = optarg;
            break;
        case 'g':
            gid_index = atoi(optarg);
            break;
        case 'p':
            port = strtol(optarg, NULL, 10);
            break;
        default:
            usage(argv[0]);
        }
    }
    if (device == NULL || gid_index < 0 || port <= 0 || port > 65535 || argc - optind > 1) {
        usage(argv[0]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    srandom((unsigned)(now.tv_nsec ^ getpid()));

    if (optind == argc) {
        struct side server;
        memset(&server, 0, sizeof server);
        side_setup(&server, device, gid_index);
        return run_server(&server, (uint16_t)port);
    }
    struct client client;
    memset(&client, 0, sizeof client);
    side_setup(&client.side, device, gid_index);
    return run_client(&client, argv[optind], (uint16_t)port);
}
