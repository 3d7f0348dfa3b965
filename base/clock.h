/* The one clock every layer times with: monotonic, so that a change of
 * the wall-clock time never shows up as a step taking negative or hours. */
#ifndef LB_BASE_CLOCK_H
#define LB_BASE_CLOCK_H

#include <time.h>

/* Seconds on a monotonic clock. */
static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds on the same clock. */
static inline double now_ms(void) { return 1e3 * now_seconds(); }

#endif
