/* The naive backend's layers: plain single-thread loops whose signatures
 * spell out the shapes, the reference every other backend is checked
 * against.
 *
 * Layouts: activations are NCHW (B images, C channels, H rows, W columns);
 * convolution weights are [K][C][kernel][kernel] and a convolution has K
 * output channels of (H - kernel) / stride + 1 rows and as many columns
 * (valid convolution, no padding); dense weights are [out][in] with the input
 * flattened as C,H,W; biases have one real per output channel or unit.
 *
 * Conventions: forward functions overwrite their output; backward-to-data
 * functions overwrite d_in; backward-to-weights and -to-bias functions ADD
 * into d_weight and d_bias (the caller zeroes them once per step). Buffers
 * passed to one call never overlap, except where a function says so.
 *
 * Speed without tricks: every hot loop is a multiply-add over contiguous
 * memory (y[j] += a * x[j]), which the compiler vectorises without having to
 * reorder a sum; convolutions unfold their input into columns (im2col) and
 * run the same matrix loop as the dense layers.
 *
 * One source for both precisions: the layers are written over `real` and
 * built twice (backends/common/real.h), for the fp32 and the fp64 engine;
 * the names below stand for that build's version (conv_forward is
 * conv_forward_f32 or conv_forward_f64, both spelled out below), so that
 * this header and the layer files read as plain C. Only files built twice
 * include it. */
#ifndef LB_NAIVE_LAYERS_H
#define LB_NAIVE_LAYERS_H

#include <stddef.h>

#include "backends/common/real.h"

#define matmul_nn REAL_NAME(matmul_nn_f32, matmul_nn_f64)
#define matmul_tn REAL_NAME(matmul_tn_f32, matmul_tn_f64)
#define transpose REAL_NAME(transpose_f32, transpose_f64)
#define conv_forward REAL_NAME(conv_forward_f32, conv_forward_f64)
#define conv_backward_data REAL_NAME(conv_backward_data_f32, conv_backward_data_f64)
#define conv_backward_weights REAL_NAME(conv_backward_weights_f32, conv_backward_weights_f64)
#define conv_backward_bias REAL_NAME(conv_backward_bias_f32, conv_backward_bias_f64)
#define maxpool_forward REAL_NAME(maxpool_forward_f32, maxpool_forward_f64)
#define maxpool_backward REAL_NAME(maxpool_backward_f32, maxpool_backward_f64)
#define dense_forward REAL_NAME(dense_forward_f32, dense_forward_f64)
#define dense_backward_data REAL_NAME(dense_backward_data_f32, dense_backward_data_f64)
#define dense_backward_weights REAL_NAME(dense_backward_weights_f32, dense_backward_weights_f64)
#define dense_backward_bias REAL_NAME(dense_backward_bias_f32, dense_backward_bias_f64)
#define relu_forward REAL_NAME(relu_forward_f32, relu_forward_f64)
#define relu_backward REAL_NAME(relu_backward_f32, relu_backward_f64)
#define softmax_xent REAL_NAME(softmax_xent_f32, softmax_xent_f64)
#define conv_scratch_count REAL_NAME(conv_scratch_count_f32, conv_scratch_count_f64)
#define dense_scratch_count REAL_NAME(dense_scratch_count_f32, dense_scratch_count_f64)

/* Matrix loops (matmul.c), all row-major, accumulating into C:
 *   matmul_nn: C[M][N] += A[M][K] * B[K][N]
 *   matmul_tn: C[M][N] += A^T * B[K][N], with A stored as [K][M] */
void matmul_nn(real *C, const real *A, const real *B, int M, int N, int K);
void matmul_tn(real *C, const real *A, const real *B, int M, int N, int K);

/* out[N][M] = in[M][N] */
void transpose(real *out, const real *in, int M, int N);

/* Convolution (conv.c). scratch holds conv_scratch_count() numbers. */
static inline int conv_out_size(int size, int kernel, int stride)
{
    return (size - kernel) / stride + 1;
}
size_t conv_scratch_count(int C, int H, int W, int kernel, int stride);

/* out[B][K][OH][OW] from in[B][C][H][W], weight[K][C][kernel][kernel], bias[K]. */
void conv_forward(real *out, const real *in, const real *weight, const real *bias, int B,
                  int C, int H, int W, int K, int kernel, int stride, real *scratch);
/* d_in[B][C][H][W] from d_out[B][K][OH][OW]. */
void conv_backward_data(real *d_in, const real *d_out, const real *weight, int B, int C,
                        int H, int W, int K, int kernel, int stride, real *scratch);
/* d_weight[K][C][kernel][kernel] += sum over images of d_out (x) in. */
void conv_backward_weights(real *d_weight, const real *d_out, const real *in, int B, int C,
                           int H, int W, int K, int kernel, int stride, real *scratch);
/* d_bias[K] += sum over images and positions of d_out[B][K][OH][OW]. */
void conv_backward_bias(real *d_bias, const real *d_out, int B, int K, int OH, int OW);

/* Max-pool (pool.c): square window `kernel`, step `stride`; out is
 * [B][C][OH][OW] with OH = (H - kernel) / stride + 1. The backward pass sends
 * each output's gradient to the first largest input of its window (found
 * again from `in`), adding when windows overlap. */
void maxpool_forward(real *out, const real *in, int B, int C, int H, int W, int kernel,
                     int stride);
void maxpool_backward(real *d_in, const real *d_out, const real *in, int B, int C, int H,
                      int W, int kernel, int stride);

/* Dense (dense.c): out[B][O] = in[B][I] weight[O][I]^T + bias[O].
 * dense_forward's scratch holds dense_scratch_count() numbers. */
size_t dense_scratch_count(int B, int I, int O);
void dense_forward(real *out, const real *in, const real *weight, const real *bias, int B,
                   int I, int O, real *scratch);
void dense_backward_data(real *d_in, const real *d_out, const real *weight, int B, int I,
                         int O);
void dense_backward_weights(real *d_weight, const real *d_out, const real *in, int B, int I,
                            int O);
void dense_backward_bias(real *d_bias, const real *d_out, int B, int O);

/* ReLU (activation.c) over n numbers; out may be in, d_in may be d_out.
 * The backward pass reads the forward output. */
void relu_forward(real *out, const real *in, size_t n);
void relu_backward(real *d_in, const real *d_out, const real *out, size_t n);

/* Softmax cross-entropy (loss.c) over logits[B][classes]: writes the
 * gradient of scale * (sum of the losses) into d_logits (may be NULL) and
 * each image's loss into losses (may be NULL); returns the sum of the
 * losses. */
double softmax_xent(real *d_logits, real *losses, const real *logits, const int *labels,
                    int B, int classes, real scale);

#endif
