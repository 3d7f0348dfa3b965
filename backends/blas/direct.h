/* The blas backend's fp32 convolutions (stride 1) and dense layers,
 * computed with register tiles of its own (direct.c says how) instead of
 * OpenBLAS: no unfolded copy of a convolution's input (26 times the images
 * for conv1, 25 times conv2's input), and no GEMM whose operands OpenBLAS
 * packs, zeroes and transposes around a product of LeNet's small shapes.
 *
 * Layout and conventions as blas_layers.h: CHWN, stride 1, weight_bias
 * [K][R + 1] with each channel's bias last; outputs overwritten; `threads`
 * OpenMP threads (1 inside a parallel region), the same floats for any
 * count. */
#ifndef LB_BLAS_DIRECT_H
#define LB_BLAS_DIRECT_H

#include <stddef.h>

/* 1 when a layer of C input channels, this kernel and stride is computed
 * here: every stride-1 convolution. */
int blas_conv_direct_suits(int C, int kernel, int stride);

/* out[K][OH][OW][B] from in[C][H][W][B]. */
void blas_conv_direct_forward(float *out, const float *in, const float *weight_bias, int B,
                              int C, int H, int W, int K, int kernel, int threads);

/* d_weight_bias[K][R + 1] from d_out[K][OH][OW][B] and in[C][H][W][B]. */
void blas_conv_direct_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, int B, int C, int H, int W, int K,
                                      int kernel, int threads);

/* d_in[C][H][W][B] from d_out[K][OH][OW][B]; scratch holds
 * blas_conv_direct_scratch_floats() floats. */
size_t blas_conv_direct_scratch_floats(int B, int C, int H, int W, int K, int kernel);
void blas_conv_direct_backward_data(float *d_in, const float *d_out, const float *weight_bias,
                                    float *scratch, int B, int C, int H, int W, int K,
                                    int kernel, int threads);

/* Dense layers, [features][B] activations, weight[n_out][n_in] (the
 * workload's layout): out = weight x in + bias; and the backward pass,
 * d_weight, d_bias and (unless NULL) d_in, with scratch holding
 * blas_dense_direct_scratch_floats() floats. */
void blas_dense_direct_forward(float *out, const float *in, const float *weight,
                               const float *bias, int B, int n_in, int n_out, int threads);
size_t blas_dense_direct_scratch_floats(int B, int n_in);
void blas_dense_direct_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const float *weight,
                                float *scratch, int B, int n_in, int n_out, int threads);

#endif
