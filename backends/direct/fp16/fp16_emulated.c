/* The fp16 tiles in portable C (fp16_tiles.h): the arithmetic of the
 * AVX512_FP16 tiles of fp16_avx512.c, operation for operation and in the
 * same order, so that both give the same bits and the numerics are tested
 * on any CPU (direct_fp16_emulate). Slow (a few ns an FMA): for tests.
 *
 * Why direct_fp16_fma is exact. vfmadd231ph rounds a * b + c once. With
 * a, b, c fp16 (11 significant bits, exponents from -24 to 15):
 *   - p = a * b in fp32 is exact: 22 significant bits, and |p| lies in
 *     [2^-48, 2^32), well inside fp32's normal range;
 *   - p + c needs up to 80 bits (2^32 down to 2^-48), so s = fl32(p + c)
 *     may be inexact, and rounding s to fp16 could round twice wrongly
 *     (a sum just past a midpoint of fp16 rounded onto it by fp32, then
 *     to even). So the error e = (p + c) - s is computed exactly
 *     (Knuth's TwoSum: exact in fp32 barring overflow, which p + c cannot
 *     reach) and s is replaced by its neighbour of odd last bit on e's
 *     side when e != 0 and s is even: rounding to odd. Rounding to odd at
 *     24 bits and then to nearest at 11 <= 24 - 2 bits gives the nearest
 *     even rounding of the exact value (Boldo and Melquiond, 2008), also
 *     where fp16 is subnormal (fewer bits still) and at the overflow
 *     threshold 65520 (a midpoint, which an odd value never is).
 * The file is built with -ffp-contract=off (fp16.mk): a fused a * b + c
 * inside TwoSum would break it. tests/test_direct_fp16.c holds the
 * function to the exact sum rounded once (in binary128), ties and
 * subnormals included. */
#include <math.h>
#include <string.h>

#include "backends/direct/fp16/fp16.h"
#include "backends/direct/fp16/fp16_tiles.h"

/* x rounded to the nearest fp16, as a float: adding and taking away c,
 * whose spacing of floats is x's spacing of halves (2^-10 of x's power of
 * two, 2^-24 below 2^-14), rounds to it, ties to even; from 65520 on,
 * infinity. Selects, not branches, so that the loops vectorise. */
static inline float half_grid(float x)
{
    const float ax = fabsf(x);
    uint32_t e = fp16_bits_of(ax) & 0x7f800000u;
    e = e < 0x38800000u ? 0x38800000u : e;
    const float c = fp16_float_of(e + (13u << 23));
    float y = (ax + c) - c;
    y = y > 65504.0f ? INFINITY : y;
    return copysignf(y, x);
}

/* a * b + c rounded once to fp16, its value as a float (operands given as
 * the floats that fp16 values stand for) */
static inline float fma16(float a, float b, float c)
{
    const float p = a * b, s = p + c;
    const float p_part = s - c, c_part = s - p_part;
    const float e = (p - p_part) + (c - c_part);
    const uint32_t u = fp16_bits_of(s);
    /* to the odd neighbour on e's side (s finite: an infinite operand
     * makes e NaN, and s is then the answer) */
    const uint32_t to_odd = (e != 0.0f) & ~u & ((u & 0x7f800000u) != 0x7f800000u);
    const uint32_t away = (uint32_t)((e > 0.0f) == (s > 0.0f));
    return half_grid(fp16_float_of(u + to_odd * (2 * away - 1)));
}

uint16_t direct_fp16_fma(uint16_t a, uint16_t b, uint16_t c)
{
    return direct_fp16_round(fma16(direct_fp16_value_inline(a), direct_fp16_value_inline(b),
                                   direct_fp16_value_inline(c)));
}

void direct_fp16_row_tile_emulated(int m, int cols, float *const *rows, int add,
                                   const float *init, const uint32_t *a, ptrdiff_t lda,
                                   ptrdiff_t a_step, const uint16_t *b, const ptrdiff_t *off,
                                   int steps, int chain)
{
    if (!add)
        for (int i = 0; i < m; i++)
            for (int col = 0; col < cols; col++)
                rows[i][col] = init ? init[i] : 0.0f;
    float h[FP16_ROWS][FP16_COLS];
    for (int s0 = 0; s0 < steps; s0 += chain) {
        const int s1 = steps - s0 < chain ? steps : s0 + chain;
        for (int i = 0; i < m; i++)
            for (int col = 0; col < cols; col++)
                h[i][col] = 0.0f;
        for (int s = s0; s < s1; s++) {
            float x[FP16_COLS];
            for (int col = 0; col < cols; col++)
                x[col] = direct_fp16_value_inline(b[off[s] + col]);
            for (int i = 0; i < m; i++) {
                const float w = direct_fp16_value_inline((uint16_t)a[i * lda + s * a_step]);
                for (int col = 0; col < cols; col++)
                    h[i][col] = fma16(w, x[col], h[i][col]);
            }
        }
        /* every row folds after the chain, in order (rows may overlap) */
        for (int i = 0; i < m; i++)
            for (int col = 0; col < cols; col++)
                rows[i][col] += h[i][col];
    }
}

/* The 16 sums of a dot tile's accumulator, as the vector code adds them */
static float lanes_total(float sum[16])
{
    for (int half = 8; half >= 1; half /= 2)
        for (int l = 0; l < half; l++)
            sum[l] += sum[l + half];
    return sum[0];
}

void direct_fp16_dot_tile_emulated(int mk, int nt, float *out, ptrdiff_t out_row,
                                   const uint16_t *const *g, const uint16_t *const *x,
                                   int nrows, ptrdiff_t g_row, ptrdiff_t x_row, size_t len,
                                   int chain)
{
    for (int i = 0; i < mk; i++)
        for (int t = 0; t < nt; t++) {
            float h[FP16_LANES] = {0}, sum[16] = {0};
            int in_chain = 0;
            for (int y = 0; y < nrows; y++)
                for (size_t j = 0; j < len; j += FP16_LANES) {
                    float gv[FP16_LANES] = {0}, xv[FP16_LANES] = {0}; /* lanes past len: 0 * 0 */
                    const size_t lanes = len - j < FP16_LANES ? len - j : FP16_LANES;
                    for (size_t l = 0; l < lanes; l++) {
                        gv[l] = direct_fp16_value_inline(g[i][y * g_row + (ptrdiff_t)(j + l)]);
                        xv[l] = direct_fp16_value_inline(x[t][y * x_row + (ptrdiff_t)(j + l)]);
                    }
                    for (int l = 0; l < FP16_LANES; l++)
                        h[l] = fma16(gv[l], xv[l], h[l]);
                    if (++in_chain == chain || (y == nrows - 1 && j + FP16_LANES >= len)) {
                        for (int l = 0; l < 16; l++)
                            sum[l] += h[l] + h[l + 16];
                        memset(h, 0, sizeof h);
                        in_chain = 0;
                    }
                }
            out[i * out_row + t] = lanes_total(sum);
        }
}
