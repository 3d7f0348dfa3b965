/* The naive engine: the reference backend. One thread, fp32, the layers of
 * layers.h applied in the order of the workload's layer list, the shared
 * optimiser update. Every other backend is checked against this one. What
 * is not about layers (buffers, data sets, checks, evaluation and profile
 * bookkeeping) is the shared host engine's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/common/host_engine.h"
#include "backends/common/optimizer.h"
#include "backends/engine.h"
#include "backends/naive/layers.h"

struct engine {
    host_engine h; /* first, so that the host_* entries find it */

    /* act[0] is the input batch, act[i + 1] the output of layer i, each
     * batch_size x (floats per image). d_a and d_b hold the gradient flowing
     * back, in turn. */
    float *act[WORKLOAD_MAX_LAYERS + 1];
    float *d_a, *d_b;
    float *scratch;
};

extern const backend naive_backend;
static const host_layers naive_layers;

static void destroy(engine *e)
{
    if (!e)
        return;
    for (int i = 0; i <= WORKLOAD_MAX_LAYERS; i++)
        free(e->act[i]);
    free(e->d_a);
    free(e->d_b);
    free(e->scratch);
    host_engine_free(e);
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    engine *e = host_engine_create(&naive_backend, &naive_layers, sizeof *e, w, cfg, NULL, err,
                                   err_len);
    if (!e)
        return NULL;
    const size_t B = (size_t)cfg->batch_size;
    e->act[0] = host_alloc_floats(B * shape3_size(w->input));
    size_t scratch = 0;
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        e->act[i + 1] = host_alloc_floats(B * shape3_size(l->out));
        if (!e->act[i + 1])
            return host_engine_out_of_memory(e, err, err_len);
        size_t s = 0;
        if (l->kind == LAYER_CONV)
            s = conv_scratch_floats(l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
        else if (l->kind == LAYER_DENSE)
            s = dense_scratch_floats((int)B, shape3_size(l->in), l->units);
        if (s > scratch)
            scratch = s;
    }
    const size_t max_act = (size_t)workload_max_activation(w);
    e->d_a = host_alloc_floats(B * max_act);
    e->d_b = host_alloc_floats(B * max_act);
    e->scratch = host_alloc_floats(scratch);
    if (!e->act[0] || !e->d_a || !e->d_b || !e->scratch)
        return host_engine_out_of_memory(e, err, err_len);
    return e;
}

/* Pixels of images idx[0..n) (or first..first+n when idx is NULL), whose
 * indices host_take_labels has checked, into act[0]. */
static void load_pixels(engine *e, const dataset *d, const int32_t *idx, int first, int n)
{
    const size_t pixels = (size_t)d->rows * d->cols;
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        const uint8_t *src = d->images + (size_t)i * pixels;
        float *dst = e->act[0] + (size_t)b * pixels;
        for (size_t p = 0; p < pixels; p++)
            dst[p] = lb_pixel(src[p]);
    }
}

static void forward_layer(engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const float *in = e->act[i], *params = e->h.params;
    float *out = e->act[i + 1];
    switch (l->kind) {
    case LAYER_CONV:
        conv_forward(out, in, params + l->weight_offset, params + l->bias_offset, B, l->in.c,
                     l->in.h, l->in.w, l->units, l->kernel, l->stride, e->scratch);
        break;
    case LAYER_MAXPOOL:
        maxpool_forward(out, in, B, l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
        break;
    case LAYER_DENSE:
        dense_forward(out, in, params + l->weight_offset, params + l->bias_offset, B,
                      shape3_size(l->in), l->units, e->scratch);
        break;
    case LAYER_RELU:
        relu_forward(out, in, (size_t)B * shape3_size(l->in));
        break;
    }
}

/* Gradients of layer i's parameters from d_out; d_in too unless it is NULL. */
static void backward_layer(engine *e, int i, int B, const float *d_out, float *d_in)
{
    const layer *l = &e->h.w.layers[i];
    const float *in = e->act[i];
    const float *W = e->h.params + l->weight_offset;
    float *dW = e->h.grads + l->weight_offset, *db = e->h.grads + l->bias_offset;
    switch (l->kind) {
    case LAYER_CONV:
        conv_backward_weights(dW, d_out, in, B, l->in.c, l->in.h, l->in.w, l->units,
                              l->kernel, l->stride, e->scratch);
        conv_backward_bias(db, d_out, B, l->units, l->out.h, l->out.w);
        if (d_in)
            conv_backward_data(d_in, d_out, W, B, l->in.c, l->in.h, l->in.w, l->units,
                               l->kernel, l->stride, e->scratch);
        break;
    case LAYER_MAXPOOL:
        if (d_in)
            maxpool_backward(d_in, d_out, in, B, l->in.c, l->in.h, l->in.w, l->kernel,
                             l->stride);
        break;
    case LAYER_DENSE:
        dense_backward_weights(dW, d_out, in, B, shape3_size(l->in), l->units);
        dense_backward_bias(db, d_out, B, l->units);
        if (d_in)
            dense_backward_data(d_in, d_out, W, B, shape3_size(l->in), l->units);
        break;
    case LAYER_RELU:
        if (d_in)
            relu_backward(d_in, d_out, e->act[i + 1], (size_t)B * shape3_size(l->in));
        break;
    }
}

/* Layer i's turn in the backward pass, swapping the gradient buffers. */
static float *backward_step(engine *e, int i, int B, float *d_out)
{
    float *d_in = i > 0 ? (d_out == e->d_a ? e->d_b : e->d_a) : NULL;
    backward_layer(e, i, B, d_out, d_in);
    return d_in;
}

/* Sum of the batch's cross-entropies from the logits in act[L]; their
 * gradient (of the mean) into d_a, and the gradients zeroed for the
 * backward pass to add to. */
static double loss_and_dlogits(engine *e, int B)
{
    const int L = e->h.w.n_layers;
    const double sum = softmax_xent(e->d_a, NULL, e->act[L], e->h.labels, B, e->h.w.classes,
                                    1.0f / (float)B);
    memset(e->h.grads, 0, sizeof(float) * e->h.w.param_count);
    return sum;
}

static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    host_engine *h = &e->h;
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch))
        return -1;
    load_pixels(e, &h->train, indices, 0, batch);
    const int L = h->w.n_layers;
    for (int i = 0; i < L; i++)
        forward_layer(e, i, batch);
    const double sum = loss_and_dlogits(e, batch);
    float *d = e->d_a;
    for (int i = L - 1; i >= 0; i--)
        d = backward_step(e, i, batch, d);
    if (loss)
        *loss = (float)(sum / batch);
    return 0;
}

static int apply_update(engine *e, float grad_scale)
{
    host_engine *h = &e->h;
    h->step++;
    optimizer_update(&h->w, &h->cfg.opt, h->params, h->grads, grad_scale, h->opt_state,
                     h->step);
    return 0;
}

static int score(engine *e, int first, int n, double *loss_sum)
{
    host_engine *h = &e->h;
    const int L = h->w.n_layers, classes = h->w.classes;
    load_pixels(e, &h->test, NULL, first, n);
    for (int i = 0; i < L; i++)
        forward_layer(e, i, n);
    *loss_sum += softmax_xent(NULL, NULL, e->act[L], h->labels, n, classes, 1.0f);
    for (int b = 0; b < n; b++)
        h->predicted[b] = lb_argmax(e->act[L] + (size_t)b * classes, classes);
    return 0;
}

static void time_steps(engine *e, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
    load_pixels(e, &e->h.train, indices, 0, batch);
    const int L = e->h.w.n_layers;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < L; i++) {
            double t0 = host_now_ms();
            forward_layer(e, i, batch);
            out->forward_ms[i] += host_now_ms() - t0;
        }
        double t0 = host_now_ms();
        loss_and_dlogits(e, batch);
        out->loss_ms += host_now_ms() - t0;
        float *d = e->d_a;
        for (int i = L - 1; i >= 0; i--) {
            t0 = host_now_ms();
            d = backward_step(e, i, batch, d);
            out->backward_ms[i] += host_now_ms() - t0;
        }
        t0 = host_now_ms();
        apply_update(e, 1.0f);
        out->update_ms += host_now_ms() - t0;
    }
}

static void describe(engine *e, char *buf, size_t len)
{
    (void)e;
    snprintf(buf, len, "fp32, 1 thread");
}

static const host_layers naive_layers = {.score = score, .time_steps = time_steps};

const backend naive_backend = {
    .name = "naive",
    .summary = "reference: plain C loops, one thread, fp32",
    .built = 1,
    HOST_ENGINE_ENTRIES,
    .create = create,
    .destroy = destroy,
    .compute_gradients = compute_gradients,
    .apply_update = apply_update,
    .describe = describe,
};
