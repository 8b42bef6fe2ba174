/*
 * Open MPI over UCX over uroce, with the data checked: two ranks exchange
 * messages of growing sizes (8 B to 1 MiB, so UCX's eager and rendezvous
 * protocols both run), each filled with a pattern that depends on the size,
 * the iteration and the sender, and check every byte that arrives; then an
 * MPI_Allreduce of a vector whose sum is known. Prints one line per check
 * and "mpi_check: OK" on rank 0 when everything held; exits 1 otherwise.
 *
 * Run by test_mpi.py with mpirun -np 2 --mca pml ucx and no shared-memory
 * or TCP BTL, so only UCX (and so uroce) carries the data.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES (1 << 20)
#define ITERS 20
#define REDUCE_LEN 100000

static unsigned char pattern(size_t i, int size, int iter, int sender) {
    return (unsigned char)((i * 131u + (unsigned)size * 7u + (unsigned)iter * 13u + (unsigned)sender * 101u) ^
                           (i >> 9));
}

static void fill(unsigned char *buf, int size, int iter, int sender) {
    for (int i = 0; i < size; ++i) {
        buf[i] = pattern((size_t)i, size, iter, sender);
    }
}

/* The index of the first byte that differs from the pattern, or -1. */
static long first_bad(const unsigned char *buf, int size, int iter, int sender) {
    for (int i = 0; i < size; ++i) {
        if (buf[i] != pattern((size_t)i, size, iter, sender)) {
            return i;
        }
    }
    return -1;
}

static int ping_pong(int rank, unsigned char *out, unsigned char *in) {
    const int peer = 1 - rank;
    int failures = 0;
    static const int sizes[] = {8, 64, 512, 4096, 65536, MAX_BYTES};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
        const int size = sizes[s];
        double start = MPI_Wtime();
        for (int iter = 0; iter < ITERS; ++iter) {
            memset(in, 0, (size_t)size);
            if (rank == 0) {
                fill(out, size, iter, rank);
                MPI_Send(out, size, MPI_BYTE, peer, iter, MPI_COMM_WORLD);
                MPI_Recv(in, size, MPI_BYTE, peer, iter, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(in, size, MPI_BYTE, peer, iter, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                fill(out, size, iter, rank);
                MPI_Send(out, size, MPI_BYTE, peer, iter, MPI_COMM_WORLD);
            }
            const long bad = first_bad(in, size, iter, peer);
            if (bad >= 0) {
                printf("rank %d: FAIL ping-pong %d bytes, iteration %d: byte %ld is 0x%02x, want 0x%02x\n", rank,
                       size, iter, bad, in[bad], pattern((size_t)bad, size, iter, peer));
                ++failures;
                break;
            }
        }
        const double us = (MPI_Wtime() - start) * 1e6 / (2.0 * ITERS);
        if (rank == 0) {
            printf("ping-pong %7d bytes x %d: data checked, %.1f us one way\n", size, ITERS, us);
        }
    }
    return failures;
}

static int allreduce(int rank, int ranks) {
    int64_t *v = malloc(sizeof(int64_t) * REDUCE_LEN);
    int64_t *sum = malloc(sizeof(int64_t) * REDUCE_LEN);
    if (v == NULL || sum == NULL) {
        printf("rank %d: FAIL out of memory\n", rank);
        return 1;
    }
    for (int64_t i = 0; i < REDUCE_LEN; ++i) {
        v[i] = i * (rank + 1) + rank;
    }
    MPI_Allreduce(v, sum, REDUCE_LEN, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* sum over ranks r of i*(r+1) + r = i * R(R+1)/2 + R(R-1)/2 */
    const int64_t scale = (int64_t)ranks * (ranks + 1) / 2;
    const int64_t offset = (int64_t)ranks * (ranks - 1) / 2;
    int failures = 0;
    for (int64_t i = 0; i < REDUCE_LEN; ++i) {
        if (sum[i] != i * scale + offset) {
            printf("rank %d: FAIL allreduce element %lld is %lld, want %lld\n", rank, (long long)i,
                   (long long)sum[i], (long long)(i * scale + offset));
            ++failures;
            break;
        }
    }
    if (rank == 0 && failures == 0) {
        printf("allreduce of %d int64 over %d ranks: every element checked\n", REDUCE_LEN, ranks);
    }
    free(v);
    free(sum);
    return failures;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int ranks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2) {
        if (rank == 0) {
            printf("mpi_check: FAIL needs exactly 2 ranks, got %d\n", ranks);
        }
        MPI_Finalize();
        return 1;
    }
    unsigned char *out = malloc(MAX_BYTES);
    unsigned char *in = malloc(MAX_BYTES);
    int failures = out == NULL || in == NULL ? 1 : ping_pong(rank, out, in);
    failures += allreduce(rank, ranks);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf(total == 0 ? "mpi_check: OK\n" : "mpi_check: %d failure(s)\n", total);
    }
    free(out);
    free(in);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
