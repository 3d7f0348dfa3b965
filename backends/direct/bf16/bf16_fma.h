/* The direct backend's bf16 on fp32 FMAs, and the choice between it and
 * the vdpbf16ps products (bf16.h).
 *
 * A product of two bf16 values (8 significant bits each) is exact in fp32,
 * so an fp32 FMA on operands already rounded to bf16 adds exactly the term
 * that vdpbf16ps adds: the fp32 register tiles (direct.h) run on rounded
 * copies of their operands compute "bf16-rounded operands, fp32 sums", the
 * numbers of the bf16 row, at the fp32 FMA rate. Where vdpbf16ps does
 * fewer flops a cycle than the FMAs (Intel Sapphire Rapids: half), or the
 * CPU has no AVX512_BF16 at all, that is the faster way, or the only one.
 * The set (direct_bf16_fma_products, bf16_fma_products.c): the weights
 * rounded once a pass (a convolution's into a copy after weight_bias, a
 * dense layer's into the engine's packed copy), the activations and
 * output gradients rounded into scratch per call (a convolution's output
 * gradient once for both of its gradients), biases and their gradients
 * fp32 from the unrounded values.
 *
 * The choice between the two is the bf16 table's (backends/direct/
 * candidates.h: rows "fma" and "dot"): LENET_BENCH_DIRECT_BF16=dot or fma
 * forces one; else the vdpbf16ps products where they run (bf16_choice.c:
 * this CPU has AVX512_BF16 and LENET_BENCH_DIRECT_ISA allows AVX-512 code)
 * and a short measurement, once a process, finds vdpbf16ps faster in
 * flops than vfmadd231ps; the FMA set everywhere else the fp32 tiles run. */
#ifndef LB_DIRECT_BF16_FMA_H
#define LB_DIRECT_BF16_FMA_H

#include <stddef.h>

struct chwn_products_f32;

/* dst[i] = src[i] rounded to bf16 as direct_bf16_round does, kept as a
 * float, over `threads` OpenMP threads (1 inside a parallel region);
 * vectorised for the instruction set of the fp32 kernels chosen
 * (direct_active()). dst and src do not overlap. */
void direct_bf16_fma_round(float *dst, const float *src, size_t n, int threads);

/* K planes of `plane` floats rounded so, dst[k * dst_stride + e] =
 * rounded src[k * plane + e], and each plane's fp32 sum of the unrounded
 * values in sums[k * sums_stride], in one read of src: a bias gradient
 * beside its rounded output gradient. The sums are half_common.h's
 * sum_floats, float for float. */
void direct_bf16_fma_round_sums(float *dst, size_t dst_stride, const float *src, size_t plane,
                                int K, float *sums, size_t sums_stride, int threads);

/* 1 when the vdpbf16ps products run here (LENET_BENCH_DIRECT_ISA allows
 * AVX-512 code, the CPU has AVX512_BF16); else 0, a short reason for the
 * details of the row chosen instead ("no AVX512_BF16 here") and the whole
 * one for a refusal. The "dot" row of the bf16 candidates asks it. */
int direct_bf16_dot_runs(char *brief, size_t brief_len, char *why, size_t why_len);

/* vdpbf16ps's flops over vfmadd231ps's on one thread of this CPU: 512-bit
 * register chains of each, interleaved short trials, best of several
 * (load on a shared machine slows both alike); measured once a process,
 * a millisecond or two. 0 where this CPU or build has no AVX512_BF16. */
double direct_bf16_dot_over_fma(void);

#endif
