/* What the fixtures of the half-precision products' tests
 * (direct_bf16_testing.h, direct_fp16_testing.h) share: buffers, uniform
 * data, poisoned outputs, and the visible skip where the instructions are
 * missing. For cmocka programs. */
#ifndef LB_TESTS_DIRECT_HALF_TESTING_H
#define LB_TESTS_DIRECT_HALF_TESTING_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run/init.h"
#include "tests/cmocka_main.h"
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

/* uniform in [0, 1) (positive) or [-1, 1), times scale */
static inline void fill_scaled(float *x, size_t n, rng *r, int positive, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (positive ? (float)rng_uniform(r) : (float)(2.0 * rng_uniform(r) - 1.0));
}

static inline void poison(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 12345.0f;
}

/* Whether the checks that need the instructions run here (supported is
 * direct_bf16_supported or direct_fp16_supported); else a visible skip. */
static inline int supported_or_skip(int (*supported)(char *why, size_t len))
{
    char why[256];
    if (supported(why, sizeof why))
        return 1;
    print_message("skipped: %s\n", why);
    return 0;
}

#endif
