/* What the speed tools of the half-precision products (bf16_speed.c,
 * fp16_speed.c) share beside speed_tools.h: the clock, zeroed aligned
 * buffers and the machine's load, printed beside the figures. */
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
