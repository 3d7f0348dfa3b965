/* NCHW [B][C][H][W] <-> CHWN [C][H][W][B], for the tests of the layers
 * that work in CHWN (test_blas_layers.c, test_direct_bf16.c). */
#ifndef LB_TESTS_LAYOUTS_H
#define LB_TESTS_LAYOUTS_H

#include <stddef.h>

static inline void to_chwn(float *out, const float *in, int B, int C, int HW)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++)
                out[((size_t)c * HW + p) * B + b] = in[((size_t)b * C + c) * HW + p];
}

static inline void to_nchw(float *out, const float *in, int B, int C, int HW)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++)
                out[((size_t)b * C + c) * HW + p] = in[((size_t)c * HW + p) * B + b];
}

#endif
