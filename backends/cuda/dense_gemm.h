/* The dense layer's three products as column-major GEMMs (cuBLAS).
 *
 * Row-major storage of an R x C matrix M is, read column-major, the C x R
 * matrix M^T with leading dimension C. So with batch B, inputs I, outputs O:
 *   x  [B][I]  row-major  = X^T  (I x B, ld I) column-major
 *   W  [O][I]  row-major  = W^T  (I x O, ld I) column-major
 *   y  [B][O]  row-major  = Y^T  (O x B, ld O) column-major
 *
 * forward          y = x W^T        =>  Y^T  = W  X^T
 *                  column-major:  C (O x B) = op(A = W^T storage)^T (O x I) * B (I x B)
 *                  gemm(T, N, m = O, n = B, k = I, A = W ld I, B = x ld I, C = y ld O)
 * backward data    dx = dy W        =>  dX^T = W^T dY^T
 *                  column-major:  C (I x B) = A (I x O) * B (O x B)
 *                  gemm(N, N, m = I, n = B, k = O, A = W ld I, B = dy ld O, C = dx ld I)
 * backward weights dW = dy^T x      =>  dW^T = X^T dY
 *                  column-major:  C (I x O) = A (I x B) * op(B = dY^T storage)^T (B x O)
 *                  gemm(N, T, m = I, n = O, k = B, A = x ld I, B = dy ld O, C = dW ld I)
 *
 * Plain C so a CPU test can run these arguments through a reference
 * column-major GEMM and compare with the naive layers, and check the math
 * mode the engine gives cuBLAS. */
#ifndef LB_CUDA_DENSE_GEMM_H
#define LB_CUDA_DENSE_GEMM_H

#include <cublas_v2.h>

#include "backends/engine.h"

typedef enum dense_product {
    DENSE_FORWARD,          /* A = W,  B = x,  C = y  */
    DENSE_BACKWARD_DATA,    /* A = W,  B = dy, C = dx */
    DENSE_BACKWARD_WEIGHTS, /* A = x,  B = dy, C = dW */
} dense_product;

typedef struct gemm_args {
    int transpose_a, transpose_b;
    int m, n, k;
    int lda, ldb, ldc;
} gemm_args;

static inline gemm_args dense_gemm_args(dense_product p, int batch, int in, int out)
{
    gemm_args g = {0, 0, 0, 0, 0, 0, 0, 0};
    switch (p) {
    case DENSE_FORWARD:
        g = (gemm_args){1, 0, out, batch, in, in, in, out};
        break;
    case DENSE_BACKWARD_DATA:
        g = (gemm_args){0, 0, in, batch, out, in, out, in};
        break;
    case DENSE_BACKWARD_WEIGHTS:
        g = (gemm_args){0, 1, in, out, batch, in, out, in};
        break;
    }
    return g;
}

/* cuBLAS's math mode for a precision: TF32 tensor ops only in tf32, and
 * never a 16-bit reduction. Without CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_
 * REDUCTION cuBLAS may sum in bf16/fp16 when the output is bf16/fp16,
 * although the compute type is 32F; the mixed precisions promise fp32
 * accumulation. */
static inline cublasMath_t dense_math_mode(precision p)
{
    const int base = p == PREC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    return (cublasMath_t)(base | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

#endif
