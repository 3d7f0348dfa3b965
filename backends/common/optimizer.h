/* The optimiser update over the flat parameter vector, for CPU engines.
 * Weight tensors get L2 decay, biases do not; the rules are documented in
 * backends/engine.h and the per-element code is in elementwise.h. */
#ifndef LB_OPTIMIZER_H
#define LB_OPTIMIZER_H

#include <stddef.h>

#include "backends/engine.h"

/* Floats of optimiser state per parameter: 0 (sgd), 1 (nesterov), 2 (adam). */
int optimizer_state_per_param(optimizer_kind kind);

/* One update of params[lo..hi) from grads, scaled by grad_scale first.
 * state holds optimizer_state_per_param() x param_count floats (nesterov:
 * v; adam: m then s), zeroed before the first step. `step` counts from 1
 * (Adam's bias correction). Disjoint ranges may run in parallel. */
void optimizer_update_range(const workload *w, const optimizer_config *opt, float *params,
                            const float *grads, float grad_scale, float *state, long step,
                            size_t lo, size_t hi);

/* The whole vector. */
void optimizer_update(const workload *w, const optimizer_config *opt, float *params,
                      const float *grads, float grad_scale, float *state, long step);

#endif
