/* The direct backend's bf16 products (backends/direct/bf16.h).
 *
 * The reference here is written plainly: each fp32 operand rounded to
 * bf16 by its own rounding function (checked first, against a nearest
 * value found in double), products and sums in double. Every product of
 * two bf16 is exact in fp32 (8 + 8 significant bits), so the kernels and
 * the reference differ only by the kernels' fp32 additions: a term that
 * passes through d of them is off by at most ((1 + 2^-24)^d - 1) of its
 * size, so a result is within d * 2^-24 * (1 + 1e-3) of the sum of its
 * terms' sizes (d = the longest chain of additions in that kernel, stated
 * with each check). Bias gradients are fp32 sums of the fp32 gradient, the
 * same argument. Against the naive fp32 layers the bound adds what
 * rounding both operands to bf16 costs, at most 2^-7 (1 + 2^-6) of each
 * term's size, and naive's own chain of n additions.
 *
 * The checks run twice: with the vdpbf16ps tiles (skipped, with the
 * reason, on a CPU without AVX512_BF16) and with the plain C tiles that
 * read the same packed operands (any CPU), so that the packing and the
 * walks are checked everywhere. Data: uniform in [-1, 1), and uniform in
 * [0, 1) too, where every term is positive and so a lost term or a biased
 * rounding moves the sum by its whole size. */
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

static const double U32 = 1.0 / 16777216.0; /* 2^-24, fp32's unit roundoff */

static float *floats(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(p);
    return p;
}

static double *doubles(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static void *scratch_of(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    assert_non_null(p);
    return p;
}

static void fill(float *x, size_t n, rng *r, int positive)
{
    for (size_t i = 0; i < n; i++)
        x[i] = positive ? (float)rng_uniform(r) : (float)(2.0 * rng_uniform(r) - 1.0);
}

/* Scratch as a product must not find it: every bf16 in it 0x7f7f, near
 * the largest, so that a word read but never packed makes a sum huge */
static void spoil(void *scratch, size_t bytes) { memset(scratch, 0x7f, bytes); }

static void poison(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 12345.0f;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to bf16, as a float: the reference's operands */
static double bf(float x) { return direct_bf16_value(direct_bf16_round(x)); }

static double *rounded(const float *x, size_t n)
{
    double *r = doubles(n);
    for (size_t i = 0; i < n; i++)
        r[i] = bf(x[i]);
    return r;
}

/* Whether the vdpbf16ps checks run here; else a visible skip. */
static int instructions_or_skip(void)
{
    char why[256];
    if (direct_bf16_supported(why, sizeof why))
        return 1;
    print_message("skipped: %s\n", why);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Rounding                                                                 */

/* The nearest bf16 to a normal finite x found another way: the two bf16
 * around it by truncation, compared in double, ties to the even one. */
static uint16_t nearest_by_search(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
    if ((u & 0xffffu) == 0)
        return down;
    const double below = direct_bf16_value(down);
    /* past the largest bf16, rounding up means infinity, taken where the
     * next value would lie (2^128), as round-to-nearest treats overflow */
    const double above = (up & 0x7fffu) == 0x7f80u ? copysign(ldexp(1.0, 128), x)
                                                    : direct_bf16_value(up);
    const double d_below = fabs((double)x - below), d_above = fabs(above - (double)x);
    if (d_below < d_above)
        return down;
    if (d_above < d_below)
        return up;
    return (down & 1) ? up : down;
}

static void rounding_is_nearest_even(void **state)
{
    (void)state;
    /* exact values stay */
    assert_int_equal(direct_bf16_round(1.0f), 0x3f80);
    assert_int_equal(direct_bf16_round(-2.5f), 0xc020);
    assert_int_equal(direct_bf16_round(0.0f), 0x0000);
    assert_int_equal(direct_bf16_round(-0.0f), 0x8000);
    /* ties: halfway between two bf16 goes to the even one */
    assert_int_equal(direct_bf16_round(from_bits(0x3f808000u)), 0x3f80); /* 1 + 2^-8 */
    assert_int_equal(direct_bf16_round(from_bits(0x3f818000u)), 0x3f82);
    assert_int_equal(direct_bf16_round(from_bits(0xbf808000u)), 0xbf80);
    assert_int_equal(direct_bf16_round(from_bits(0xbf818000u)), 0xbf82);
    /* either side of a tie */
    assert_int_equal(direct_bf16_round(from_bits(0x3f807fffu)), 0x3f80);
    assert_int_equal(direct_bf16_round(from_bits(0x3f808001u)), 0x3f81);
    /* a carry into the exponent */
    assert_int_equal(direct_bf16_round(from_bits(0x3fffc000u)), 0x4000);
    /* infinities stay; past the largest bf16 goes to infinity */
    assert_int_equal(direct_bf16_round(INFINITY), 0x7f80);
    assert_int_equal(direct_bf16_round(-INFINITY), 0xff80);
    assert_int_equal(direct_bf16_round(FLT_MAX), 0x7f80);
    assert_int_equal(direct_bf16_round(-FLT_MAX), 0xff80);
    assert_int_equal(direct_bf16_round(from_bits(0x7f7f7fffu)), 0x7f7f);
    /* NaN stays NaN, quiet, sign kept, even where rounding up would carry
     * it into infinity (0x7f800001) or flip its sign (0x7fffffff) */
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u, 0xffc00000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        const uint16_t h = direct_bf16_round(from_bits(nans[i]));
        assert_true(isnan(direct_bf16_value(h)));
        assert_true((h & 0x40u) != 0);
        assert_int_equal(h >> 15, nans[i] >> 31);
    }
    /* subnormal floats: a zero of their sign (the instruction reads them so) */
    assert_int_equal(direct_bf16_round(from_bits(0x00000001u)), 0x0000);
    assert_int_equal(direct_bf16_round(from_bits(0x007fffffu)), 0x0000);
    assert_int_equal(direct_bf16_round(from_bits(0x807fffffu)), 0x8000);
    assert_int_equal(direct_bf16_round(FLT_MIN), 0x0080);
    /* and a million normal floats (every pattern of the low half among
     * them many times) against the search */
    rng r = {2718};
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        if (i % 4 == 0) /* ties and near-ties are rare among random bits */
            u = (u & 0xffff0000u) | (i % 8 == 0 ? 0x8000u : 0x7fffu + (u & 2));
        const uint32_t exponent = (u >> 23) & 0xffu;
        if (exponent == 0 || exponent == 0xff)
            continue;
        const float x = from_bits(u);
        if (direct_bf16_round(x) != nearest_by_search(x))
            fail_msg("%a (0x%08x): 0x%04x, the nearest is 0x%04x", (double)x, u,
                     direct_bf16_round(x), nearest_by_search(x));
    }
}

/* ---------------------------------------------------------------------- */
/* Packing                                                                  */

static uint32_t expected_pair(float first, float second)
{
    return (uint32_t)direct_bf16_round(first) | (uint32_t)direct_bf16_round(second) << 16;
}

/* (noipa: specialised for one case, GCC warns of a branch that case never takes) */
__attribute__((noipa)) static void check_conv_packing(int B, int C, int H, int W)
{
    const size_t n = (size_t)C * H * W * B, words = direct_bf16_conv_input_words(B, C, H, W);
    float *in = floats(n);
    rng r = {(uint64_t)(B * 100 + C)};
    fill(in, n, &r, 0);
    uint32_t *packed = malloc(sizeof(uint32_t) * words);
    assert_non_null(packed);
    memset(packed, 0xa5, sizeof(uint32_t) * words);
    direct_bf16_pack_conv_input(packed, in, B, C, H, W, 2);
    const size_t row = (size_t)W * B, plane = (size_t)H * row;
    const int by_channels = direct_bf16_conv_pairs_channels(C);
    assert_int_equal(by_channels, C % 2 == 0);
    const int groups = by_channels ? C / 2 : C;
    for (int g = 0; g < groups; g++)
        for (int h = 0; h < H; h++)
            for (int x = 0; x < W; x++)
                for (int b = 0; b < B; b++) {
                    const size_t e = (size_t)x * B + b;
                    const float first = by_channels ? in[2 * g * plane + h * row + e]
                                                    : in[g * plane + h * row + e];
                    const float second = by_channels ? in[(2 * g + 1) * plane + h * row + e]
                                         : x + 1 < W ? in[g * plane + h * row + e + B]
                                                     : 0.0f;
                    assert_int_equal(packed[g * plane + h * row + e], expected_pair(first, second));
                }
    for (size_t i = (size_t)groups * plane; i < words; i++)
        assert_int_equal(packed[i], 0); /* what a last vector reads past the end */
    free(in);
    free(packed);
}

static void check_packing(void)
{
    check_conv_packing(3, 4, 5, 6); /* channels paired */
    check_conv_packing(5, 3, 4, 7); /* columns paired */
    check_conv_packing(2, 1, 3, 1); /* one column: every partner 0 */
    check_conv_packing(20, 2, 3, 3); /* whole vectors and a masked rest */
    /* rows paired, odd count, padded columns */
    const int n = 5, cols = 7, ld = 16;
    float x[5 * 7];
    rng r = {9};
    fill(x, (size_t)n * cols, &r, 0);
    uint32_t rows[3 * 16];
    memset(rows, 0xa5, sizeof rows);
    direct_bf16_pack_row_pairs(rows, ld, x, n, cols, 1);
    for (int q = 0; q < 3; q++)
        for (int c = 0; c < ld; c++) {
            const uint32_t want = c >= cols ? 0
                                  : 2 * q + 1 < n ? expected_pair(x[2 * q * cols + c], x[(2 * q + 1) * cols + c])
                                                  : expected_pair(x[2 * q * cols + c], 0.0f);
            assert_int_equal(rows[q * ld + c], want);
        }
    /* columns paired, odd count, a row stride past the row */
    float y[3 * 9];
    fill(y, 27, &r, 0);
    uint32_t cols_packed[3 * 4];
    memset(cols_packed, 0xa5, sizeof cols_packed);
    direct_bf16_pack_col_pairs(cols_packed, y, 9, 3, 7, 1);
    for (int rr = 0; rr < 3; rr++)
        for (int q = 0; q < 4; q++) {
            const float second = 2 * q + 1 < 7 ? y[rr * 9 + 2 * q + 1] : 0.0f;
            assert_int_equal(cols_packed[rr * 4 + q], expected_pair(y[rr * 9 + 2 * q], second));
        }
}

/* The packing rounds plainly when emulating, else with vcvtneps2bf16:
 * both are checked */
static void packing_pairs_along_the_sums(void **state)
{
    (void)state;
    direct_bf16_emulate = 1;
    check_packing();
    direct_bf16_emulate = 0;
    if (!instructions_or_skip())
        skip();
    check_packing();
}

/* vcvtneps2bf16, as the packing uses it, rounds as direct_bf16_round:
 * special values, ties, and random bit patterns of every class */
static void instruction_rounds_as_the_function(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    enum { N = 1 << 16 };
    float *x = floats(2 * N);
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
                                0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f807fffu, 0x3f808001u,
                                0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0xffc00001u, 0x3fffc000u};
    const size_t n_special = sizeof special / sizeof special[0];
    rng r = {31415};
    for (size_t i = 0; i < 2 * (size_t)N; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        if (i < n_special)
            u = special[i];
        else if (i % 3 == 0) /* ties and their neighbours */
            u = (u & 0xffff0000u) | (0x7fffu + (uint32_t)(i % 5 == 0) + (u & 1));
        x[i] = from_bits(u);
    }
    uint32_t *packed = malloc(sizeof(uint32_t) * N);
    assert_non_null(packed);
    direct_bf16_pack_row_pairs(packed, N, x, 2, N, 1);
    for (size_t i = 0; i < (size_t)N; i++)
        if (packed[i] != expected_pair(x[i], x[N + i])) {
            uint32_t lo, hi;
            memcpy(&lo, &x[i], sizeof lo);
            memcpy(&hi, &x[N + i], sizeof hi);
            fail_msg("0x%08x and 0x%08x: packed 0x%08x, rounded 0x%08x", lo, hi, packed[i],
                     expected_pair(x[i], x[N + i]));
        }
    free(packed);
    free(x);
}

/* ---------------------------------------------------------------------- */
/* References (CHWN, as the products)                                       */

/* out[K][OH][OW][B] and the sum of its terms' sizes */
static void ref_conv_forward(double *out, double *size, const double *in, const double *wb,
                             const float *wb_fp32, int B, int C, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    for (int k = 0; k < K; k++)
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++)
                for (int b = 0; b < B; b++) {
                    const double bias = wb_fp32[(size_t)k * (R + 1) + R];
                    double sum = bias, s = fabs(bias);
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < kernel; ki++)
                            for (int kj = 0; kj < kernel; kj++) {
                                const double t =
                                    wb[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj] *
                                    in[(((size_t)c * H + y + ki) * W + x + kj) * B + b];
                                sum += t, s += fabs(t);
                            }
                    const size_t o = (((size_t)k * OH + y) * OW + x) * B + b;
                    out[o] = sum, size[o] = s;
                }
}

static void ref_conv_backward_data(double *d_in, double *size, const double *d_out,
                                   const double *wb, int B, int C, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    memset(d_in, 0, sizeof(double) * C * H * W * B);
    memset(size, 0, sizeof(double) * C * H * W * B);
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++)
            for (int ki = 0; ki < kernel; ki++)
                for (int kj = 0; kj < kernel; kj++) {
                    const double w = wb[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj];
                    for (int y = 0; y < OH; y++)
                        for (int x = 0; x < OW; x++)
                            for (int b = 0; b < B; b++) {
                                const double t =
                                    w * d_out[(((size_t)k * OH + y) * OW + x) * B + b];
                                const size_t i = (((size_t)c * H + y + ki) * W + x + kj) * B + b;
                                d_in[i] += t, size[i] += fabs(t);
                            }
                }
}

static void ref_conv_backward_params(double *dwb, double *size, const double *d_out,
                                     const float *d_out_fp32, const double *in, int B, int C, int H, int W, int K,
                                     int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    for (int k = 0; k < K; k++)
        for (int r = 0; r <= R; r++) {
            const int c = r / (kernel * kernel), ki = r / kernel % kernel, kj = r % kernel;
            double sum = 0, s = 0;
            for (int y = 0; y < OH; y++)
                for (int x = 0; x < OW; x++)
                    for (int b = 0; b < B; b++) {
                        const size_t o = (((size_t)k * OH + y) * OW + x) * B + b;
                        /* the bias's gradient: the fp32 gradient itself */
                        const double t =
                            r == R ? d_out_fp32[o]
                                   : d_out[o] * in[(((size_t)c * H + y + ki) * W + x + kj) * B + b];
                        sum += t, s += fabs(t);
                    }
            dwb[(size_t)k * (R + 1) + r] = sum, size[(size_t)k * (R + 1) + r] = s;
        }
}

/* ---------------------------------------------------------------------- */
/* Holding results to the reference                                         */

/* |got - ref| <= chain * 2^-24 (1 + 1e-3) * size (+ a hair for products
 * that underflow), with the worst case named */
static void hold(const char *what, const float *got, const double *ref, const double *size,
                 size_t n, double chain)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double allowed = chain * U32 * 1.001 * size[i] + 1e-30;
        const double ratio = fabs((double)got[i] - ref[i]) / allowed;
        if (!(ratio <= worst)) /* NaN counts as worst */
            worst = ratio, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s [%zu]: %.9g, reference %.9g, terms' sizes sum to %.4g: off by %.3g of "
                 "the %.3g allowed (%g additions in a chain)",
                 what, at, (double)got[at], ref[at], size[at],
                 fabs((double)got[at] - ref[at]) / size[at], chain * U32 * 1.001, chain);
}

/* Against naive fp32 (converted to CHWN): the bf16 rounding of each
 * operand, the kernel's chain, and naive's n additions. */
static void hold_to_fp32(const char *what, const float *got, const float *fp32,
                         const double *size, size_t n, double chain, double naive_chain)
{
    const double per_size = ldexp(1.0, -7) * (1 + ldexp(1.0, -6)) +
                            (chain + naive_chain) * U32 * 1.001 * (1 + ldexp(1.0, -6));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double ratio = fabs((double)got[i] - fp32[i]) / (per_size * size[i] + 1e-30);
        if (!(ratio <= worst))
            worst = ratio, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s [%zu] against fp32: %.9g, naive %.9g, terms' sizes %.4g: off by %.3g "
                 "of the %.3g allowed",
                 what, at, (double)got[at], (double)fp32[at], size[at],
                 fabs((double)got[at] - fp32[at]) / size[at], per_size);
}

/* x[B][C][HW] <-> x[C][HW][B] */
static void to_chwn(float *out, const float *in, int B, int C, int HW)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++)
                out[((size_t)c * HW + p) * B + b] = in[((size_t)b * C + c) * HW + p];
}

static void to_nchw(float *out, const float *in, int B, int C, int HW)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++)
                out[((size_t)b * C + c) * HW + p] = in[((size_t)c * HW + p) * B + b];
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

typedef struct conv_case {
    int B, C, H, W, K, kernel, threads;
} conv_case;

static void check_conv(conv_case cc, int positive)
{
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kernel = cc.kernel;
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t n_in = (size_t)C * H * W * B, n_out = (size_t)K * OH * OW * B;
    const size_t n_wb = (size_t)K * (R + 1);
    float *in = floats(n_in), *wb = floats(n_wb), *d_out = floats(n_out);
    rng r = {(uint64_t)(B * 7919 + C * 131 + K * 17 + kernel + positive)};
    fill(in, n_in, &r, positive);
    fill(wb, n_wb, &r, positive);
    fill(d_out, n_out, &r, positive);
    const size_t scratch_bytes = direct_bf16_conv_scratch_bytes(B, C, H, W, K, kernel);
    void *scratch = scratch_of(scratch_bytes);
    float *out[2], *d_in[2], *dwb[2];
    for (int run = 0; run < 2; run++) { /* at cc.threads, then at 1: the same floats */
        const int threads = run ? 1 : cc.threads;
        out[run] = floats(n_out), d_in[run] = floats(n_in), dwb[run] = floats(n_wb);
        poison(out[run], n_out), poison(d_in[run], n_in), poison(dwb[run], n_wb);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_forward(out[run], in, wb, scratch, B, C, H, W, K, kernel, threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_backward_data(d_in[run], d_out, wb, scratch, B, C, H, W, K, kernel,
                                       threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_backward_params(dwb[run], d_out, in, scratch, B, C, H, W, K, kernel,
                                         threads);
    }
    assert_memory_equal(out[0], out[1], sizeof(float) * n_out);
    assert_memory_equal(d_in[0], d_in[1], sizeof(float) * n_in);
    assert_memory_equal(dwb[0], dwb[1], sizeof(float) * n_wb);

    /* chains: forward, bias then 2 additions a step, a step a pair of taps
     * (at most C * k * ceil(k / 2) + ... <= R + C * k steps' worth);
     * input gradient, 2 a step over up to k * ceil(K / 2) steps, then one
     * addition into d_in per kernel column; weight gradient, 2 a step over
     * OH * ceil(OW * B / 32) steps and 4 across the lanes; bias gradient,
     * 16 running sums of n / 16 each, then 16 more */
    const double chain_fwd = R + C * kernel + 2;
    const double chain_data = (double)kernel * (K + 1) + kernel + 2;
    const double chain_w = 2.0 * OH * ((OW * B + 31) / 32) + 4;
    const double chain_bias = (double)OH * OW * B / 16 + 18;
    double *ref = doubles(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    double *size = doubles(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    char what[160];
    snprintf(what, sizeof what, "conv forward B=%d C=%d %dx%d K=%d k=%d", B, C, H, W, K, kernel);
    double *in_r = rounded(in, n_in), *wb_r = rounded(wb, n_wb), *d_out_r = rounded(d_out, n_out);
    ref_conv_forward(ref, size, in_r, wb_r, wb, B, C, H, W, K, kernel);
    hold(what, out[0], ref, size, n_out, chain_fwd);

    /* naive fp32, NCHW */
    float *in_n = floats(n_in), *d_out_n = floats(n_out), *w_n = floats((size_t)K * R);
    float *bias_n = floats(K), *got_n = floats(n_out > n_in ? n_out : n_in);
    float *fp32 = floats(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    to_nchw(in_n, in, B, C, H * W);
    to_nchw(d_out_n, d_out, B, K, OH * OW);
    for (int k = 0; k < K; k++) {
        memcpy(w_n + (size_t)k * R, wb + (size_t)k * (R + 1), sizeof(float) * R);
        bias_n[k] = wb[(size_t)k * (R + 1) + R];
    }
    float *naive_scratch = floats(conv_scratch_count(C, H, W, kernel, 1));
    conv_forward(got_n, in_n, w_n, bias_n, B, C, H, W, K, kernel, 1, naive_scratch);
    to_chwn(fp32, got_n, B, K, OH * OW);
    hold_to_fp32(what, out[0], fp32, size, n_out, chain_fwd, R + 1);

    snprintf(what, sizeof what, "conv input gradient B=%d C=%d %dx%d K=%d k=%d", B, C, H, W, K,
             kernel);
    ref_conv_backward_data(ref, size, d_out_r, wb_r, B, C, H, W, K, kernel);
    hold(what, d_in[0], ref, size, n_in, chain_data);
    conv_backward_data(got_n, d_out_n, w_n, B, C, H, W, K, kernel, 1, naive_scratch);
    to_chwn(fp32, got_n, B, C, H * W);
    hold_to_fp32(what, d_in[0], fp32, size, n_in, chain_data, (double)K * kernel * kernel);

    snprintf(what, sizeof what, "conv weight and bias gradients B=%d C=%d %dx%d K=%d k=%d", B,
             C, H, W, K, kernel);
    ref_conv_backward_params(ref, size, d_out_r, d_out, in_r, B, C, H, W, K, kernel);
    for (int k = 0; k < K; k++) { /* the biases' chain is another */
        const size_t at = (size_t)k * (R + 1);
        hold(what, dwb[0] + at, ref + at, size + at, R, chain_w);
        hold(what, dwb[0] + at + R, ref + at + R, size + at + R, 1, chain_bias);
    }
    float *dw_n = floats((size_t)K * R), *db_n = floats(K);
    memset(dw_n, 0, sizeof(float) * K * R);
    memset(db_n, 0, sizeof(float) * K);
    conv_backward_weights(dw_n, d_out_n, in_n, B, C, H, W, K, kernel, 1, naive_scratch);
    conv_backward_bias(db_n, d_out_n, B, K, OH, OW);
    for (int k = 0; k < K; k++) {
        memcpy(fp32 + (size_t)k * (R + 1), dw_n + (size_t)k * R, sizeof(float) * R);
        fp32[(size_t)k * (R + 1) + R] = db_n[k];
    }
    hold_to_fp32(what, dwb[0], fp32, size, n_wb, chain_w > chain_bias ? chain_w : chain_bias,
                 (double)OH * OW * B);

    float *all[] = {in,   wb,     d_out,  out[0], out[1],  d_in[0], d_in[1], dwb[0], dwb[1],
                    in_n, d_out_n, w_n,   bias_n, got_n,   fp32,    naive_scratch, dw_n, db_n};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(ref), free(size), free(scratch), free(in_r), free(wb_r), free(d_out_r);
}

/* LeNet's (workloads/workload.c: conv1 1 -> 20, 28x28; conv2 20 -> 50,
 * 12x12; both 5x5, stride 1, no padding; batch 128), then odd batches,
 * partial tiles and the other pairings. */
static const conv_case lenet_convs[] = {
    {128, 1, 28, 28, 20, 5, 2},  /* conv1: columns paired, 15 steps for 25 taps */
    {128, 20, 12, 12, 50, 5, 2}, /* conv2: channels paired */
};
static const conv_case odd_convs[] = {
    {7, 1, 28, 28, 20, 5, 2},  /* odd batch: runs at odd offsets, partial vectors */
    {33, 20, 12, 12, 50, 5, 2}, /* conv2, odd batch */
    {1, 3, 9, 8, 13, 3, 2},    /* one image; odd channels >1; 13 rows of tiles */
    {5, 4, 10, 11, 7, 7, 1},   /* kernel 7: more columns than a tile's rows */
    {16, 6, 12, 12, 16, 5, 2}, /* 6 -> 16 (LeNet-5 as first published) */
    {3, 2, 6, 6, 3, 1, 2},     /* 1x1, odd output channels (a zero partner) */
};

static void run_convs(const conv_case *cases, size_t n, int emulate)
{
    direct_bf16_emulate = emulate;
    for (size_t i = 0; i < n; i++)
        for (int positive = 0; positive < 2; positive++)
            check_conv(cases[i], positive);
    direct_bf16_emulate = 0;
}

static void lenet_convs_match_reference(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    run_convs(lenet_convs, sizeof lenet_convs / sizeof lenet_convs[0], 0);
}

static void odd_convs_match_reference(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    run_convs(odd_convs, sizeof odd_convs / sizeof odd_convs[0], 0);
}

static void plain_tiles_convs_match_reference(void **state)
{
    (void)state;
    run_convs(odd_convs, sizeof odd_convs / sizeof odd_convs[0], 1);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

typedef struct dense_case {
    int B, n_in, n_out, threads;
} dense_case;

static void check_dense(dense_case dc, int positive)
{
    const int B = dc.B, I = dc.n_in, O = dc.n_out;
    const size_t n_in = (size_t)I * B, n_out = (size_t)O * B, n_w = (size_t)O * I;
    float *in = floats(n_in), *w = floats(n_w), *bias = floats(O), *d_out = floats(n_out);
    rng r = {(uint64_t)(B * 31 + I * 7 + O + positive)};
    fill(in, n_in, &r, positive);
    fill(w, n_w, &r, positive);
    fill(bias, O, &r, positive);
    fill(d_out, n_out, &r, positive);
    const size_t scratch_bytes = direct_bf16_dense_scratch_bytes(B, I, O);
    void *scratch = scratch_of(scratch_bytes);
    float *out[2], *d_in[2], *dw[2], *db[2];
    for (int run = 0; run < 2; run++) {
        const int threads = run ? 1 : dc.threads;
        out[run] = floats(n_out), d_in[run] = floats(n_in), dw[run] = floats(n_w);
        db[run] = floats(O);
        poison(out[run], n_out), poison(d_in[run], n_in), poison(dw[run], n_w);
        poison(db[run], O);
        spoil(scratch, scratch_bytes);
        direct_bf16_dense_forward(out[run], in, w, bias, scratch, B, I, O, threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_dense_backward(dw[run], db[run], d_in[run], d_out, in, w, scratch, B, I, O,
                                   threads);
    }
    assert_memory_equal(out[0], out[1], sizeof(float) * n_out);
    assert_memory_equal(d_in[0], d_in[1], sizeof(float) * n_in);
    assert_memory_equal(dw[0], dw[1], sizeof(float) * n_w);
    assert_memory_equal(db[0], db[1], sizeof(float) * O);
    /* without d_in, the same parameter gradients */
    float *dw_alone = floats(n_w), *db_alone = floats(O);
    direct_bf16_dense_backward(dw_alone, db_alone, NULL, d_out, in, w, scratch, B, I, O,
                               dc.threads);
    assert_memory_equal(dw_alone, dw[0], sizeof(float) * n_w);
    assert_memory_equal(db_alone, db[0], sizeof(float) * O);

    const size_t most = n_w > n_in ? (n_w > n_out ? n_w : n_out) : (n_in > n_out ? n_in : n_out);
    double *ref = doubles(most), *size = doubles(most);
    float *fp32 = floats(most);
    /* naive fp32, [B][features] */
    float *in_n = floats(n_in), *d_out_n = floats(n_out), *got_n = floats(most);
    float *naive_scratch = floats(dense_scratch_count(B, I, O));
    to_nchw(in_n, in, B, I, 1);
    to_nchw(d_out_n, d_out, B, O, 1);
    char what[128];
    double *in_r = rounded(in, n_in), *w_r = rounded(w, n_w), *d_out_r = rounded(d_out, n_out);

    /* forward: bias, then 2 additions a pair of inputs */
    snprintf(what, sizeof what, "dense forward B=%d %d -> %d", B, I, O);
    for (int o = 0; o < O; o++)
        for (int b = 0; b < B; b++) {
            double sum = bias[o], s = fabs(bias[o]);
            for (int i = 0; i < I; i++) {
                const double t = w_r[(size_t)o * I + i] * in_r[(size_t)i * B + b];
                sum += t, s += fabs(t);
            }
            ref[(size_t)o * B + b] = sum, size[(size_t)o * B + b] = s;
        }
    const double chain_fwd = 2.0 * ((I + 1) / 2) + 1;
    hold(what, out[0], ref, size, n_out, chain_fwd);
    dense_forward(got_n, in_n, w, bias, B, I, O, naive_scratch);
    to_chwn(fp32, got_n, B, O, 1);
    hold_to_fp32(what, out[0], fp32, size, n_out, chain_fwd, I + 1);

    /* input gradient: 2 additions a pair of outputs */
    snprintf(what, sizeof what, "dense input gradient B=%d %d -> %d", B, I, O);
    for (int i = 0; i < I; i++)
        for (int b = 0; b < B; b++) {
            double sum = 0, s = 0;
            for (int o = 0; o < O; o++) {
                const double t = w_r[(size_t)o * I + i] * d_out_r[(size_t)o * B + b];
                sum += t, s += fabs(t);
            }
            ref[(size_t)i * B + b] = sum, size[(size_t)i * B + b] = s;
        }
    const double chain_data = 2.0 * ((O + 1) / 2);
    hold(what, d_in[0], ref, size, n_in, chain_data);
    dense_backward_data(got_n, d_out_n, w, B, I, O);
    to_chwn(fp32, got_n, B, I, 1);
    hold_to_fp32(what, d_in[0], fp32, size, n_in, chain_data, O);

    /* weight gradient: 2 additions a pair of images */
    snprintf(what, sizeof what, "dense weight gradient B=%d %d -> %d", B, I, O);
    for (int o = 0; o < O; o++)
        for (int i = 0; i < I; i++) {
            double sum = 0, s = 0;
            for (int b = 0; b < B; b++) {
                const double t = d_out_r[(size_t)o * B + b] * in_r[(size_t)i * B + b];
                sum += t, s += fabs(t);
            }
            ref[(size_t)o * I + i] = sum, size[(size_t)o * I + i] = s;
        }
    const double chain_w = 2.0 * ((B + 1) / 2);
    hold(what, dw[0], ref, size, n_w, chain_w);
    memset(got_n, 0, sizeof(float) * n_w);
    dense_backward_weights(got_n, d_out_n, in_n, B, I, O);
    hold_to_fp32(what, dw[0], got_n, size, n_w, chain_w, B);

    /* bias gradient: fp32 sums of the fp32 gradient, 16 running sums */
    snprintf(what, sizeof what, "dense bias gradient B=%d %d -> %d", B, I, O);
    for (int o = 0; o < O; o++) {
        double sum = 0, s = 0;
        for (int b = 0; b < B; b++)
            sum += d_out[(size_t)o * B + b], s += fabs(d_out[(size_t)o * B + b]);
        ref[o] = sum, size[o] = s;
    }
    hold(what, db[0], ref, size, O, B / 16.0 + 18);

    float *all[] = {in,    w,     bias,   d_out,  out[0],   out[1], d_in[0],  d_in[1],
                    dw[0], dw[1], db[0],  db[1],  dw_alone, db_alone, fp32,   in_n,
                    d_out_n, got_n, naive_scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(ref), free(size), free(scratch), free(in_r), free(w_r), free(d_out_r);
}

/* LeNet's fc1 (800 -> 500) and fc2 (500 -> 10) at batch 128, the MLP's
 * fc1 (784 -> 100), then odd sizes */
static const dense_case lenet_denses[] = {
    {128, 800, 500, 2},
    {128, 500, 10, 2},
    {128, 784, 100, 2},
};
static const dense_case odd_denses[] = {
    {33, 801, 500, 2}, /* odd batch and inputs: zero partners; a partial strip */
    {5, 7, 3, 1},      /* less than a vector anywhere */
    {1, 400, 13, 2},   /* one image */
    {17, 300, 601, 2}, /* odd outputs: a zero partner in the input gradient */
    {130, 64, 70, 2},  /* columns past two strips */
};

static void run_denses(const dense_case *cases, size_t n, int emulate)
{
    direct_bf16_emulate = emulate;
    for (size_t i = 0; i < n; i++)
        for (int positive = 0; positive < 2; positive++)
            check_dense(cases[i], positive);
    direct_bf16_emulate = 0;
}

static void lenet_denses_match_reference(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    run_denses(lenet_denses, sizeof lenet_denses / sizeof lenet_denses[0], 0);
}

static void odd_denses_match_reference(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    run_denses(odd_denses, sizeof odd_denses / sizeof odd_denses[0], 0);
}

static void plain_tiles_denses_match_reference(void **state)
{
    (void)state;
    run_denses(lenet_denses, sizeof lenet_denses / sizeof lenet_denses[0], 1);
    run_denses(odd_denses, sizeof odd_denses / sizeof odd_denses[0], 1);
}

static void support_is_reported(void **state)
{
    (void)state;
    char why[256] = "";
    const int yes = direct_bf16_supported(why, sizeof why);
    __builtin_cpu_init();
    assert_int_equal(yes, __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
                              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"));
    if (!yes) /* the reason names what is missing */
        assert_non_null(strstr(why, "has no "));
    char tiny[8];
    direct_bf16_supported(tiny, sizeof tiny); /* a short buffer is cut, not overrun */
    assert_true(strlen(tiny) < sizeof tiny);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rounding_is_nearest_even),
        cmocka_unit_test(packing_pairs_along_the_sums),
        cmocka_unit_test(instruction_rounds_as_the_function),
        cmocka_unit_test(support_is_reported),
        cmocka_unit_test(plain_tiles_denses_match_reference),
        cmocka_unit_test(plain_tiles_convs_match_reference),
        cmocka_unit_test(lenet_denses_match_reference),
        cmocka_unit_test(odd_denses_match_reference),
        cmocka_unit_test(lenet_convs_match_reference),
        cmocka_unit_test(odd_convs_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
