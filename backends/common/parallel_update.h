/* The optimiser step of a CPU engine whose module runs OpenMP (blas,
 * direct, onednn): the host engine's flat vectors cut into ranges that the
 * threads take as they come free. Each element's update is independent, so
 * any cut gives the same numbers. For sources built with -fopenmp; over
 * `real` (real.h), so the fp64 builds update their double vectors. */
#ifndef LB_PARALLEL_UPDATE_H
#define LB_PARALLEL_UPDATE_H

#include "backends/common/host_engine.h"
#include "backends/common/optimizer.h"
#include "backends/common/real.h"

/* One step (h->step counts it) of params from grads scaled by grad_scale,
 * on up to `threads` threads. */
static inline void host_update_in_ranges(host_engine *h, float grad_scale, int threads)
{
    enum { RANGE = 16384 };
    const size_t n = h->w.param_count;
    const int ranges = (int)((n + RANGE - 1) / RANGE);
    h->step++;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (ranges > 1)
    for (int r = 0; r < ranges; r++) {
        const size_t lo = (size_t)r * RANGE, hi = lo + RANGE < n ? lo + RANGE : n;
        optimizer_update_range(&h->w, &h->cfg.opt, h->TYPED(params), h->TYPED(grads), grad_scale,
                               h->TYPED(opt_state), h->step, lo, hi);
    }
}

#endif
