#include "backends/blas/sgemm_peak.h"

#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <time.h>

#include "backends/blas/blas.h"
#include "base/clock.h"

double blas_sgemm_peak_gflops_sized(int threads, int n, int reps)
{
    if (threads < 0 || n < 1 || n > 16384 || reps < 1)
        return -1.0;
    const chwn_team team = {threads > 0 ? threads : omp_get_num_procs(), CHWN_SPLIT_LIBRARY};
    blas_team_enter(&team);
    const size_t count = (size_t)n * n;
    float *a = malloc(sizeof(float) * count), *b = malloc(sizeof(float) * count),
          *c = malloc(sizeof(float) * count);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return -1.0;
    }
    /* small values that are not all alike, so nothing is a special case */
    for (size_t i = 0; i < count; i++) {
        a[i] = (float)(i % 97) * (1.0f / 97) - 0.5f;
        b[i] = (float)(i % 89) * (1.0f / 89) - 0.5f;
        c[i] = 0.0f;
    }
    double best = 0.0;
    for (int r = -1; r < reps; r++) {
        const double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        const double dt = now_seconds() - t0;
        if (r >= 0 && dt > 0 && (best == 0.0 || dt < best))
            best = dt;
    }
    free(a);
    free(b);
    free(c);
    return best > 0 ? 2.0 * n * n * (double)n / best * 1e-9 : -1.0;
}

double blas_sgemm_peak_gflops(int threads)
{
    return blas_sgemm_peak_gflops_sized(threads, 2048, 5);
}
