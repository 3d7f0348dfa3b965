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
#include "backends/direct/bf16.h"
#include "backends/direct/isa.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/direct/bf16_tiles.h"
#include "backends/direct/half_common.h"
#include "base/cpu.h"

int direct_bf16_emulate;

/* ---------------------------------------------------------------------- */
/* The CPU                                                                  */

int direct_bf16_supported(char *why, size_t len)
{
    if (!direct_isa_allows_bf16(why, len)) /* LENET_BENCH_DIRECT_ISA's rule (isa.h) */
        return 0;
    /* cpu_has counts AVX-512 only where the operating system saves the
     * registers (XCR0) */
    char missing[64];
    cpu_missing(CPU_AVX512F | CPU_AVX512BW | CPU_AVX512VL | CPU_AVX512_BF16, missing,
                sizeof missing);
    if (!missing[0])
        return 1;
    const char *name = cpu_this()->brand;
    snprintf(why, len,
             "this CPU%s%s%s has no %s (bf16 products need AVX512_BF16: Intel Cooper Lake, "
             "Sapphire Rapids and later, AMD Zen 4 and later), or its operating system does "
             "not enable it",
             name[0] ? " (" : "", name, name[0] ? ")" : "", missing);
    return 0;
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

/* dst[c][r] = src[r][c], in blocks that stay in cache */
static void transpose_words(uint32_t *dst, size_t ld_dst, const uint32_t *src, size_t ld_src,
                            int rows, int cols, int threads)
{
    enum { BLOCK = 16 };
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c0 = 0; c0 < cols; c0 += BLOCK)
        for (int r0 = 0; r0 < rows; r0 += BLOCK) {
            const int c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
            const int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++)
                    dst[c * ld_dst + r] = src[r * ld_src + c];
        }
}

int direct_bf16_conv_pairs_channels(int C) { return C % 2 == 0; }

/* Words a packed row may be read past its end (a vector) */
enum { OVERREAD = 16 };

size_t direct_bf16_conv_input_words(int B, int C, int H, int W)
{
    const int groups = direct_bf16_conv_pairs_channels(C) ? C / 2 : C;
    return (size_t)groups * H * W * B + OVERREAD;
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

static pair_tile_fn *pair_tile(void)
{
    return direct_bf16_emulate ? direct_bf16_pair_tile_plain : direct_bf16_pair_tile_avx512;
}

static dot_tile_fn *dot_tile(void)
{
    return direct_bf16_emulate ? direct_bf16_dot_tile_plain : direct_bf16_dot_tile_avx512;
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

/* Tap pairs of the forward pass: channel pairs, or column pairs of one
 * channel (the last column alone when the kernel's width is odd). */
static int forward_steps(int C, int kernel)
{
    return direct_bf16_conv_pairs_channels(C) ? C / 2 * kernel * kernel
                                              : C * kernel * ((kernel + 1) / 2);
}

/* The weights as the two passes multiply them, packed once per pass over
 * a batch (direct_bf16_pack_conv_weights) and read by every group of
 * images: the forward pass's a[k][step], the input gradient's
 * [c][kj][ki][kp] (output channels paired). */
typedef struct conv_weight_parts {
    uint32_t *forward, *data;
} conv_weight_parts;

static conv_weight_parts weight_parts(carver *c, int C, int K, int kernel)
{
    conv_weight_parts p;
    p.forward = carve(c, sizeof(uint32_t) * K * forward_steps(C, kernel));
    p.data = carve(c, sizeof(uint32_t) * C * kernel * kernel * ((K + 1) / 2));
    return p;
}

size_t direct_bf16_conv_weight_bytes(int C, int K, int kernel)
{
    carver c = {NULL, 0};
    weight_parts(&c, C, K, kernel);
    return c.used;
}

void direct_bf16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel)
{
    const int R = C * kernel * kernel, KP = (K + 1) / 2, kk = kernel * kernel;
    carver cv = {packed, 0};
    const conv_weight_parts p = weight_parts(&cv, C, K, kernel);
    const int S = forward_steps(C, kernel), by_channels = direct_bf16_conv_pairs_channels(C);
    const int half = (kernel + 1) / 2;
    /* step s: channels (2g, 2g+1) at (ki, kj), or channel g at (ki, 2jp) and (ki, 2jp+1) */
    for (int s = 0; s < S; s++) {
        const int g = by_channels ? s / kk : s / (kernel * half);
        const int ki = by_channels ? s / kernel % kernel : s / half % kernel;
        const int kj = by_channels ? s % kernel : 2 * (s % half);
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

/* The forward pass's packed input (pack_conv_input) and each step's
 * offset into it. */
typedef struct conv_forward_parts {
    uint32_t *input;
    ptrdiff_t *offsets;
    int steps;
} conv_forward_parts;

static conv_forward_parts forward_parts(carver *c, int B, int C, int H, int W, int kernel)
{
    conv_forward_parts p;
    p.steps = forward_steps(C, kernel);
    p.input = carve(c, sizeof(uint32_t) * direct_bf16_conv_input_words(B, C, H, W));
    p.offsets = carve(c, sizeof(ptrdiff_t) * p.steps);
    return p;
}

/* The input gradient's: d_out's rows with channels paired, [oy][kp][ld],
 * and step (ki, kp)'s offset from row iy's start, [ki][kp]. */
typedef struct conv_data_parts {
    uint32_t *grad;
    ptrdiff_t *offsets;
    size_t ld;
} conv_data_parts;

static conv_data_parts data_parts(carver *c, int B, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, KP = (K + 1) / 2;
    conv_data_parts p;
    p.ld = (size_t)OW * B + OVERREAD;
    p.grad = carve(c, sizeof(uint32_t) * ((size_t)OH * KP * p.ld + OVERREAD));
    p.offsets = carve(c, sizeof(ptrdiff_t) * kernel * KP);
    return p;
}

/* The weight gradient (its scratch: half_common.h's params_parts): up to
 * this many tiles of taps read d_out as fp32 and round it as they go. */
enum { ROUNDED_AS_READ = 8 };


size_t direct_bf16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel)
{
    carver f = {NULL, 0}, d = {NULL, 0}, w = {NULL, 0};
    forward_parts(&f, B, C, H, W, kernel);
    data_parts(&d, B, H, W, K, kernel);
    params_parts(&w, B, C, H, W, K, kernel);
    return carved_most(&f, &d, &w);
}

void direct_bf16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    carver cv = {scratch, 0}, cw = {(char *)packed_weights, 0};
    const conv_forward_parts p = forward_parts(&cv, B, C, H, W, kernel);
    const uint32_t *weights = weight_parts(&cw, C, K, kernel).forward;
    const int S = p.steps, by_channels = direct_bf16_conv_pairs_channels(C);
    const int half = (kernel + 1) / 2;
    direct_bf16_pack_conv_input(p.input, in, B, C, H, W, threads);
    for (int s = 0; s < S; s++) { /* as direct_bf16_pack_conv_weights walks them */
        const int g = by_channels ? s / (kernel * kernel) : s / (kernel * half);
        const int ki = by_channels ? s / kernel % kernel : s / half % kernel;
        const int kj = by_channels ? s % kernel : 2 * (s % half);
        p.offsets[s] = ((ptrdiff_t)(g * H + ki) * W + kj) * B;
    }
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int blocks = (K + PAIR_ROWS - 1) / PAIR_ROWS;
    const int col_tiles = (int)((row + PAIR_COLS - 1) / PAIR_COLS);
    pair_tile_fn *tile = pair_tile();
    /* a column tile of one output row for every block of channels in
     * turn: its runs stay in cache from one block to the next */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int y = 0; y < OH; y++)
        for (int jt = 0; jt < col_tiles; jt++) {
            const size_t j = (size_t)jt * PAIR_COLS;
            const int cols = row - j < PAIR_COLS ? (int)(row - j) : PAIR_COLS;
            for (int kb = 0; kb < blocks; kb++) {
                const int k0 = split_at(K, blocks, kb), m = split_at(K, blocks, kb + 1) - k0;
                float *rows[PAIR_ROWS], bias[PAIR_ROWS];
                for (int i = 0; i < m; i++) {
                    rows[i] = out + (k0 + i) * plane_out + y * row + j;
                    bias[i] = weight_bias[(size_t)(k0 + i) * (R + 1) + R];
                }
                tile(m, cols, rows, 0, bias, weights + (size_t)k0 * S, S, 1,
                     p.input + (size_t)y * W * B + j, p.offsets, S);
            }
        }
}

void direct_bf16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, KP = (K + 1) / 2;
    carver cv = {scratch, 0}, cw = {(char *)packed_weights, 0};
    const conv_data_parts p = data_parts(&cv, B, H, W, K, kernel);
    const uint32_t *weights = weight_parts(&cw, C, K, kernel).data;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    /* d_out's rows, channels paired: grad[oy][kp] */
    for (int oy = 0; oy < OH; oy++)
        pack_row_pairs_strided(p.grad + (size_t)oy * KP * p.ld, (ptrdiff_t)p.ld,
                               d_out + oy * row, (ptrdiff_t)plane_out, K, (int)row, threads);
    memset(p.grad + (size_t)OH * KP * p.ld, 0, sizeof(uint32_t) * OVERREAD);
    /* step (ki, kp) reads d_out row iy - ki: offsets from row iy's start */
    for (int ki = 0; ki < kernel; ki++)
        for (int kp = 0; kp < KP; kp++)
            p.offsets[ki * KP + kp] = ((ptrdiff_t)kp - (ptrdiff_t)ki * KP) * (ptrdiff_t)p.ld;
    const size_t in_row = (size_t)W * B, plane_in = (size_t)H * in_row;
    const int blocks = (kernel + PAIR_ROWS - 1) / PAIR_ROWS;
    pair_tile_fn *tile = pair_tile();
    /* each row of d_in is summed by one thread, in the same order for
     * any split */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int iy = 0; iy < H; iy++) {
            const int ki_lo = iy - (OH - 1) > 0 ? iy - (OH - 1) : 0;
            const int ki_hi = iy < kernel - 1 ? iy : kernel - 1;
            const int steps = (ki_hi - ki_lo + 1) * KP;
            float *dst = d_in + c * plane_in + iy * in_row;
            memset(dst, 0, sizeof(float) * in_row);
            const uint32_t *b = p.grad + (size_t)iy * KP * p.ld;
            for (size_t j = 0; j < row; j += PAIR_COLS) {
                const int cols = row - j < PAIR_COLS ? (int)(row - j) : PAIR_COLS;
                for (int kb = 0; kb < blocks; kb++) {
                    const int kj0 = split_at(kernel, blocks, kb);
                    const int m = split_at(kernel, blocks, kb + 1) - kj0;
                    float *rows[PAIR_ROWS];
                    for (int i = 0; i < m; i++) /* kernel column kj lands kj images on */
                        rows[i] = dst + (size_t)(kj0 + i) * B + j;
                    const uint32_t *a =
                        weights + ((size_t)(c * kernel + kj0) * kernel + ki_lo) * KP;
                    tile(m, cols, rows, 1, NULL, a, (ptrdiff_t)kernel * KP, 1, b + j,
                         p.offsets + ki_lo * KP, steps);
                }
            }
        }
}

void direct_bf16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    carver cv = {scratch, 0};
    const conv_params_parts p = params_parts(&cv, B, C, H, W, K, kernel);
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int tap_tiles = (R + DOT_COLS - 1) / DOT_COLS, k_tiles = (K + DOT_ROWS - 1) / DOT_ROWS;
    /* d_out rounded once, unless few tiles read it: then each rounds it as
     * it loads it (conv1: 5 tiles of taps), which saves writing and
     * reading back a copy half its size */
    const int round_as_read = tap_tiles <= ROUNDED_AS_READ;
    round_all(p.input, in, (size_t)C * H * W * B, threads);
    if (!round_as_read)
        round_all(p.grad, d_out, (size_t)K * plane_out, threads);
    dot_tile_fn *tile = dot_tile();
    dot_tile_f32_fn *tile_f32 =
        direct_bf16_emulate ? direct_bf16_dot_tile_f32_plain : direct_bf16_dot_tile_f32_avx512;
    /* the taps outside: a tile's runs of the input stay in cache while
     * every channel's gradient passes */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int rt = 0; rt < tap_tiles; rt++)
        for (int kt = 0; kt < k_tiles; kt++) {
            const int r0 = rt * DOT_COLS, nt = R - r0 < DOT_COLS ? R - r0 : DOT_COLS;
            const int k0 = kt * DOT_ROWS, mk = K - k0 < DOT_ROWS ? K - k0 : DOT_ROWS;
            const uint16_t *runs[DOT_COLS], *g[DOT_ROWS];
            for (int t = 0; t < nt; t++) {
                const int r = r0 + t, c = r / (kernel * kernel), ki = r / kernel % kernel;
                const int kj = r % kernel;
                runs[t] = p.input + ((size_t)(c * H + ki) * W + kj) * B;
            }
            float *const dst = d_weight_bias + (size_t)k0 * (R + 1) + r0;
            if (round_as_read) {
                const float *g32[DOT_ROWS];
                for (int i = 0; i < mk; i++)
                    g32[i] = d_out + (size_t)(k0 + i) * plane_out;
                /* the first tile of taps sums the biases' gradients too */
                tile_f32(mk, nt, dst, R + 1, r0 == 0 ? dst + R : NULL, g32, runs, OH,
                         (ptrdiff_t)row, (ptrdiff_t)W * B, row);
                continue;
            }
            for (int i = 0; i < mk; i++)
                g[i] = p.grad + (size_t)(k0 + i) * plane_out;
            tile(mk, nt, dst, R + 1, g, runs, OH, (ptrdiff_t)row, (ptrdiff_t)W * B, row);
        }
    if (!round_as_read)
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
        for (int k = 0; k < K; k++)
            d_weight_bias[(size_t)k * (R + 1) + R] =
                sum_floats(d_out + (size_t)k * plane_out, plane_out);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* Packed operands: forward in[n_in][B] row-paired (a column of images per
 * word, rows padded to whole vectors) and the weights column-paired;
 * backward d_out row-paired with the weights row-paired (read down their
 * columns), and d_out image-paired with in image-paired and transposed.
 * One set of offsets (s * ld) serves each. */
typedef struct dense_parts {
    uint32_t *x, *w, *g, *wt, *gi, *xt, *untransposed;
    ptrdiff_t *offsets;
} dense_parts;

static dense_parts dense_layout(carver *c, int B, int n_in, int n_out)
{
    const size_t cols_b = round_up((size_t)B, 16), cols_in = round_up((size_t)n_in, 16);
    const size_t pin = (size_t)(n_in + 1) / 2, pout = (size_t)(n_out + 1) / 2;
    const size_t pb = (size_t)(B + 1) / 2;
    dense_parts p;
    p.x = carve(c, sizeof(uint32_t) * pin * cols_b);
    p.w = carve(c, sizeof(uint32_t) * n_out * pin);
    p.g = carve(c, sizeof(uint32_t) * pout * cols_b);
    p.wt = carve(c, sizeof(uint32_t) * n_in * pout);
    p.gi = carve(c, sizeof(uint32_t) * n_out * pb);
    p.xt = carve(c, sizeof(uint32_t) * pb * cols_in);
    p.untransposed = carve(c, sizeof(uint32_t) * n_in * pb);
    const size_t most = pin > pout ? (pin > pb ? pin : pb) : (pout > pb ? pout : pb);
    p.offsets = carve(c, sizeof(ptrdiff_t) * most);
    return p;
}

size_t direct_bf16_dense_scratch_bytes(int B, int n_in, int n_out)
{
    carver c = {NULL, 0};
    dense_layout(&c, B, n_in, n_out);
    return c.used;
}

/* c[M][ldc] (columns [0, N)) = init + a x b[steps][ld], the pair tile
 * over every block of rows and strip of columns; a's row i, step s is
 * a[i * lda + s * a_step]. */
static void pair_product(float *c, size_t ldc, const float *init, const uint32_t *a,
                         ptrdiff_t lda, ptrdiff_t a_step, const uint32_t *b, size_t ld,
                         ptrdiff_t *offsets, int steps, int M, int N, int threads)
{
    for (int s = 0; s < steps; s++)
        offsets[s] = (ptrdiff_t)s * (ptrdiff_t)ld;
    const int blocks = (M + PAIR_ROWS - 1) / PAIR_ROWS, strips = (N + PAIR_COLS - 1) / PAIR_COLS;
    pair_tile_fn *tile = pair_tile();
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int jt = 0; jt < strips; jt++)
        for (int kb = 0; kb < blocks; kb++) {
            const int j = jt * PAIR_COLS, cols = N - j < PAIR_COLS ? N - j : PAIR_COLS;
            const int k0 = split_at(M, blocks, kb), m = split_at(M, blocks, kb + 1) - k0;
            float *rows[PAIR_ROWS];
            for (int i = 0; i < m; i++)
                rows[i] = c + (size_t)(k0 + i) * ldc + j;
            tile(m, cols, rows, 0, init ? init + k0 : NULL, a + k0 * lda, lda, a_step, b + j,
                 offsets, steps);
        }
}

void direct_bf16_dense_forward(float *out, const float *in, const float *weight,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads)
{
    threads = dense_threads(threads, B, n_in, n_out);
    carver c = {scratch, 0};
    const dense_parts p = dense_layout(&c, B, n_in, n_out);
    const size_t ld = round_up((size_t)B, 16);
    pack_row_pairs_strided(p.x, (ptrdiff_t)ld, in, B, n_in, B, threads);
    pack_col_pairs_strided(p.w, weight, n_in, n_out, n_in, threads);
    const int pairs = (n_in + 1) / 2;
    pair_product(out, B, bias, p.w, pairs, 1, p.x, ld, p.offsets, pairs, n_out, B, threads);
}

void direct_bf16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const float *weight,
                                void *scratch, int B, int n_in, int n_out, int threads)
{
    threads = dense_threads(threads, B, n_in, n_out);
    carver c = {scratch, 0};
    const dense_parts p = dense_layout(&c, B, n_in, n_out);
    /* d_weight = d_out x in^T, pairs of images */
    const size_t ld_in = round_up((size_t)n_in, 16);
    pack_col_pairs_strided(p.gi, d_out, B, n_out, B, threads);
    /* in's rows image-paired, then transposed: xt[q][i] */
    const int pb = (B + 1) / 2;
    pack_col_pairs_strided(p.untransposed, in, B, n_in, B, threads);
    transpose_words(p.xt, ld_in, p.untransposed, (size_t)pb, n_in, pb, threads);
    for (int q = 0; q < pb; q++)
        memset(p.xt + q * ld_in + n_in, 0, sizeof(uint32_t) * (ld_in - n_in));
    pair_product(d_weight, n_in, NULL, p.gi, pb, 1, p.xt, ld_in, p.offsets, pb, n_out, n_in,
                 threads);
    /* d_in = weight^T x d_out, pairs of outputs */
    if (d_in) {
        const size_t ld_b = round_up((size_t)B, 16);
        pack_row_pairs_strided(p.g, (ptrdiff_t)ld_b, d_out, B, n_out, B, threads);
        /* the weights' rows paired, wt[q][i]: d_in's row i takes its
         * pairs down column i, so nothing is transposed */
        const int pout = (n_out + 1) / 2;
        pack_row_pairs_strided(p.wt, n_in, weight, n_in, n_out, n_in, threads);
        pair_product(d_in, B, NULL, p.wt, 1, n_in, p.g, ld_b, p.offsets, pout, n_in, B,
                     threads);
    }
    for (int k = 0; k < n_out; k++)
        d_bias[k] = sum_floats(d_out + (size_t)k * B, (size_t)B);
}
