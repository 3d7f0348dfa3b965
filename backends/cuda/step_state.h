/* The CUDA engine's per-step bookkeeping, kept in device memory so that a
 * captured CUDA graph can replay a step without the host: which step of the
 * current call is running (the slot that picks its indices and its loss),
 * how many optimiser steps were applied (Adam's t), and fp16 loss scaling
 * (the rule is backends/common/loss_scale.h's).
 * Plain C so the CPU tests run the same state machine the GPU runs. */
#ifndef LB_CUDA_STEP_STATE_H
#define LB_CUDA_STEP_STATE_H

#include "backends/common/loss_scale.h"

typedef struct cuda_step_state {
    int slot;         /* step within the current train_steps call */
    int step;         /* optimiser steps applied so far (Adam's t - 1) */
    float loss_scale; /* gradients are those of loss_scale * loss */
    int good_steps;   /* steps since the scale last changed */
    int overflow;     /* this step's gradients held an Inf or NaN */
    int unused;
} cuda_step_state;

/* Closes one step: counts it unless it was skipped, adjusts the scale,
 * clears the overflow flag and moves to the next slot. */
LB_HD void lb_finish_step(cuda_step_state *s, loss_scaling cfg)
{
    if (!s->overflow)
        s->step++;
    lb_adjust_loss_scale(&s->loss_scale, &s->good_steps, s->overflow, cfg);
    s->overflow = 0;
    s->slot++;
}

#endif
