/* The fixtures of the bf16 products' tests (test_direct_bf16.c: rounding
 * and packing; test_direct_bf16_products.c: the products against their
 * references): buffers, data, scratch spoiled as a product must not find
 * it, bf16 rounding for the references, and the visible skip where the
 * instructions are missing. For cmocka programs. */
#ifndef LB_TESTS_DIRECT_BF16_TESTING_H
#define LB_TESTS_DIRECT_BF16_TESTING_H

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/direct/bf16.h"
#include "backends/direct/bf16_tiles.h"
#include "backends/naive/layers.h"
#include "harness/run/init.h"
#include "tests/checks.h"
#include "tests/testing.h"


static const double U32 = 1.0 / 16777216.0; /* 2^-24, fp32's unit roundoff */

static inline double *doubles(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static inline void *scratch_of(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    assert_non_null(p);
    return p;
}

static inline void fill(float *x, size_t n, rng *r, int positive)
{
    for (size_t i = 0; i < n; i++)
        x[i] = positive ? (float)rng_uniform(r) : (float)(2.0 * rng_uniform(r) - 1.0);
}

/* Scratch as a product must not find it: every bf16 in it 0x7f7f, near
 * the largest, so that a word read but never packed makes a sum huge */
static inline void spoil(void *scratch, size_t bytes) { memset(scratch, 0x7f, bytes); }

static inline void poison(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 12345.0f;
}

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
static inline int instructions_or_skip(void)
{
    char why[256];
    if (direct_bf16_supported(why, sizeof why))
        return 1;
    print_message("skipped: %s\n", why);
    return 0;
}

#endif
