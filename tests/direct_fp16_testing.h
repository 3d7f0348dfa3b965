/* The fixtures of the fp16 products' tests (test_direct_fp16.c:
 * conversions, the emulated FMA and the chain bound;
 * test_direct_fp16_products.c: the products against an fp64 reference):
 * buffers, data, the error bound of fp16.h, and the visible skip where the
 * instructions are missing. For cmocka programs. */
#ifndef LB_TESTS_DIRECT_FP16_TESTING_H
#define LB_TESTS_DIRECT_FP16_TESTING_H

#include "backends/direct/fp16/fp16.h"
#include "backends/direct/fp16/fp16_tiles.h"
#include "base/cpu.h"
#include "tests/direct_half_testing.h"

static const double U16 = 1.0 / 2048.0;       /* 2^-11, fp16's unit roundoff */
static const double UNDERFLOW16 = 0x1p-25;    /* the most an fp16 result below 2^-14 loses */

/* gamma(m) = m u / (1 - m u): what m roundings in a row may cost */
static inline double gamma_of(double m, double u) { return m * u / (1.0 - m * u); }

/* The bound of fp16.h for one result: chains of `chain` products summed in
 * fp16, their values through `folds` fp32 additions; `size` the sum of
 * the terms' sizes, `n` the products, `start` what the sum starts from
 * (a bias). */
static inline double fp16_bound(int chain, double folds, double size, double n, double start)
{
    assert_true(chain * U16 < 0.5); /* else no bound: a chain that long may lose everything */
    const double g16 = gamma_of(chain, U16), g32 = gamma_of(folds, U32);
    return (g16 + g32 * (1 + g16)) * size + g32 * fabs(start) +
           n * UNDERFLOW16 * (1 + g16) * (1 + g32);
}

static inline void fill(float *x, size_t n, rng *r, int positive, float scale)
{
    fill_scaled(x, n, r, positive, scale);
}

/* Scratch as a product must not find it: every half 0x7b7b, near the
 * largest (60768), so that a half read but never packed makes a sum huge */
static inline void spoil(void *scratch, size_t bytes) { memset(scratch, 0x7b, bytes); }

static inline float from_bits(uint32_t u) { return fp16_float_of(u); }

/* x rounded to fp16, as a double: the reference's operands */
static inline double half_of(float x) { return direct_fp16_value(direct_fp16_round(x)); }

/* Whether the AVX512_FP16 checks run here; else a visible skip. */
static inline int instructions_or_skip(void) { return supported_or_skip(direct_fp16_supported); }

#endif
