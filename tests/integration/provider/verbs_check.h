/* Helpers shared by the C test programs that drive stock libibverbs against
 * a running uroced (run under `uroce exec`): checks that print one line each
 * and count failures, and opening the uroce device. */
#ifndef UROCE_TEST_VERBS_CHECK_H
#define UROCE_TEST_VERBS_CHECK_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;

__attribute__((unused)) static void check(int ok, const char* what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        ++check_failures;
    }
}

/* A verb that returns 0 or an errno. */
__attribute__((unused)) static void check_ret(int got, int want, const char* what) {
    char line[256];
    snprintf(line, sizeof line, "%s -> %d (%s), want %d", what, got, strerror(got), want);
    check(got == want, line);
}

/* A verb that returns a pointer, NULL with errno on failure. */
__attribute__((unused)) static void* check_ptr(void* p, int want_errno, const char* what) {
    char line[256];
    const int err = p == NULL ? errno : 0;
    snprintf(line, sizeof line, "%s -> %s (errno %d %s), want %s %d", what, p != NULL ? "object" : "NULL", err,
             err != 0 ? strerror(err) : "", want_errno == 0 ? "object" : "errno", want_errno);
    check(want_errno == 0 ? p != NULL : (p == NULL && err == want_errno), line);
    return p;
}

__attribute__((unused)) static struct ibv_device* find_uroce(struct ibv_device*** list) {
    int n = 0;
    *list = ibv_get_device_list(&n);
    for (int i = 0; *list != NULL && i < n; ++i) {
        if (strncmp(ibv_get_device_name((*list)[i]), "uroce", 5) == 0) {
            return (*list)[i];
        }
    }
    return NULL;
}

__attribute__((unused)) static struct ibv_context* open_uroce(struct ibv_device*** list) {
    struct ibv_device* dev = find_uroce(list);
    if (dev == NULL) {
        printf("FAIL no uroce device listed\n");
        exit(1);
    }
    struct ibv_context* ctx = ibv_open_device(dev);
    if (ctx == NULL) {
        printf("FAIL ibv_open_device: %s\n", strerror(errno));
        exit(1);
    }
    return ctx;
}

/* RESET -> INIT -> RTR -> RTS for an RC QP towards QP `dest` at this
 * device's own address (GID index 2, path MTU 1024), with `access` as its
 * remote rights, the local ACK `timeout` (4.096 us x 2^timeout) and
 * retry_cnt and rnr_retry 7. One check line. */
__attribute__((unused)) static void connect_rc_to_own_address(struct ibv_qp* qp, uint32_t dest, int access,
                                                              uint8_t timeout) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = (unsigned)access;
    int ok = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = 2;
    a.ah_attr.grh.hop_limit = 64;
    ok = ok && ibv_query_gid(qp->context, 1, 2, &a.ah_attr.grh.dgid) == 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    ok = ok && ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0;
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    ok = ok && ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_MAX_QP_RD_ATOMIC) == 0;
    check(ok, "QP to RTS");
}

#endif
