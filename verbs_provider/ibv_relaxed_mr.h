/*
 * The Solaris names of relaxed memory regions (ibv_reg_mr_relaxed(3)) for
 * programs written against them: thin wrappers of uroce_dv.h.
 *
 * The uroce_dv_* functions live in the plugin libibverbs loads. Either link
 * the program to liburoce-rdmav34.so, or (what uroce's own tests do) define
 * UROCE_RELAXED_MR_DLSYM before including this header: the wrappers then
 * look the functions up in the plugin libibverbs already loaded
 * ($RDMAV_DRIVERS-rdmav34.so, as `uroce exec` sets it), so call them after
 * opening the device. Without the plugin they fail with EOPNOTSUPP.
 */
#ifndef UROCE_IBV_RELAXED_MR_H
#define UROCE_IBV_RELAXED_MR_H

#include "uroce_dv.h"

#ifdef UROCE_RELAXED_MR_DLSYM
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Looks `name` up in the plugin as libibverbs loaded it
 * ($RDMAV_DRIVERS-rdmav34.so) and stores it in the function pointer at
 * `fn` (copied bytewise: ISO C has no object-to-function pointer cast). */
static inline int uroce_relaxed_sym(const char* name, void* fn) {
    static void* handle;
    if (handle == NULL) {
        const char* base = getenv("RDMAV_DRIVERS");
        char path[4096];
        if (base == NULL || snprintf(path, sizeof path, "%s-rdmav34.so", base) >= (int)sizeof path) {
            return 0;
        }
        handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (handle == NULL) {
            return 0;
        }
    }
    void* sym = dlsym(handle, name);
    memcpy(fn, &sym, sizeof sym);
    return sym != NULL;
}

static inline struct ibv_mr* ibv_reg_mr_relaxed(struct ibv_pd* pd, void* addr, size_t length, int access) {
    struct ibv_mr* (*f)(struct ibv_pd*, void*, size_t, int) = NULL;
    if (!uroce_relaxed_sym("uroce_dv_reg_mr_relaxed", &f)) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    return f(pd, addr, length, access);
}
static inline int ibv_dereg_mr_relaxed(struct ibv_mr* mr) {
    int (*f)(struct ibv_mr*) = NULL;
    return uroce_relaxed_sym("uroce_dv_dereg_mr_relaxed", &f) ? f(mr) : EOPNOTSUPP;
}
static inline int ibv_flush_relaxed_mr(struct ibv_pd* pd) {
    int (*f)(struct ibv_pd*) = NULL;
    return uroce_relaxed_sym("uroce_dv_flush_relaxed_mr", &f) ? f(pd) : EOPNOTSUPP;
}
#else
static inline struct ibv_mr* ibv_reg_mr_relaxed(struct ibv_pd* pd, void* addr, size_t length, int access) {
    return uroce_dv_reg_mr_relaxed(pd, addr, length, access);
}
static inline int ibv_dereg_mr_relaxed(struct ibv_mr* mr) { return uroce_dv_dereg_mr_relaxed(mr); }
static inline int ibv_flush_relaxed_mr(struct ibv_pd* pd) { return uroce_dv_flush_relaxed_mr(pd); }
#endif

#endif /* UROCE_IBV_RELAXED_MR_H */
