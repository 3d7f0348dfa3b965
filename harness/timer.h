#ifndef LB_TIMER_H
#define LB_TIMER_H

#include <time.h>

/* Seconds on a monotonic clock. */
static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
