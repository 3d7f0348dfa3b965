/* The OpenBLAS product sets of the CHWN engine (chwn_products.h): every
 * product a row-major GEMM, a convolution over its unfolded input a chunk
 * of output rows at a time (bias in the GEMM: the unfolded input ends in a
 * row of ones), a dense layer over tiles of rows. Written over `real` and
 * built twice: the float build holds the sgemm set and the sbgemm set
 * (operands rounded to bf16, bf16.h), the double build the dgemm set; the
 * GEMM is the set's ctx, called once per product. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "backends/blas/blas.h"
#include "backends/blas/bf16.h"
#include "backends/chwn/chwn_layers.h"
#include "backends/chwn/chwn_products.h"

/* cblas_?gemm's arguments, row-major, the transpositions as CBLAS's. */
typedef void gemm_fn(int trans_a, int trans_b, int M, int N, int K, real alpha, const real *A,
                     int lda, const real *B, int ldb, real beta, real *C, int ldc);
typedef struct gemm_ctx {
    gemm_fn *gemm;
} gemm_ctx;

static inline void gemm(const chwn_products *set, int trans_a, int trans_b, int M, int N, int K,
                        real alpha, const real *A, int lda, const real *B, int ldb, real beta,
                        real *C, int ldc)
{
    ((const gemm_ctx *)set->ctx)->gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                       ldc);
}

#ifdef LB_REAL_PLAIN
/* Sets how many threads OpenBLAS uses for a call made outside our parallel
 * regions: every thread when it splits the GEMMs, else one. Both of
 * OpenBLAS's knobs are set, since its OpenMP build follows this thread's
 * omp_get_max_threads() but never rises again from 1 by that route alone.
 * Inside an active parallel region its OpenMP build always runs on one
 * thread; its pthreads build needs the count of 1 for that. (Once, in the
 * float build: the dgemm set's too.) */
void blas_team_enter(const chwn_team *t)
{
    const int library_threads = t->split == CHWN_SPLIT_LIBRARY ? t->threads : 1;
    omp_set_num_threads(library_threads);
    if (openblas_get_num_threads() != library_threads)
        openblas_set_num_threads(library_threads);
}
#endif

/* ---------------------------------------------------------------------- */
/* Convolution                                                             */

/* Output rows [oy0, oy1) unfolded: col[(c, ki, kj)][(oy - oy0, ox, b)] =
 * in[c][oy*s + ki][ox*s + kj][b], then a row of ones. With stride 1 a
 * whole output row (ox, b) is one contiguous run of the input. */
static void im2col_rows(real *col, const real *in, int B, int C, int H, int W, int kernel,
                        int stride, int oy0, int oy1, int threads)
{
    const int OW = chwn_out_size(W, kernel, stride);
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
    g.OH = chwn_out_size(H, kernel, stride);
    g.R = C * kernel * kernel;
    g.row = (size_t)chwn_out_size(W, kernel, stride) * B;
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


static size_t conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W, int K,
                                  int kernel, int stride)
{
    /* a chunk of the unfolded input, or of its gradient */
    (void)set, (void)K;
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    return ((size_t)g.R + 1) * (size_t)g.step * g.row;
}

static void conv_forward(const chwn_products *set, real *out, const real *in,
                         const real *weight_bias, real *scratch, int B, int C, int H, int W,
                         int K, int kernel, int stride, int threads)
{
    real *col = scratch; /* a chunk of the unfolded input at a time */
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        im2col_rows(col, in, B, C, H, W, kernel, stride, oy0, oy1, threads);
        gemm(set, CblasNoTrans, CblasNoTrans, K, N, g.R + 1, 1.0f, weight_bias,
             g.R + 1, col, N, 0.0f, out + (size_t)oy0 * g.row, (int)g.plane);
    }
}

static void conv_backward_params(const chwn_products *set, real *d_weight_bias,
                                 const real *d_out, const real *in, real *scratch, int B, int C,
                                 int H, int W, int K, int kernel, int stride, int threads)
{
    /* the input unfolded again, a chunk at a time, into scratch */
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    /* d_weight_bias[K][R + 1] = sum over the chunks of d_out[K][N] *
     * col[R + 1][N]^T; the row of ones gives the bias gradient, the sum of
     * d_out's rows. */
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        im2col_rows(scratch, in, B, C, H, W, kernel, stride, oy0, oy1, threads);
        gemm(set, CblasNoTrans, CblasTrans, K, g.R + 1, N, 1.0f,
             d_out + (size_t)oy0 * g.row, (int)g.plane, scratch, N, oy0 ? 1.0f : 0.0f,
             d_weight_bias, g.R + 1);
    }
}

static void conv_backward_data(const chwn_products *set, real *d_in, const real *d_out,
                               const real *weight_bias, real *d_col, int B, int C, int H, int W,
                               int K, int kernel, int stride, int threads)
{
    const int OW = chwn_out_size(W, kernel, stride);
    const conv_chunks g = chunks_of(B, C, H, W, kernel, stride);
    const size_t row = g.row;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        memset(d_in + (size_t)c * H * W * B, 0, sizeof(real) * (size_t)H * W * B);
    for (int oy0 = 0; oy0 < g.OH; oy0 += g.step) {
        const int oy1 = chunk_end(&g, oy0), N = chunk_columns(&g, oy0, oy1);
        /* d_col[R][N] = weight^T * d_out for these output rows, the weights
         * being the first R columns of weight_bias */
        gemm(set, CblasTrans, CblasNoTrans, g.R, N, K, 1.0f, weight_bias, g.R + 1,
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
}

/* ---------------------------------------------------------------------- */
/* Dense layers: GEMMs over tiles of rows                                  */

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

static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    (void)B, (void)n_in, (void)n_out;
    return 0;
}

static void dense_forward(const chwn_products *set, real *out, const real *in,
                          const real *weight, const real *bias, real *scratch, int B, int n_in,
                          int n_out, const chwn_team *t)
{
    (void)scratch;
    for (int o = 0; o < n_out; o++)
        for (int b = 0; b < B; b++)
            out[(size_t)o * B + b] = bias[o];
    if (t->split == CHWN_SPLIT_LIBRARY) {
        gemm(set, CblasNoTrans, CblasNoTrans, n_out, B, n_in, 1.0f, weight,
                    n_in, in, B, 1.0f, out, B);
        return;
    }
    const int rows = tile_rows(n_out, B, n_in), tiles = tile_count(n_out, rows);
#pragma omp parallel for schedule(dynamic, 1) num_threads(t->threads) if (tiles > 1)
    for (int i = 0; i < tiles; i++) {
        const int lo = i * rows, m = n_out - lo < rows ? n_out - lo : rows;
        gemm(set, CblasNoTrans, CblasNoTrans, m, B, n_in, 1.0f,
                    weight + (size_t)lo * n_in, n_in, in, B, 1.0f, out + (size_t)lo * B, B);
    }
}

static void dense_backward(const chwn_products *set, real *d_weight, real *d_bias, real *d_in,
                           const real *d_out, const real *in, const real *weight,
                           real *scratch, int B, int n_in, int n_out, const chwn_team *t)
{
    (void)scratch;
    if (t->split == CHWN_SPLIT_LIBRARY) {
        gemm(set, CblasNoTrans, CblasTrans, n_out, n_in, B, 1.0f, d_out, B,
                    in, B, 0.0f, d_weight, n_in);
        row_sums(d_bias, d_out, n_out, (size_t)B, 1);
        if (d_in)
            gemm(set, CblasTrans, CblasNoTrans, n_in, B, n_out, 1.0f, weight,
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
            gemm(set, CblasNoTrans, CblasTrans, m, n_in, B, 1.0f,
                        d_out + (size_t)lo * B, B, in, B, 0.0f, d_weight + (size_t)lo * n_in,
                        n_in);
            row_sums(d_bias + lo, d_out + (size_t)lo * B, m, (size_t)B, 1);
        } else {
            const int lo = (i - w_tiles) * d_rows, m = n_in - lo < d_rows ? n_in - lo : d_rows;
            gemm(set, CblasTrans, CblasNoTrans, m, B, n_out, 1.0f,
                        weight + lo, n_in, d_out, B, 0.0f, d_in + (size_t)lo * B, B);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* The sets                                                                 */

#define GEMM_PRODUCTS                                                                          \
    .group_images = 16, .enter = blas_team_enter, .conv_scratch_floats = conv_scratch_floats,  \
    .forward_conv = conv_forward, .backward_conv_params = conv_backward_params,                \
    .backward_conv_data = conv_backward_data, .dense_scratch_floats = dense_scratch_floats,    \
    .forward_dense = dense_forward, .backward_dense = dense_backward,                          \
    .loss_scaling = CHWN_NOT_LOSS_SCALED /* fp32 sums, fp32's range */

#ifdef LB_REAL_DOUBLE
static void dgemm(int trans_a, int trans_b, int M, int N, int K, double alpha, const double *A,
                  int lda, const double *B, int ldb, double beta, double *C, int ldc)
{
    cblas_dgemm(CblasRowMajor, (enum CBLAS_TRANSPOSE)trans_a, (enum CBLAS_TRANSPOSE)trans_b, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const chwn_products blas_dgemm_products = {
    .name = "dgemm", .arithmetic = ARITHMETIC_FP64, .ctx = &(const gemm_ctx){dgemm}, GEMM_PRODUCTS};
#else
static void sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, (enum CBLAS_TRANSPOSE)trans_a, (enum CBLAS_TRANSPOSE)trans_b, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void sbgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    blas_bf16_gemm(CblasRowMajor, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const chwn_products blas_sgemm_products = {
    .name = "sgemm", .arithmetic = ARITHMETIC_FP32, .ctx = &(const gemm_ctx){sgemm}, GEMM_PRODUCTS};
/* bf16: fp32 activations and master weights, each GEMM's operands rounded
 * to bf16 on the way in (bf16.h), fp32 sums; held to the bf16 dot
 * product's peak, which sbgemm runs on where OpenBLAS's kernels for this
 * core have it (blas_bf16_available asks for AVX512_BF16) */
const chwn_products blas_sbgemm_products = {
    .name = "sbgemm",
    .arithmetic = ARITHMETIC_BF16_DOT,
    .ctx = &(const gemm_ctx){sbgemm},
    .take_failure = blas_bf16_take_failure,
    GEMM_PRODUCTS};
#endif
