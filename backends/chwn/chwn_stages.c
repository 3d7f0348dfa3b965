/* The CHWN engine's model-parallel stages (chwn_engine_impl.h): a part of
 * a network, its micro-batches' activations kept slot by slot, host floats
 * in the workload's NCHW layout on both sides. */
#include <omp.h>

#include "backends/chwn/chwn_engine_impl.h"

/* The stage's output as [features][B]: the dense stage's last activation,
 * or the conv stage's output matrix when the stage has no dense part. */
static real *stage_output(chwn_engine *e)
{
    return e->conv_layers == e->h.w.n_layers ? e->rows : e->act[e->h.w.n_layers];
}

/* The slot's input (NCHW floats) through the stage's layers into out. */
int chwn_stage_forward(engine *handle, int slot, const float *in, int batch, float *out)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    host_engine *h = &e->h;
    const int C = e->conv_layers, L = h->w.n_layers;
    chwn_use_slot(e, slot);
    chwn_conv_stage_forward(e, &(source){NULL, NULL, 0, in, 0}, batch, 0, C);
    for (int i = C; i < L; i++)
        chwn_dense_forward_layer(e, i, batch);
    chwn_to_nchw(out, stage_output(e), batch, shape3_size(h->w.layers[L - 1].out), batch,
                        e->team.threads);
    return chwn_pass_failed(e);
}

/* The first layer's input gradient, left by the backward pass as CHWN
 * group blocks (conv stage) or as [features][B] in d_rows, into d_in. */
static void stage_input_gradient(chwn_engine *e, int B, float *d_in)
{
    const int C = e->conv_layers, F = shape3_size(e->h.w.input);
    if (C == 0) {
        chwn_to_nchw(d_in, e->d_rows, B, F, B, e->team.threads);
        return;
    }
    real *base = (C - 1) % 2 ? e->d_a : e->d_b; /* as group_backward_layer */
    const plan p = chwn_plan_for(e, B);
#pragma omp parallel for schedule(static) num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = chwn_group_size(&p, B, g);
        chwn_to_nchw(d_in + (size_t)b0 * F, chwn_group_grad(e, base, b0), n, F, n,
                            p.layer_threads);
    }
}

/* The layers write their gradients whole; to add them to BUF_GRADS they
 * are written to stage_grads first. */
int chwn_stage_backward(engine *handle, int slot, int batch, const float *d_out, float *d_in,
                        int accumulate)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    host_engine *h = &e->h;
    const int C = e->conv_layers, L = h->w.n_layers;
    chwn_use_slot(e, slot);
    chwn_join_weights(e); /* the parameters may have changed since the forward pass */
    real *grads = h->TYPED(grads);
    if (accumulate)
        h->TYPED(grads) = e->stage_grads;
    e->want_d_in = d_in != NULL;
    chwn_from_nchw(C == L ? e->d_rows : e->d_a, batch, d_out,
                        shape3_size(h->w.layers[L - 1].out), batch, e->team.threads);
    for (int i = L - 1; i >= C; i--)
        chwn_dense_backward_layer(e, i, batch);
    chwn_conv_stage_backward(e, batch, 0, C);
    chwn_conv_stage_sum_gradients(e, batch);
    if (d_in)
        stage_input_gradient(e, batch, d_in);
    e->want_d_in = 0;
    if (accumulate) {
        h->TYPED(grads) = grads;
        const real *add = e->stage_grads;
        const long n = (long)h->w.param_count;
#pragma omp parallel for simd schedule(static) num_threads(e->team.threads)                     \
    if (parallel : n >= 1 << 16)
        for (long j = 0; j < n; j++)
            grads[j] += add[j];
    }
    return chwn_pass_failed(e);
}
