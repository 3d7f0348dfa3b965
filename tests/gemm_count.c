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

/* An interposed GEMM of element type T: the CBLAS entry point `name`
 * (the enums as ints, so that no cblas.h is needed). */
#define CBLAS_GEMM(name, T)                                                                  \
    typedef void name##_fn(int, int, int, int, int, int, T, const T *, int, const T *, int, T, \
                           T *, int);                                                        \
    void name(int order, int ta, int tb, int M, int N, int K, T alpha, const T *A, int lda,  \
              const T *B, int ldb, T beta, T *C, int ldc)                                    \
    {                                                                                        \
        static name##_fn *f;                                                                 \
        if (!f)                                                                              \
            f = (name##_fn *)next(#name);                                                    \
        count(M, N, K);                                                                      \
        f(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);                      \
    }

/* the same for the Fortran entry point `name`, every argument a pointer */
#define FORTRAN_GEMM(name, T)                                                                \
    typedef void name##fn(const char *, const char *, const int *, const int *, const int *, \
                          const T *, const T *, const int *, const T *, const int *,         \
                          const T *, T *, const int *);                                      \
    void name(const char *ta, const char *tb, const int *M, const int *N, const int *K,      \
              const T *alpha, const T *A, const int *lda, const T *B, const int *ldb,        \
              const T *beta, T *C, const int *ldc)                                           \
    {                                                                                        \
        static name##fn *f;                                                                  \
        if (!f)                                                                              \
            f = (name##fn *)next(#name);                                                     \
        count(*M, *N, *K);                                                                   \
        f(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);                             \
    }

CBLAS_GEMM(cblas_sgemm, float)
CBLAS_GEMM(cblas_dgemm, double)
FORTRAN_GEMM(sgemm_, float)
FORTRAN_GEMM(dgemm_, double)
