/* The optimiser update, written over `real` and built for float and double
 * (real.h). */
#include "backends/common/optimizer.h"

#include <math.h>

#include "backends/common/elementwise.h"
#include "backends/common/real.h"

#ifdef LB_REAL_PLAIN
int optimizer_state_per_param(optimizer_kind kind)
{
    switch (kind) {
    case OPT_SGD:
        return 0;
    case OPT_NESTEROV:
        return 1;
    case OPT_ADAM:
        return 2;
    }
    return 0;
}
#endif

/* The hyper-parameters at the engine's precision: an fp64 engine widens
 * the float settings once, as it widens the parameters. */
static void update_tensor(const optimizer_config *opt, real *w, const real *g, real scale,
                          real decay, real *state, size_t state_stride, long step, size_t n)
{
    const real lr = opt->lr, mu = opt->momentum, b1 = opt->beta1, b2 = opt->beta2;
    switch (opt->kind) {
    case OPT_SGD:
        for (size_t i = 0; i < n; i++)
            w[i] = lb_sgd_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay), lr);
        break;
    case OPT_NESTEROV:
        for (size_t i = 0; i < n; i++)
            w[i] = lb_nesterov_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay),
                                    &state[i], lr, mu);
        break;
    case OPT_ADAM: {
#ifdef LB_REAL_DOUBLE
        const real c1 = 1 - pow(b1, (real)step), c2 = 1 - pow(b2, (real)step);
#else
        const real c1 = 1 - powf(b1, (real)step), c2 = 1 - powf(b2, (real)step);
#endif
        real *m = state, *s = state + state_stride;
        for (size_t i = 0; i < n; i++)
            w[i] = lb_adam_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay), &m[i],
                                &s[i], lr, b1, b2, (real)opt->eps, c1, c2);
        break;
    }
    }
}

static void update_range(const workload *w, const optimizer_config *opt, real *params,
                         const real *grads, real grad_scale, real *state, long step, size_t lo,
                         size_t hi)
{
    for (int li = 0; li < w->n_layers; li++) {
        const layer *l = &w->layers[li];
        if (!l->weight_count)
            continue;
        /* weights then bias, each clipped to [lo, hi) */
        size_t starts[2] = {l->weight_offset, l->bias_offset};
        size_t counts[2] = {l->weight_count, l->bias_count};
        real decays[2] = {opt->weight_decay, 0};
        for (int t = 0; t < 2; t++) {
            size_t a = starts[t] > lo ? starts[t] : lo;
            size_t b = starts[t] + counts[t] < hi ? starts[t] + counts[t] : hi;
            if (a >= b)
                continue;
            update_tensor(opt, params + a, grads + a, grad_scale, decays[t],
                          state ? state + a : NULL, w->param_count, step, b - a);
        }
    }
}

/* The entry point under this build's name (optimizer.h). */
#ifdef LB_REAL_DOUBLE
void optimizer_update_range_f64(const workload *w, const optimizer_config *opt, double *params,
                                const double *grads, double grad_scale, double *state, long step,
                                size_t lo, size_t hi)
{
    update_range(w, opt, params, grads, grad_scale, state, step, lo, hi);
}
#else
void optimizer_update_range_f32(const workload *w, const optimizer_config *opt, float *params,
                                const float *grads, float grad_scale, float *state, long step,
                                size_t lo, size_t hi)
{
    update_range(w, opt, params, grads, grad_scale, state, step, lo, hi);
}
#endif
