/* Registration rate through uroce (issue 10 item 7): registers COUNT
 * distinct small malloc'd buffers (one MR each), deregisters them, ROUNDS
 * times (0: until killed), and prints one line per round:
 *   "round R: COUNT MRs registered in S s: RATE MRs/s; deregistered: RATE MRs/s"
 * Run by tools/bench/reg_bench.py; prints figures, asserts nothing.
 *
 * usage: reg_flood DEVICE COUNT ROUNDS [SIZE] */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct ibv_context *open_named(const char *name) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_context *ctx = NULL;
    for (int i = 0; list != NULL && i < n && ctx == NULL; ++i) {
        if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
    return ctx;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s DEVICE COUNT ROUNDS [SIZE]\n", argv[0]);
        return 2;
    }
    const size_t count = strtoul(argv[2], NULL, 10);
    const long rounds = strtol(argv[3], NULL, 10);
    const size_t size = argc > 4 ? strtoul(argv[4], NULL, 10) : 256;
    struct ibv_context *ctx = open_named(argv[1]);
    struct ibv_pd *pd = ctx != NULL ? ibv_alloc_pd(ctx) : NULL;
    void **bufs = calloc(count, sizeof *bufs);
    struct ibv_mr **mrs = calloc(count, sizeof *mrs);
    if (pd == NULL || bufs == NULL || mrs == NULL) {
        fprintf(stderr, "cannot open %s or allocate\n", argv[1]);
        return 1;
    }
    for (size_t i = 0; i < count; ++i) {
        bufs[i] = malloc(size);
        if (bufs[i] == NULL) {
            return 1;
        }
        memset(bufs[i], (int)i, size);
    }
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    for (long r = 1; rounds == 0 || r <= rounds; ++r) {
        const double t0 = now_s();
        for (size_t i = 0; i < count; ++i) {
            mrs[i] = ibv_reg_mr(pd, bufs[i], size, access);
            if (mrs[i] == NULL) {
                perror("ibv_reg_mr");
                return 1;
            }
        }
        const double t1 = now_s();
        for (size_t i = 0; i < count; ++i) {
            ibv_dereg_mr(mrs[i]);
        }
        const double t2 = now_s();
        printf("round %ld: %zu MRs registered in %.3f s: %.0f MRs/s; deregistered: %.0f MRs/s\n", r, count, t1 - t0,
               (double)count / (t1 - t0), (double)count / (t2 - t1));
        fflush(stdout);
    }
    return 0;
}
