/* ibv_reg_dmabuf_mr regions that move data, through stock libibverbs
 * against a running uroced (run as `uroce exec -- dmabuf_mr KIND`). The
 * daemon maps the dma-buf the fd names and serves the MR from that mapping
 * (docs/memory-registration.md). Two RC QPs connected over the loopback
 * port: RDMA WRITE into the dma-buf MR and RDMA READ out of it, and a SEND
 * received into it, each checked byte for byte in the buffer's own pages.
 *
 * KIND is
 *   udmabuf  a real dma-buf: a sealed memfd turned into one by /dev/udmabuf
 *            (UDMABUF_CREATE). Where /dev/udmabuf does not exist (a kernel
 *            without CONFIG_UDMABUF) the program prints "SKIP: <reason>" and
 *            exits 77.
 *   memfd    the same with the sealed memfd itself handed over in place of
 *            the dma-buf: the daemon's mapping path runs without udmabuf.
 *            The program never maps the memfd: the bytes it reads back with
 *            pread() got there through the daemon's mapping.
 * One line per check; the exit status is the number of failures.
 * Completions are awaited with a bounded deadline. */
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_check.h"

enum { kPage = 4096, kBufBytes = 4 * kPage, kOffset = kPage + 100, kMrBytes = 2 * kPage + 300 };
enum { kSkip = 77 };

/* The memory behind the dma-buf MR: the memfd the test reads with pread. */
static int memfd = -1;

/* A dma-buf fd of KIND over `memfd`, or -1 after printing SKIP (77 in
 * *skip) or FAIL. */
static int make_dmabuf(const char* kind, int* skip) {
    memfd = memfd_create("uroce-dmabuf-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0 || ftruncate(memfd, kBufBytes) != 0 || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
        printf("FAIL a sealed memfd: %s\n", strerror(errno));
        return -1;
    }
    if (strcmp(kind, "memfd") == 0) {
        return memfd;
    }
    const int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        printf("SKIP: /dev/udmabuf cannot be opened (%s): the kernel has no udmabuf (CONFIG_UDMABUF)\n",
               strerror(errno));
        *skip = kSkip;
        return -1;
    }
    struct udmabuf_create create = {.memfd = (uint32_t)memfd, .flags = UDMABUF_FLAGS_CLOEXEC, .offset = 0,
                                    .size = kBufBytes};
    const int fd = ioctl(dev, UDMABUF_CREATE, &create);
    close(dev);
    if (fd < 0) {
        printf("FAIL UDMABUF_CREATE: %s\n", strerror(errno));
    }
    return fd;
}

/* Up to `n` completions of `cq` within 5 s; returns how many came. */
static int poll_n(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int got = 0;
    while (got < n) {
        const int r = ibv_poll_cq(cq, n - got, wc + got);
        if (r < 0) {
            return got;
        }
        got += r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            break;
        }
    }
    return got;
}

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq) {
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = cq;
    a.recv_cq = cq;
    a.cap.max_send_wr = 8;
    a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    return ibv_create_qp(pd, &a);
}

static int post(struct ibv_qp* qp, enum ibv_wr_opcode op, struct ibv_mr* mr, void* addr, uint32_t len,
                uint64_t remote_addr, uint32_t rkey, uint64_t wr_id) {
    struct ibv_sge sge = {(uintptr_t)addr, len, mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad);
}

static void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) {
        p[i] = (uint8_t)(seed + i * 13 + i / 251);
    }
}

/* The dma-buf's bytes [at, at + n), read from the memfd behind it. */
static int dmabuf_bytes_equal(size_t at, const uint8_t* want, size_t n) {
    uint8_t got[kBufBytes];
    return pread(memfd, got, n, (off_t)at) == (ssize_t)n && memcmp(got, want, n) == 0;
}

static void move_data(struct ibv_pd* pd, struct ibv_mr* dm, uint64_t iova) {
    struct ibv_cq* cq = check_ptr(ibv_create_cq(pd->context, 16, NULL, NULL, 0), 0, "ibv_create_cq");
    struct ibv_qp* a = cq != NULL ? check_ptr(make_qp(pd, cq), 0, "RC QP a") : NULL;
    struct ibv_qp* b = cq != NULL ? check_ptr(make_qp(pd, cq), 0, "RC QP b") : NULL;
    uint8_t* local = calloc(1, kBufBytes);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    struct ibv_mr* lm = check_ptr(ibv_reg_mr(pd, local, kBufBytes, access), 0, "ibv_reg_mr of a heap buffer");
    struct ibv_wc wc[2];
    if (a != NULL && b != NULL && lm != NULL) {
        connect_rc_to_own_address(a, b->qp_num, access, 14);
        connect_rc_to_own_address(b, a->qp_num, access, 14);

        /* RDMA WRITE into the dma-buf MR, 200 bytes in. */
        fill(local, kMrBytes - 200, 5);
        check_ret(post(a, IBV_WR_RDMA_WRITE, lm, local, kMrBytes - 200, iova + 200, dm->rkey, 1), 0,
                  "post an RDMA WRITE into the dma-buf MR");
        check(poll_n(cq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS, "the WRITE completes");
        check(dmabuf_bytes_equal(kOffset + 200, local, kMrBytes - 200), "WRITE: every byte is in the dma-buf");
        uint8_t zeros[200] = {0};
        check(dmabuf_bytes_equal(kOffset, zeros, 200), "WRITE: the bytes before it are untouched");

        /* RDMA READ out of it: the bytes put into the memfd with pwrite. */
        uint8_t pattern[kMrBytes];
        fill(pattern, kMrBytes, 77);
        check(pwrite(memfd, pattern, kMrBytes, kOffset) == kMrBytes, "fill the dma-buf through the memfd");
        memset(local, 0, kBufBytes);
        check_ret(post(a, IBV_WR_RDMA_READ, lm, local, kMrBytes, iova, dm->rkey, 2), 0,
                  "post an RDMA READ of the whole dma-buf MR");
        check(poll_n(cq, 1, wc) == 1 && wc[0].status == IBV_WC_SUCCESS, "the READ completes");
        check(memcmp(local, pattern, kMrBytes) == 0, "READ: every byte came from the dma-buf");

        /* A SEND received into the dma-buf MR (its lkey in a receive SGE). */
        struct ibv_sge rsge = {iova, kMrBytes, dm->lkey};
        struct ibv_recv_wr rwr = {.wr_id = 3, .sg_list = &rsge, .num_sge = 1}, *rbad;
        check_ret(ibv_post_recv(b, &rwr, &rbad), 0, "post a receive into the dma-buf MR");
        fill(local, 1500, 201);
        check_ret(post(a, IBV_WR_SEND, lm, local, 1500, 0, 0, 4), 0, "post a SEND");
        check(poll_n(cq, 2, wc) == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS,
              "the SEND and its receive complete");
        check(dmabuf_bytes_equal(kOffset, local, 1500), "SEND: every byte is in the dma-buf");

        /* Past the MR's end: a remote access error, nothing written. */
        check_ret(post(a, IBV_WR_RDMA_WRITE, lm, local, 16, iova + kMrBytes - 8, dm->rkey, 5), 0,
                  "post an RDMA WRITE crossing the MR's end");
        check(poll_n(cq, 1, wc) == 1 && wc[0].status == IBV_WC_REM_ACCESS_ERR, "it fails: remote access error");
    }
    if (lm != NULL) {
        ibv_dereg_mr(lm);
    }
    if (a != NULL) {
        ibv_destroy_qp(a);
    }
    if (b != NULL) {
        ibv_destroy_qp(b);
    }
    if (cq != NULL) {
        ibv_destroy_cq(cq);
    }
    free(local);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char* kind = argc > 1 ? argv[1] : "udmabuf";
    int skip = 0;
    const int fd = make_dmabuf(kind, &skip);
    if (fd < 0) {
        return skip != 0 ? skip : 1;
    }
    struct ibv_device** list;
    struct ibv_context* ctx = open_uroce(&list);
    struct ibv_pd* pd = check_ptr(ibv_alloc_pd(ctx), 0, "ibv_alloc_pd");
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    const uint64_t iova = 0x7000000;
    check_ptr(ibv_reg_dmabuf_mr(pd, kBufBytes - kPage, 2 * kPage, iova, fd, access), EINVAL,
              "ibv_reg_dmabuf_mr past the end of the dma-buf");
    check_ptr(ibv_reg_dmabuf_mr(pd, 0, kPage, iova, -1, access), EBADF, "ibv_reg_dmabuf_mr of fd -1");
    struct ibv_mr* dm = check_ptr(ibv_reg_dmabuf_mr(pd, kOffset, kMrBytes, iova, fd, access), 0,
                                  "ibv_reg_dmabuf_mr at an unaligned offset");
    if (dm != NULL) {
        move_data(pd, dm, iova);
        check_ret(ibv_dereg_mr(dm), 0, "ibv_dereg_mr of the dma-buf MR");
    }
    check_ret(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    if (fd != memfd) {
        close(fd);
    }
    close(memfd);
    printf("%d failures\n", check_failures);
    return check_failures;
}
