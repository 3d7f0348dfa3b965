/* Convolutions computed directly, without unfolding the input, for layers
 * whose outputs each take few inputs (conv1: 25). As a GEMM such a layer
 * has an inner dimension of 26, too shallow for OpenBLAS to reach speed
 * (24 GFLOP/s on a Zen core that runs deep products at 34), and the
 * unfolded input it multiplies is 26 times the size of the images. Here
 * two output channels' rows are held in registers while every input
 * contributes, so the images are read from cache and nothing is unfolded.
 *
 * Layout and conventions as blas_layers.h: CHWN, stride 1, weight_bias
 * [K][R + 1] with each channel's bias last; outputs overwritten. */
#ifndef LB_CONV_DIRECT_H
#define LB_CONV_DIRECT_H

/* 1 when a layer of C input channels, this kernel and stride is computed
 * here: stride 1 and C * kernel^2 + 1 below 128. */
int blas_conv_direct_suits(int C, int kernel, int stride);

/* out[K][OH][OW][B] from in[C][H][W][B]. */
void blas_conv_direct_forward(float *out, const float *in, const float *weight_bias, int B,
                              int C, int H, int W, int K, int kernel, int threads);

/* d_weight_bias[K][R + 1] from d_out[K][OH][OW][B] and in[C][H][W][B]. */
void blas_conv_direct_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, int B, int C, int H, int W, int K,
                                      int kernel);

#endif
