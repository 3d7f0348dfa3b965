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
 * rounded once a pass into a copy after weight_bias, the activations and
 * output gradients rounded into scratch per call, biases and their
 * gradients fp32 from the unrounded values.
 *
 * The choice (bf16_choice.c): LENET_BENCH_DIRECT_BF16=dot or fma forces
 * one (isa.h checks the value); else the vdpbf16ps products where this
 * CPU has AVX512_BF16, LENET_BENCH_DIRECT_ISA allows AVX-512 code, and a
 * short measurement, once a process, finds vdpbf16ps faster in flops than
 * vfmadd231ps; the FMA set everywhere else the fp32 tiles run. */
#ifndef LB_DIRECT_BF16_FMA_H
#define LB_DIRECT_BF16_FMA_H

#include <stddef.h>

struct chwn_products_f32;

/* dst[i] = src[i] rounded to bf16 as direct_bf16_round does, kept as a
 * float, over `threads` OpenMP threads (1 inside a parallel region);
 * vectorised for the instruction set of the fp32 kernels chosen
 * (direct_active()). dst and src do not overlap. */
void direct_bf16_fma_round(float *dst, const float *src, size_t n, int threads);

/* Which products a bf16 engine runs, and why, in words for the row's
 * details: "fp32 FMAs on bf16-rounded operands: vdpbf16ps measured at
 * 0.48x the FMA rate here". */
typedef struct direct_bf16_choice {
    const struct chwn_products_f32 *set; /* direct_bf16_products or _fma_products */
    int dot;                             /* 1: the vdpbf16ps products */
    char why[192];
} direct_bf16_choice;

/* 1 and the choice for this process's environment and CPU (the fp32
 * kernels chosen too: direct_choose); else 0 and the reason bf16 cannot
 * run (a forced ISA the CPU lacks, LENET_BENCH_DIRECT_BF16=dot where
 * vdpbf16ps cannot run). Measures only when it must, once a process. */
int direct_bf16_choose(direct_bf16_choice *out, char *why, size_t why_len);

/* vdpbf16ps's flops over vfmadd231ps's on one thread of this CPU: 512-bit
 * register chains of each, interleaved short trials, best of several
 * (load on a shared machine slows both alike); measured once a process,
 * a millisecond or two. 0 where this CPU or build has no AVX512_BF16. */
double direct_bf16_dot_over_fma(void);

#endif
