/* The CUDA engine's per-step bookkeeping, kept in device memory so that a
 * captured CUDA graph can replay a step without the host: which step of the
 * current call is running (the slot that picks its indices and its loss),
 * how many optimiser steps were applied (Adam's t), and fp16 loss scaling.
 * Plain C so the CPU tests run the same state machine the GPU runs. */
#ifndef LB_CUDA_STEP_STATE_H
#define LB_CUDA_STEP_STATE_H

#include "backends/common/elementwise.h"

typedef struct cuda_step_state {
    int slot;         /* step within the current train_steps call */
    int step;         /* optimiser steps applied so far (Adam's t - 1) */
    float loss_scale; /* gradients are those of loss_scale * loss */
    int good_steps;   /* steps since the scale last changed */
    int overflow;     /* this step's gradients held an Inf or NaN */
    int unused;
} cuda_step_state;

/* Loss scaling for fp16 (dynamic = 0 and initial = 1 for the other
 * precisions): a step whose gradients overflow is skipped and the scale is
 * multiplied by backoff; after growth_interval clean steps it is multiplied
 * by growth. The same rule as PyTorch's GradScaler. */
typedef struct loss_scaling {
    int dynamic;
    float initial, growth, backoff, min_scale, max_scale;
    int growth_interval;
} loss_scaling;

/* Closes one step: counts it unless it was skipped, adjusts the scale,
 * clears the overflow flag and moves to the next slot. */
LB_HD void lb_finish_step(cuda_step_state *s, loss_scaling cfg)
{
    if (s->overflow) {
        if (cfg.dynamic) {
            float next = s->loss_scale * cfg.backoff;
            s->loss_scale = next < cfg.min_scale ? cfg.min_scale : next;
        }
        s->good_steps = 0;
    } else {
        s->step++;
        if (cfg.dynamic && ++s->good_steps >= cfg.growth_interval) {
            float next = s->loss_scale * cfg.growth;
            s->loss_scale = next > cfg.max_scale ? cfg.max_scale : next;
            s->good_steps = 0;
        }
    }
    s->overflow = 0;
    s->slot++;
}

#endif
