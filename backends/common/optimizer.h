/* The optimiser update over the flat parameter vector, for CPU engines.
 * Weight tensors get L2 decay, biases do not; the rules are documented in
 * backends/engine.h and the per-element code is in elementwise.h.
 *
 * optimizer.c is written over `real` (real.h) and built for float and
 * double; optimizer_update_range() and optimizer_update() pick the version
 * by the type of params. */
#ifndef LB_OPTIMIZER_H
#define LB_OPTIMIZER_H

#include <stddef.h>

#include "backends/engine.h"

/* Numbers of optimiser state per parameter: 0 (sgd), 1 (nesterov), 2 (adam). */
int optimizer_state_per_param(optimizer_kind kind);

/* One update of params[lo..hi) from grads, scaled by grad_scale first.
 * state holds optimizer_state_per_param() x param_count numbers (nesterov:
 * v; adam: m then s), zeroed before the first step. `step` counts from 1
 * (Adam's bias correction). Disjoint ranges may run in parallel. */
void optimizer_update_range_f32(const workload *w, const optimizer_config *opt, float *params,
                                const float *grads, float grad_scale, float *state, long step,
                                size_t lo, size_t hi);
void optimizer_update_range_f64(const workload *w, const optimizer_config *opt, double *params,
                                const double *grads, double grad_scale, double *state, long step,
                                size_t lo, size_t hi);

#define optimizer_update_range(w, opt, params, ...)                                            \
    _Generic((params)[0], double: optimizer_update_range_f64,                                  \
             default: optimizer_update_range_f32)(w, opt, params, __VA_ARGS__)
/* The whole vector. */
#define optimizer_update(w, opt, params, grads, grad_scale, state, step)                       \
    optimizer_update_range(w, opt, params, grads, grad_scale, state, step, 0, (w)->param_count)

#endif
