/* An LD_PRELOAD library for tests/test_blas_gemm_share.c: it interposes
 * OpenBLAS's GEMM entry points (CBLAS and Fortran, float and double),
 * adds M x N x K of every call to a counter, and forwards the call to
 * OpenBLAS. lb_gemm_count_macs() reads the counter; the test finds it with
 * dlsym, so its absence means the library was not preloaded. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic uint64_t macs, calls;

uint64_t lb_gemm_count_macs(void) { return atomic_load(&macs); }
uint64_t lb_gemm_count_calls(void) { return atomic_load(&calls); }

/* The next definition of `name`: after this library in the global scope,
 * or in OpenBLAS loaded privately (the blas module dlopens it locally). */
static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        void *lib = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
        f = lib ? dlsym(lib, name) : NULL;
    }
    if (!f) {
        fprintf(stderr, "gemm_count: %s not found after the preloaded library\n", name);
        abort();
    }
    return f;
}

static void count(int M, int N, int K)
{
    atomic_fetch_add(&macs, (uint64_t)M * (uint64_t)N * (uint64_t)K);
    atomic_fetch_add(&calls, 1);
}

/* the CBLAS enums as ints, so that no cblas.h is needed */
typedef void cblas_sgemm_fn(int, int, int, int, int, int, float, const float *, int,
                            const float *, int, float, float *, int);
typedef void cblas_dgemm_fn(int, int, int, int, int, int, double, const double *, int,
                            const double *, int, double, double *, int);
typedef void fortran_sgemm_fn(const char *, const char *, const int *, const int *,
                              const int *, const float *, const float *, const int *,
                              const float *, const int *, const float *, float *, const int *);
typedef void fortran_dgemm_fn(const char *, const char *, const int *, const int *,
                              const int *, const double *, const double *, const int *,
                              const double *, const int *, const double *, double *,
                              const int *);

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    static cblas_sgemm_fn *f;
    if (!f)
        f = (cblas_sgemm_fn *)next("cblas_sgemm");
    count(M, N, K);
    f(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cblas_dgemm(int order, int ta, int tb, int M, int N, int K, double alpha, const double *A,
                 int lda, const double *B, int ldb, double beta, double *C, int ldc)
{
    static cblas_dgemm_fn *f;
    if (!f)
        f = (cblas_dgemm_fn *)next("cblas_dgemm");
    count(M, N, K);
    f(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_(const char *ta, const char *tb, const int *M, const int *N, const int *K,
            const float *alpha, const float *A, const int *lda, const float *B, const int *ldb,
            const float *beta, float *C, const int *ldc)
{
    static fortran_sgemm_fn *f;
    if (!f)
        f = (fortran_sgemm_fn *)next("sgemm_");
    count(*M, *N, *K);
    f(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void dgemm_(const char *ta, const char *tb, const int *M, const int *N, const int *K,
            const double *alpha, const double *A, const int *lda, const double *B,
            const int *ldb, const double *beta, double *C, const int *ldc)
{
    static fortran_dgemm_fn *f;
    if (!f)
        f = (fortran_dgemm_fn *)next("dgemm_");
    count(*M, *N, *K);
    f(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
