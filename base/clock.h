/* The one clock every layer times with: monotonic, so that a change of
 * the wall-clock time never shows up as a step taking negative or hours. */
#ifndef LB_BASE_CLOCK_H
#define LB_BASE_CLOCK_H

#include <time.h>

/* Seconds on the clock `id`. */
static inline double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds on a monotonic clock. */
static inline double now_seconds(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* Seconds this thread has run (a timing on a shared machine that other
 * processes do not lengthen). */
static inline double thread_run_seconds(void) { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* Milliseconds on the same clock. */
static inline double now_ms(void) { return 1e3 * now_seconds(); }

/* Two timed trials (each returning its seconds) run in turn `trials` times
 * after one warm-up of each, the least positive time of each kept: a trial
 * slowed by other work loses to one that ran alone, and the two see the
 * same clock and the same neighbours. */
static inline void best_of_alternating(double (*first)(void), double (*second)(void), int trials,
                                       double *best_first, double *best_second)
{
    first(), second();
    double a = 1e9, b = 1e9;
    for (int t = 0; t < trials; t++) {
        const double x = first(), y = second();
        a = x > 0 && x < a ? x : a;
        b = y > 0 && y < b ? y : b;
    }
    *best_first = a, *best_second = b;
}

#endif
