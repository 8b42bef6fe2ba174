/*
 * Relaxed (FMR-style) memory regions: the pool shared between a client
 * process and uroced. Plain C, explicit sizes and padding, versioned: the
 * provider includes it as well as the daemon.
 *
 * The client registers and deregisters without talking to the daemon by
 * changing slots in this pool; the daemon reads the slots when packets use
 * their keys and invalidates deregistered slots in batches. The daemon
 * trusts nothing in here: a slot can only ever describe memory of the
 * process that owns the pool, in the pool's PD, and the key byte that
 * decides whether an rkey matches lives in the daemon's private memory.
 *
 * Who writes what:
 *   header.version, capacity, page_size, base_index   daemon, at creation
 *   slot.key                                          daemon only
 *   slot.ctrl  FREE -> WRITING -> REGISTERED -> DEREGISTERED   client
 *              DEREGISTERED -> INVALIDATING -> FREE             daemon
 *   slot.access, addr, length, user_*, *_ns           client, in WRITING only
 *   header.dirty      client adds one per deregistration (not atomically: a hint that
 *                     may undercount), daemon subtracts
 *                     after invalidating (a hint: the daemon also scans on a timer)
 */
#ifndef UROCE_ABI_RELAXED_MR_H
#define UROCE_ABI_RELAXED_MR_H

#include <stdint.h>

#define UROCE_RELAXED_ABI_VERSION 1u

enum uroce_relaxed_state {
    UROCE_RELAXED_FREE = 0,
    UROCE_RELAXED_WRITING = 1,
    UROCE_RELAXED_REGISTERED = 2,
    UROCE_RELAXED_DEREGISTERED = 3,
    UROCE_RELAXED_INVALIDATING = 4,
};

/* ctrl: state in bits 0-7, a generation in bits 8-31 that the client bumps
 * each time it takes a slot for writing (readers detect a rewrite by it). */
#define UROCE_RELAXED_STATE(ctrl) ((ctrl) & 0xFFu)
#define UROCE_RELAXED_GEN(ctrl) ((ctrl) >> 8)
#define UROCE_RELAXED_CTRL(gen, state) ((((gen) & 0xFFFFFFu) << 8) | ((state) & 0xFFu))

struct uroce_relaxed_slot {
    uint32_t ctrl;           /* accessed atomically */
    uint32_t key;            /* lkey == rkey of the slot's next or current registration */
    uint32_t access;         /* ibv_access_flags granted */
    uint32_t reserved;
    uint64_t addr;           /* page-aligned start of the access granted */
    uint64_t length;         /* page-aligned length */
    uint64_t user_addr;      /* what the client asked to register (for reports) */
    uint64_t user_length;
    uint64_t registered_ns;  /* CLOCK_MONOTONIC, as the client reports it */
    uint64_t deregistered_ns;
};

struct uroce_relaxed_pool_header {
    uint32_t version;
    uint32_t capacity;       /* slots that follow */
    uint32_t page_size;
    uint32_t base_index;     /* key index of slot 0 */
    uint32_t dirty;          /* accessed atomically */
    uint32_t eagain;         /* accessed atomically: registrations refused with EAGAIN */
    uint8_t pad[40];         /* slots start on a cache line */
};

#ifdef __cplusplus
static_assert(sizeof(struct uroce_relaxed_slot) == 64, "slot is one cache line");
static_assert(sizeof(struct uroce_relaxed_pool_header) == 64, "header is one cache line");
#endif

#endif /* UROCE_ABI_RELAXED_MR_H */
