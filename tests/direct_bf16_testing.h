/* The fixtures of the bf16 products' tests (test_direct_bf16.c: rounding
 * and packing; test_direct_bf16_products.c: the products against their
 * references): buffers, data, scratch spoiled as a product must not find
 * it, bf16 rounding for the references, and the visible skip where the
 * instructions are missing. For cmocka programs. */
#ifndef LB_TESTS_DIRECT_BF16_TESTING_H
#define LB_TESTS_DIRECT_BF16_TESTING_H

#include "backends/direct/bf16/bf16.h"
#include "backends/direct/bf16/bf16_tiles.h"
#include "backends/naive/layers.h"
#include "tests/direct_half_testing.h"


static inline void fill(float *x, size_t n, rng *r, int positive)
{
    fill_scaled(x, n, r, positive, 1.0f);
}

/* Scratch as a product must not find it: every bf16 in it 0x7f7f, near
 * the largest, so that a word read but never packed makes a sum huge */
static inline void spoil(void *scratch, size_t bytes) { memset(scratch, 0x7f, bytes); }

static inline float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to bf16, as a float: the reference's operands */
static inline double bf(float x) { return direct_bf16_value(direct_bf16_round(x)); }

static inline double *rounded(const float *x, size_t n)
{
    double *r = doubles(n);
    for (size_t i = 0; i < n; i++)
        r[i] = bf(x[i]);
    return r;
}

/* Whether the vdpbf16ps checks run here; else a visible skip. */
static inline int instructions_or_skip(void) { return supported_or_skip(direct_bf16_supported); }

#endif
