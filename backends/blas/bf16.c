/* bf16 GEMMs for the blas backend (see bf16.h). */
#include "backends/blas/bf16.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/bf16_round.h"
#include "base/cpu.h"

typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                          blasint, blasint, float, const bfloat16 *, blasint, const bfloat16 *,
                          blasint, float, float *, blasint);

/* cblas_sbgemm of the OpenBLAS this module was linked with, or NULL. */
static sbgemm_fn sbgemm;
static pthread_once_t sbgemm_once = PTHREAD_ONCE_INIT;

static void find_sbgemm(void)
{
    Dl_info info;
    if (!dladdr((void *)cblas_sgemm, &info) || !info.dli_fname)
        return;
    void *lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return;
    void *f = dlsym(lib, "cblas_sbgemm");
    memcpy(&sbgemm, &f, sizeof sbgemm); /* a data pointer into a function pointer */
    dlclose(lib); /* only drops the reference dlopen took: the module holds the library */
}

int blas_bf16_available(char *why, size_t why_len)
{
    /* AVX512F and AVX512_BF16, with an OS that saves the AVX-512 state */
    if (!cpu_has(CPU_AVX512F | CPU_AVX512_BF16)) {
        snprintf(why, why_len,
                 "this CPU lacks AVX512_BF16 (AMD Zen 4 and later, Intel Cooper Lake, "
                 "Sapphire Rapids and later have it)");
        return 0;
    }
    pthread_once(&sbgemm_once, find_sbgemm);
    if (!sbgemm) {
        snprintf(why, why_len, "this OpenBLAS (%s) has no cblas_sbgemm: it was built without "
                               "BUILD_BFLOAT16", openblas_get_config());
        return 0;
    }
    return 1;
}

static atomic_int failed;

int blas_bf16_take_failure(void) { return atomic_exchange(&failed, 0); }

/* rows x cols of src (leading dimension ld) rounded into a packed copy. */
static bfloat16 *rounded(const float *src, int rows, int cols, int ld)
{
    bfloat16 *dst = malloc(sizeof(bfloat16) * (size_t)rows * cols + 1);
    if (!dst)
        return NULL;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)r * cols + c] = lb_bf16_bits(src[(size_t)r * ld + c]);
    return dst;
}

void blas_bf16_gemm(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc)
{
    /* row-major: A is stored M x K (K x M transposed), B K x N (N x K) */
    const int a_rows = trans_a == CblasNoTrans ? M : K, a_cols = trans_a == CblasNoTrans ? K : M;
    const int b_rows = trans_b == CblasNoTrans ? K : N, b_cols = trans_b == CblasNoTrans ? N : K;
    bfloat16 *a = rounded(A, a_rows, a_cols, lda), *b = rounded(B, b_rows, b_cols, ldb);
    if (order != CblasRowMajor || !a || !b || !sbgemm)
        atomic_store(&failed, 1);
    else
        sbgemm(CblasRowMajor, (enum CBLAS_TRANSPOSE)trans_a, (enum CBLAS_TRANSPOSE)trans_b, M, N,
               K, alpha, a, a_cols, b, b_cols, beta, C, ldc);
    free(a);
    free(b);
}
