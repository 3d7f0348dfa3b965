/* The direct backend's kernels (direct.h) over the register tiles of
 * kernel_tiles.h, built once per instruction set: LB_DIRECT_ISA names the
 * build (its table is direct_kernels_<isa>), the Makefile puts that set's
 * -march after the build's own, and everything else here is static.
 *
 * In the CHWN layout a stride-1 convolution is a GEMM whose unfolded
 * operand never needs building: for output row y, the inputs of tap
 * (c, ki, kj) over every (x, image) are one contiguous run of the input,
 * in[c][y + ki][kj..][..], so a register tile can read them where they are.
 * Three kernels share that idea:
 *   - forward: out[k][y][n] = bias[k] + sum over taps of w[k][tap] * run;
 *   - input gradient: row by row of d_in, the products of the weights
 *     with the output gradient's rows that reach it, summed in registers
 *     and added where they belong, instead of an unfolded gradient stored
 *     and folded back;
 *   - weight gradient: dot products of d_out's rows with the runs.
 * What this saves against OpenBLAS on the unfolded matrices (conv2, one
 * Zen core): the unfolding and folding, OpenBLAS packing both operands and
 * zeroing its output, and the transposes, about a sixth of a step.
 *
 * A dense layer is the same tile over other walks: the forward pass and
 * the input gradient sum over the inputs (output channels) KC at a time,
 * so that the rows of the other operand a column tile reads stay in L1;
 * the weight gradient is d_out times the input transposed once, so that
 * its rows are read a vector at a time. On fc1 at batch 128 (one Zen 1
 * core) that is as fast as OpenBLAS at its best, 9.2 ms a step for the
 * three products, where OpenBLAS took 10.6 ms.
 *
 * Built with -ffp-contract=fast (module.mk): each multiply-add is one FMA
 * where the CPU has them. The vectors are GCC's generic vector type as
 * wide as the build's registers (16 floats with AVX-512, 8 with AVX2, 4
 * with SSE), so the compiler picks the instructions; the tiles are sized
 * for the build's register file (MR x NV accumulators: 16 registers below
 * AVX-512, 32 with it). */
#include "backends/chwn/chwn_transpose.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/kernel_tiles.h"
#include "base/cpu.h"

#include <omp.h>
#include <stddef.h>
#include <string.h>

#ifndef LB_DIRECT_ISA
#error "kernels.c is built once per instruction set, with -DLB_DIRECT_ISA set to one of DIRECT_ISAS (module.mk)"
#endif
#define ISA_PASTE(a, b) a##b
#define ISA_NAME(a, b) ISA_PASTE(a, b)
#define ISA_STRING_(x) #x
#define ISA_STRING(x) ISA_STRING_(x)

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

static void conv_forward(float *out, const float *in, const float *weight_bias, int B,
                              int C, int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    /* taps (c, ki, kj): runs a plane, a row and an image column apart */
    const walk wk = {{C, kernel, kernel},
                     {(ptrdiff_t)H * W * B, (ptrdiff_t)W * B, B},
                     {kernel * kernel, kernel, 1}};
    const int blocks = (K + MR - 1) / MR;
    /* a block of output channels at a time: their weights stay in L1 while
     * the runs of consecutive tiles overlap (kj shifts them by B) */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int kb = 0; kb < blocks; kb++)
        for (int y = 0; y < OH; y++) {
            const int k0 = block_start(K, blocks, kb), m = block_start(K, blocks, kb + 1) - k0;
            float *rows[MR], bias[MR];
            for (int i = 0; i < m; i++) {
                rows[i] = out + (size_t)(k0 + i) * plane_out + (size_t)y * row;
                bias[i] = weight_bias[(size_t)(k0 + i) * (R + 1) + R];
            }
            const float *a = weight_bias + (size_t)k0 * (R + 1), *b = in + (size_t)y * W * B;
            int cols;
            for (size_t j = 0; j < row; j += cols) {
                const int nv = tile_at(j, row, &cols);
                float *at[MR];
                for (int i = 0; i < m; i++)
                    at[i] = rows[i] + j;
                tile(m, nv, at, 0, bias, a, R + 1, b + j, &wk);
            }
        }
}

/* (the output gradient's rows as the input gradient reads them are
 * DIRECT_ROW_PAD floats longer than a row: direct.h) */
enum { ROW_PAD = DIRECT_ROW_PAD };

/* The input gradient row by row: d_in[c][iy][kj * B + n] gets, for each
 * kj, the sum over the output channels k and the kernel rows ki that reach
 * row iy of w[k][c][ki][kj] * d_out[k][iy - ki][n]. A tile's rows are
 * (channel, kj) pairs, MR at a time across the channels (conv2's 5 x 4
 * tiles of one channel left 4 of the 2fma build's 24 accumulators idle),
 * by a column tile, summing over (ki, k): up to kernel x K taps, so that
 * each element of d_in takes a few additions (one per kj), not one per
 * tap. The taps come in chunks of at most `taps_in_l1` (whole kernel rows
 * of output channels where one fits), every block of pairs resuming its
 * sums (in `sums`, NR floats a pair) chunk by chunk: a chunk's
 * output-gradient rows stay in L1 while every block passes. Each element
 * gets the same taps in the same order, and its additions in the same
 * order (column tile by column tile), whatever the blocks and chunks. */
static void input_gradient_row(float *d_in, float *sums, const float *out_rows,
                               const float *w_t, int B, int C, int H, int W, int K, int kernel,
                               int iy, int c0, int c1, int taps_in_l1)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    const size_t row = (size_t)OW * B, ld = row + ROW_PAD, plane_in = (size_t)H * W * B;
    const int ki_lo = iy - (OH - 1) > 0 ? iy - (OH - 1) : 0;
    const int ki_hi = iy < kernel - 1 ? iy : kernel - 1;
    /* a chunk: as many whole kernel rows of taps as taps_in_l1 holds, or
     * a part of one where it holds less */
    const int rows_per_chunk = taps_in_l1 / K > 1 ? taps_in_l1 / K : 1;
    const int chunks = taps_in_l1 >= K ? 1 : (K + taps_in_l1 - 1) / taps_in_l1;
    for (int c = c0; c < c1; c++)
        memset(d_in + c * plane_in + (size_t)iy * W * B, 0, sizeof(float) * W * B);
    /* the rows (c, kj), c0 * kernel on */
    const int pairs = (c1 - c0) * kernel, blocks = (pairs + MR - 1) / MR;
    int cols;
    for (size_t j = 0; j < row; j += cols) {
        const int nv = tile_at(j, row, &cols);
        /* taps (ki, k): the output rows iy - ki, going up; the weights
         * w_t[((ki * C + c) * kernel + kj) * K + k] */
        for (int ki = ki_lo; ki <= ki_hi; ki += rows_per_chunk)
            for (int q = 0; q < chunks; q++) {
                const int k0 = block_start(K, chunks, q), n = block_start(K, chunks, q + 1) - k0;
                const int rows_here = ki_hi - ki + 1 < rows_per_chunk ? ki_hi - ki + 1 : rows_per_chunk;
                const walk wk = {{1, rows_here, n},
                                 {0, -(ptrdiff_t)(K * ld), (ptrdiff_t)ld},
                                 {0, (ptrdiff_t)C * kernel * K, 1}};
                const float *b = out_rows + ((size_t)(iy - ki) * K + k0) * ld + j;
                const int how = ki == ki_lo && q == 0 ? TILE_STORE : TILE_RESUME;
                for (int pb = 0; pb < blocks; pb++) {
                    const int p0 = block_start(pairs, blocks, pb);
                    const int m = block_start(pairs, blocks, pb + 1) - p0;
                    float *rows[MR];
                    for (int i = 0; i < m; i++)
                        rows[i] = sums + (size_t)(p0 + i) * NR;
                    const float *a = w_t + (((size_t)ki * C + c0) * kernel + p0) * K + k0;
                    tile(m, nv, rows, how, NULL, a, K, b, &wk);
                }
            }
        /* each pair's sums added where they belong */
        for (int p = 0; p < pairs; p++) {
            const int c = c0 + p / kernel, kj = p % kernel;
            float *dst = d_in + c * plane_in + (size_t)iy * W * B + j + (size_t)kj * B;
            const float *sum = sums + (size_t)p * NR;
            if (!nv)
                dst[0] += sum[0];
            for (int v = 0; v < nv; v++)
                store(dst + v * VL, load(dst + v * VL) + load(sum + v * VL));
        }
    }
}

_Static_assert((int)NR <= (int)DIRECT_PAIR_SUM_FLOATS,
               "direct_conv_scratch_floats (dispatch.c) keeps DIRECT_PAIR_SUM_FLOATS a pair");

static void conv_backward_data(float *d_in, const float *d_out, const float *weight_bias,
                                    float *scratch, int B, int C, int H, int W, int K,
                                    int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t row = (size_t)OW * B, ld = row + ROW_PAD, plane_out = (size_t)OH * row;
    /* the weights transposed, [ki][c][kj][K], so that the (c, kj) rows of
     * a kernel row are K floats apart across the channels; the output
     * gradient's rows reordered [OH][K][ld], so that a tap is a step
     * through each; and the pairs' sums, NR floats each */
    float *w_t = scratch, *out_rows = w_t + direct_line_floats((size_t)K * R);
    float *sums = out_rows + (size_t)OH * K * ld;
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < kernel; ki++)
            chwn_transpose(w_t + ((size_t)ki * C + c) * kernel * K, K,
                           weight_bias + (size_t)(c * kernel + ki) * kernel, R + 1, K, kernel);
    for (int oy = 0; oy < OH; oy++)
        for (int k = 0; k < K; k++)
            memcpy(out_rows + ((size_t)oy * K + k) * ld, d_out + k * plane_out + oy * row,
                   sizeof(float) * row);
    /* a chunk's output-gradient rows (NR floats of each) in the L1 data
     * cache: conv2 at 48 KiB, 3 of its 5 kernel rows (38 KiB). On a
     * Sapphire Rapids-class Xeon one row a chunk was 4-5% slower, half a
     * row 9% slower (more sums resumed), all five rows (64 KiB) 1% */
    const int chunk_taps = cpu_l1d_bytes(32 * 1024) / (NR * (int)sizeof(float));
    const int taps_in_l1 = chunk_taps > 0 ? chunk_taps : 1;
    /* threads take whole input channels; each element's additions come
     * in the same order for any split */
    const int parts = threads < C ? threads : C;
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int p = 0; p < parts; p++) {
        const int c0 = (int)((long)C * p / parts), c1 = (int)((long)C * (p + 1) / parts);
        for (int iy = 0; iy < H; iy++)
            input_gradient_row(d_in, sums + (size_t)c0 * kernel * NR, out_rows, w_t, B, C, H,
                               W, K, kernel, iy, c0, c1, taps_in_l1);
    }
}

/* The columns of each row from `from` on that weight_tile leaves (fewer
 * than a vector), summed into tail[i * WT + t]; out of line, so that its
 * registers do not crowd the tile's accumulators. */
static __attribute__((noinline)) void weight_tail(float *tail, int mk, int nt,
                                                  const float *const *g,
                                                  const float *const *runs, int B, int H,
                                                  int W, int kernel, size_t from)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    const size_t row = (size_t)OW * B;
    for (int y = 0; y < OH; y++)
        for (size_t j = from; j < row; j++)
            for (int i = 0; i < mk; i++)
                for (int t = 0; t < nt; t++)
                    tail[i * WT + t] += g[i][(size_t)y * row + j] * runs[t][(size_t)y * W * B + j];
}

/* d_weight[k][r] for channels k0..k0+mk and taps r0..r0+nt: each the dot
 * product of channel k's output gradient with tap r's runs, row by row.
 * mk and nt are constants where this is inlined. */
ALWAYS_INLINE void weight_tile(const int mk, const int nt, float *d_weight_bias,
                               const float *d_out, const float *in, int B, int C, int H,
                               int W, int kernel, int k0, int r0)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const size_t whole = row / VL * VL; /* the columns taken a vector at a time */
    const float *runs[WT], *g[WK];
UNROLL(8)
    for (int t = 0; t < nt; t++) {
        const int r = r0 + t, c = r / (kernel * kernel), ki = r / kernel % kernel,
                  kj = r % kernel;
        runs[t] = in + ((size_t)(c * H + ki) * W + kj) * B;
    }
UNROLL(4)
    for (int i = 0; i < mk; i++)
        g[i] = d_out + (size_t)(k0 + i) * plane_out;
    vec acc[WK][WT];
UNROLL(4)
    for (int i = 0; i < mk; i++)
UNROLL(8)
        for (int t = 0; t < nt; t++)
            acc[i][t] = splat(0.0f);
    /* nothing but the vectors in this loop, so that every accumulator
     * stays in its register from the first row to the last */
    for (int y = 0; y < OH; y++) {
        const size_t out_at = (size_t)y * row, in_at = (size_t)y * W * B;
        TAPS_AS_WRITTEN
        for (size_t j = 0; j < whole; j += VL) {
            vec e[WK];
UNROLL(4)
            for (int i = 0; i < mk; i++)
                e[i] = load(g[i] + out_at + j);
UNROLL(8)
            for (int t = 0; t < nt; t++) {
                vec s = load(runs[t] + in_at + j);
                in_register(&s); /* one load for every channel, not one each */
UNROLL(4)
                for (int i = 0; i < mk; i++)
                    acc[i][t] += e[i] * s;
            }
        }
    }
    float tail[WK * WT] = {0};
    if (whole < row)
        weight_tail(tail, mk, nt, g, runs, B, H, W, kernel, whole);
#if defined(VEC_IS_ZMM)
    /* the lanes summed 16 accumulators at a time (the same floats) */
    enum { GROUPS = (WK * WT + 15) / 16 };
    vec all[GROUPS * 16];
    float sums[GROUPS * 16];
UNROLL(4)
    for (int i = 0; i < mk; i++)
UNROLL(8)
        for (int t = 0; t < nt; t++)
            all[i * nt + t] = acc[i][t];
    for (int k = mk * nt; k < (mk * nt + 15) / 16 * 16; k++)
        all[k] = splat(0.0f);
    for (int k = 0; k < mk * nt; k += 16)
        sum_lanes_16(all + k, sums + k);
UNROLL(4)
    for (int i = 0; i < mk; i++)
UNROLL(8)
        for (int t = 0; t < nt; t++)
            d_weight_bias[(size_t)(k0 + i) * (R + 1) + r0 + t] = sums[i * nt + t] + tail[i * WT + t];
#else
UNROLL(4)
    for (int i = 0; i < mk; i++)
UNROLL(8)
        for (int t = 0; t < nt; t++)
            d_weight_bias[(size_t)(k0 + i) * (R + 1) + r0 + t] =
                sum_lanes(acc[i][t]) + tail[i * WT + t];
#endif
}

/* weight_tile with mk and nt constants: one function for each shape, out
 * of line, so that each hot loop has the registers to itself (all shapes
 * inlined into one function reloaded pointers and accumulators from the
 * stack in the 4x5 loop; scripts/check-spills holds the loops to it) */
typedef void weight_fn(float *d_weight_bias, const float *d_out, const float *in, int B, int C,
                       int H, int W, int kernel, int k0, int r0);
#define WEIGHT_SHAPE(MK, NT)                                                                 \
    static __attribute__((noinline)) void weight_##MK##x##NT(                                \
        float *d_weight_bias, const float *d_out, const float *in, int B, int C, int H,      \
        int W, int kernel, int k0, int r0)                                                   \
    {                                                                                        \
        weight_tile(MK, NT, d_weight_bias, d_out, in, B, C, H, W, kernel, k0, r0);           \
    }
#if LB_DIRECT_WT >= 8
#define WEIGHT_SHAPES(MK)                                                                    \
    WEIGHT_SHAPE(MK, 1) WEIGHT_SHAPE(MK, 2) WEIGHT_SHAPE(MK, 3) WEIGHT_SHAPE(MK, 4)          \
    WEIGHT_SHAPE(MK, 5) WEIGHT_SHAPE(MK, 6) WEIGHT_SHAPE(MK, 7) WEIGHT_SHAPE(MK, 8)
#define WEIGHT_ROW(MK)                                                                       \
    {weight_##MK##x1, weight_##MK##x2, weight_##MK##x3, weight_##MK##x4,                     \
     weight_##MK##x5, weight_##MK##x6, weight_##MK##x7, weight_##MK##x8}
#elif LB_DIRECT_WT >= 6
#define WEIGHT_SHAPES(MK)                                                                    \
    WEIGHT_SHAPE(MK, 1) WEIGHT_SHAPE(MK, 2) WEIGHT_SHAPE(MK, 3) WEIGHT_SHAPE(MK, 4)          \
    WEIGHT_SHAPE(MK, 5) WEIGHT_SHAPE(MK, 6)
#define WEIGHT_ROW(MK)                                                                       \
    {weight_##MK##x1, weight_##MK##x2, weight_##MK##x3, weight_##MK##x4,                     \
     weight_##MK##x5, weight_##MK##x6}
#else
#define WEIGHT_SHAPES(MK)                                                                    \
    WEIGHT_SHAPE(MK, 1) WEIGHT_SHAPE(MK, 2) WEIGHT_SHAPE(MK, 3) WEIGHT_SHAPE(MK, 4)          \
    WEIGHT_SHAPE(MK, 5)
#define WEIGHT_ROW(MK)                                                                       \
    {weight_##MK##x1, weight_##MK##x2, weight_##MK##x3, weight_##MK##x4, weight_##MK##x5}
#endif
WEIGHT_SHAPES(1)
WEIGHT_SHAPES(2)
#if LB_DIRECT_WK >= 4
WEIGHT_SHAPES(3)
WEIGHT_SHAPES(4)
#endif
#if LB_DIRECT_WK >= 5
WEIGHT_SHAPES(5)
#endif

/* weights[mk - 1][nt - 1]: the function of each shape */
static weight_fn *const weights[WK][WT] = {
    WEIGHT_ROW(1), WEIGHT_ROW(2),
#if LB_DIRECT_WK >= 4
    WEIGHT_ROW(3), WEIGHT_ROW(4),
#endif
#if LB_DIRECT_WK >= 5
    WEIGHT_ROW(5),
#endif
};
#undef WEIGHT_ROW
#undef WEIGHT_SHAPES
#undef WEIGHT_SHAPE

static void weight_block(int mk, int nt, float *d_weight_bias, const float *d_out,
                         const float *in, int B, int C, int H, int W, int kernel, int k0, int r0)
{
    weights[mk - 1][nt - 1](d_weight_bias, d_out, in, B, C, H, W, kernel, k0, r0);
}

static void conv_backward_weights(float *d_weight_bias, const float *d_out, const float *in,
                                  int B, int C, int H, int W, int K, int kernel, int threads)
{
    const int R = C * kernel * kernel;
    const int tap_blocks = (R + WT - 1) / WT;
#if LB_DIRECT_EVEN
    /* blocks of nearly equal channel counts, the outer loop: a block's
     * output gradient (conv2: 4 channels, 32 KiB at 32 images) stays in L1
     * while the runs of every tap block pass, so the larger operand is
     * read once, not once per tap block; the taps in blocks of nearly
     * equal counts too (conv2's 500 by 6: 5 or 6, not a last block of 2) */
    const int k_blocks = (K + WK - 1) / WK;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int kb = 0; kb < k_blocks; kb++)
        for (int rb = 0; rb < tap_blocks; rb++) {
            const int k0 = block_start(K, k_blocks, kb), mk = block_start(K, k_blocks, kb + 1) - k0;
            const int r0 = block_start(R, tap_blocks, rb);
            const int nt = block_start(R, tap_blocks, rb + 1) - r0;
            weight_block(mk, nt, d_weight_bias, d_out, in, B, C, H, W, kernel, k0, r0);
        }
#else
    /* a block of taps at a time, their runs staying in L1 while every
     * channel's output gradient passes */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int rb = 0; rb < tap_blocks; rb++) {
        const int r0 = rb * WT, nt = R - r0 < WT ? R - r0 : WT;
        for (int k0 = 0; k0 < K; k0 += WK)
            weight_block(K - k0 < WK ? K - k0 : WK, nt, d_weight_bias, d_out, in, B, C, H, W,
                         kernel, k0, r0);
    }
#endif
}

static void conv_backward_params(float *d_weight_bias, const float *d_out, const float *in,
                                 int B, int C, int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    conv_backward_weights(d_weight_bias, d_out, in, B, C, H, W, K, kernel, threads);
    /* the biases: each channel's gradients summed */
    const size_t plane_out = (size_t)OH * OW * B;
    for (int k = 0; k < K; k++)
        d_weight_bias[(size_t)k * (R + 1) + R] = sum_run(d_out + (size_t)k * plane_out, plane_out);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* Inputs (or output channels) a forward or input-gradient tile sums over
 * before it adds its partial sums to the output: KC x NR floats of the
 * other operand, 16 KiB, stay in L1 while a block of rows passes over
 * every column tile. */
enum { KC = 256 };

/* Rows k0..k0+m of out[][ld], columns [0, B): for each, the sum over
 * `taps` taps of a weight (a + i * a_row + t * a_tap for row i, tap t)
 * times a row of b (b + t * b_tap), plus init[i] if given. Taken in chunks
 * of KC taps: the first chunk stores, the others add. */
static void chunked_rows(float *out, size_t ld, int k0, int m, const float *init, int B,
                         const float *a, ptrdiff_t a_row, ptrdiff_t a_tap, const float *b,
                         ptrdiff_t b_tap, int taps)
{
    for (int t0 = 0; t0 < taps; t0 += KC) {
        const int n = taps - t0 < KC ? taps - t0 : KC;
        const walk wk = {{1, 1, n}, {0, 0, b_tap}, {0, 0, a_tap}};
        int cols;
        for (size_t j = 0; j < (size_t)B; j += cols) {
            const int nv = tile_at(j, B, &cols);
            float *rows[MR];
            for (int i = 0; i < m; i++)
                rows[i] = out + (size_t)(k0 + i) * ld + j;
            tile(m, nv, rows, t0 > 0, t0 > 0 ? NULL : init, a + t0 * a_tap, a_row,
                 b + t0 * b_tap + j, &wk);
        }
    }
}

/* A dense pass of too few multiply-adds to be worth waking a second
 * thread for: fc2's forward pass (500 x 10 at batch 128) took longer on two
 * than on one, its backward pass (two such products) less. */
static int dense_threads(int threads, double multiply_adds)
{
    return multiply_adds < (double)(1 << 20) ? 1 : threads;
}

static void dense_forward(float *out, const float *in, const float *weight,
                               const float *bias, int B, int n_in, int n_out, int threads)
{
    threads = dense_threads(threads, (double)B * n_in * n_out);
    const int blocks = (n_out + MR - 1) / MR;
    /* handed out as they are asked for: on a shared machine a thread held
     * off its core leaves its share to the other */
#pragma omp parallel for schedule(dynamic, 2) num_threads(threads) if (threads > 1 && blocks > 1)
    for (int kb = 0; kb < blocks; kb++) {
        const int k0 = block_start(n_out, blocks, kb), m = block_start(n_out, blocks, kb + 1) - k0;
        /* taps: the inputs, a weight and a row of `in` apart */
        chunked_rows(out, B, k0, m, bias + k0, B, weight + (size_t)k0 * n_in, n_in, 1, in, B,
                     n_in);
    }
}

/* Row blocks of the input gradient per piece of work: a piece about as
 * long as a column strip of the weight gradient. */
enum { BAND = 4 };

/* Columns k0..k1 of the weights fetched towards L2 ahead of the tiles
 * that read them down the columns (fc1: 3.2 KB apart, no hardware
 * prefetcher follows), so that their misses overlap (fc1's backward pass
 * 4% faster on a Sapphire Rapids-class Xeon, notes/intel-kernels.md) */
static void prefetch_columns(const float *weight, int n_in, int n_out, int k0, int k1)
{
    for (int t = 0; t < n_out; t++) {
        const char *first = (const char *)(weight + (size_t)t * n_in + k0);
        const char *last = (const char *)(weight + (size_t)t * n_in + k1 - 1);
        for (const char *p = first; p <= last; p += 64)
            __builtin_prefetch(p, 0, 2);
        __builtin_prefetch(last, 0, 2);
    }
}

/* Images at a time in a strip's transposed input (NR inputs of each): the
 * strip is written where its tiles read it, in L1, not transposed whole
 * beforehand into scratch that has gone cold since the last step (fc2's
 * 500 x 128, rows 2,000 bytes apart: 150 us of misses on a Sapphire
 * Rapids-class Xeon, the transposition itself 11 us) */
enum { STRIP_IMAGES = 128 };

static void dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const float *weight,
                                int B, int n_in, int n_out, int threads)
{
    /* the weight gradient, and the input gradient unless d_in is NULL */
    threads = dense_threads(threads, (d_in ? 2.0 : 1.0) * B * n_in * n_out);
    const int out_blocks = (n_out + MR - 1) / MR, strips = (n_in + NR - 1) / NR;
    const int in_blocks = (n_in + MR - 1) / MR;
    const int bands = d_in ? (in_blocks + BAND - 1) / BAND : 0;
    /* pieces: column strips of d_weight, then bands of d_in's rows; each
     * element is one tile's sum, in the same order for any thread count */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
    for (int piece = 0; piece < strips + bands; piece++) {
        if (piece < strips) {
            /* the weight gradient is d_out times the input transposed:
             * strip_t[b][j] = in[(j0 + j) * B + b0 + b], whose rows a tile
             * reads a vector at a time; taps: the images, a column of d_out
             * and a row of strip_t apart, resumed image chunk by chunk */
            float strip_t[STRIP_IMAGES * NR] __attribute__((aligned(64)));
            const int j0 = piece * NR, width = n_in - j0 < NR ? n_in - j0 : NR;
            for (int b0 = 0; b0 < B; b0 += STRIP_IMAGES) {
                const int nb = B - b0 < STRIP_IMAGES ? B - b0 : STRIP_IMAGES;
                chwn_transpose(strip_t, NR, in + (size_t)j0 * B + b0, B, width, nb);
                const walk wk = {{1, 1, nb}, {0, 0, NR}, {0, 0, 1}};
                int cols;
                for (int j = 0; j < width; j += cols) {
                    const int nv = tile_at(j, width, &cols);
                    for (int kb = 0; kb < out_blocks; kb++) {
                        const int k0 = block_start(n_out, out_blocks, kb);
                        const int m = block_start(n_out, out_blocks, kb + 1) - k0;
                        float *rows[MR];
                        for (int i = 0; i < m; i++)
                            rows[i] = d_weight + (size_t)(k0 + i) * n_in + j0 + j;
                        tile(m, nv, rows, b0 ? TILE_RESUME : TILE_STORE, NULL,
                             d_out + (size_t)k0 * B + b0, B, strip_t + j, &wk);
                    }
                }
            }
            continue;
        }
        const int band = piece - strips, last = (band + 1) * BAND;
        prefetch_columns(weight, n_in, n_out, block_start(n_in, in_blocks, band * BAND),
                         block_start(n_in, in_blocks, last < in_blocks ? last : in_blocks));
        for (int kb = band * BAND; kb < last && kb < in_blocks; kb++) {
            const int k0 = block_start(n_in, in_blocks, kb), m = block_start(n_in, in_blocks, kb + 1) - k0;
            /* taps: the output channels, a row of weights and a row of
             * d_out apart; rows k0.. of d_in are columns of the weights */
            chunked_rows(d_in, B, k0, m, NULL, B, weight + k0, 1, n_in, d_out, B, n_out);
        }
    }
    for (int k = 0; k < n_out; k++)
        d_bias[k] = sum_run(d_out + (size_t)k * B, B);
}

/* ---------------------------------------------------------------------- */
/* This build's table                                                       */

/* Whether the CPU and its OS run what this build was compiled for: the
 * features its flags enable (module.mk), asked of base/cpu.h */
#if defined(__AVX512F__)
#define BUILD_FEATURES (CPU_AVX512 | CPU_AVX2 | CPU_FMA | CPU_F16C | CPU_AVX)
#elif defined(__AVX2__)
#define BUILD_FEATURES (CPU_AVX2 | CPU_FMA | CPU_F16C | CPU_AVX)
#else
#define BUILD_FEATURES 0u
#endif
static int cpu_runs(void) { return cpu_has(BUILD_FEATURES); }

/* 2: tiles fitted to cores that retire two 512-bit FMAs a cycle (dispatch.c
 * prefers this build there only) */
#ifndef LB_DIRECT_FMA_PORTS
#define LB_DIRECT_FMA_PORTS 0
#endif

#if defined(__AVX512F__)
#define ISA_WORDS "AVX-512"
#elif defined(__AVX2__)
#define ISA_WORDS "AVX2 + FMA"
#elif defined(__AVX__)
#define ISA_WORDS "AVX"
#else
#define ISA_WORDS "SSE2"
#endif

#if LB_DIRECT_FMA_PORTS == 2
#define FITTED_WORDS ", fitted to two 512-bit FMA ports"
#else
#define FITTED_WORDS ""
#endif

const direct_kernels ISA_NAME(direct_kernels_, LB_DIRECT_ISA) = {
    .isa = ISA_STRING(LB_DIRECT_ISA),
    .description = ISA_WORDS ", " ISA_STRING(LB_DIRECT_VL) "-float vectors, " ISA_STRING(
        LB_DIRECT_MR) "x" ISA_STRING(LB_DIRECT_NV) "-vector tiles" FITTED_WORDS,
    .vector_floats = VL,
    .cpu_runs = cpu_runs,
    .fma_ports = LB_DIRECT_FMA_PORTS,
    .conv_forward = conv_forward,
    .conv_backward_params = conv_backward_params,
    .conv_backward_weights = conv_backward_weights,
    .conv_backward_data = conv_backward_data,
    .dense_forward = dense_forward,
    .dense_backward = dense_backward,
};
