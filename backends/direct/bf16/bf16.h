/* Mixed-precision products for the direct backend: the convolutions
 * (stride 1) and dense layers of a training step with their operands
 * rounded to bfloat16 (round to nearest even) and multiplied with
 * AVX512_BF16's vdpbf16ps (two bf16 products summed into each fp32 lane),
 * summing in fp32 into fp32 results. Weights, biases, gradients and
 * optimiser state stay fp32 in the caller; only the copies packed here for
 * the instruction are bf16. Biases are added, and their gradients summed,
 * in fp32.
 *
 * Layouts, as the fp32 direct kernels: activations CHWN, [C][H][W][B] with
 * the images innermost (a dense layer's [features][B] is CHWN with
 * H = W = 1); a convolution's weight_bias is [K][C*k*k + 1], each output
 * channel's weights in (c, ki, kj) order followed by its bias; a dense
 * layer's weight is [n_out][n_in]. Outputs are overwritten, never added to.
 * `threads` OpenMP threads (1 inside a parallel region); every output is
 * one fixed sum, so any thread count gives the same floats. `scratch` is
 * the caller's, of the size the matching *_scratch_bytes function gives
 * (best aligned to 64 bytes: the packed pieces then start on cache lines);
 * it holds the packed bf16 operands. Buffers never overlap.
 *
 * On a CPU where direct_bf16_supported returns 0, call only it, the
 * rounding functions and the *_scratch_bytes functions: the products
 * execute AVX-512 instructions. */
#ifndef LB_DIRECT_BF16_H
#define LB_DIRECT_BF16_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this CPU (and its operating system) can run the products; else 0
 * with the reason in why. */
int direct_bf16_supported(char *why, size_t len);

/* The bf16 value nearest x, ties to even, as its 16 bits, as the
 * instruction rounds: NaN stays a (quiet) NaN of the same sign, values
 * past the largest bf16 go to infinity, and subnormal floats (which the
 * instruction reads as zero) to a zero of their sign. */
uint16_t direct_bf16_round(float x);
/* The float a bf16 stands for (exact). */
float direct_bf16_value(uint16_t h);

/* Convolutions: B images in[C][H][W][B], kernel k x k, stride 1, no
 * padding; OH = H - k + 1, OW = W - k + 1. One scratch size serves the
 * three passes. */
size_t direct_bf16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel);

/* The weights rounded and paired as the forward pass and the input
 * gradient multiply them, in a buffer of direct_bf16_conv_weight_bytes
 * (best aligned to 64 bytes): packed once when the weights change and
 * read by every call after, so that a batch taken a group of images at a
 * time does not pack them once a group. */
size_t direct_bf16_conv_weight_bytes(int C, int K, int kernel);
void direct_bf16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel);

/* out[K][OH][OW][B] = bias + weights (x) in: the biases from weight_bias,
 * the weights as packed from it. */
void direct_bf16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads);

/* d_in[C][H][W][B] from d_out[K][OH][OW][B]. */
void direct_bf16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads);

/* d_weight_bias[K][C*k*k + 1]: the weight gradients (bf16 products of
 * d_out and in, summed over images and positions) and each bias gradient
 * (the fp32 sum of its channel of d_out). */
void direct_bf16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads);

/* Dense layers: out[n_out][B] = weight x in[n_in][B] + bias; backward:
 * d_weight[n_out][n_in] = d_out x in^T, d_bias[n_out] = fp32 row sums of
 * d_out, and d_in[n_in][B] = weight^T x d_out unless d_in is NULL. Both
 * read the weights packed (direct_bf16_pack_dense_weights, into
 * direct_bf16_dense_weight_bytes) from weight[n_out][n_in]: once a pass
 * serves the forward and the backward products. */
size_t direct_bf16_dense_scratch_bytes(int B, int n_in, int n_out);
size_t direct_bf16_dense_weight_bytes(int n_in, int n_out);
void direct_bf16_pack_dense_weights(void *packed, const float *weight, int n_in, int n_out,
                                    int threads);
void direct_bf16_dense_forward(float *out, const float *in, const void *packed_weights,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads);
void direct_bf16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const void *packed_weights,
                                void *scratch, int B, int n_in, int n_out, int threads);

#endif
