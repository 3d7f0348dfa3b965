/* The fp16 products (fp16.h): packing into fp16 copies, and the walks that
 * hand them to the register tiles (fp16_tiles.h; AVX512_FP16 in
 * fp16_avx512.c, emulated in fp16_emulated.c). Plain C, built for the
 * build's target: only the tiles need the instructions.
 *
 * vfmadd231ph multiplies lane by lane, 32 halves a register, and needs no
 * pairing along the sum (bf16's vdpbf16ps does): each product is a
 * broadcast half of one operand times a run of the other, as the fp32
 * direct kernels do:
 *   - convolution forward, output row y: out[k][y][*] = bias + sum over
 *     taps (c, ki, kj) of w[k][tap] * the tap's run of the input, which is
 *     contiguous in CHWN (row y + ki, kj images on);
 *   - input gradient, row iy of d_in: the rows of d_out that reach it
 *     (kernel rows ki with 0 <= iy - ki < OH) times the weights of each
 *     (c, kj), every output channel a step; the tile's row for kernel
 *     column kj lands kj images to the right and is added there, so
 *     nothing is computed for the zeros of a padded convolution;
 *   - weight gradient: the sum runs over images and positions, so the
 *     vectors lie along it (the dot tile) and each lane's sums are added
 *     across lanes at the end;
 *   - dense layers: the row tile over inputs (forward), outputs (input
 *     gradient) and images (weight gradient, the input transposed).
 * Every sum is cut into chains of DIRECT_FP16_CHAIN steps, each step one
 * product for each output, so a chain holds at most that many products. */
#include "backends/direct/fp16.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/direct/fp16_tiles.h"
#include "backends/direct/half_common.h"
#include "base/cpu.h"

int direct_fp16_emulate;

int direct_fp16_supported(char *why, size_t len)
{
    char missing[128];
    cpu_missing(CPU_AVX512 | CPU_AVX512_FP16, missing, sizeof missing);
    if (!missing[0])
        return 1;
    const char *brand = cpu_this()->brand;
    snprintf(why, len,
             "this CPU%s%s%s has no %s (fp16 products need AVX512_FP16: Intel Sapphire Rapids "
             "and later Xeons; AMD Zen 4 and Zen 5 have none), or its operating system does "
             "not enable it",
             brand[0] ? " (" : "", brand, brand[0] ? ")" : "", missing);
    return 0;
}

static fp16_row_tile_fn *row_tile(void)
{
    return direct_fp16_emulate ? direct_fp16_row_tile_emulated : direct_fp16_row_tile_avx512;
}

static fp16_dot_tile_fn *dot_tile(void)
{
    return direct_fp16_emulate ? direct_fp16_dot_tile_emulated : direct_fp16_dot_tile_avx512;
}

/* ---------------------------------------------------------------------- */
/* Packing (the carver and the sums are half_common.h's)                   */

/* Halves a packed run may be read past its end (a vector) */
enum { OVERREAD = FP16_LANES };

/* dst[e] = src[e] rounded, as halves, or doubled (direct_fp16_double:
 * the row tile's broadcast operand) when `doubled` */
static void pack_run(void *dst, int doubled, const float *src, size_t n)
{
    if (!doubled) {
        direct_fp16_round_run(dst, src, n, 1.0f);
        return;
    }
    enum { PIECE = 256 };
    uint16_t h[PIECE];
    uint32_t *words = dst;
    for (size_t e0 = 0; e0 < n; e0 += PIECE) {
        const size_t len = n - e0 < PIECE ? n - e0 : PIECE;
        direct_fp16_round_run(h, src + e0, len, 1.0f);
        for (size_t e = 0; e < len; e++)
            words[e0 + e] = direct_fp16_double(h[e]);
    }
}

/* pack_run over n values, in pieces shared between threads */
static void pack_all(void *dst, int doubled, const float *src, size_t n, int threads)
{
    enum { PIECE = 16384 };
    const size_t pieces = (n + PIECE - 1) / PIECE, size = doubled ? 4 : 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && pieces > 1)
    for (size_t i = 0; i < pieces; i++)
        pack_run((char *)dst + i * PIECE * size, doubled, src + i * PIECE,
                 n - i * PIECE < PIECE ? n - i * PIECE : PIECE);
}

/* rows r < n of x (row stride sx floats, `cols` each) rounded into
 * packed[r][ld], 0 past cols */
static void round_rows(uint16_t *packed, size_t ld, const float *x, ptrdiff_t sx, int n,
                       int cols, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int r = 0; r < n; r++) {
        direct_fp16_round_run(packed + r * ld, x + r * sx, (size_t)cols, 1.0f);
        memset(packed + r * ld + cols, 0, sizeof(uint16_t) * (ld - (size_t)cols));
    }
}

/* c[M][ldc] (columns [0, N)) = init + a x b[steps][ld], the row tile over
 * every block of rows and strip of columns; a's row i, step s is
 * a[i * lda + s * a_step]. */
static void row_product(float *c, size_t ldc, const float *init, const uint32_t *a,
                        ptrdiff_t lda, ptrdiff_t a_step, const uint16_t *b, size_t ld,
                        ptrdiff_t *offsets, int steps, int M, int N, int threads)
{
    for (int s = 0; s < steps; s++)
        offsets[s] = (ptrdiff_t)s * (ptrdiff_t)ld;
    const int blocks = (M + FP16_ROWS - 1) / FP16_ROWS, strips = (N + FP16_COLS - 1) / FP16_COLS;
    fp16_row_tile_fn *tile = row_tile();
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int jt = 0; jt < strips; jt++)
        for (int kb = 0; kb < blocks; kb++) {
            const int j = jt * FP16_COLS, cols = N - j < FP16_COLS ? N - j : FP16_COLS;
            const int k0 = split_at(M, blocks, kb), m = split_at(M, blocks, kb + 1) - k0;
            float *rows[FP16_ROWS];
            for (int i = 0; i < m; i++)
                rows[i] = c + (size_t)(k0 + i) * ldc + j;
            tile(m, cols, rows, 0, init ? init + k0 : NULL, a + k0 * lda, lda, a_step, b + j,
                 offsets, steps, DIRECT_FP16_CHAIN);
        }
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

/* The weights as the two passes read them, packed once per pass over a
 * batch: the forward pass's [k][tap] (each channel's weights without its
 * bias), the input gradient's [c][kj][ki][k]. */
typedef struct conv_weight_parts {
    uint32_t *forward, *data;
} conv_weight_parts;

static conv_weight_parts weight_parts(carver *c, int C, int K, int kernel)
{
    const size_t R = (size_t)C * kernel * kernel;
    conv_weight_parts p;
    p.forward = carve(c, sizeof(uint32_t) * K * R);
    p.data = carve(c, sizeof(uint32_t) * K * R);
    return p;
}

size_t direct_fp16_conv_weight_bytes(int C, int K, int kernel)
{
    carver c = {NULL, 0};
    weight_parts(&c, C, K, kernel);
    return c.used;
}

void direct_fp16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel)
{
    const int R = C * kernel * kernel, kk = kernel * kernel;
    carver cv = {packed, 0};
    const conv_weight_parts p = weight_parts(&cv, C, K, kernel);
    for (int k = 0; k < K; k++)
        pack_run(p.forward + (size_t)k * R, 1, weight_bias + (size_t)k * (R + 1), (size_t)R);
    for (int c = 0; c < C; c++)
        for (int kj = 0; kj < kernel; kj++)
            for (int ki = 0; ki < kernel; ki++)
                for (int k = 0; k < K; k++)
                    p.data[((size_t)(c * kernel + kj) * kernel + ki) * K + k] =
                        p.forward[(size_t)k * R + c * kk + ki * kernel + kj];
}

/* The forward pass's rounded input (CHWN, as given) and each tap's offset
 * into it. */
typedef struct conv_forward_parts {
    uint16_t *input;
    ptrdiff_t *offsets;
} conv_forward_parts;

static conv_forward_parts forward_parts(carver *c, int B, int C, int H, int W, int kernel)
{
    conv_forward_parts p;
    p.input = carve(c, sizeof(uint16_t) * ((size_t)C * H * W * B + OVERREAD));
    p.offsets = carve(c, sizeof(ptrdiff_t) * C * kernel * kernel);
    return p;
}

/* The input gradient's: d_out's rows rounded, [oy][k][ld], and step (ki,
 * k)'s offset from row iy's start, [ki][k]. */
typedef struct conv_data_parts {
    uint16_t *grad;
    ptrdiff_t *offsets;
    size_t ld;
} conv_data_parts;

static conv_data_parts data_parts(carver *c, int B, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    conv_data_parts p;
    p.ld = (size_t)OW * B + OVERREAD;
    p.grad = carve(c, sizeof(uint16_t) * (size_t)OH * K * p.ld);
    p.offsets = carve(c, sizeof(ptrdiff_t) * kernel * K);
    return p;
}


size_t direct_fp16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel)
{
    carver f = {NULL, 0}, d = {NULL, 0}, w = {NULL, 0};
    forward_parts(&f, B, C, H, W, kernel);
    data_parts(&d, B, H, W, K, kernel);
    params_parts(&w, B, C, H, W, K, kernel);
    return carved_most(&f, &d, &w);
}

void direct_fp16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    carver cv = {scratch, 0}, cw = {(char *)packed_weights, 0};
    const conv_forward_parts p = forward_parts(&cv, B, C, H, W, kernel);
    const uint32_t *weights = weight_parts(&cw, C, K, kernel).forward;
    const size_t n_in = (size_t)C * H * W * B;
    pack_all(p.input, 0, in, n_in, threads);
    memset(p.input + n_in, 0, sizeof(uint16_t) * OVERREAD);
    for (int s = 0; s < R; s++) { /* tap (c, ki, kj) */
        const int c = s / (kernel * kernel), ki = s / kernel % kernel, kj = s % kernel;
        p.offsets[s] = ((ptrdiff_t)(c * H + ki) * W + kj) * B;
    }
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int blocks = (K + FP16_ROWS - 1) / FP16_ROWS;
    const int col_tiles = (int)((row + FP16_COLS - 1) / FP16_COLS);
    fp16_row_tile_fn *tile = row_tile();
    /* a column tile of one output row for every block of channels in
     * turn: its runs stay in cache from one block to the next */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int y = 0; y < OH; y++)
        for (int jt = 0; jt < col_tiles; jt++) {
            const size_t j = (size_t)jt * FP16_COLS;
            const int cols = row - j < FP16_COLS ? (int)(row - j) : FP16_COLS;
            for (int kb = 0; kb < blocks; kb++) {
                const int k0 = split_at(K, blocks, kb), m = split_at(K, blocks, kb + 1) - k0;
                float *rows[FP16_ROWS], bias[FP16_ROWS];
                for (int i = 0; i < m; i++) {
                    rows[i] = out + (k0 + i) * plane_out + y * row + j;
                    bias[i] = weight_bias[(size_t)(k0 + i) * (R + 1) + R];
                }
                tile(m, cols, rows, 0, bias, weights + (size_t)k0 * R, R, 1,
                     p.input + (size_t)y * W * B + j, p.offsets, R, DIRECT_FP16_CHAIN);
            }
        }
}

void direct_fp16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    carver cv = {scratch, 0}, cw = {(char *)packed_weights, 0};
    const conv_data_parts p = data_parts(&cv, B, H, W, K, kernel);
    const uint32_t *weights = weight_parts(&cw, C, K, kernel).data;
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    /* d_out's rows: grad[oy][k] */
    for (int oy = 0; oy < OH; oy++)
        round_rows(p.grad + (size_t)oy * K * p.ld, p.ld, d_out + oy * row, (ptrdiff_t)plane_out,
                   K, (int)row, threads);
    /* step (ki, k) reads d_out row iy - ki: offsets from row iy's start */
    for (int ki = 0; ki < kernel; ki++)
        for (int k = 0; k < K; k++)
            p.offsets[ki * K + k] = ((ptrdiff_t)k - (ptrdiff_t)ki * K) * (ptrdiff_t)p.ld;
    const size_t in_row = (size_t)W * B, plane_in = (size_t)H * in_row;
    const int blocks = (kernel + FP16_ROWS - 1) / FP16_ROWS;
    fp16_row_tile_fn *tile = row_tile();
    /* each row of d_in is summed by one thread, in the same order for
     * any split */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int iy = 0; iy < H; iy++) {
            const int ki_lo = iy - (OH - 1) > 0 ? iy - (OH - 1) : 0;
            const int ki_hi = iy < kernel - 1 ? iy : kernel - 1;
            const int steps = (ki_hi - ki_lo + 1) * K;
            float *dst = d_in + c * plane_in + iy * in_row;
            memset(dst, 0, sizeof(float) * in_row);
            const uint16_t *b = p.grad + (size_t)iy * K * p.ld;
            for (size_t j = 0; j < row; j += FP16_COLS) {
                const int cols = row - j < FP16_COLS ? (int)(row - j) : FP16_COLS;
                for (int kb = 0; kb < blocks; kb++) {
                    const int kj0 = split_at(kernel, blocks, kb);
                    const int m = split_at(kernel, blocks, kb + 1) - kj0;
                    float *rows[FP16_ROWS];
                    for (int i = 0; i < m; i++) /* kernel column kj lands kj images on */
                        rows[i] = dst + (size_t)(kj0 + i) * B + j;
                    const uint32_t *a =
                        weights + ((size_t)(c * kernel + kj0) * kernel + ki_lo) * K;
                    tile(m, cols, rows, 1, NULL, a, (ptrdiff_t)kernel * K, 1, b + j,
                         p.offsets + ki_lo * K, steps, DIRECT_FP16_CHAIN);
                }
            }
        }
}

void direct_fp16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    carver cv = {scratch, 0};
    const conv_params_parts p = params_parts(&cv, B, C, H, W, K, kernel);
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    const int tap_tiles = (R + FP16_DOT_COLS - 1) / FP16_DOT_COLS;
    const int k_tiles = (K + FP16_DOT_ROWS - 1) / FP16_DOT_ROWS;
    pack_all(p.input, 0, in, (size_t)C * H * W * B, threads);
    pack_all(p.grad, 0, d_out, (size_t)K * plane_out, threads);
    fp16_dot_tile_fn *tile = dot_tile();
    /* the taps outside: a tile's runs of the input stay in cache while
     * every channel's gradient passes */
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int rt = 0; rt < tap_tiles; rt++)
        for (int kt = 0; kt < k_tiles; kt++) {
            const int r0 = rt * FP16_DOT_COLS, nt = R - r0 < FP16_DOT_COLS ? R - r0 : FP16_DOT_COLS;
            const int k0 = kt * FP16_DOT_ROWS, mk = K - k0 < FP16_DOT_ROWS ? K - k0 : FP16_DOT_ROWS;
            const uint16_t *runs[FP16_DOT_COLS], *g[FP16_DOT_ROWS];
            for (int t = 0; t < nt; t++) {
                const int r = r0 + t, c = r / (kernel * kernel), ki = r / kernel % kernel;
                const int kj = r % kernel;
                runs[t] = p.input + ((size_t)(c * H + ki) * W + kj) * B;
            }
            for (int i = 0; i < mk; i++)
                g[i] = p.grad + (size_t)(k0 + i) * plane_out;
            tile(mk, nt, d_weight_bias + (size_t)k0 * (R + 1) + r0, R + 1, g, runs, OH,
                 (ptrdiff_t)row, (ptrdiff_t)W * B, row, DIRECT_FP16_CHAIN);
        }
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int k = 0; k < K; k++)
        d_weight_bias[(size_t)k * (R + 1) + R] = sum_floats(d_out + (size_t)k * plane_out, plane_out);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* Packed operands: in[n_in][ld_b] and the weights [n_out][n_in] doubled
 * (forward; the weights read down their columns for the input gradient);
 * d_out[n_out][ld_b], and doubled [n_out][B] for the weight gradient, where
 * it is broadcast; in transposed, [B][ld_in]. */
typedef struct dense_parts {
    uint16_t *x, *g, *xt, *untransposed;
    uint32_t *w, *g_doubled;
    ptrdiff_t *offsets;
} dense_parts;

static dense_parts dense_layout(carver *c, int B, int n_in, int n_out)
{
    const size_t ld_b = round_up((size_t)B, FP16_LANES), ld_in = round_up((size_t)n_in, FP16_LANES);
    dense_parts p;
    p.x = carve(c, sizeof(uint16_t) * n_in * ld_b);
    p.w = carve(c, sizeof(uint32_t) * n_out * n_in);
    p.g = carve(c, sizeof(uint16_t) * n_out * ld_b);
    p.g_doubled = carve(c, sizeof(uint32_t) * n_out * B);
    p.xt = carve(c, sizeof(uint16_t) * B * ld_in);
    p.untransposed = carve(c, sizeof(uint16_t) * n_in * B);
    const int most = n_in > n_out ? (n_in > B ? n_in : B) : (n_out > B ? n_out : B);
    p.offsets = carve(c, sizeof(ptrdiff_t) * most);
    return p;
}

size_t direct_fp16_dense_scratch_bytes(int B, int n_in, int n_out)
{
    carver c = {NULL, 0};
    dense_layout(&c, B, n_in, n_out);
    return c.used;
}

void direct_fp16_dense_forward(float *out, const float *in, const float *weight,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads)
{
    threads = dense_threads(threads, B, n_in, n_out);
    carver c = {scratch, 0};
    const dense_parts p = dense_layout(&c, B, n_in, n_out);
    const size_t ld = round_up((size_t)B, FP16_LANES);
    round_rows(p.x, ld, in, B, n_in, B, threads);
    pack_all(p.w, 1, weight, (size_t)n_out * n_in, threads);
    row_product(out, B, bias, p.w, n_in, 1, p.x, ld, p.offsets, n_in, n_out, B, threads);
}

/* dst[c][r] = src[r][c], in blocks that stay in cache */
static void transpose_halves(uint16_t *dst, size_t ld_dst, const uint16_t *src, size_t ld_src,
                             int rows, int cols, int threads)
{
    enum { BLOCK = 32 };
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

void direct_fp16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const float *weight,
                                void *scratch, int B, int n_in, int n_out, int threads)
{
    threads = dense_threads(threads, B, n_in, n_out);
    carver c = {scratch, 0};
    const dense_parts p = dense_layout(&c, B, n_in, n_out);
    const size_t ld_b = round_up((size_t)B, FP16_LANES), ld_in = round_up((size_t)n_in, FP16_LANES);
    /* d_weight = d_out x in^T: a step an image, in's rows transposed to
     * xt[b][i] */
    pack_all(p.g_doubled, 1, d_out, (size_t)n_out * B, threads);
    pack_all(p.untransposed, 0, in, (size_t)n_in * B, threads);
    transpose_halves(p.xt, ld_in, p.untransposed, (size_t)B, n_in, B, threads);
    for (int b = 0; b < B; b++)
        memset(p.xt + b * ld_in + n_in, 0, sizeof(uint16_t) * (ld_in - n_in));
    row_product(d_weight, n_in, NULL, p.g_doubled, B, 1, p.xt, ld_in, p.offsets, B, n_out, n_in,
                threads);
    /* d_in = weight^T x d_out: a step an output, d_in's row i reading the
     * weights down column i, so nothing is transposed */
    if (d_in) {
        round_rows(p.g, ld_b, d_out, B, n_out, B, threads);
        pack_all(p.w, 1, weight, (size_t)n_out * n_in, threads);
        row_product(d_in, B, NULL, p.w, 1, n_in, p.g, ld_b, p.offsets, n_out, n_in, B, threads);
    }
    for (int k = 0; k < n_out; k++)
        d_bias[k] = sum_floats(d_out + (size_t)k * B, (size_t)B);
}
