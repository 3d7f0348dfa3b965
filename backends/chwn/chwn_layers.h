/* The CHWN engine's layers other than its products (those are the product
 * set's, chwn_products.h): moving images in and out of the layout,
 * pooling, ReLU and the loss, as plain or OpenMP loops.
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
 * Conventions: functions that take `threads` run their loops on that many
 * OpenMP threads (1 when the caller is already inside a parallel region);
 * forward functions overwrite their output; backward functions overwrite
 * d_in. Buffers of one call never overlap unless a function says so.
 *
 * Written over `real` and built twice (chwn_layers.o, chwn_layers_f64.o):
 * both link into the blas module, so each name below is the symbol with
 * the build's suffix, chwn_relu_forward_f32 or chwn_relu_forward_f64
 * (both spelled out below, real.h's REAL_NAME), and only that suffix. */
#ifndef LB_CHWN_LAYERS_H
#define LB_CHWN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/common/real.h"

#define chwn_gather REAL_NAME(chwn_gather_f32, chwn_gather_f64)
#define chwn_from_nchw REAL_NAME(chwn_from_nchw_f32, chwn_from_nchw_f64)
#define chwn_to_nchw REAL_NAME(chwn_to_nchw_f32, chwn_to_nchw_f64)
#define chwn_rows_from_group REAL_NAME(chwn_rows_from_group_f32, chwn_rows_from_group_f64)
#define chwn_group_from_rows REAL_NAME(chwn_group_from_rows_f32, chwn_group_from_rows_f64)
#define chwn_join_weight_bias REAL_NAME(chwn_join_weight_bias_f32, chwn_join_weight_bias_f64)
#define chwn_maxpool_forward REAL_NAME(chwn_maxpool_forward_f32, chwn_maxpool_forward_f64)
#define chwn_maxpool_backward REAL_NAME(chwn_maxpool_backward_f32, chwn_maxpool_backward_f64)
#define chwn_relu_forward REAL_NAME(chwn_relu_forward_f32, chwn_relu_forward_f64)
#define chwn_relu_backward REAL_NAME(chwn_relu_backward_f32, chwn_relu_backward_f64)
#define chwn_softmax_xent REAL_NAME(chwn_softmax_xent_f32, chwn_softmax_xent_f64)

/* Output size of a valid convolution or pool. */
static inline int chwn_out_size(int size, int kernel, int stride)
{
    return (size - kernel) / stride + 1;
}

/* Images idx[0..B) (or first..first+B when idx is NULL) of `pixels` bytes
 * each, scaled to [0,1], into x[pixels][ld] (columns 0..B). */
void chwn_gather(real *x, int ld, const uint8_t *images, size_t pixels, const int32_t *idx,
                 int first, int B, int threads);

/* Model-parallel stages hand over floats image after image: x[F][ld]
 * (columns 0..B) <- src[B][F], and dst[B][F] <- x[F][ld]. */
void chwn_from_nchw(real *x, int ld, const float *src, size_t F, int B, int threads);
void chwn_to_nchw(float *dst, const real *x, int ld, size_t F, int B, int threads);

/* dst[F][ld] columns b0..b0+B <- src[F][B], and back. */
void chwn_rows_from_group(real *dst, int ld, int b0, const real *src, int F, int B);
void chwn_group_from_rows(real *dst, const real *src, int ld, int b0, int F, int B);

/* weight_bias[K][R + 1]: each output channel's R weights, then its bias,
 * as every product set takes a convolution's parameters: the GEMM sets
 * multiply it by an unfolded input ending in a row of ones, so there is
 * no pass to add the bias and none to sum its gradient. */
void chwn_join_weight_bias(real *weight_bias, const real *weight, const real *bias, int K,
                           int R);

/* Max-pool over in[C][H][W][B]: the first largest input of each window (in
 * row-major window order, as the naive backend) wins, and the backward
 * pass gives it the output's gradient. Where the pool records the winner
 * (2x2 windows, stride 2: chwn_maxpool_records_argmax), the forward pass
 * writes its place in the window, 0..3, to argmax[C][OH][OW][B] unless
 * argmax is NULL, and a backward pass given argmax reads only it and
 * d_out (in and out may then be NULL): the pool's input, a convolution's
 * output, is then not needed after the forward pass. Otherwise (argmax
 * NULL) the backward pass finds the winner again from in and out. */
static inline int chwn_maxpool_records_argmax(int kernel, int stride)
{
    return kernel == 2 && stride == 2;
}
void chwn_maxpool_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                          int H, int W, int kernel, int stride, int threads);
void chwn_maxpool_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                           const real *in, const real *out, int B, int C, int H, int W,
                           int kernel, int stride, int threads);

/* ReLU over n floats; out may be in, d_in may be d_out. */
void chwn_relu_forward(real *out, const real *in, size_t n, int threads);
void chwn_relu_backward(real *d_in, const real *d_out, const real *out, size_t n,
                        int threads);

/* Softmax cross-entropy over logits[classes][B]: each image's loss into
 * losses[B], the gradient of scale * (sum of losses) into d_logits (may be
 * NULL), predicted classes into predicted (may be NULL). rows is scratch of
 * 2 * B * classes floats. */
void chwn_softmax_xent(real *d_logits, real *losses, int *predicted, const real *logits,
                       const int *labels, int B, int classes, real scale, real *rows);

#endif
