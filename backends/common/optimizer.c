#include "backends/common/optimizer.h"

#include <math.h>

#include "backends/common/elementwise.h"

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

static void update_tensor(const optimizer_config *opt, float *w, const float *g, float scale,
                          float decay, float *state, size_t state_stride, long step,
                          size_t n)
{
    switch (opt->kind) {
    case OPT_SGD:
        for (size_t i = 0; i < n; i++)
            w[i] = lb_sgd_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay), opt->lr);
        break;
    case OPT_NESTEROV:
        for (size_t i = 0; i < n; i++)
            w[i] = lb_nesterov_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay),
                                    &state[i], opt->lr, opt->momentum);
        break;
    case OPT_ADAM: {
        float c1 = 1.0f - powf(opt->beta1, (float)step);
        float c2 = 1.0f - powf(opt->beta2, (float)step);
        float *m = state, *s = state + state_stride;
        for (size_t i = 0; i < n; i++)
            w[i] = lb_adam_step(w[i], lb_decayed_grad(g[i] * scale, w[i], decay), &m[i],
                                &s[i], opt->lr, opt->beta1, opt->beta2, opt->eps, c1, c2);
        break;
    }
    }
}

void optimizer_update_range(const workload *w, const optimizer_config *opt, float *params,
                            const float *grads, float grad_scale, float *state, long step,
                            size_t lo, size_t hi)
{
    for (int li = 0; li < w->n_layers; li++) {
        const layer *l = &w->layers[li];
        if (!l->weight_count)
            continue;
        /* weights then bias, each clipped to [lo, hi) */
        size_t starts[2] = {l->weight_offset, l->bias_offset};
        size_t counts[2] = {l->weight_count, l->bias_count};
        float decays[2] = {opt->weight_decay, 0.0f};
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

void optimizer_update(const workload *w, const optimizer_config *opt, float *params,
                      const float *grads, float grad_scale, float *state, long step)
{
    optimizer_update_range(w, opt, params, grads, grad_scale, state, step, 0,
                           w->param_count);
}
