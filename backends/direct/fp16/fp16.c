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
#include "backends/direct/fp16/fp16.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/direct/fp16/fp16_tiles.h"
#include "backends/direct/half/half_walks.h"
#include "base/cpu.h"

int direct_fp16_emulate;

int direct_fp16_supported(char *why, size_t len)
{
    return half_cpu_supports(CPU_AVX512 | CPU_AVX512_FP16,
                             "fp16 products need AVX512_FP16: Intel Sapphire Rapids and later "
                             "Xeons; AMD Zen 4 and Zen 5 have none",
                             why, len);
}

/* The tiles as the walks (half_walks.h) call them, every sum in chains of
 * DIRECT_FP16_CHAIN: the AVX512_FP16 ones, or the emulated ones where
 * direct_fp16_emulate says */
static void chained_rows(int m, int cols, float *const *rows, int add, const float *init,
                         const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step, const void *b,
                         const ptrdiff_t *off, int steps)
{
    fp16_row_tile_fn *tile =
        direct_fp16_emulate ? direct_fp16_row_tile_emulated : direct_fp16_row_tile_avx512;
    tile(m, cols, rows, add, init, a, lda, a_step, b, off, steps, DIRECT_FP16_CHAIN);
}

/* Halves a packed run may be read past its end (a vector) */
enum { OVERREAD = FP16_LANES };

/* Halves, one term each */
static const half_format ROWS = {chained_rows, FP16_ROWS, FP16_COLS, 1, sizeof(uint16_t),
                                 OVERREAD,     0};
HALF_TILES_FIT(FP16_ROWS, FP16_DOT_ROWS, FP16_DOT_COLS);

static void chained_dot(const void *job, const half_dot_args *t)
{
    (void)job;
    fp16_dot_tile_fn *tile =
        direct_fp16_emulate ? direct_fp16_dot_tile_emulated : direct_fp16_dot_tile_avx512;
    tile(t->mk, t->nt, t->out, t->out_row, t->g, t->x, t->nrows, t->g_row, t->x_row, t->len,
         DIRECT_FP16_CHAIN);
}

/* ---------------------------------------------------------------------- */
/* Packing (the carver and the sums are half_common.h's)                   */

/* dst[e] = src[e] rounded, as halves, or doubled (direct_fp16_double:
 * the row tile's broadcast operand) when `doubled` */
static void pack_run(void *dst, int doubled, const float *src, size_t n)
{
    if (!doubled) {
        direct_fp16_round_run(dst, src, n, 1.0f);
        return;
    }
    direct_fp16_round_doubled_run(dst, src, n);
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

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

/* The weights as the two passes read them (half_conv_weight_layout),
 * packed once per pass over a batch: the forward pass's [k][tap] (each
 * channel's weights without its bias), the input gradient's
 * [c][kj][ki][k]. */
size_t direct_fp16_conv_weight_bytes(int C, int K, int kernel)
{
    return half_conv_weight_layout(ROWS, NULL, C, K, kernel).bytes;
}

void direct_fp16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel)
{
    const int R = C * kernel * kernel, kk = kernel * kernel;
    const half_conv_weights p = half_conv_weight_layout(ROWS, packed, C, K, kernel);
    for (int k = 0; k < K; k++)
        pack_run(p.forward + (size_t)k * R, 1, weight_bias + (size_t)k * (R + 1), (size_t)R);
    for (int c = 0; c < C; c++)
        for (int kj = 0; kj < kernel; kj++)
            for (int ki = 0; ki < kernel; ki++)
                for (int k = 0; k < K; k++)
                    p.data[((size_t)(c * kernel + kj) * kernel + ki) * K + k] =
                        p.forward[(size_t)k * R + c * kk + ki * kernel + kj];
}

size_t direct_fp16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel)
{
    return half_conv_scratch_bytes(ROWS, B, C, H, W, K, kernel);
}

void direct_fp16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads)
{
    const half_conv_pass p =
        half_conv_forward_layout(ROWS, scratch, B, C, H, W, kernel);
    /* the input as given (CHWN), rounded */
    const size_t n_in = (size_t)C * H * W * B;
    pack_all(p.packed, 0, in, n_in, threads);
    memset((uint16_t *)p.packed + n_in, 0, sizeof(uint16_t) * OVERREAD);
    half_conv_forward_walk(ROWS, out, weight_bias,
                           half_conv_weight_layout(ROWS, packed_weights, C, K, kernel).forward, p,
                           B, C, H, W, K, kernel, threads);
}

void direct_fp16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    const half_conv_pass p = half_conv_data_layout(ROWS, scratch, B, H, W, K, kernel);
    const size_t row = (size_t)OW * B, plane_out = (size_t)OH * row;
    /* d_out's rows: grad[oy][k] */
    for (int oy = 0; oy < OH; oy++)
        round_rows((uint16_t *)p.packed + (size_t)oy * K * p.ld, p.ld, d_out + oy * row,
                   (ptrdiff_t)plane_out, K, (int)row, threads);
    half_conv_data_walk(ROWS, d_in,
                        half_conv_weight_layout(ROWS, packed_weights, C, K, kernel).data, p, B, C,
                        H, W, kernel, threads);
}

void direct_fp16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads)
{
    const half_conv_params_parts p = half_conv_params_layout(scratch, B, C, H, W, K, kernel);
    const int R = C * kernel * kernel;
    pack_all(p.input, 0, in, p.n_input, threads);
    /* d_out rounded and the bias gradients summed in one read of it */
    direct_fp16_round_sums(p.grad, d_out, p.plane, K, d_weight_bias + R, (size_t)R + 1, threads);
    half_conv_params_walk(chained_dot, NULL, FP16_DOT_ROWS, FP16_DOT_COLS, d_weight_bias,
                          p.grad, p.input, B, C, H, W, K, kernel, threads);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* The operands (half_dense_layout): in[n_in][ld_b], times the weights
 * doubled, [n_out][n_in] (half_dense_weight_layout: forward along the
 * rows, the input gradient down the columns); d_out[n_out][ld_b], and
 * doubled [n_out][B] for the weight gradient, where it is broadcast; in
 * transposed, [B][ld_in]. */
static half_dense_parts dense_parts(void *scratch, int B, int n_in, int n_out)
{
    return half_dense_layout(scratch, B, n_in, n_out, 1, sizeof(uint16_t), FP16_LANES);
}

size_t direct_fp16_dense_scratch_bytes(int B, int n_in, int n_out)
{
    return dense_parts(NULL, B, n_in, n_out).bytes;
}

size_t direct_fp16_dense_weight_bytes(int n_in, int n_out)
{
    return half_dense_weight_layout(NULL, n_in, n_out, 1).bytes;
}

void direct_fp16_pack_dense_weights(void *packed, const float *weight, int n_in, int n_out,
                                    int threads)
{
    pack_all(half_dense_weight_layout(packed, n_in, n_out, 1).w, 1, weight,
             (size_t)n_out * n_in, threads);
}

void direct_fp16_dense_forward(float *out, const float *in, const void *packed_weights,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads)
{
    threads = dense_threads(threads, (double)B * n_in * n_out);
    const half_dense_parts p = dense_parts(scratch, B, n_in, n_out);
    round_rows(p.x, p.ld_b, in, B, n_in, B, threads);
    half_product(ROWS, out, B, bias, half_dense_weight_layout(packed_weights, n_in, n_out, 1).w,
                 n_in, 1, p.x, p.ld_b, p.offsets, n_in, n_out, B, threads);
}

void direct_fp16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const void *packed_weights,
                                void *scratch, int B, int n_in, int n_out, int threads)
{
    /* the weight gradient, and the input gradient unless d_in is NULL */
    threads = dense_threads(threads, (d_in ? 2.0 : 1.0) * B * n_in * n_out);
    const half_dense_parts p = dense_parts(scratch, B, n_in, n_out);
    /* d_weight = d_out x in^T: a step an image, in's rows transposed to
     * xt[b][i] */
    pack_all(p.gi, 1, d_out, (size_t)n_out * B, threads);
    direct_fp16_round_transposed(p.xt, p.ld_in, in, (size_t)B, n_in, B, threads);
    half_product(ROWS, d_weight, n_in, NULL, p.gi, B, 1, p.xt, p.ld_in, p.offsets, B, n_out,
                 n_in, threads);
    /* d_in = weight^T x d_out: a step an output, d_in's row i reading the
     * weights down column i, so nothing is transposed */
    if (d_in) {
        round_rows(p.g, p.ld_b, d_out, B, n_out, B, threads);
        half_product(ROWS, d_in, B, NULL,
                     half_dense_weight_layout(packed_weights, n_in, n_out, 1).wt, 1, n_in, p.g,
                     p.ld_b, p.offsets, n_out, n_in, B, threads);
    }
    for (int k = 0; k < n_out; k++)
        d_bias[k] = sum_floats(d_out + (size_t)k * B, (size_t)B);
}
