/* The CHWN layers of the blas and direct backends (see blas_layers.h for
 * the layout and the threading). In the blas builds every product is a
 * row-major GEMM of the build's type: cblas_sgemm, cblas_dgemm (fp64), or
 * cblas_sbgemm on operands rounded to bf16 (bf16.h). In the direct build
 * (LB_REAL_DIRECT) they are the direct kernels chosen for this CPU
 * (backends/direct/direct.h), or with LB_DIRECT_BF16 the direct bf16
 * products (backends/direct/bf16.h, in the caller's scratch), and OpenBLAS
 * is not used. */
#include "backends/blas/blas_layers.h"

#include <omp.h>
#include <string.h>

#include "backends/common/elementwise.h"

#if defined(LB_REAL_DIRECT)
#include "backends/direct/direct.h"
#else
#include <cblas.h>

#include "backends/blas/bf16.h"
#endif

#if defined(LB_REAL_DOUBLE)
#define gemm cblas_dgemm
#elif defined(LB_REAL_BF16)
#define gemm blas_bf16_gemm
#elif !defined(LB_REAL_DIRECT)
#define gemm cblas_sgemm
#endif

/* Sets how many threads OpenBLAS uses for a call made outside our parallel
 * regions: every thread when it splits the GEMMs, else one. Both of
 * OpenBLAS's knobs are set, since its OpenMP build follows this thread's
 * omp_get_max_threads() but never rises again from 1 by that route alone.
 * Inside an active parallel region its OpenMP build always runs on one
 * thread; its pthreads build needs the count of 1 for that. */
#if defined(LB_REAL_PLAIN)
void blas_team_enter(const blas_team *t)
{
    const int library_threads = t->split == BLAS_SPLIT_LIBRARY ? t->threads : 1;
    omp_set_num_threads(library_threads);
    if (openblas_get_num_threads() != library_threads)
        openblas_set_num_threads(library_threads);
}
#elif defined(LB_REAL_DIRECT_FP32)
/* (no library: the loops name their thread counts) */
void blas_team_enter(const blas_team *t)
{
    (void)t;
    omp_set_num_threads(1);
}
#endif

void blas_gather_chwn(real *x, int ld, const uint8_t *images, size_t pixels,
                      const int32_t *idx, int first, int B, int threads)
{
    enum { ROWS = 32 }; /* pixels per chunk: a thread owns these rows of x */
    const int chunks = (int)((pixels + ROWS - 1) / ROWS);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < chunks; c++) {
        const size_t p0 = (size_t)c * ROWS, p1 = p0 + ROWS < pixels ? p0 + ROWS : pixels;
        for (int b = 0; b < B; b++) {
            const uint8_t *src = images + (size_t)(idx ? idx[b] : first + b) * pixels;
            for (size_t p = p0; p < p1; p++)
                x[p * ld + b] = lb_pixel(src[p]);
        }
    }
}

/* Rows of x in chunks that a thread owns, each chunk's images read in
 * turn: every src row is read in runs of ROWS floats. */
void blas_chwn_from_nchw(real *x, int ld, const float *src, size_t F, int B, int threads)
{
    enum { ROWS = 32 };
    const int chunks = (int)((F + ROWS - 1) / ROWS);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && chunks > 1)
    for (int c = 0; c < chunks; c++) {
        const size_t f0 = (size_t)c * ROWS, f1 = f0 + ROWS < F ? f0 + ROWS : F;
        for (int b = 0; b < B; b++)
            for (size_t f = f0; f < f1; f++)
                x[f * ld + b] = (real)src[(size_t)b * F + f];
    }
}

void blas_nchw_from_chwn(float *dst, const real *x, int ld, size_t F, int B, int threads)
{
    enum { ROWS = 32 };
    const int chunks = (int)((F + ROWS - 1) / ROWS);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && chunks > 1)
    for (int c = 0; c < chunks; c++) {
        const size_t f0 = (size_t)c * ROWS, f1 = f0 + ROWS < F ? f0 + ROWS : F;
        for (int b = 0; b < B; b++)
            for (size_t f = f0; f < f1; f++)
                dst[(size_t)b * F + f] = (float)x[f * ld + b];
    }
}

void blas_rows_from_group(real *dst, int ld, int b0, const real *src, int F, int B)
{
    for (int f = 0; f < F; f++)
        memcpy(dst + (size_t)f * ld + b0, src + (size_t)f * B, sizeof(real) * B);
}

void blas_group_from_rows(real *dst, const real *src, int ld, int b0, int F, int B)
{
    for (int f = 0; f < F; f++)
        memcpy(dst + (size_t)f * B, src + (size_t)f * ld + b0, sizeof(real) * B);
}

/* ---------------------------------------------------------------------- */
/* Convolution                                                             */

void blas_join_weight_bias(real *weight_bias, const real *weight, const real *bias, int K,
                           int R)
{
    for (int k = 0; k < K; k++) {
        memcpy(weight_bias + (size_t)k * (R + 1), weight + (size_t)k * R, sizeof(real) * R);
        weight_bias[(size_t)k * (R + 1) + R] = bias[k];
    }
}

#if defined(LB_DIRECT_BF16)
/* Where the packed copy starts: past [K][R + 1], on a cache line */
static size_t packed_at(int C, int K, int kernel)
{
    return ((size_t)K * (C * kernel * kernel + 1) + 15) / 16 * 16;
}
#endif

size_t blas_conv_packed_floats(int C, int K, int kernel)
{
#if defined(LB_DIRECT_BF16)
    return packed_at(C, K, kernel) - (size_t)K * (C * kernel * kernel + 1) +
           (direct_bf16_conv_weight_bytes(C, K, kernel) + sizeof(real) - 1) / sizeof(real);
#else
    (void)C, (void)K, (void)kernel;
    return 0;
#endif
}

void blas_conv_pack_weights(real *weight_bias, int C, int K, int kernel)
{
#if defined(LB_DIRECT_BF16)
    direct_bf16_pack_conv_weights(weight_bias + packed_at(C, K, kernel), weight_bias, C, K,
                                  kernel);
#else
    (void)weight_bias, (void)C, (void)K, (void)kernel;
#endif
}

#ifndef LB_REAL_DIRECT
/* Output rows [oy0, oy1) unfolded: col[(c, ki, kj)][(oy - oy0, ox, b)] =
 * in[c][oy*s + ki][ox*s + kj][b], then a row of ones. With stride 1 a
 * whole output row (ox, b) is one contiguous run of the input. */
static void im2col_rows(real *col, const real *in, int B, int C, int H, int W, int kernel,
                        int stride, int oy0, int oy1, int threads)
{
    const int OW = blas_out_size(W, kernel, stride);
    const size_t row = (size_t)OW * B, N = (size_t)(oy1 - oy0) * row;
    const int R = C * kernel * kernel;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int r = 0; r <= R; r++) {
        real *dst = col + (size_t)r * N;
        if (r == R) {
            for (size_t j = 0; j < N; j++)
                dst[j] = 1.0f;
            continue;
        }
        const int c = r / (kernel * kernel), ki = r / kernel % kernel, kj = r % kernel;
        for (int oy = oy0; oy < oy1; oy++) {
            const real *src = in + ((size_t)(c * H + oy * stride + ki) * W + kj) * B;
            real *d = dst + (size_t)(oy - oy0) * row;
            if (stride == 1) {
                memcpy(d, src, sizeof(real) * row);
                continue;
            }
            for (int ox = 0; ox < OW; ox++)
                memcpy(d + (size_t)ox * B, src + (size_t)ox * stride * B, sizeof(real) * B);
        }
    }
}

/* Output rows per product: as many as keep a chunk of the unfolded input
 * near COL_CHUNK_FLOATS, so that it is still in L2 when OpenBLAS packs it.
 * Unfolding a whole group at once wrote conv1's 1.9 MB and conv2's 4 MB
 * per group of 32 images out to memory, read them back to pack them and
 * again in the backward pass (conv1's products ran at a quarter of the
 * core's peak, memory-bound). A chunk is unfolded again from the input,
 * still in cache, where the backward pass needs it. */
enum { COL_CHUNK_FLOATS = 1 << 15 };

/* A convolution of B images cut into chunks of `step` output rows: each
 * output row is `row` = OW * B floats of a [K][OH][row] plane. */
typedef struct conv_chunks {
    int OH, R, step;
    size_t row, plane;
} conv_chunks;

static conv_chunks chunks_of(int B, int C, int H, int W, int kernel, int stride)
{
    conv_chunks g;
    g.OH = blas_out_size(H, kernel, stride);
    g.R = C * kernel * kernel;
    g.row = (size_t)blas_out_size(W, kernel, stride) * B;
    g.plane = (size_t)g.OH * g.row;
    const size_t per_row = (size_t)(g.R + 1) * g.row;
    const int rows = per_row ? (int)(COL_CHUNK_FLOATS / per_row) : g.OH;
    g.step = rows < 1 ? 1 : rows > g.OH ? g.OH : rows;
    return g;
}

/* The end of the chunk that starts at output row oy0. */
static int chunk_end(const conv_chunks *g, int oy0)
{
    return oy0 + g->step < g->OH ? oy0 + g->step : g->OH;
}

/* Floats a chunk's columns span: its output rows times a row. */
static int chunk_columns(const conv_chunks *g, int oy0, int oy1)
{
    return (int)((size_t)(oy1 - oy0) * g->row);
}

#endif

size_t blas_conv_scratch_floats(int B, int C, int H, int W, int K, int kernel, int stride)
{
#if defined(LB_DIRECT_BF16)
    (void)stride;
    return (direct_bf16_conv_scratch_bytes(B, C, H, W, K, kernel) + sizeof(real) - 1) /
           sizeof(real);
#elif defined(LB_REAL_DIRECT)
    (void)stride; /* stride 1 (the engine refuses others) */
    return direct_conv_scratch_floats(B, C, H, W, K, kernel);
#else
    /* a chunk of the unfolded input, or of its gradient */
    (void)K;
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    return ((size_t)g.R + 1) * (size_t)g.step * g.row;
#endif
}

void blas_conv_forward(real *out, const real *in, const real *weight_bias, real *scratch,
                       int B, int C, int H, int W, int K, int kernel, int stride, int threads)
{
#if defined(LB_DIRECT_BF16)
    (void)stride;
    direct_bf16_conv_forward(out, in, weight_bias, weight_bias + packed_at(C, K, kernel), scratch,
                             B, C, H, W, K, kernel, threads);
#elif defined(LB_REAL_DIRECT)
    (void)scratch, (void)stride; /* read in place; stride 1 */
    direct_active()->conv_forward(out, in, weight_bias, B, C, H, W, K, kernel, threads);
#else
    real *col = scratch; /* a chunk of the unfolded input at a time */
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        im2col_rows(col, in, B, C, H, W, kernel, stride, oy0, oy1, threads);
        gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, N, g.R + 1, 1.0f, weight_bias,
             g.R + 1, col, N, 0.0f, out + (size_t)oy0 * g.row, (int)g.plane);
    }
#endif
}

void blas_conv_backward_params(real *d_weight_bias, const real *d_out, const real *in,
                               real *scratch, int B, int C, int H, int W, int K, int kernel,
                               int stride, int threads)
{
#if defined(LB_DIRECT_BF16)
    (void)stride;
    direct_bf16_conv_backward_params(d_weight_bias, d_out, in, scratch, B, C, H, W, K, kernel,
                                     threads);
#elif defined(LB_REAL_DIRECT)
    (void)scratch, (void)stride;
    direct_active()->conv_backward_params(d_weight_bias, d_out, in, B, C, H, W, K, kernel,
                                          threads);
#else
    /* the input unfolded again, a chunk at a time, into scratch */
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    /* d_weight_bias[K][R + 1] = sum over the chunks of d_out[K][N] *
     * col[R + 1][N]^T; the row of ones gives the bias gradient, the sum of
     * d_out's rows. */
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        im2col_rows(scratch, in, B, C, H, W, kernel, stride, oy0, oy1, threads);
        gemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, g.R + 1, N, 1.0f,
             d_out + (size_t)oy0 * g.row, (int)g.plane, scratch, N, oy0 ? 1.0f : 0.0f,
             d_weight_bias, g.R + 1);
    }
#endif
}

void blas_conv_backward_data(real *d_in, real *d_col, const real *d_out,
                             const real *weight_bias, int B, int C, int H, int W, int K,
                             int kernel, int stride, int threads)
{
#if defined(LB_DIRECT_BF16)
    (void)stride;
    direct_bf16_conv_backward_data(d_in, d_out, weight_bias + packed_at(C, K, kernel), d_col, B,
                                   C, H, W, K, kernel, threads);
#elif defined(LB_REAL_DIRECT)
    (void)stride; /* d_col is the kernels' scratch */
    direct_active()->conv_backward_data(d_in, d_out, weight_bias, d_col, B, C, H, W, K, kernel,
                                        threads);
#else
    const int OW = blas_out_size(W, kernel, stride);
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    const size_t row = g.row;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        memset(d_in + (size_t)c * H * W * B, 0, sizeof(real) * (size_t)H * W * B);
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        /* d_col[R][N] = weight^T * d_out for these output rows, the weights
         * being the first R columns of weight_bias */
        gemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.R, N, K, 1.0f, weight_bias, g.R + 1,
             d_out + (size_t)oy0 * g.row, (int)g.plane, 0.0f, d_col, N);
        /* folded back, a channel at a time: windows of different channels
         * never overlap, so channels may go to different threads */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
        for (int c = 0; c < C; c++) {
            real *dst_c = d_in + (size_t)c * H * W * B;
            for (int ki = 0; ki < kernel; ki++)
                for (int kj = 0; kj < kernel; kj++) {
                    const real *src = d_col + ((size_t)(c * kernel + ki) * kernel + kj) * N;
                    for (int oy = oy0; oy < oy1; oy++) {
                        real *dst = dst_c + ((size_t)(oy * stride + ki) * W + kj) * B;
                        const real *s = src + (size_t)(oy - oy0) * row;
                        if (stride == 1) {
#pragma omp simd
                            for (size_t j = 0; j < row; j++)
                                dst[j] += s[j];
                            continue;
                        }
                        for (int ox = 0; ox < OW; ox++) {
                            real *d = dst + (size_t)ox * stride * B;
                            const real *g = s + (size_t)ox * B;
#pragma omp simd
                            for (int b = 0; b < B; b++)
                                d[b] += g[b];
                        }
                    }
                }
        }
    }
#endif
}

/* ---------------------------------------------------------------------- */
/* Max-pool, ReLU                                                          */

/* 2x2 windows, stride 2 (LeNet's): one pass over each window's four rows
 * of B images instead of four, and the same comparisons in the same order.
 * pool1 at batch 128 on one Zen core: forward 1.3 -> 0.5-0.8 ms, backward
 * 6.6 -> 2.0 ms (CPU time, groups of 16 images). */
int blas_maxpool_records_argmax(int kernel, int stride) { return kernel == 2 && stride == 2; }

static void maxpool2_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                             int H, int W, int threads)
{
    const int OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const real *x0 = in + ((size_t)(c * H + 2 * oy) * W + 2 * ox) * B;
                const real *x1 = x0 + (size_t)W * B;
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                real *y = out + at;
                if (!argmax) {
#pragma omp simd
                    for (int b = 0; b < B; b++) {
                        real m = x0[b];
                        m = x0[B + b] > m ? x0[B + b] : m;
                        m = x1[b] > m ? x1[b] : m;
                        y[b] = x1[B + b] > m ? x1[B + b] : m;
                    }
                    continue;
                }
                unsigned char *won = argmax + at;
#pragma omp simd
                for (int b = 0; b < B; b++) { /* strictly larger: the first largest wins */
                    const real a0 = x0[b], a1 = x0[B + b], a2 = x1[b], a3 = x1[B + b];
                    const int g1 = a1 > a0;
                    const real m1 = g1 ? a1 : a0;
                    const int g2 = a2 > m1;
                    const real m2 = g2 ? a2 : m1;
                    const int g3 = a3 > m2;
                    y[b] = g3 ? a3 : m2;
                    /* the winner's place, in arithmetic the vectoriser takes */
                    const int k2 = g2 * 2 + (1 - g2) * g1;
                    won[b] = (unsigned char)(g3 * 3 + (1 - g3) * k2);
                }
            }
}

/* The gradient goes to the first of the window's inputs (row-major order)
 * equal to the output, as the forward pass kept it: the one argmax names
 * when it was recorded, else found again from the input and output. */
static void maxpool2_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                              const real *in, const real *out, int B, int C, int H, int W,
                              int threads)
{
    const int OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++) {
        real *dc = d_in + (size_t)c * H * W * B;
        /* an odd last row or column no window covers */
        for (int y = 0; y < H; y++) {
            const int from = y < OH * 2 ? OW * 2 : 0;
            memset(dc + ((size_t)y * W + from) * B, 0, sizeof(real) * (W - from) * B);
        }
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                const size_t from = ((size_t)(c * H + 2 * oy) * W + 2 * ox) * B;
                real *d0 = d_in + from, *d1 = d0 + (size_t)W * B;
                const real *dy = d_out + at;
                if (argmax) {
                    const unsigned char *won = argmax + at;
#pragma omp simd
                    for (int b = 0; b < B; b++) {
                        const real g = dy[b];
                        const int k = won[b];
                        d0[b] = k == 0 ? g : 0.0f;
                        d0[B + b] = k == 1 ? g : 0.0f;
                        d1[b] = k == 2 ? g : 0.0f;
                        d1[B + b] = k == 3 ? g : 0.0f;
                    }
                    continue;
                }
                const real *x0 = in + from, *x1 = x0 + (size_t)W * B, *y = out + at;
#pragma omp simd
                for (int b = 0; b < B; b++) {
                    /* every load and store unconditional (&, not &&):
                     * blends, no masked stores */
                    const real m = y[b], g = dy[b];
                    const int q0 = x0[b] == m, q1 = x0[B + b] == m;
                    const int q2 = x1[b] == m, q3 = x1[B + b] == m;
                    const int e1 = q1 & !q0, e2 = q2 & !(q0 | q1), e3 = q3 & !(q0 | q1 | q2);
                    d0[b] = q0 ? g : 0.0f;
                    d0[B + b] = e1 ? g : 0.0f;
                    d1[b] = e2 ? g : 0.0f;
                    d1[B + b] = e3 ? g : 0.0f;
                }
            }
    }
}

void blas_maxpool_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                          int H, int W, int kernel, int stride, int threads)
{
    if (blas_maxpool_records_argmax(kernel, stride)) {
        maxpool2_forward(out, argmax, in, B, C, H, W, threads);
        return;
    }
    const int OH = blas_out_size(H, kernel, stride), OW = blas_out_size(W, kernel, stride);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const real *x = in + ((size_t)(c * H + oy * stride) * W + ox * stride) * B;
                real *y = out + ((size_t)(c * OH + oy) * OW + ox) * B;
                memcpy(y, x, sizeof(real) * B);
                for (int ki = 0; ki < kernel; ki++)
                    for (int kj = 0; kj < kernel; kj++) {
                        const real *v = x + ((size_t)ki * W + kj) * B;
                        /* strictly larger, as the naive backend: a max
                         * instruction, and the value of the first largest */
#pragma omp simd
                        for (int b = 0; b < B; b++)
                            y[b] = v[b] > y[b] ? v[b] : y[b];
                    }
            }
}

void blas_maxpool_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                           const real *in, const real *out, int B, int C, int H, int W,
                           int kernel, int stride, int threads)
{
    if (blas_maxpool_records_argmax(kernel, stride)) {
        maxpool2_backward(d_in, d_out, argmax, in, out, B, C, H, W, threads);
        return;
    }
    const int OH = blas_out_size(H, kernel, stride), OW = blas_out_size(W, kernel, stride);
    /* windows that neither overlap nor leave gaps between them (LeNet's)
     * write each input's gradient once: no zeroing first, no adding */
    const int tiles = stride == kernel;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++) {
        real *dc = d_in + (size_t)c * H * W * B;
        if (!tiles)
            memset(dc, 0, sizeof(real) * (size_t)H * W * B);
        else /* only the rows and columns past the last window */
            for (int y = 0; y < H; y++) {
                const int from = y < OH * stride ? OW * stride : 0;
                memset(dc + ((size_t)y * W + from) * B, 0, sizeof(real) * (W - from) * B);
            }
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                const size_t from = ((size_t)(c * H + oy * stride) * W + ox * stride) * B;
                /* images in chunks, each with a flag per image that turns 1
                 * once its gradient has found the input the forward pass
                 * kept: the first one equal to the maximum */
                enum { CHUNK = 64 };
                for (int b0 = 0; b0 < B; b0 += CHUNK) {
                    const int n = B - b0 < CHUNK ? B - b0 : CHUNK;
                    const real *dy = d_out + at + b0, *y = out + at + b0;
                    real taken[CHUNK] = {0};
                    for (int ki = 0; ki < kernel; ki++)
                        for (int kj = 0; kj < kernel; kj++) {
                            const size_t off = from + ((size_t)ki * W + kj) * B + b0;
                            const real *x = in + off;
                            real *dx = d_in + off;
                            if (tiles) {
#pragma omp simd
                                for (int b = 0; b < n; b++) {
                                    const int first = x[b] == y[b] && taken[b] == 0.0f;
                                    dx[b] = first ? dy[b] : 0.0f;
                                    taken[b] = first ? 1.0f : taken[b];
                                }
                                continue;
                            }
#pragma omp simd
                            for (int b = 0; b < n; b++) {
                                const int first = x[b] == y[b] && taken[b] == 0.0f;
                                dx[b] += first ? dy[b] : 0.0f;
                                taken[b] = first ? 1.0f : taken[b];
                            }
                        }
                }
            }
    }
}

/* Below this many floats an elementwise loop is not worth waking threads.
 * (`if (parallel : ...)`: a bare `if` on a combined construct applies to
 * its simd too, and a false one leaves the loop scalar, with a branch per
 * element.) */
enum { PARALLEL_MIN_FLOATS = 1 << 18 };

void blas_relu_forward(real *out, const real *in, size_t n, int threads)
{
#pragma omp parallel for simd schedule(static)                                                \
    num_threads(threads) if (parallel : threads > 1 && n >= PARALLEL_MIN_FLOATS)
    for (size_t i = 0; i < n; i++)
        out[i] = lb_relu(in[i]);
}

void blas_relu_backward(real *d_in, const real *d_out, const real *out, size_t n,
                        int threads)
{
#pragma omp parallel for simd schedule(static)                                                \
    num_threads(threads) if (parallel : threads > 1 && n >= PARALLEL_MIN_FLOATS)
    for (size_t i = 0; i < n; i++)
        d_in[i] = lb_relu_backward(out[i], d_out[i]);
}

/* ---------------------------------------------------------------------- */
/* Dense layers: GEMMs over tiles of rows, or the direct kernels            */

#ifndef LB_REAL_DIRECT
/* out[r] = sum of in[r][0..n) */
static void row_sums(real *out, const real *in, int rows, size_t n, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int r = 0; r < rows; r++) {
        const real *x = in + (size_t)r * n;
        real sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (size_t j = 0; j < n; j++)
            sum += x[j];
        out[r] = sum;
    }
}

/* Rows per tile of an [M][N] result with inner dimension K: at most 8 tiles,
 * a multiple of 16 rows, and at least about a million multiply-adds each
 * (less is not worth a thread). From the shape alone, so the tiles, and the
 * floats they give, are the same for any thread count. */
static int tile_rows(int M, int N, int K)
{
    enum { MAX_TILES = 8, ALIGN = 16 };
    const double min_rows = (double)(1 << 20) / ((double)N * K > 1 ? (double)N * K : 1);
    int rows = (M + MAX_TILES - 1) / MAX_TILES;
    if (rows < min_rows)
        rows = min_rows < M ? (int)min_rows + 1 : M;
    rows = (rows + ALIGN - 1) / ALIGN * ALIGN;
    return rows > 0 ? rows : ALIGN;
}

static int tile_count(int n, int size) { return (n + size - 1) / size; }
#endif

void blas_dense_forward(real *out, const real *in, const real *weight, const real *bias,
                        real *scratch, int B, int n_in, int n_out, const blas_team *t)
{
#if defined(LB_DIRECT_BF16)
    direct_bf16_dense_forward(out, in, weight, bias, scratch, B, n_in, n_out, t->threads);
#elif defined(LB_REAL_DIRECT)
    (void)scratch;
    direct_active()->dense_forward(out, in, weight, bias, B, n_in, n_out, t->threads);
#else
    (void)scratch;
    for (int o = 0; o < n_out; o++)
        for (int b = 0; b < B; b++)
            out[(size_t)o * B + b] = bias[o];
    if (t->split == BLAS_SPLIT_LIBRARY) {
        gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_out, B, n_in, 1.0f, weight,
                    n_in, in, B, 1.0f, out, B);
        return;
    }
    const int rows = tile_rows(n_out, B, n_in), tiles = tile_count(n_out, rows);
#pragma omp parallel for schedule(dynamic, 1) num_threads(t->threads) if (tiles > 1)
    for (int i = 0; i < tiles; i++) {
        const int lo = i * rows, m = n_out - lo < rows ? n_out - lo : rows;
        gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, B, n_in, 1.0f,
                    weight + (size_t)lo * n_in, n_in, in, B, 1.0f, out + (size_t)lo * B, B);
    }
#endif
}

size_t blas_dense_scratch_floats(int B, int n_in, int n_out)
{
#if defined(LB_DIRECT_BF16)
    return (direct_bf16_dense_scratch_bytes(B, n_in, n_out) + sizeof(real) - 1) / sizeof(real);
#elif defined(LB_REAL_DIRECT)
    (void)n_out;
    return direct_dense_scratch_floats(B, n_in);
#else
    (void)B, (void)n_in, (void)n_out;
    return 0;
#endif
}

void blas_dense_backward(real *d_weight, real *d_bias, real *d_in, const real *d_out,
                         const real *in, const real *weight, real *scratch, int B, int n_in,
                         int n_out, const blas_team *t)
{
#if defined(LB_DIRECT_BF16)
    direct_bf16_dense_backward(d_weight, d_bias, d_in, d_out, in, weight, scratch, B, n_in,
                               n_out, t->threads);
#elif defined(LB_REAL_DIRECT)
    direct_active()->dense_backward(d_weight, d_bias, d_in, d_out, in, weight, scratch, B, n_in,
                                    n_out, t->threads);
#else
    (void)scratch;
    if (t->split == BLAS_SPLIT_LIBRARY) {
        gemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_out, n_in, B, 1.0f, d_out, B,
                    in, B, 0.0f, d_weight, n_in);
        row_sums(d_bias, d_out, n_out, (size_t)B, 1);
        if (d_in)
            gemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_in, B, n_out, 1.0f, weight,
                        n_in, d_out, B, 0.0f, d_in, B);
        return;
    }
    /* the weight-gradient tiles (rows of d_weight) and the data-gradient
     * tiles (rows of d_in) in one parallel loop */
    const int w_rows = tile_rows(n_out, n_in, B), w_tiles = tile_count(n_out, w_rows);
    const int d_rows = tile_rows(n_in, B, n_out);
    const int d_tiles = d_in ? tile_count(n_in, d_rows) : 0;
#pragma omp parallel for schedule(dynamic, 1)                                                 \
    num_threads(t->threads) if (w_tiles + d_tiles > 1)
    for (int i = 0; i < w_tiles + d_tiles; i++) {
        if (i < w_tiles) {
            const int lo = i * w_rows, m = n_out - lo < w_rows ? n_out - lo : w_rows;
            gemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n_in, B, 1.0f,
                        d_out + (size_t)lo * B, B, in, B, 0.0f, d_weight + (size_t)lo * n_in,
                        n_in);
            row_sums(d_bias + lo, d_out + (size_t)lo * B, m, (size_t)B, 1);
        } else {
            const int lo = (i - w_tiles) * d_rows, m = n_in - lo < d_rows ? n_in - lo : d_rows;
            gemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, B, n_out, 1.0f,
                        weight + lo, n_in, d_out, B, 0.0f, d_in + (size_t)lo * B, B);
        }
    }
#endif
}

/* ---------------------------------------------------------------------- */
/* Loss                                                                    */

/* B x classes is a few thousand floats: one thread is quicker than many. */
void blas_softmax_xent(real *d_logits, real *losses, int *predicted, const real *logits,
                       const int *labels, int B, int classes, real scale, real *rows)
{
    real *by_image = rows, *d_by_image = rows + (size_t)B * classes;
    for (int k = 0; k < classes; k++)
        for (int b = 0; b < B; b++)
            by_image[(size_t)b * classes + k] = logits[(size_t)k * B + b];
    for (int b = 0; b < B; b++) {
        const real *z = by_image + (size_t)b * classes;
        losses[b] = lb_softmax_xent(z, classes, labels[b], scale,
                                    d_logits ? d_by_image + (size_t)b * classes : NULL);
        if (predicted)
            predicted[b] = lb_argmax(z, classes);
    }
    if (d_logits)
        for (int k = 0; k < classes; k++)
            for (int b = 0; b < B; b++)
                d_logits[(size_t)k * B + b] = d_by_image[(size_t)b * classes + k];
}
