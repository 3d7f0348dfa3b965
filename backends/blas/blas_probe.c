/* The blas module's "kernel_probe" table: what the program's child
 * processes ask of the OpenBLAS they loaded before the program decides
 * which kernels it runs (kernel_choice.h). */
#include <cblas.h>

#include "backends/blas/blas.h"
#include "backends/blas/kernel_choice.h"

static const char *corename(void) { return openblas_get_corename(); }

static void sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

const blas_kernel_probe blas_kernel_probe_table = {
    .corename = corename,
    .sgemm = sgemm,
};
