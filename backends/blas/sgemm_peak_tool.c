/* sgemm-peak [THREADS [SIZE [REPS]]]: prints the measured sgemm ceiling as
 *   <GFLOP/s> GFLOP/s sgemm <n>^3, <threads> threads, <library>
 * (the first field alone is what scripts read). */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/blas/blas.h"
#include "backends/blas/sgemm_peak.h"

static int parse(const char *s, const char *what, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "sgemm-peak: %s must be a whole number in %ld..%ld, got '%s'\n", what,
                lo, hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 0, n = 2048, reps = 5;
    if (argc > 4 ||
        (argc > 1 && parse(argv[1], "THREADS (0: every core)", 0, 1024, &threads)) ||
        (argc > 2 && parse(argv[2], "SIZE", 64, 16384, &n)) ||
        (argc > 3 && parse(argv[3], "REPS", 1, 1000, &reps))) {
        fprintf(stderr, "usage: sgemm-peak [THREADS [SIZE [REPS]]]\n");
        return 2;
    }
    const double gflops = blas_sgemm_peak_gflops_sized(threads, n, reps);
    if (gflops < 0) {
        fprintf(stderr, "sgemm-peak: cannot allocate three %dx%d matrices\n", n, n);
        return 1;
    }
    char lib[256];
    blas_library_info(lib, sizeof lib);
    printf("%.1f GFLOP/s sgemm %d^3, %d threads, %s\n", gflops, n,
           threads > 0 ? threads : omp_get_num_procs(), lib);
    return 0;
}
