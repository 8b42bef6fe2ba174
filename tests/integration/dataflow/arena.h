/* Buffers with guard bytes around them, filled with byte patterns that
 * depend on the position, and the check of a whole buffer after a transfer:
 * the transferred range holds the data pattern, the rest of the region its
 * background pattern, and the guards on either side their own pattern.
 *
 * Only the region in the middle is registered as an MR; the guards share its
 * first and last pages, so a device that writes outside the MR (or a
 * registration that disturbs the pages it maps) shows up as a changed guard. */
#ifndef UROCE_TEST_ARENA_H
#define UROCE_TEST_ARENA_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of guard on each side: one page, so the region starts page-aligned. */
#define ARENA_GUARD 4096u

/* The seed of the guard pattern (never used for data). */
#define ARENA_GUARD_SEED 0x6A09E668u /* % 5 == 4: the hash kind */

struct arena {
    uint8_t *base;  /* guard | region | guard */
    size_t len;     /* bytes in the region */
};

static inline uint8_t *arena_region(const struct arena *a) { return a->base + ARENA_GUARD; }

/* Allocates an arena whose region has `len` bytes (anonymous private memory,
 * the kind stock programs register). Returns 0, or -1 with errno. */
int arena_alloc(struct arena *a, size_t len);
void arena_free(struct arena *a);

/* Byte `index` of the pattern `seed`. seed % 5 picks the kind: all zeros,
 * all ones, 0x55/0xAA alternating, the index's low byte, or (4) a hash of the
 * seed and the index, which differs when data lands shifted by any amount.
 * Backgrounds always use the hash kind. */
uint8_t pattern_byte(uint32_t seed, uint64_t index);

/* dst[j] = pattern_byte(seed, first_index + j) for j < len. */
void pattern_fill(uint8_t *dst, size_t len, uint32_t seed, uint64_t first_index);

/* A background seed: a hash-kind seed derived from n. */
uint32_t background_seed(uint32_t n);

/* Guards to their pattern, region[k] = pattern_byte(background, k). */
void arena_reset(struct arena *a, uint32_t background);

/* Checks the whole arena: region[k] == pattern_byte(seed, k) for k in
 * [off, off + n), pattern_byte(background, k) for the other k, and both
 * guards. Returns the number of wrong bytes; when there are any, writes the
 * first one ("region byte 1025 is 0x00, want 0x3f; 12 wrong") into why. */
size_t arena_verify(const struct arena *a, size_t off, size_t n, uint32_t seed, uint32_t background, char *why,
                    size_t why_len);

#endif
