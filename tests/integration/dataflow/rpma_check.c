/* A librpma server and client (librpma 1.2, Debian's librpma-dev) that check
 * every byte: the server registers one 8 KiB region between two guard pages,
 * fills its second half with a pattern and sends the region's descriptor in
 * the connection's private data (rpma_mr_get_descriptor). The client turns
 * the descriptor into a remote region (rpma_mr_remote_from_descriptor),
 * writes the first half (rpma_write), flushes it (rpma_flush, visibility),
 * reads the second half back (rpma_read) and compares it, then disconnects.
 * The server then checks that the first half holds the client's bytes, the
 * second half its own, and both guard pages are untouched.
 *
 * The tampered mode is the SECURITY WARNING of rpma_mr_remote_from_descriptor(3):
 * the client moves the descriptor's address one region further (onto the
 * guard page) before it writes; the write must complete with a remote
 * access error, and the server (mode server-untouched) checks that nothing
 * changed, region or guards.
 *
 * usage: rpma_check server|server-untouched|client|client-tampered ADDRESS PORT
 * exit 0 when every check passed; the first failure is printed. */
#include <librpma.h>

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kHalf = 4096, kRegion = 2 * kHalf, kGuard = 4096, kGuardByte = 0xEE };

static uint8_t written_byte(size_t i) { return (uint8_t)(i * 13 + 1); }  /* the client's half */
static uint8_t served_byte(size_t i) { return (uint8_t)(i * 7 + 3); }    /* the server's half */

static int fail(const char *what, int ret) {
    fprintf(stderr, "rpma_check: %s failed: %s (%d)\n", what, rpma_err_2str(ret), ret);
    return 1;
}

#define CHECK(call)                          \
    do {                                     \
        int ret_ = (call);                   \
        if (ret_ != 0) return fail(#call, ret_); \
    } while (0)

static int expect_event(struct rpma_conn *conn, enum rpma_conn_event want) {
    enum rpma_conn_event got = RPMA_CONN_UNDEFINED;
    CHECK(rpma_conn_next_event(conn, &got));
    if (got != want) {
        fprintf(stderr, "rpma_check: connection event %s, expected %s\n", rpma_utils_conn_event_2str(got),
                rpma_utils_conn_event_2str(want));
        return 1;
    }
    return 0;
}

/* Waits for the one completion an operation asked for; it must be a success. */
static int wait_completion(struct rpma_conn *conn, const char *what) {
    struct rpma_cq *cq = NULL;
    CHECK(rpma_conn_get_cq(conn, &cq));
    struct ibv_wc wc;
    int got = 0;
    for (;;) {
        int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
        if (ret == 0 && got == 1) break;
        if (ret != RPMA_E_NO_COMPLETION) return fail("rpma_cq_get_wc", ret);
        CHECK(rpma_cq_wait(cq));
    }
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "rpma_check: %s completed with %s\n", what, ibv_wc_status_str(wc.status));
        return 1;
    }
    return 0;
}

static int run_server(const char *addr, const char *port, int expect_written) {
    struct ibv_context *ibv = NULL;
    struct rpma_peer *peer = NULL;
    CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ibv));
    CHECK(rpma_peer_new(ibv, &peer));
    uint8_t *mem = aligned_alloc(4096, kGuard + kRegion + kGuard);
    memset(mem, kGuardByte, kGuard + kRegion + kGuard);
    uint8_t *region = mem + kGuard;
    memset(region, 0, kHalf);
    for (size_t i = 0; i < kHalf; ++i) region[kHalf + i] = served_byte(i);
    struct rpma_mr_local *mr = NULL;
    CHECK(rpma_mr_reg(peer, region, kRegion,
                      RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr));
    size_t desc_size = 0;
    CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
    uint8_t desc[64];
    if (desc_size > sizeof desc) return fail("descriptor size", -1);
    CHECK(rpma_mr_get_descriptor(mr, desc));

    struct rpma_ep *ep = NULL;
    CHECK(rpma_ep_listen(peer, addr, port, &ep));
    printf("server: listening\n");
    fflush(stdout);
    struct rpma_conn_req *req = NULL;
    CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
    struct rpma_conn_private_data pdata = {desc, (uint8_t)desc_size};
    struct rpma_conn *conn = NULL;
    CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
    if (expect_event(conn, RPMA_CONN_ESTABLISHED)) return 1;
    enum rpma_conn_event end = RPMA_CONN_UNDEFINED;
    CHECK(rpma_conn_next_event(conn, &end));
    if (end != RPMA_CONN_CLOSED && (expect_written || end != RPMA_CONN_LOST)) {
        fprintf(stderr, "rpma_check: connection event %s at the end\n", rpma_utils_conn_event_2str(end));
        return 1;
    }

    for (size_t i = 0; i < kHalf; ++i) {
        const uint8_t first = expect_written ? written_byte(i) : 0;
        if (region[i] != first || region[kHalf + i] != served_byte(i)) {
            fprintf(stderr, "rpma_check: server byte %zu wrong\n", i);
            return 1;
        }
    }
    for (size_t i = 0; i < kGuard; ++i) {
        if (mem[i] != kGuardByte || mem[kGuard + kRegion + i] != kGuardByte) {
            fprintf(stderr, "rpma_check: guard byte %zu outside the region changed\n", i);
            return 1;
        }
    }
    printf("server: %d bytes checked, guards untouched\n", kRegion);
    CHECK(rpma_conn_disconnect(conn));
    CHECK(rpma_conn_delete(&conn));
    CHECK(rpma_ep_shutdown(&ep));
    CHECK(rpma_mr_dereg(&mr));
    CHECK(rpma_peer_delete(&peer));
    free(mem);
    return 0;
}

/* The descriptor's first field is the region's address (little endian). */
static void move_descriptor_address(uint8_t *desc, uint64_t by) {
    uint64_t raddr = 0;
    for (int i = 7; i >= 0; --i) raddr = (raddr << 8) | desc[i];
    raddr += by;
    for (int i = 0; i < 8; ++i) desc[i] = (uint8_t)(raddr >> (8 * i));
}

/* A write through a tampered descriptor must fail with a remote access error. */
static int write_tampered(struct rpma_conn *conn, struct rpma_mr_local *mr, const struct rpma_conn_private_data *pdata) {
    uint8_t desc[256];
    memcpy(desc, pdata->ptr, pdata->len);
    move_descriptor_address(desc, kRegion);
    struct rpma_mr_remote *remote = NULL;
    CHECK(rpma_mr_remote_from_descriptor(desc, pdata->len, &remote));
    CHECK(rpma_write(conn, remote, 0, mr, 0, kHalf, RPMA_F_COMPLETION_ALWAYS, NULL));
    struct rpma_cq *cq = NULL;
    CHECK(rpma_conn_get_cq(conn, &cq));
    struct ibv_wc wc;
    int got = 0;
    for (;;) {
        int ret = rpma_cq_get_wc(cq, 1, &wc, &got);
        if (ret == 0 && got == 1) break;
        if (ret != RPMA_E_NO_COMPLETION) return fail("rpma_cq_get_wc", ret);
        CHECK(rpma_cq_wait(cq));
    }
    if (wc.status != IBV_WC_REM_ACCESS_ERR) {
        fprintf(stderr, "rpma_check: tampered write completed with %s, expected %s\n", ibv_wc_status_str(wc.status),
                ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
        return 1;
    }
    printf("client: tampered write refused: %s\n", ibv_wc_status_str(wc.status));
    CHECK(rpma_mr_remote_delete(&remote));
    return 0;
}

static int run_client(const char *addr, const char *port, int tamper) {
    struct ibv_context *ibv = NULL;
    struct rpma_peer *peer = NULL;
    CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ibv));
    CHECK(rpma_peer_new(ibv, &peer));
    uint8_t *local = aligned_alloc(4096, kRegion);
    for (size_t i = 0; i < kHalf; ++i) local[i] = written_byte(i);
    memset(local + kHalf, 0, kHalf);
    struct rpma_mr_local *mr = NULL;
    CHECK(rpma_mr_reg(peer, local, kRegion, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST, &mr));

    struct rpma_conn_req *req = NULL;
    CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
    struct rpma_conn *conn = NULL;
    CHECK(rpma_conn_req_connect(&req, NULL, &conn));
    if (expect_event(conn, RPMA_CONN_ESTABLISHED)) return 1;
    struct rpma_conn_private_data pdata;
    CHECK(rpma_conn_get_private_data(conn, &pdata));
    if (tamper) {
        if (write_tampered(conn, mr, &pdata)) return 1;
        CHECK(rpma_conn_disconnect(conn));
        CHECK(rpma_conn_delete(&conn));
        CHECK(rpma_mr_dereg(&mr));
        CHECK(rpma_peer_delete(&peer));
        free(local);
        return 0;
    }
    struct rpma_mr_remote *remote = NULL;
    CHECK(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote));
    size_t remote_size = 0;
    CHECK(rpma_mr_remote_get_size(remote, &remote_size));
    if (remote_size != kRegion) {
        fprintf(stderr, "rpma_check: remote region of %zu bytes, expected %d\n", remote_size, kRegion);
        return 1;
    }

    CHECK(rpma_write(conn, remote, 0, mr, 0, kHalf, RPMA_F_COMPLETION_ALWAYS, NULL));
    if (wait_completion(conn, "rpma_write")) return 1;
    CHECK(rpma_flush(conn, remote, 0, kHalf, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, NULL));
    if (wait_completion(conn, "rpma_flush")) return 1;
    CHECK(rpma_read(conn, mr, kHalf, remote, kHalf, kHalf, RPMA_F_COMPLETION_ALWAYS, NULL));
    if (wait_completion(conn, "rpma_read")) return 1;
    for (size_t i = 0; i < kHalf; ++i) {
        if (local[kHalf + i] != served_byte(i)) {
            fprintf(stderr, "rpma_check: byte %zu read back wrong\n", i);
            return 1;
        }
    }
    printf("client: wrote %d, flushed, read %d bytes back, all checked\n", kHalf, kHalf);
    CHECK(rpma_conn_disconnect(conn));
    if (expect_event(conn, RPMA_CONN_CLOSED)) return 1;
    CHECK(rpma_conn_delete(&conn));
    CHECK(rpma_mr_remote_delete(&remote));
    CHECK(rpma_mr_dereg(&mr));
    CHECK(rpma_peer_delete(&peer));
    free(local);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "server") == 0) return run_server(argv[2], argv[3], 1);
    if (argc == 4 && strcmp(argv[1], "server-untouched") == 0) return run_server(argv[2], argv[3], 0);
    if (argc == 4 && strcmp(argv[1], "client") == 0) return run_client(argv[2], argv[3], 0);
    if (argc == 4 && strcmp(argv[1], "client-tampered") == 0) return run_client(argv[2], argv[3], 1);
    fprintf(stderr, "usage: rpma_check server|server-untouched|client|client-tampered ADDRESS PORT\n");
    return 2;
}
