#include "arena.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static size_t arena_total(size_t len) { return ARENA_GUARD + len + ARENA_GUARD; }

int arena_alloc(struct arena *a, size_t len) {
    void *p = mmap(NULL, arena_total(len), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return -1;
    }
    a->base = p;
    a->len = len;
    return 0;
}

void arena_free(struct arena *a) {
    if (a->base != NULL) {
        munmap(a->base, arena_total(a->len));
        a->base = NULL;
    }
}

/* splitmix64's finaliser: every input bit affects every output bit. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint8_t pattern_byte(uint32_t seed, uint64_t index) {
    switch (seed % 5) {
    case 0:
        return 0x00;
    case 1:
        return 0xFF;
    case 2:
        return (index & 1) != 0 ? 0xAA : 0x55;
    case 3:
        return (uint8_t)index;
    default:
        return (uint8_t)mix64(((uint64_t)seed << 40) ^ index);
    }
}

void pattern_fill(uint8_t *dst, size_t len, uint32_t seed, uint64_t first_index) {
    for (size_t j = 0; j < len; ++j) {
        dst[j] = pattern_byte(seed, first_index + j);
    }
}

uint32_t background_seed(uint32_t n) { return 5u * (0x01000193u * n + 7u) + 4u; }

void arena_reset(struct arena *a, uint32_t background) {
    pattern_fill(a->base, ARENA_GUARD, ARENA_GUARD_SEED, 0);
    pattern_fill(arena_region(a), a->len, background, 0);
    pattern_fill(arena_region(a) + a->len, ARENA_GUARD, ARENA_GUARD_SEED, ARENA_GUARD);
}

size_t arena_verify(const struct arena *a, size_t off, size_t n, uint32_t seed, uint32_t background, char *why,
                    size_t why_len) {
    size_t wrong = 0;
    const uint8_t *region = arena_region(a);
    for (size_t g = 0; g < 2 * ARENA_GUARD; ++g) {
        const uint8_t got = g < ARENA_GUARD ? a->base[g] : region[a->len + g - ARENA_GUARD];
        const uint8_t want = pattern_byte(ARENA_GUARD_SEED, g);
        if (got != want && wrong++ == 0) {
            snprintf(why, why_len, "guard byte %s%zu outside the region is 0x%02x, want 0x%02x (unchanged)",
                     g < ARENA_GUARD ? "-" : "+", g < ARENA_GUARD ? ARENA_GUARD - g : g - ARENA_GUARD + 1, got, want);
        }
    }
    for (size_t k = 0; k < a->len; ++k) {
        const int in_range = k >= off && k - off < n;
        const uint8_t want = pattern_byte(in_range ? seed : background, k);
        if (region[k] != want && wrong++ == 0) {
            snprintf(why, why_len, "region byte %zu (%s) is 0x%02x, want 0x%02x", k,
                     in_range ? "transferred" : "outside the transfer, must be unchanged", region[k], want);
        }
    }
    if (wrong > 1) {
        const size_t used = strnlen(why, why_len);
        snprintf(why + used, why_len - used, "; %zu bytes wrong", wrong);
    }
    return wrong;
}
