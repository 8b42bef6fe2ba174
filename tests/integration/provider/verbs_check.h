/* Helpers shared by the C test programs that drive stock libibverbs against
 * a running uroced (run under `uroce exec`): checks that print one line each
 * and count failures, and opening the uroce device. */
#ifndef UROCE_TEST_VERBS_CHECK_H
#define UROCE_TEST_VERBS_CHECK_H

#include <errno.h>
#include <infiniband/verbs.h>
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

#endif
