/* --precision bf16 on the blas backend: every GEMM takes its operands
 * rounded to bfloat16 (round to nearest even) and OpenBLAS's cblas_sbgemm
 * multiplies them, summing in fp32 into an fp32 result. Master weights,
 * gradients, optimiser state, activations and every other loop stay fp32,
 * as in the GPU backend's mixed precision. The rounding is the one of
 * backends/common/bf16_round.h. It needs a CPU with
 * AVX512_BF16 (AMD Zen 4 and later, Intel Cooper Lake, Sapphire Rapids and
 * later), found at run time with cpuid, never from the build machine, and
 * an OpenBLAS built with BUILD_BFLOAT16, found at run time too (Debian's
 * 0.3.21 declares cblas_sbgemm in cblas.h but does not export it). */
#ifndef LB_BLAS_BF16_H
#define LB_BLAS_BF16_H

#include <stddef.h>

/* 1 when bf16 GEMMs can run here; else 0 with the reason in why. */
int blas_bf16_available(char *why, size_t why_len);

/* cblas_sgemm's arguments (row-major only; the CBLAS enums as ints, so
 * that this header needs no cblas.h), the operands rounded to bf16. When
 * the rounded copies cannot be allocated the product is not computed and
 * blas_bf16_take_failure() reports it afterwards. */
void blas_bf16_gemm(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc);

/* 1 if a product since the last call could not run (and clears it). */
int blas_bf16_take_failure(void);

#endif
