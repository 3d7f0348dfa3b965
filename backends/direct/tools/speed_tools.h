/* What the direct backend's speed tools (kernel_speed.c, bf16_speed.c)
 * share: operands filled with the same made-up values (and, timed by a
 * thread's processor time, base/clock.h). Not part of the backend. */
#ifndef LB_DIRECT_SPEED_TOOLS_H
#define LB_DIRECT_SPEED_TOOLS_H

#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"

/* n floats in [-0.5, 0.5) from seed, 64-byte aligned; exits on no memory */
static inline float *speed_filled(size_t n, unsigned seed)
{
    const size_t bytes = (sizeof(float) * n + 63) / 64 * 64;
    float *x = aligned_alloc(64, bytes ? bytes : 64); /* (none asked: a line, not NULL) */
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
    return x;
}

#endif
