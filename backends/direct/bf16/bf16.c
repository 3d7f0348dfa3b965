/* The bf16 products (bf16.h): packing into pairs along each sum, and the
 * walks that hand the packed operands to the register tiles (bf16_tiles.h,
 * bf16_avx512.c; rounding and the tiles in plain C: bf16_plain.c). Plain
 * C, built for the build's target: only the tiles need the instructions.
 *
 * How each product meets vdpbf16ps, which wants its two operands paired
 * along the reduction:
 *   - convolution forward, for output row y: out[k][y][*] = sum over taps
 *     of w[k][tap] * (the tap's run of the input, contiguous in CHWN). A
 *     tap pair is two input channels at the same (ki, kj) when C is even
 *     (no padding), else two neighbouring kernel columns of one channel
 *     (a kernel of odd width takes its last column with a zero partner:
 *     conv1, one channel, computes 15 pairs for its 25 taps);
 *   - input gradient, row iy of d_in: the rows of d_out that reach it
 *     (kernel rows ki with 0 <= iy - ki < OH), output channels paired,
 *     times the weights of each (c, kj); each such row of the tile lands
 *     kj images to the right and is added there, so nothing is computed
 *     for the zeros a padded ("full") convolution would multiply;
 *   - weight gradient: the sum runs over images and positions, so the
 *     vectors lie along it (pairs of neighbouring (x, image) elements) and
 *     each accumulator is summed across its lanes at the end;
 *   - dense layers: the same pair tile, pairs of inputs (forward), of
 *     outputs (input gradient), of images (weight gradient).
 * Packing reads each fp32 operand once and writes half its bytes; for
 * conv1's weight gradient (25 taps) even that costs about what the
 * product does, so there the tiles round d_out as they load it.
 *
 * Measured (make direct-bf16-speed, LeNet at batch 128, one Zen 4 core
 * of a shared machine, load average 7.6 on 2 cores, best of 40 by
 * processor time): vdpbf16ps alone 236 GFLOP/s; conv1 forward 140
 * (fp32 direct 58), conv1 weight gradient 179 (84), conv2 forward 175
 * (69), conv2 input gradient 175 (72), conv2 weight gradient 193 (92),
 * fc1 forward 209 (107), fc1 backward 187 (79, after the weights were
 * no longer transposed); fc2, 500 -> 10, gains nothing forward (90 to 118
 * against 97 to 104 over several runs): packing its input costs what its
 * 10 outputs' products do. */
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/fp32/isa.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/direct/bf16/bf16_tiles.h"
#include "backends/direct/half/half_walks.h"
#include "base/cpu.h"

int direct_bf16_emulate;

/* ---------------------------------------------------------------------- */
/* The CPU                                                                  */

int direct_bf16_supported(char *why, size_t len)
{
    if (!direct_isa_allows_avx512("vdpbf16ps products", why, len)) /* isa.h's rule */
        return 0;
    return half_cpu_supports(CPU_AVX512F | CPU_AVX512BW | CPU_AVX512VL | CPU_AVX512_BF16,
                             "bf16 products need AVX512_BF16: Intel Cooper Lake, Sapphire "
                             "Rapids and later, AMD Zen 4 and later",
                             why, len);
}

/* ---------------------------------------------------------------------- */
/* Packing (the rounding is bf16_plain.c's)                                 */

static inline uint32_t pair(float first, float second)
{
    return (uint32_t)direct_bf16_round(first) | (uint32_t)direct_bf16_round(second) << 16;
}

/* The runs every packing is made of: with vcvtneps2bf16, or plainly */
static void round_run(uint16_t *dst, const float *src, size_t n)
{
    if (!direct_bf16_emulate) {
        direct_bf16_round_run_avx512(dst, src, n);
        return;
    }
    for (size_t e = 0; e < n; e++)
        dst[e] = direct_bf16_round(src[e]);
}

static void pair_runs(uint32_t *dst, const float *lo, const float *hi, size_t n)
{
    if (!direct_bf16_emulate) {
        direct_bf16_pair_runs_avx512(dst, lo, hi, n);
        return;
    }
    for (size_t e = 0; e < n; e++)
        dst[e] = pair(lo[e], hi ? hi[e] : 0.0f);
}

static void round_all(uint16_t *dst, const float *src, size_t n, int threads)
{
    enum { PIECE = 16384 };
    const size_t pieces = (n + PIECE - 1) / PIECE;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && pieces > 1)
    for (size_t i = 0; i < pieces; i++)
        round_run(dst + i * PIECE, src + i * PIECE, n - i * PIECE < PIECE ? n - i * PIECE : PIECE);
}

/* The tiles as the walks (half_walks.h) call them: the vdpbf16ps ones,
 * or the plain ones where direct_bf16_emulate says */
static void pair_rows(int m, int cols, float *const *rows, int add, const float *init,
                      const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step, const void *b,
                      const ptrdiff_t *off, int steps)
{
    (direct_bf16_emulate ? direct_bf16_pair_tile_plain : direct_bf16_pair_tile_avx512)(
        m, cols, rows, add, init, a, lda, a_step, b, off, steps);
}

/* Words a packed row may be read past its end (a vector) */
enum { OVERREAD = 16 };

/* Pairs, in words: the input gradient's packed d_out also OVERREAD words
 * past its end */
static const half_format PAIRS = {pair_rows, PAIR_ROWS, PAIR_COLS, 2, sizeof(uint32_t),
                                  OVERREAD,  OVERREAD};
HALF_TILES_FIT(PAIR_ROWS, DOT_ROWS, DOT_COLS);

static void dot_rounded(const void *job, const half_dot_args *t)
{
    (void)job;
    (direct_bf16_emulate ? direct_bf16_dot_tile_plain : direct_bf16_dot_tile_avx512)(
        t->mk, t->nt, t->out, t->out_row, t->g, t->x, t->nrows, t->g_row, t->x_row, t->len);
}

/* d_out unrounded: job is d_out's first channel, channels a plane of
 * floats apart (the rows' stride g_row times nrows) */
static void dot_rounded_as_read(const void *job, const half_dot_args *t)
{
    const float *d_out = job, *g32[DOT_ROWS];
    for (int i = 0; i < t->mk; i++)
        g32[i] = d_out + (size_t)(t->k0 + i) * t->nrows * t->g_row;
    /* the first tile of taps sums the biases' gradients too (after the
     * row's R weights) */
    float *const sums = t->r0 == 0 ? t->out + t->out_row - 1 : NULL;
    (direct_bf16_emulate ? direct_bf16_dot_tile_f32_plain : direct_bf16_dot_tile_f32_avx512)(
        t->mk, t->nt, t->out, t->out_row, sums, g32, t->x, t->nrows, t->g_row, t->x_row, t->len);
}

int direct_bf16_conv_pairs_channels(int C) { return !half_conv_pairs_columns(PAIRS, C); }

size_t direct_bf16_conv_input_words(int B, int C, int H, int W)
{
    return half_conv_input_elements(PAIRS, B, C, H, W);
}

void direct_bf16_pack_conv_input(uint32_t *packed, const float *in, int B, int C, int H, int W,
                                 int threads)
{
    const int by_channels = direct_bf16_conv_pairs_channels(C);
    const int groups = by_channels ? C / 2 : C;
    const size_t row = (size_t)W * B, plane = (size_t)H * row;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int g = 0; g < groups; g++)
        for (int h = 0; h < H; h++) {
            uint32_t *dst = packed + g * plane + h * row;
            if (by_channels) {
                const float *lo = in + 2 * g * plane + h * row;
                pair_runs(dst, lo, lo + plane, row);
            } else { /* the next column is B floats on */
                const float *src = in + g * plane + h * row;
                pair_runs(dst, src, src + B, row - B);
                pair_runs(dst + row - B, src + row - B, NULL, (size_t)B);
            }
        }
    memset(packed + groups * plane, 0, sizeof(uint32_t) * OVERREAD);
}

/* Rows sr floats apart */
static void pack_row_pairs_strided(uint32_t *packed, ptrdiff_t ld, const float *x,
                                   ptrdiff_t sr, int n, int cols, int threads)
{
    const int pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int q = 0; q < pairs; q++) {
        uint32_t *dst = packed + q * ld;
        const float *lo = x + 2 * q * sr, *hi = lo + sr;
        pair_runs(dst, lo, 2 * q + 1 < n ? hi : NULL, (size_t)cols);
        for (ptrdiff_t c = cols; c < ld; c++)
            dst[c] = 0;
    }
}

/* The pairs are neighbours in a row: each row a run rounded in place */
static void pack_col_pairs_strided(uint32_t *packed, const float *x, ptrdiff_t sr, int rows,
                                   int n, int threads)
{
    const int pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int r = 0; r < rows; r++) {
        uint16_t *halves = (uint16_t *)(packed + (size_t)r * pairs);
        round_run(halves, x + r * sr, (size_t)n);
        if (n % 2)
            halves[n] = 0;
    }
}

void direct_bf16_pack_row_pairs(uint32_t *packed, ptrdiff_t ld, const float *x, int n,
                                int cols, int threads)
{
    pack_row_pairs_strided(packed, ld, x, cols, n, cols, threads);
}

void direct_bf16_pack_col_pairs(uint32_t *packed, const float *x, ptrdiff_t ldx, int rows,
                                int n, int threads)
{
    pack_col_pairs_strided(packed, x, ldx, rows, n, threads);
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

/* The weights as the two passes multiply them (half_conv_weight_layout),
 * packed once per pass over a batch and read by every group of images:
 * the forward pass's a[k][step], the input gradient's [c][kj][ki][kp]
 * (output channels paired). */
size_t direct_bf16_conv_weight_bytes(int C, int K, int kernel)
{
    return half_conv_weight_layout(PAIRS, NULL, C, K, kernel).bytes;
}

void direct_bf16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel)
{
    const int R = C * kernel * kernel, KP = (K + 1) / 2, kk = kernel * kernel;
    const half_conv_weights p = half_conv_weight_layout(PAIRS, packed, C, K, kernel);
    const int S = half_conv_steps(PAIRS, C, kernel);
    const int by_channels = direct_bf16_conv_pairs_channels(C);
    /* step s: channels (2g, 2g+1) at (ki, kj), or channel g at (ki, 2jp) and (ki, 2jp+1) */
    for (int s = 0; s < S; s++) {
        int g, ki, kj;
        half_tap_of(PAIRS, C, s, kernel, &g, &ki, &kj);
        for (int k = 0; k < K; k++) {
            const float *wk = weight_bias + (size_t)k * (R + 1);
            const float first = by_channels ? wk[((2 * g) * kernel + ki) * kernel + kj]
                                            : wk[(g * kernel + ki) * kernel + kj];
            const float second = by_channels  ? wk[((2 * g + 1) * kernel + ki) * kernel + kj]
                                 : kj + 1 < kernel ? wk[(g * kernel + ki) * kernel + kj + 1]
                                                   : 0.0f;
            p.forward[(size_t)k * S + s] = pair(first, second);
        }
    }
    for (int c = 0; c < C; c++)
        for (int kj = 0; kj < kernel; kj++)
            for (int ki = 0; ki < kernel; ki++)
                for (int kp = 0; kp < KP; kp++) {
                    const size_t tap = (size_t)c * kk + ki * kernel + kj;
                    const float first = weight_bias[(size_t)(2 * kp) * (R + 1) + tap];
                    const float second =
                        2 * kp + 1 < K ? weight_bias[(size_t)(2 * kp + 1) * (R + 1) + tap] : 0.0f;
                    p.data[((size_t)(c * kernel + kj) * kernel + ki) * KP + kp] =
                        pair(first, second);
                }
}

/* The weight gradient (its scratch: half_conv_params_layout): up to
 * this many tiles of taps read d_out as fp32 and round it as they go. */
enum { ROUNDED_AS_READ = 8 };

size_t direct_bf16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel)
{
    return half_conv_scratch_bytes(PAIRS, B, C, H, W, K, kernel);
}

void direct_bf16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads)
{
    const half_conv_pass p =
        half_conv_forward_layout(PAIRS, scratch, B, C, H, W, kernel);
    direct_bf16_pack_conv_input(p.packed, in, B, C, H, W, threads);
    half_conv_forward_walk(PAIRS, out, weight_bias,
                           half_conv_weight_layout(PAIRS, packed_weights, C, K, kernel).forward,
                           p, B, C, H, W, K, kernel, threads);
}

void direct_bf16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, KP = (K + 1) / 2;
    const half_conv_pass p = half_conv_data_layout(PAIRS, scratch, B, H, W, K, kernel);
    uint32_t *grad = p.packed;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    /* d_out's rows, channels paired: grad[oy][kp] */
    for (int oy = 0; oy < OH; oy++)
        pack_row_pairs_strided(grad + (size_t)oy * KP * p.ld, (ptrdiff_t)p.ld, d_out + oy * row,
                               (ptrdiff_t)plane_out, K, (int)row, threads);
    memset(grad + (size_t)OH * KP * p.ld, 0, sizeof(uint32_t) * OVERREAD);
    half_conv_data_walk(PAIRS, d_in,
                        half_conv_weight_layout(PAIRS, packed_weights, C, K, kernel).data, p, B,
                        C, H, W, kernel, threads);
}

void direct_bf16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads)
{
    const half_conv_params_parts p = half_conv_params_layout(scratch, B, C, H, W, K, kernel);
    const int R = C * kernel * kernel;
    /* d_out rounded once, unless few tiles read it: then each rounds it as
     * it loads it (conv1: 5 tiles of taps), which saves writing and
     * reading back a copy half its size */
    const int round_as_read = (R + DOT_COLS - 1) / DOT_COLS <= ROUNDED_AS_READ;
    round_all(p.input, in, p.n_input, threads);
    if (round_as_read)
        half_conv_params_walk(dot_rounded_as_read, d_out, DOT_ROWS, DOT_COLS, d_weight_bias,
                              NULL, p.input, B, C, H, W, K, kernel, threads);
    else {
        round_all(p.grad, d_out, K * p.plane, threads);
        half_conv_params_walk(dot_rounded, NULL, DOT_ROWS, DOT_COLS, d_weight_bias, p.grad,
                              p.input, B, C, H, W, K, kernel, threads);
        half_bias_sums(d_weight_bias, d_out, K, R, p.plane, threads);
    }
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* The operands (half_dense_layout): forward in[n_in][B] row-paired (a
 * column of images a word, rows padded to whole vectors) times the
 * weights column-paired (half_dense_weight_layout's w); backward d_out
 * row-paired times the weights row-paired (wt, read down their columns),
 * and d_out image-paired with in image-paired and transposed. */
static half_dense_parts dense_parts(void *scratch, int B, int n_in, int n_out)
{
    return half_dense_layout(scratch, B, n_in, n_out, 2, sizeof(uint32_t), 16);
}

size_t direct_bf16_dense_scratch_bytes(int B, int n_in, int n_out)
{
    return dense_parts(NULL, B, n_in, n_out).bytes;
}

size_t direct_bf16_dense_weight_bytes(int n_in, int n_out)
{
    return half_dense_weight_layout(NULL, n_in, n_out, 2).bytes;
}

void direct_bf16_pack_dense_weights(void *packed, const float *weight, int n_in, int n_out,
                                    int threads)
{
    const half_dense_weights p = half_dense_weight_layout(packed, n_in, n_out, 2);
    pack_col_pairs_strided(p.w, weight, n_in, n_out, n_in, threads);
    /* the weights' rows paired, wt[q][i]: d_in's row i takes its pairs
     * down column i, so nothing is transposed */
    pack_row_pairs_strided(p.wt, n_in, weight, n_in, n_out, n_in, threads);
}

void direct_bf16_dense_forward(float *out, const float *in, const void *packed_weights,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads)
{
    threads = dense_threads(threads, (double)B * n_in * n_out);
    const half_dense_parts p = dense_parts(scratch, B, n_in, n_out);
    pack_row_pairs_strided(p.x, (ptrdiff_t)p.ld_b, in, B, n_in, B, threads);
    half_product(PAIRS, out, B, bias, half_dense_weight_layout(packed_weights, n_in, n_out, 2).w,
                 p.steps_in, 1, p.x, p.ld_b, p.offsets, p.steps_in, n_out, B, threads);
}

void direct_bf16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const void *packed_weights,
                                void *scratch, int B, int n_in, int n_out, int threads)
{
    /* the weight gradient, and the input gradient unless d_in is NULL */
    threads = dense_threads(threads, (d_in ? 2.0 : 1.0) * B * n_in * n_out);
    const half_dense_parts p = dense_parts(scratch, B, n_in, n_out);
    /* d_weight = d_out x in^T, pairs of images */
    const int pb = p.steps_b;
    pack_col_pairs_strided(p.gi, d_out, B, n_out, B, threads);
    /* in's rows image-paired, then transposed: xt[q][i] */
    pack_col_pairs_strided(p.untransposed, in, B, n_in, B, threads);
    half_transpose(p.xt, p.ld_in, p.untransposed, (size_t)pb, n_in, pb, 16, threads);
    half_product(PAIRS, d_weight, n_in, NULL, p.gi, pb, 1, p.xt, p.ld_in, p.offsets, pb, n_out,
                 n_in, threads);
    /* d_in = weight^T x d_out, pairs of outputs */
    if (d_in) {
        pack_row_pairs_strided(p.g, (ptrdiff_t)p.ld_b, d_out, B, n_out, B, threads);
        half_product(PAIRS, d_in, B, NULL,
                     half_dense_weight_layout(packed_weights, n_in, n_out, 2).wt, 1, n_in, p.g,
                     p.ld_b, p.offsets, p.steps_out, n_in, B, threads);
    }
    for (int k = 0; k < n_out; k++)
        d_bias[k] = sum_floats(d_out + (size_t)k * B, (size_t)B);
}
