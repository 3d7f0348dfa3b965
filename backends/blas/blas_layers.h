/* The CHWN layers of the blas backend, and of the direct backend, which is
 * the same engine with other products: dense layers and convolutions as
 * GEMMs through CBLAS (a convolution over its unfolded input), or in the
 * direct build (LB_REAL_DIRECT) as the direct kernels
 * (backends/direct/direct.h, stride-1 convolutions only); pooling, ReLU and
 * the loss as plain or OpenMP loops.
 *
 * Layout: activations are CHWN, [C][H][W][B] with the images innermost
 * (a dense layer's [O][B] is CHWN with H = W = 1). Then
 *   - for a stride-1 convolution each tap's inputs over a whole output row
 *     of the group are one contiguous run: im2col is a run of contiguous
 *     copies, and a convolution a GEMM per chunk of output rows of the
 *     whole group, not one per image; the direct kernels read the runs in
 *     place;
 *   - a group's pool output, copied into its columns of a [C*H*W][B]
 *     matrix, is what the dense layer multiplies, features in the C,H,W
 *     order of the weights;
 *   - pooling and ReLU loops run over B contiguous floats.
 *
 * How the work is shared (blas_team):
 *   BLAS_SPLIT_OWN      the engine's threads share out fixed pieces of work
 *                       (groups of images for the convolutions, tiles of
 *                       rows for the dense layers) and every sgemm runs on
 *                       one thread inside that parallel region. The pieces
 *                       depend on the shapes only, so 1 thread and 8 compute
 *                       the same floats.
 *   BLAS_SPLIT_LIBRARY  one sgemm per product over the whole batch, threaded
 *                       by OpenBLAS; the loops around it use OpenMP.
 * The first is the default: on 2 cores it was 1.3-1.5x faster per step
 * (fewer, larger synchronisations; each group's data stays in one core's
 * cache), and 2-2.5x faster when other processes shared the cores.
 * With OpenBLAS's OpenMP build both run on one thread pool, and an sgemm
 * called inside an active parallel region runs on one thread: neither
 * oversubscribes the cores.
 *
 * Conventions: functions that take `threads` run their loops on that many
 * OpenMP threads (1 when the caller is already inside a parallel region);
 * forward functions overwrite their output; backward functions overwrite
 * d_in, d_weight and d_bias (no accumulation). Buffers of one call never
 * overlap unless a function says so.
 *
 * One source for every precision and both backends: the layers are
 * written over `real` and built for float, double, float with bf16 GEMMs
 * and float with the direct kernels (backends/common/real.h); the names
 * below stand for that build's version (blas_conv_forward is
 * blas_conv_forward_f32, _f64, _bf16 or _direct). */
#ifndef LB_BLAS_LAYERS_H
#define LB_BLAS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/common/real.h"

/* A float program that drives the direct build's layers (its test)
 * defines LB_LAYERS_DIRECT to reach their names. */
#if defined(LB_REAL_DIRECT) && defined(LB_DIRECT_BF16)
#define BLAS_LAYER(name) name##_direct_bf16
#elif defined(LB_REAL_DIRECT) || defined(LB_LAYERS_DIRECT)
#define BLAS_LAYER(name) name##_direct
#else
#define BLAS_LAYER(name) R(name)
#endif
#define blas_gather_chwn BLAS_LAYER(blas_gather_chwn)
#define blas_chwn_from_nchw BLAS_LAYER(blas_chwn_from_nchw)
#define blas_nchw_from_chwn BLAS_LAYER(blas_nchw_from_chwn)
#define blas_rows_from_group BLAS_LAYER(blas_rows_from_group)
#define blas_group_from_rows BLAS_LAYER(blas_group_from_rows)
#define blas_conv_scratch_floats BLAS_LAYER(blas_conv_scratch_floats)
#define blas_join_weight_bias BLAS_LAYER(blas_join_weight_bias)
#define blas_conv_packed_floats BLAS_LAYER(blas_conv_packed_floats)
#define blas_conv_pack_weights BLAS_LAYER(blas_conv_pack_weights)
#define blas_conv_forward BLAS_LAYER(blas_conv_forward)
#define blas_conv_backward_params BLAS_LAYER(blas_conv_backward_params)
#define blas_conv_backward_data BLAS_LAYER(blas_conv_backward_data)
#define blas_maxpool_records_argmax BLAS_LAYER(blas_maxpool_records_argmax)
#define blas_maxpool_forward BLAS_LAYER(blas_maxpool_forward)
#define blas_maxpool_backward BLAS_LAYER(blas_maxpool_backward)
#define blas_relu_forward BLAS_LAYER(blas_relu_forward)
#define blas_relu_backward BLAS_LAYER(blas_relu_backward)
#define blas_dense_forward BLAS_LAYER(blas_dense_forward)
#define blas_dense_scratch_floats BLAS_LAYER(blas_dense_scratch_floats)
#define blas_dense_backward BLAS_LAYER(blas_dense_backward)
#define blas_softmax_xent BLAS_LAYER(blas_softmax_xent)
#if defined(LB_REAL_DIRECT) || defined(LB_LAYERS_DIRECT)
#define blas_team_enter blas_team_enter_direct
#endif

typedef enum blas_split { BLAS_SPLIT_OWN, BLAS_SPLIT_LIBRARY } blas_split;

typedef struct blas_team {
    int threads;
    blas_split split;
} blas_team;

/* Makes OpenBLAS's thread count what `t` needs (t->threads when it splits
 * the GEMMs, else 1); call on entry to the engine, from the thread that
 * drives it. The loops of the engine name their thread counts themselves.
 * (The direct build has no library to tell.) */
void blas_team_enter(const blas_team *t);

/* Output size of a valid convolution or pool. */
static inline int blas_out_size(int size, int kernel, int stride)
{
    return (size - kernel) / stride + 1;
}

/* Images idx[0..B) (or first..first+B when idx is NULL) of `pixels` bytes
 * each, scaled to [0,1], into x[pixels][ld] (columns 0..B). */
void blas_gather_chwn(real *x, int ld, const uint8_t *images, size_t pixels,
                      const int32_t *idx, int first, int B, int threads);

/* Model-parallel stages hand over floats image after image: x[F][ld]
 * (columns 0..B) <- src[B][F], and dst[B][F] <- x[F][ld]. */
void blas_chwn_from_nchw(real *x, int ld, const float *src, size_t F, int B, int threads);
void blas_nchw_from_chwn(float *dst, const real *x, int ld, size_t F, int B, int threads);

/* dst[F][ld] columns b0..b0+B <- src[F][B], and back. */
void blas_rows_from_group(real *dst, int ld, int b0, const real *src, int F, int B);
void blas_group_from_rows(real *dst, const real *src, int ld, int b0, int F, int B);

/* Convolution of B images, in[C][H][W][B] -> out[K][OH][OW][B], with
 * R = C*k*k. The bias rides in the GEMM: weight_bias[K][R + 1] holds each
 * output channel's weights followed by its bias, and the unfolded input
 * ([R + 1][a few output rows' OW*B] in scratch, a chunk of output rows at
 * a time so that it stays in L2 while OpenBLAS packs it; both passes
 * unfold it) ends with a row of ones. So there is no pass to add the bias
 * and none to sum its gradient. The direct build computes from `in`
 * (stride 1 only). */
/* Scratch each pass over B images needs (they take turns with it): a
 * chunk of the unfolded input or of its gradient, or in the direct build
 * what its input gradient needs. */
size_t blas_conv_scratch_floats(int B, int C, int H, int W, int K, int kernel, int stride);
void blas_join_weight_bias(real *weight_bias, const real *weight, const real *bias, int K,
                           int R);
/* The bf16 build multiplies weights rounded and paired (backends/direct/
 * bf16.h), packed once each time they are joined and kept after the
 * [K][R + 1] floats of weight_bias, which then holds
 * blas_conv_packed_floats more (0 in the other builds, where packing does
 * nothing): the groups of a batch read one copy. */
size_t blas_conv_packed_floats(int C, int K, int kernel);
void blas_conv_pack_weights(real *weight_bias, int C, int K, int kernel);
void blas_conv_forward(real *out, const real *in, const real *weight_bias, real *scratch,
                       int B, int C, int H, int W, int K, int kernel, int stride, int threads);
/* d_weight_bias[K][R + 1]: the weight and bias gradients of these B images
 * (scratch as the forward pass's; the direct fp32 kernels need none). */
void blas_conv_backward_params(real *d_weight_bias, const real *d_out, const real *in,
                               real *scratch, int B, int C, int H, int W, int K, int kernel,
                               int stride, int threads);
/* d_in[C][H][W][B] from d_out[K][OH][OW][B]. */
void blas_conv_backward_data(real *d_in, real *d_col, const real *d_out,
                             const real *weight_bias, int B, int C, int H, int W, int K,
                             int kernel, int stride, int threads);

/* Max-pool over in[C][H][W][B]: the first largest input of each window (in
 * row-major window order, as the naive backend) wins, and the backward
 * pass gives it the output's gradient. Where the pool records the winner
 * (2x2 windows, stride 2: blas_maxpool_records_argmax), the forward pass
 * writes its place in the window, 0..3, to argmax[C][OH][OW][B] unless
 * argmax is NULL, and a backward pass given argmax reads only it and
 * d_out (in and out may then be NULL): the pool's input, a convolution's
 * output, is then not needed after the forward pass. Otherwise (argmax
 * NULL) the backward pass finds the winner again from in and out. */
int blas_maxpool_records_argmax(int kernel, int stride);
void blas_maxpool_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                          int H, int W, int kernel, int stride, int threads);
void blas_maxpool_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                           const real *in, const real *out, int B, int C, int H, int W,
                           int kernel, int stride, int threads);

/* ReLU over n floats; out may be in, d_in may be d_out. */
void blas_relu_forward(real *out, const real *in, size_t n, int threads);
void blas_relu_backward(real *d_in, const real *d_out, const real *out, size_t n,
                        int threads);

/* Dense layers over the whole batch, shared out by the team:
 * out[n_out][B] = weight[n_out][n_in] * in[n_in][B] + bias: GEMMs, or in
 * the direct build the direct kernels, whatever the split. */
void blas_dense_forward(real *out, const real *in, const real *weight, const real *bias,
                        real *scratch, int B, int n_in, int n_out, const blas_team *t);
/* d_weight[n_out][n_in] = d_out * in^T, d_bias = row sums of d_out[n_out][B],
 * and d_in[n_in][B] = weight^T * d_out unless d_in is NULL; scratch (the
 * forward pass's too) holds blas_dense_scratch_floats() floats. */
size_t blas_dense_scratch_floats(int B, int n_in, int n_out);
void blas_dense_backward(real *d_weight, real *d_bias, real *d_in, const real *d_out,
                         const real *in, const real *weight, real *scratch, int B, int n_in,
                         int n_out, const blas_team *t);

/* Softmax cross-entropy over logits[classes][B]: each image's loss into
 * losses[B], the gradient of scale * (sum of losses) into d_logits (may be
 * NULL), predicted classes into predicted (may be NULL). rows is scratch of
 * 2 * B * classes floats. */
void blas_softmax_xent(real *d_logits, real *losses, int *predicted, const real *logits,
                       const int *labels, int B, int classes, real scale, real *rows);

#endif
