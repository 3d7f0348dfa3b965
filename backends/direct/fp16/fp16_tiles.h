/* Inside the fp16 products (fp16.h): the two register tiles, each in
 * AVX512_FP16 (fp16_avx512.c) and emulated in portable C (fp16_emulated.c)
 * with the same arithmetic in the same order, bit for bit, so that the
 * numerics and the walks of fp16.c are tested on any CPU; and the
 * conversion runs per instruction set (fp16_convert.c).
 *
 * Both tiles sum in chains: a chain of at most `chain` products is
 * accumulated by fp16 FMAs from +0 (each rounds once, a * b + c exactly,
 * then to fp16), and its value, widened exactly to fp32, is added in fp32
 * where the sum is kept. */
#ifndef LB_DIRECT_FP16_TILES_H
#define LB_DIRECT_FP16_TILES_H

#include <stddef.h>
#include <stdint.h>

/* A row tile: rows i < m (at most FP16_ROWS), columns [0, cols) (at most
 * FP16_COLS), each a sum over steps s of a[i * lda + s * a_step] (one half,
 * broadcast) times b[off[s] + col] (a vector along the columns). Each word
 * of a holds its half twice (low and high: direct_fp16_double), so that a
 * 32-bit broadcast fills the register: a load alone, where a 16-bit one
 * (vpbroadcastw) also takes a shuffle on a port the FMAs need.
 *   r = add ? rows[i][col] : (init ? init[i] : 0), stored first unless add;
 *   then for each chain of steps [s0, s0 + chain) in turn, for each row i
 *   in turn: rows[i][col] += the chain's fp16 sum (fp32 addition).
 * With add, rows may overlap (each fold reads what the previous one
 * stored); without, they do not (the AVX-512 tile stores the first
 * chain's start + value, the same float, without storing the start). b is
 * read up to 32 halves past the last column (a vector), whatever cols is. */
enum { FP16_ROWS = 6, FP16_VECS = 4, FP16_LANES = 32, FP16_COLS = FP16_VECS * FP16_LANES };
typedef void fp16_row_tile_fn(int m, int cols, float *const *rows, int add, const float *init,
                              const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step,
                              const uint16_t *b, const ptrdiff_t *off, int steps, int chain);

/* A half twice in a word, as the row tile's broadcast operand wants it */
static inline uint32_t direct_fp16_double(uint16_t h) { return (uint32_t)h * 0x10001u; }

/* A dot tile, for weight gradients (the sum runs over images and
 * positions, so the vectors lie along it): for i < mk (at most
 * FP16_DOT_ROWS), t < nt (at most FP16_DOT_COLS),
 *   out[i * out_row + t] = sum over y < nrows, e < len of
 *                          g[i][y * g_row + e] * x[t][y * x_row + e]
 * in 32 lanes (lane e % 32; a row's last vector has 0 in its lanes past
 * len), each lane's products chained `chain` vectors at a time over the
 * rows in order; a chain's 32 values fold into 16 fp32 sums, lane l and
 * l + 16 added first: sum[l] += (h[l] + h[l + 16]); at the end the 16
 * sums are added as a tree: l += l + 8, then + 4, + 2, + 1. */
enum { FP16_DOT_ROWS = 4, FP16_DOT_COLS = 5 };
typedef void fp16_dot_tile_fn(int mk, int nt, float *out, ptrdiff_t out_row,
                              const uint16_t *const *g, const uint16_t *const *x, int nrows,
                              ptrdiff_t g_row, ptrdiff_t x_row, size_t len, int chain);

fp16_row_tile_fn direct_fp16_row_tile_avx512, direct_fp16_row_tile_emulated;
fp16_dot_tile_fn direct_fp16_dot_tile_avx512, direct_fp16_dot_tile_emulated;

/* A float's bits and back (type punning without aliasing) */
typedef union fp16_pun {
    float f;
    uint32_t u;
} fp16_pun;
static inline uint32_t fp16_bits_of(float x) { return ((fp16_pun){.f = x}).u; }
static inline float fp16_float_of(uint32_t u) { return ((fp16_pun){.u = u}).f; }

/* What a half stands for (direct_fp16_value), inline for the emulation's
 * loops: vcvtph2ps's value, NaN made quiet. */
static inline float direct_fp16_value_inline(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) /* infinity, or NaN */
        return fp16_float_of(sign | 0x7f800000u | mantissa << 13 | (mantissa ? 0x400000u : 0));
    if (exponent)
        return fp16_float_of(sign | (exponent + 112) << 23 | mantissa << 13);
    return fp16_float_of(sign | fp16_bits_of((float)mantissa * 0x1p-24f)); /* subnormal, zero */
}

/* One fp16 FMA as vfmadd231ph computes it: a * b + c rounded once to fp16
 * (nearest even), subnormals kept (the FP16 instructions ignore MXCSR's
 * DAZ and FTZ). fp16_emulated.c argues why it is exact. */
uint16_t direct_fp16_fma(uint16_t a, uint16_t b, uint16_t c);

/* When set, the products use the emulated tiles (tests on CPUs without
 * AVX512_FP16). Set it before a call, never during one. */
extern int direct_fp16_emulate;

/* The conversion runs of fp16.h per instruction set (dst[e] = round(src[e]
 * * scale); dst[e] = value(src[e]) * scale): the plain functions, F16C's
 * 8 at a time, AVX-512's 16. Call the vector ones only where cpu_has says
 * CPU_F16C, or CPU_AVX512F. */
typedef void fp16_round_run_fn(uint16_t *dst, const float *src, size_t n, float scale);
typedef void fp16_value_run_fn(float *dst, const uint16_t *src, size_t n, float scale);
fp16_round_run_fn direct_fp16_round_run_plain, direct_fp16_round_run_f16c,
    direct_fp16_round_run_avx512;
fp16_value_run_fn direct_fp16_value_run_plain, direct_fp16_value_run_f16c,
    direct_fp16_value_run_avx512;

/* dst[e] = direct_fp16_double(direct_fp16_round(src[e])): the row tile's
 * broadcast operand rounded and doubled in one pass (AVX-512 where the CPU
 * has it) */
void direct_fp16_round_doubled_run(uint32_t *dst, const float *src, size_t n);

#endif
