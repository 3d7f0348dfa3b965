/* What the speed tools of the half-precision products (bf16_speed.c,
 * fp16_speed.c) share: the clock, zeroed aligned buffers, uniform data and
 * the machine's load, printed beside the figures. */
#ifndef LB_DIRECT_HALF_SPEED_H
#define LB_DIRECT_HALF_SPEED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

static inline double now(void) { return now_seconds(); }

/* 64-byte aligned and zeroed; exits when out of memory */
static inline void *buffer(size_t bytes)
{
    const size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(p, 0, rounded);
    return p;
}

/* uniform in [-0.5, 0.5) */
static inline float *filled(size_t n, unsigned seed)
{
    float *x = buffer(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
    return x;
}

static inline void load_average(const char *when)
{
    char line[128] = "?\n";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(line, sizeof line, f))
            strcpy(line, "?\n");
        fclose(f);
    }
    printf("load average %s: %s", when, line);
}

#endif
