/* The machine's peak, measured in the same run, so that "% of peak" in the
 * summary compares a backend's achieved GFLOP/s with what this CPU (or GPU)
 * did a moment ago rather than with a data-sheet number. */
#ifndef LB_PEAK_H
#define LB_PEAK_H

typedef struct peak_measure {
    double gflops;      /* 0: not measured */
    const char *source; /* how it was measured, e.g. "sgemm of the blas backend's library, 2 threads" */
} peak_measure;

/* Peak single-precision GFLOP/s of `threads` CPU threads: the higher of a
 * register-blocked multiply-add kernel in C run on every thread at once
 * (about 0.2 s) and, when the blas backend is built, its sgemm probe.
 * Cached per thread count for the life of the process. */
peak_measure cpu_peak_gflops(int threads);

/* Achieved as a percentage of peak; 0 when the peak is unknown. */
double percent_of_peak(double achieved_gflops, double peak_gflops);

#endif
