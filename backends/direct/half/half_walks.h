/* The walks that the half-precision products (bf16.c, fp16.c) share: how a
 * convolution's three passes and a dense product are cut into register
 * tiles, and the offsets the tiles read by. What differs between the
 * formats comes in as parameters: the row tile (its call, its most rows
 * and columns, the bytes of a packed element), the steps a sum takes (bf16
 * pairs two terms a step) and the dot tile's call. Each walk is static
 * inline, called once per format; inside its parallel loop the format's
 * numbers are values, not constants (OpenMP outlines the loop first),
 * which costs a few integer operations a tile: the hot loops are the
 * tiles', whose shapes stay constants (ROW_SHAPES, DOT_SHAPES). Where a
 * loop of elements would pay for it (the transpose), the element's size
 * is tested once a block. */
#ifndef LB_DIRECT_HALF_WALKS_H
#define LB_DIRECT_HALF_WALKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/direct/half/half_common.h"

/* A format's row tile as the walks call it: rows i < m, columns [0, cols),
 *   rows[i][col] (+)= init[i] + sum over s < steps of
 *                     a[i * lda + s * a_step] times b[off[s] + col]
 * (bf16_tiles.h's pair tile, fp16_tiles.h's row tile; b's elements are the
 * format's packed ones, offsets count them). */
typedef void half_row_call(int m, int cols, float *const *rows, int add, const float *init,
                           const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step, const void *b,
                           const ptrdiff_t *off, int steps);

/* What a walk needs to know of a format */
typedef struct half_format {
    half_row_call *call;
    int rows, cols;  /* the most one call of the row tile takes */
    int terms;       /* terms of a sum one packed element holds: 2 in a bf16 pair */
    size_t element;  /* bytes of a packed element */
    int overread;    /* elements a tile may read past a packed run's end */
    int grad_tail;   /* elements zeroed past the input gradient's packed d_out */
} half_format;

/* The most rows of any format's row tile (the walks' arrays of rows) */
#define HALF_MOST_ROWS 8
/* ... and of a dot tile's rows and columns (HALF_TILES_FIT checks both) */
#define HALF_MOST_DOT 8
#define HALF_TILES_FIT(ROWS, DOT_ROWS, DOT_COLS)                                                \
    _Static_assert((ROWS) <= HALF_MOST_ROWS && (DOT_ROWS) <= HALF_MOST_DOT &&                  \
                       (DOT_COLS) <= HALF_MOST_DOT,                                            \
                   "the walks' arrays hold a tile")

static inline const void *half_at(const void *b, size_t element, size_t i)
{
    return (const char *)b + i * element;
}

/* A convolution's forward pass in tap steps of `terms` channels (C a
 * multiple of terms), else of `terms` kernel columns of one channel (the
 * last step of a row short where the kernel's width is not a multiple) */
static inline int half_conv_pairs_columns(half_format f, int C) { return C % f.terms != 0; }

static inline int half_conv_steps(half_format f, int C, int kernel)
{
    return half_conv_pairs_columns(f, C) ? C * kernel * ((kernel + f.terms - 1) / f.terms)
                                         : C / f.terms * kernel * kernel;
}

/* Tap step s of a convolution's forward pass: group g (a channel, or
 * `terms` channels), kernel row ki and column kj (with columns paired,
 * the first of the step's `terms` columns). */
static inline void half_tap_of(half_format f, int C, int s, int kernel, int *g, int *ki, int *kj)
{
    const int columns = half_conv_pairs_columns(f, C);
    const int across = columns ? (kernel + f.terms - 1) / f.terms : kernel;
    *g = s / (kernel * across);
    *ki = s / across % kernel;
    *kj = columns ? f.terms * (s % across) : s % across;
}

/* The elements of the forward pass's packed input, in groups of channels
 * (or one channel a group, columns paired), and the tile's overread */
static inline size_t half_conv_input_elements(half_format f, int B, int C, int H, int W)
{
    const int groups = half_conv_pairs_columns(f, C) ? C : C / f.terms;
    return (size_t)groups * H * W * B + (size_t)f.overread;
}

/* The weights as the two passes multiply them, packed once per pass over
 * a batch and read by every group of images: the forward pass's
 * a[k][step], the input gradient's [c][kj][ki][n], n the output channels
 * in words (ceil(K / terms)). */
typedef struct half_conv_weights {
    uint32_t *forward, *data;
    size_t bytes;
} half_conv_weights;

static inline half_conv_weights half_conv_weight_layout(half_format f, const void *packed, int C,
                                                        int K, int kernel)
{
    carver c = {(char *)packed, 0};
    half_conv_weights p;
    p.forward = carve(&c, sizeof(uint32_t) * K * half_conv_steps(f, C, kernel));
    p.data = carve(&c, sizeof(uint32_t) * C * kernel * kernel * ((K + f.terms - 1) / f.terms));
    p.bytes = c.used;
    return p;
}

/* A pass's scratch: its packed operand and each step's offset into it */
typedef struct half_conv_pass {
    void *packed;
    ptrdiff_t *offsets;
    int steps; /* forward: a channel's; input gradient: an output row's (n) */
    size_t ld; /* input gradient: the packed rows' stride */
    size_t bytes;
} half_conv_pass;

static inline half_conv_pass half_conv_pass_carve(void *scratch, int steps, size_t ld,
                                                  size_t packed_bytes, size_t offsets)
{
    carver c = {scratch, 0};
    half_conv_pass p = {.steps = steps, .ld = ld};
    p.packed = carve(&c, packed_bytes);
    p.offsets = carve(&c, sizeof(ptrdiff_t) * offsets);
    p.bytes = c.used;
    return p;
}

/* The forward pass's: its packed input, and each tap step's offset */
static inline half_conv_pass half_conv_forward_layout(half_format f, void *scratch, int B, int C,
                                                      int H, int W, int kernel)
{
    const int steps = half_conv_steps(f, C, kernel);
    return half_conv_pass_carve(scratch, steps, 0,
                                f.element * half_conv_input_elements(f, B, C, H, W),
                                (size_t)steps);
}

/* The input gradient's: d_out's rows with output channels in elements,
 * [oy][n][ld] (n ceil(K / terms) steps), and step (ki, k)'s offset from
 * row iy's start, [ki][n]. */
static inline half_conv_pass half_conv_data_layout(half_format f, void *scratch, int B, int H,
                                                   int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, n = (K + f.terms - 1) / f.terms;
    const size_t ld = (size_t)OW * B + (size_t)f.overread;
    return half_conv_pass_carve(scratch, n, ld,
                                f.element * ((size_t)OH * n * ld + (size_t)f.grad_tail),
                                (size_t)kernel * n);
}

/* The weight gradient's, the same in every format: the convolution's
 * input (n_input elements) and output gradient (K planes of `plane`)
 * rounded, in their own layouts. */
typedef struct half_conv_params_parts {
    uint16_t *input, *grad;
    size_t n_input, plane;
    size_t bytes;
} half_conv_params_parts;

static inline half_conv_params_parts half_conv_params_layout(void *scratch, int B, int C, int H,
                                                             int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    carver c = {scratch, 0};
    half_conv_params_parts p;
    p.n_input = (size_t)C * H * W * B, p.plane = (size_t)OH * OW * B;
    p.input = carve(&c, sizeof(uint16_t) * p.n_input);
    p.grad = carve(&c, sizeof(uint16_t) * K * p.plane);
    p.bytes = c.used;
    return p;
}

/* One scratch serves the three passes in turn: the most any takes */
static inline size_t half_conv_scratch_bytes(half_format f, int B, int C, int H, int W, int K,
                                             int kernel)
{
    const size_t forward = half_conv_forward_layout(f, NULL, B, C, H, W, kernel).bytes;
    const size_t data = half_conv_data_layout(f, NULL, B, H, W, K, kernel).bytes;
    const size_t params = half_conv_params_layout(NULL, B, C, H, W, K, kernel).bytes;
    const size_t most = forward > data ? forward : data;
    return most > params ? most : params;
}

/* Convolution forward, out[K][OH][OW][B] = bias + weights x input: the
 * weights a[k][step] (p.steps a channel), the input packed CHWN by groups
 * (step s reads group g's row y + ki, kj columns on). */
static inline void half_conv_forward_walk(half_format f, float *out, const float *weight_bias,
                                          const uint32_t *weights, half_conv_pass p,
                                          int B, int C, int H, int W, int K, int kernel,
                                          int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const int steps = p.steps;
    const void *input = p.packed;
    const ptrdiff_t *offsets = p.offsets;
    for (int s = 0; s < steps; s++) {
        int g, ki, kj;
        half_tap_of(f, C, s, kernel, &g, &ki, &kj);
        p.offsets[s] = ((ptrdiff_t)(g * H + ki) * W + kj) * B;
    }
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int blocks = (K + f.rows - 1) / f.rows;
    const int col_tiles = (int)((row + f.cols - 1) / f.cols);
    /* a column tile of one output row for every block of channels in
     * turn: its runs stay in cache from one block to the next */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int y = 0; y < OH; y++)
        for (int jt = 0; jt < col_tiles; jt++) {
            const size_t j = (size_t)jt * f.cols;
            const int cols = row - j < (size_t)f.cols ? (int)(row - j) : f.cols;
            for (int kb = 0; kb < blocks; kb++) {
                const int k0 = split_at(K, blocks, kb), m = split_at(K, blocks, kb + 1) - k0;
                float *rows[HALF_MOST_ROWS], bias[HALF_MOST_ROWS];
                for (int i = 0; i < m; i++) {
                    rows[i] = out + (k0 + i) * plane_out + y * row + j;
                    bias[i] = weight_bias[(size_t)(k0 + i) * (R + 1) + R];
                }
                f.call(m, cols, rows, 0, bias, weights + (size_t)k0 * steps, steps, 1,
                       half_at(input, f.element, (size_t)y * W * B + j), offsets, steps);
            }
        }
}

/* Convolution input gradient, d_in[C][H][W][B]: p.packed holds d_out's
 * rows, [oy][n][ld] (n = p.steps an output row), the weights
 * [c][kj][ki][n]. Row iy of d_in takes the rows of d_out that reach it (kernel
 * rows ki with 0 <= iy - ki < OH); the tile's row for kernel column kj
 * lands kj images on and is added there, so nothing is computed for the
 * zeros of a padded convolution. */
static inline void half_conv_data_walk(half_format f, float *d_in, const uint32_t *weights,
                                       half_conv_pass p, int B, int C, int H, int W,
                                       int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, n = p.steps;
    const void *grad = p.packed;
    const size_t ld = p.ld;
    const ptrdiff_t *offsets = p.offsets;
    /* step (ki, k) reads d_out row iy - ki: offsets from row iy's start */
    for (int ki = 0; ki < kernel; ki++)
        for (int k = 0; k < n; k++)
            p.offsets[ki * n + k] = ((ptrdiff_t)k - (ptrdiff_t)ki * n) * (ptrdiff_t)ld;
    const size_t row = (size_t)OW * B, in_row = (size_t)W * B, plane_in = (size_t)H * in_row;
    const int blocks = (kernel + f.rows - 1) / f.rows;
    /* each row of d_in is summed by one thread, in the same order for
     * any split */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int iy = 0; iy < H; iy++) {
            const int ki_lo = iy - (OH - 1) > 0 ? iy - (OH - 1) : 0;
            const int ki_hi = iy < kernel - 1 ? iy : kernel - 1;
            const int steps = (ki_hi - ki_lo + 1) * n;
            float *dst = d_in + c * plane_in + iy * in_row;
            memset(dst, 0, sizeof(float) * in_row);
            const size_t b = (size_t)iy * n * ld;
            for (size_t j = 0; j < row; j += (size_t)f.cols) {
                const int cols = row - j < (size_t)f.cols ? (int)(row - j) : f.cols;
                for (int kb = 0; kb < blocks; kb++) {
                    const int kj0 = split_at(kernel, blocks, kb);
                    const int m = split_at(kernel, blocks, kb + 1) - kj0;
                    float *rows[HALF_MOST_ROWS];
                    for (int i = 0; i < m; i++) /* kernel column kj lands kj images on */
                        rows[i] = dst + (size_t)(kj0 + i) * B + j;
                    const uint32_t *a =
                        weights + ((size_t)(c * kernel + kj0) * kernel + ki_lo) * n;
                    f.call(m, cols, rows, 1, NULL, a, (ptrdiff_t)kernel * n, 1,
                           half_at(grad, f.element, b + j), offsets + ki_lo * n, steps);
                }
            }
        }
}

/* c[M][ldc] (columns [0, N)) = init + a x b[steps][ld], the row tile over
 * every block of rows and strip of columns; a's row i, step s is
 * a[i * lda + s * a_step]; offsets (`steps` of them) its scratch. */
static inline void half_product(half_format f, float *c, size_t ldc, const float *init,
                                const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step,
                                const void *b, size_t ld, ptrdiff_t *offsets, int steps, int M,
                                int N, int threads)
{
    for (int s = 0; s < steps; s++)
        offsets[s] = (ptrdiff_t)s * (ptrdiff_t)ld;
    const int blocks = (M + f.rows - 1) / f.rows, strips = (N + f.cols - 1) / f.cols;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int jt = 0; jt < strips; jt++)
        for (int kb = 0; kb < blocks; kb++) {
            const int j = jt * f.cols, cols = N - j < f.cols ? N - j : f.cols;
            const int k0 = split_at(M, blocks, kb), m = split_at(M, blocks, kb + 1) - k0;
            float *rows[HALF_MOST_ROWS];
            for (int i = 0; i < m; i++)
                rows[i] = c + (size_t)(k0 + i) * ldc + j;
            f.call(m, cols, rows, 0, init ? init + k0 : NULL, a + k0 * lda, lda, a_step,
                   half_at(b, f.element, (size_t)j), offsets, steps);
        }
}

/* The weight gradient's dot tile as the walk below calls it: the tile of
 * output channels [k0, k0 + mk) and taps [r0, r0 + nt), with the
 * arguments of bf16_tiles.h's dot tile (g's rows NULL where the format
 * reads d_out unrounded); `job` is the format's. */
typedef struct half_dot_args {
    int k0, r0, mk, nt;
    float *out;
    ptrdiff_t out_row;
    const uint16_t *const *g, *const *x;
    int nrows;
    ptrdiff_t g_row, x_row;
    size_t len;
} half_dot_args;
typedef void half_dot_call(const void *job, const half_dot_args *t);

/* Convolution weight gradient: tiles of at most most_k channels and
 * most_taps taps (HALF_MOST_DOT at most each) of d_out (rounded, [K][OH]
 * [OW][B], or NULL) times the input (rounded, CHWN), the taps outside, so
 * that a tile's runs of the input stay in cache while every channel's
 * gradient passes. */
static inline void half_conv_params_walk(half_dot_call *dot, const void *job, int most_k,
                                         int most_taps, float *d_weight_bias,
                                         const uint16_t *grad, const uint16_t *input, int B,
                                         int C, int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int tap_tiles = (R + most_taps - 1) / most_taps, k_tiles = (K + most_k - 1) / most_k;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int rt = 0; rt < tap_tiles; rt++)
        for (int kt = 0; kt < k_tiles; kt++) {
            const int r0 = rt * most_taps, nt = R - r0 < most_taps ? R - r0 : most_taps;
            const int k0 = kt * most_k, mk = K - k0 < most_k ? K - k0 : most_k;
            const uint16_t *runs[HALF_MOST_DOT], *g[HALF_MOST_DOT];
            for (int t = 0; t < nt; t++) {
                const int r = r0 + t, c = r / (kernel * kernel), ki = r / kernel % kernel;
                const int kj = r % kernel;
                runs[t] = input + ((size_t)(c * H + ki) * W + kj) * B;
            }
            for (int i = 0; i < mk; i++)
                g[i] = grad ? grad + (size_t)(k0 + i) * plane_out : NULL;
            const half_dot_args t = {k0,   r0, mk, nt, d_weight_bias + (size_t)k0 * (R + 1) + r0,
                                     R + 1, g,  runs, OH, (ptrdiff_t)row, (ptrdiff_t)W * B, row};
            dot(job, &t);
        }
}

/* Each bias's gradient, d_weight_bias[k][R] = the fp32 sum of channel k
 * of d_out ([K][plane]) */
static inline void half_bias_sums(float *d_weight_bias, const float *d_out, int K, int R,
                                  size_t plane, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int k = 0; k < K; k++)
        d_weight_bias[(size_t)k * (R + 1) + R] = sum_floats(d_out + (size_t)k * plane, plane);
}

/* A dense layer's packed operands, the same pieces in every format: an
 * element (`element` bytes) holds `terms` terms of a sum (a bf16 pair two,
 * an fp16 half one), a vector `lanes` elements, a word (uint32_t) the
 * broadcast operand's terms. Forward: in[n_in][B] in rows of elements
 * along the inputs (x, ld_b apart) times the weights (half_dense_weights'
 * w). Input gradient: d_out in rows along the outputs (g, ld_b apart)
 * times the weights' wt. Weight gradient: d_out in words along the images
 * (gi, [n_out][steps_b]) times in along the images transposed (xt,
 * [steps_b][ld_in]; bf16 pairs them first in untransposed,
 * [n_in][steps_b]). One set of offsets
 * (s * ld) serves each product. */
typedef struct half_dense_parts {
    void *x, *g, *xt, *untransposed;
    uint32_t *gi;
    ptrdiff_t *offsets;
    size_t ld_b, ld_in;
    int steps_in, steps_out, steps_b; /* n_in, n_out, B: ceil(n / terms) */
    size_t bytes;                     /* the scratch they take */
} half_dense_parts;

/* The parts carved from scratch (or, from NULL, only their size) */
static inline half_dense_parts half_dense_layout(void *scratch, int B, int n_in, int n_out,
                                                 int terms, size_t element, int lanes)
{
    carver c = {scratch, 0};
    half_dense_parts p;
    p.ld_b = round_up((size_t)B, (size_t)lanes), p.ld_in = round_up((size_t)n_in, (size_t)lanes);
    p.steps_in = (n_in + terms - 1) / terms, p.steps_out = (n_out + terms - 1) / terms;
    p.steps_b = (B + terms - 1) / terms;
    p.x = carve(&c, element * p.steps_in * p.ld_b);
    p.g = carve(&c, element * p.steps_out * p.ld_b);
    p.gi = carve(&c, sizeof(uint32_t) * n_out * p.steps_b);
    p.xt = carve(&c, element * p.steps_b * p.ld_in);
    /* bf16 pairs the images before transposing; fp16 rounds as it
     * transposes (direct_fp16_round_transposed) */
    p.untransposed = terms > 1 ? carve(&c, element * n_in * p.steps_b) : NULL;
    int most = p.steps_in > p.steps_out ? p.steps_in : p.steps_out;
    most = most > p.steps_b ? most : p.steps_b;
    p.offsets = carve(&c, sizeof(ptrdiff_t) * most);
    p.bytes = c.used;
    return p;
}

/* A dense layer's weights as both products read them, packed once a pass
 * (the engine keeps the copy, chwn_products.h's dense_pack_weights): in
 * words along the inputs for the forward pass (w, [n_out][steps_in]), and
 * along the outputs for the input gradient (wt, [steps_out][n_in]); where
 * a word holds one term, w read down its columns serves, and wt is w. */
typedef struct half_dense_weights {
    uint32_t *w, *wt;
    size_t bytes; /* the packed copy's size */
} half_dense_weights;

static inline half_dense_weights half_dense_weight_layout(const void *packed, int n_in, int n_out,
                                                          int terms)
{
    carver c = {(char *)packed, 0};
    half_dense_weights p;
    p.w = carve(&c, sizeof(uint32_t) * n_out * (size_t)((n_in + terms - 1) / terms));
    p.wt = terms > 1 ? carve(&c, sizeof(uint32_t) * n_in * (size_t)((n_out + terms - 1) / terms))
                     : p.w;
    p.bytes = c.used;
    return p;
}

/* dst[c][r] = src[r][c] for words (bf16 pairs), in blocks of `block` that
 * stay in cache, and each row of dst zero from `rows` to ld_dst (fp16
 * rounds and transposes in one pass: direct_fp16_round_transposed) */
static inline void half_transpose(uint32_t *dst, size_t ld_dst, const uint32_t *src,
                                  size_t ld_src, int rows, int cols, int block, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c0 = 0; c0 < cols; c0 += block)
        for (int r0 = 0; r0 < rows; r0 += block) {
            const int c1 = c0 + block < cols ? c0 + block : cols;
            const int r1 = r0 + block < rows ? r0 + block : rows;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++)
                    dst[c * ld_dst + r] = src[r * ld_src + c];
        }
    for (int c = 0; c < cols; c++)
        memset(dst + c * ld_dst + rows, 0, sizeof(uint32_t) * (ld_dst - (size_t)rows));
}

#endif
