/* A measured ceiling for the CPU engines: how fast this machine's OpenBLAS
 * multiplies large square fp32 matrices. Achieved GFLOP/s divided by this
 * gives the "percent of peak" the CPU benchmark reports. */
#ifndef LB_SGEMM_PEAK_H
#define LB_SGEMM_PEAK_H

/* Best GFLOP/s of `reps` row-major n x n x n sgemm calls (after one
 * warm-up) on `threads` threads (0: every core), threaded by OpenBLAS.
 * Returns a negative value when the matrices cannot be allocated or an
 * argument is out of range. The caller's OpenMP thread count is left as
 * `threads`. */
double blas_sgemm_peak_gflops_sized(int threads, int n, int reps);

/* The usual probe: 2048^3, best of 5. */
double blas_sgemm_peak_gflops(int threads);

#endif
