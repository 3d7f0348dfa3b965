/* fp16 loss scaling, shared by the engines that train in fp16 (the CHWN
 * engine's direct fp16, backends/chwn/; the cuda row, backends/cuda/
 * step_state.h): the gradients are those of scale * loss, so that small
 * ones stay inside fp16's range; a step whose gradients hold an Inf or NaN
 * is skipped and the scale multiplied by backoff; after growth_interval
 * clean steps it is multiplied by growth, within [min_scale, max_scale].
 * The same rule as PyTorch's GradScaler. Plain C (LB_HD: static inline,
 * and __host__ __device__ under nvcc, where the cuda row calls it from a
 * kernel). */
#ifndef LB_LOSS_SCALE_H
#define LB_LOSS_SCALE_H

#include "backends/common/elementwise.h"

/* dynamic = 0 and initial = 1 for the precisions that need no scaling */
typedef struct loss_scaling {
    int dynamic;
    float initial, growth, backoff, min_scale, max_scale;
    int growth_interval;
} loss_scaling;

/* fp16's: start at 2^10, halve on an overflow, double after 1000 clean
 * steps, within [1, 2^16] (powers of two: scaling and unscaling are
 * exact); and no scaling. */
#define LB_FP16_LOSS_SCALING ((loss_scaling){1, 1024.0f, 2.0f, 0.5f, 1.0f, 65536.0f, 1000})
#define LB_NO_LOSS_SCALING ((loss_scaling){0, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1 << 30})

/* After a step whose gradients overflowed (or not): the next scale and the
 * count of clean steps since it last changed. */
LB_HD void lb_adjust_loss_scale(float *scale, int *good_steps, int overflow, loss_scaling cfg)
{
    if (overflow) {
        if (cfg.dynamic) {
            const float next = *scale * cfg.backoff;
            *scale = next < cfg.min_scale ? cfg.min_scale : next;
        }
        *good_steps = 0;
    } else if (cfg.dynamic && ++*good_steps >= cfg.growth_interval) {
        const float next = *scale * cfg.growth;
        *scale = next > cfg.max_scale ? cfg.max_scale : next;
        *good_steps = 0;
    }
}

#endif
