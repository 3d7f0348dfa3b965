/* Mixed-precision products for the direct backend in IEEE fp16 (binary16:
 * 11 significant bits, largest 65504, subnormals down to 2^-24), the
 * seeds' HALF on the CPU: the convolutions (stride 1) and dense layers of
 * a training step with their operands rounded to fp16 (round to nearest
 * even) and multiplied with AVX512_FP16's vfmadd231ph, 32 halves a
 * register. Weights, biases, gradients and optimiser state stay fp32 in
 * the caller; only the copies packed here for the instruction are fp16.
 * Biases are added, and their gradients summed, in fp32.
 *
 * Sums: each is cut into chains of at most DIRECT_FP16_CHAIN products,
 * each chain accumulated by fp16 FMAs (one rounding each, to 2^-11 of the
 * running sum), and the chains' values are summed in fp32. With T the sum
 * of the terms' sizes |a * b| (of the fp16 operands), n the products of
 * the sum and D the fp32 additions a chain's value passes through, a
 * result is within
 *     (g16(CHAIN) + g32(D) (1 + g16(CHAIN))) T + g32(D) |bias|
 *     + n 2^-25 (1 + g16(CHAIN)) (1 + g32(D))
 * of the exact sum, g16(m) = m 2^-11 / (1 - m 2^-11), g32(m) = m 2^-24 /
 * (1 - m 2^-24); 2^-25 is what an fp16 result below 2^-14 (subnormal,
 * spaced 2^-24) may lose, once a product. notes/direct-fp16.md argues the chain length;
 * tests/test_direct_fp16_products.c holds every product to this bound.
 *
 * fp16's range is narrow: the caller keeps gradients in it by loss
 * scaling, as the cuda row's fp16 does: the gradients handed in are those
 * of scale * loss (scaled once, where the loss's gradient is made), the
 * parameter gradients come back scaled the same way and are divided by
 * the scale before the update; a step whose gradients hold an Inf or NaN
 * (an fp16 overflow: a packed value or a chain past 65504) is skipped and
 * the scale lowered. The products themselves take no scale: every value
 * they are given is already in the units the engine chose.
 *
 * Layouts, as the fp32 direct kernels and the bf16 products (bf16.h):
 * activations CHWN, [C][H][W][B] with the images innermost (a dense
 * layer's [features][B] is CHWN with H = W = 1); a convolution's
 * weight_bias is [K][C*k*k + 1], each output channel's weights in (c, ki,
 * kj) order followed by its bias; a dense layer's weight is [n_out][n_in].
 * Outputs are overwritten, never added to. `threads` OpenMP threads (1
 * inside a parallel region); every output is one fixed sum in a fixed
 * order, so any thread count gives the same floats. `scratch` is the
 * caller's, of the size the matching *_scratch_bytes function gives (best
 * aligned to 64 bytes); it holds the packed fp16 operands. Buffers never
 * overlap.
 *
 * On a CPU where direct_fp16_supported returns 0, call only it, the
 * conversions and the *_scratch_bytes functions: the products execute
 * AVX512_FP16 instructions (tests run the same arithmetic emulated,
 * fp16_tiles.h). */
#ifndef LB_DIRECT_FP16_H
#define LB_DIRECT_FP16_H

#include <stddef.h>
#include <stdint.h>

/* The longest chain of products summed in fp16 before its value is added
 * in fp32 (notes/direct-fp16.md: 32 keeps the worst case at 1.6% of T and
 * the folds at about a fifth of the FMAs' port time). */
enum { DIRECT_FP16_CHAIN = 32 };

/* 1 when this CPU (and its operating system) can run the products; else 0
 * with the reason in why (base/cpu.h names what is missing). */
int direct_fp16_supported(char *why, size_t len);

/* Conversions, as vcvtps2ph (round to nearest even) and vcvtph2ps do:
 * values past 65504 (from 65520 on) go to infinity, values below 2^-14 to
 * subnormals (and below 2^-25 to zero), NaN stays a quiet NaN with its
 * sign and the top of its payload. fp16 to fp32 is exact. */
uint16_t direct_fp16_round(float x);
float direct_fp16_value(uint16_t h);

/* Runs: dst[e] = round(src[e] * scale) and dst[e] = value(src[e]) * scale,
 * with AVX-512 or F16C conversions where the CPU has them, the functions
 * above elsewhere (the same bits). A power-of-two scale (a loss scale)
 * multiplies exactly, so the only rounding is the conversion's. */
void direct_fp16_round_run(uint16_t *dst, const float *src, size_t n, float scale);
void direct_fp16_value_run(float *dst, const uint16_t *src, size_t n, float scale);

/* K planes of `plane` floats rounded, dst[k][e] = round(src[k][e]), and
 * each plane's fp32 sum in sums[k * sums_stride], in one read of src: a
 * bias gradient beside its rounded output gradient. The sums are
 * half_common.h's sum_floats, float for float. */
void direct_fp16_round_sums(uint16_t *dst, const float *src, size_t plane, int K, float *sums,
                            size_t sums_stride, int threads);

/* dst[c][r] = round(src[r][c]) for rows r < rows and columns c < cols
 * (src's rows ld_src floats apart, dst's ld_dst halves), and 0 in each
 * dst row past `rows`: a rounding and a transposition in one pass. */
void direct_fp16_round_transposed(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src,
                                  int rows, int cols, int threads);

/* Convolutions: B images in[C][H][W][B], kernel k x k, stride 1, no
 * padding; OH = H - k + 1, OW = W - k + 1. One scratch size serves the
 * three passes. */
size_t direct_fp16_conv_scratch_bytes(int B, int C, int H, int W, int K, int kernel);

/* The weights rounded as the forward pass and the input gradient read
 * them, in a buffer of direct_fp16_conv_weight_bytes (best aligned to 64
 * bytes): packed once when the weights change, read by every call after. */
size_t direct_fp16_conv_weight_bytes(int C, int K, int kernel);
void direct_fp16_pack_conv_weights(void *packed, const float *weight_bias, int C, int K,
                                   int kernel);

/* out[K][OH][OW][B] = bias + weights (x) in: the biases from weight_bias,
 * the weights as packed from it. */
void direct_fp16_conv_forward(float *out, const float *in, const float *weight_bias,
                              const void *packed_weights, void *scratch, int B, int C, int H,
                              int W, int K, int kernel, int threads);

/* d_in[C][H][W][B] from d_out[K][OH][OW][B]. */
void direct_fp16_conv_backward_data(float *d_in, const float *d_out,
                                    const void *packed_weights, void *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int threads);

/* d_weight_bias[K][C*k*k + 1]: the weight gradients (fp16 products of
 * d_out and in, summed over images and positions) and each bias gradient
 * (the fp32 sum of its channel of d_out). */
void direct_fp16_conv_backward_params(float *d_weight_bias, const float *d_out,
                                      const float *in, void *scratch, int B, int C, int H,
                                      int W, int K, int kernel, int threads);

/* Dense layers: out[n_out][B] = weight x in[n_in][B] + bias; backward:
 * d_weight[n_out][n_in] = d_out x in^T, d_bias[n_out] = fp32 row sums of
 * d_out, and d_in[n_in][B] = weight^T x d_out unless d_in is NULL. Both
 * read the weights packed (direct_fp16_pack_dense_weights, into
 * direct_fp16_dense_weight_bytes) from weight[n_out][n_in]: once a pass
 * serves the forward and the backward products. */
size_t direct_fp16_dense_scratch_bytes(int B, int n_in, int n_out);
size_t direct_fp16_dense_weight_bytes(int n_in, int n_out);
void direct_fp16_pack_dense_weights(void *packed, const float *weight, int n_in, int n_out,
                                    int threads);
void direct_fp16_dense_forward(float *out, const float *in, const void *packed_weights,
                               const float *bias, void *scratch, int B, int n_in, int n_out,
                               int threads);
void direct_fp16_dense_backward(float *d_weight, float *d_bias, float *d_in,
                                const float *d_out, const float *in, const void *packed_weights,
                                void *scratch, int B, int n_in, int n_out, int threads);

#endif
