/* Inside the bf16 products (bf16.h): the two register tiles, the packed
 * layouts they read, and a plain C version of each tile, so that the
 * packing and the walks can be checked on any CPU.
 *
 * A pair is two bf16 in one 32-bit word, the first in the low half: what
 * vdpbf16ps multiplies lane by lane and sums into one fp32 lane. Both
 * operands of a product are paired along the sum (the reduction), the
 * same two reduction indices in the same halves. */
#ifndef LB_DIRECT_BF16_TILES_H
#define LB_DIRECT_BF16_TILES_H

#include <stddef.h>
#include <stdint.h>

/* A pair tile: rows i < m (at most PAIR_ROWS), columns [0, cols) (at most
 * PAIR_COLS):
 *   rows[i][col] (+)= init[i] (0 without init)
 *                   + sum over s < steps of dot2(a[i * lda + s * a_step], b[off[s] + col])
 * stored, or added to what is there when add is set; rows are written in
 * order, so they may overlap. b is read up to 16 words past the last
 * column (a vector), whatever cols is. */
enum { PAIR_ROWS = 6, PAIR_VECS = 4, PAIR_COLS = PAIR_VECS * 16 };
typedef void pair_tile_fn(int m, int cols, float *const *rows, int add, const float *init,
                          const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step, const uint32_t *b,
                          const ptrdiff_t *off, int steps);

/* A dot tile, for weight gradients (the sum runs over images and
 * positions, so the vectors lie along it): for i < mk (at most DOT_ROWS),
 * t < nt (at most DOT_COLS),
 *   out[i * out_row + t] = sum over y < nrows, e < len of
 *                          g[i][y * g_row + e] * x[t][y * x_row + e]
 * over bf16 elements (pairs are consecutive elements). */
enum { DOT_ROWS = 4, DOT_COLS = 5 };
typedef void dot_tile_fn(int mk, int nt, float *out, ptrdiff_t out_row,
                         const uint16_t *const *g, const uint16_t *const *x, int nrows,
                         ptrdiff_t g_row, ptrdiff_t x_row, size_t len);

/* The same with g in fp32, rounded as it is loaded: for a layer with few
 * taps (conv1's 25), where rounding all of d_out first would cost about
 * as much as the product. Unless sums is NULL, sums[i * out_row] also
 * gets the fp32 sum of g[i]'s elements (a bias gradient), while they pass. */
typedef void dot_tile_f32_fn(int mk, int nt, float *out, ptrdiff_t out_row, float *sums,
                             const float *const *g, const uint16_t *const *x, int nrows,
                             ptrdiff_t g_row, ptrdiff_t x_row, size_t len);

/* The vdpbf16ps tiles (bf16_avx512.c) and the plain C ones (bf16_plain.c),
 * which sum in double. */
pair_tile_fn direct_bf16_pair_tile_avx512, direct_bf16_pair_tile_plain;
dot_tile_fn direct_bf16_dot_tile_avx512, direct_bf16_dot_tile_plain;
dot_tile_f32_fn direct_bf16_dot_tile_f32_avx512, direct_bf16_dot_tile_f32_plain;

/* Rounding runs with vcvtneps2bf16 (which rounds as direct_bf16_round):
 * dst[e] = round(src[e]); and pairs, dst[e] = (round(lo[e]), round(hi[e])),
 * hi NULL for zeros. */
void direct_bf16_round_run_avx512(uint16_t *dst, const float *src, size_t n);
void direct_bf16_pair_runs_avx512(uint32_t *dst, const float *lo, const float *hi, size_t n);

/* When set, the products use the plain tiles (tests on CPUs without the
 * instructions, and checks of the packing alone). Set it before a call,
 * never during one. */
extern int direct_bf16_emulate;

/* Packing, exposed for the tests.
 *
 * Convolution forward: the runs of the input, paired along the taps.
 * With C even, channels 2p and 2p + 1 are paired: packed[p][h][x*B + b]
 * = (in[2p][h][x][b], in[2p+1][h][x][b]). With C odd, neighbouring
 * columns of one channel are: packed[c][h][x*B + b] = (in[c][h][x][b],
 * in[c][h][x+1][b]), 0 past the row's end, and the kernel's columns are
 * taken two at a time (the last one alone when k is odd). */
int direct_bf16_conv_pairs_channels(int C);
size_t direct_bf16_conv_input_words(int B, int C, int H, int W);
void direct_bf16_pack_conv_input(uint32_t *packed, const float *in, int B, int C, int H, int W,
                                 int threads);

/* Dense: rows [0, n) of x[n][cols] paired two rows at a time,
 * packed[q][col] = (x[2q][col], x[2q+1][col]) (0 for a row past n), each
 * packed row ld >= cols words (0 past cols). */
void direct_bf16_pack_row_pairs(uint32_t *packed, ptrdiff_t ld, const float *x, int n,
                                int cols, int threads);
/* Columns paired: packed[r][q] = (x[r][2q], x[r][2q+1]) for x[rows][n]
 * with row stride ldx (0 past n), ceil(n / 2) words a packed row. */
void direct_bf16_pack_col_pairs(uint32_t *packed, const float *x, ptrdiff_t ldx, int rows,
                                int n, int threads);

#endif
