/* The naive engine: the reference backend. One thread, fp32, the layers of
 * layers.h applied in the order of the workload's layer list, the shared
 * optimiser update. Every other backend is checked against this one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/common/elementwise.h"
#include "backends/common/optimizer.h"
#include "backends/engine.h"
#include "backends/naive/layers.h"

struct engine {
    workload w;
    engine_config cfg;
    char err[256];

    float *params, *grads, *opt_state; /* param_count each; state x0, x1 or x2 */
    size_t state_count;
    long step; /* optimiser steps taken, for Adam's bias correction */

    /* act[0] is the input batch, act[i + 1] the output of layer i, each
     * batch_size x (floats per image). d_a and d_b hold the gradient flowing
     * back, in turn. */
    float *act[WORKLOAD_MAX_LAYERS + 1];
    float *d_a, *d_b;
    float *scratch;
    int *labels;
    float *losses;

    dataset train, test;
    int have_train, have_test;
};

static int fail(engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int probe(void *ctx, char *why, size_t why_len)
{
    (void)ctx;
    if (why && why_len)
        why[0] = '\0';
    return 1;
}

static void destroy(engine *e)
{
    if (!e)
        return;
    free(e->params);
    free(e->grads);
    free(e->opt_state);
    for (int i = 0; i <= WORKLOAD_MAX_LAYERS; i++)
        free(e->act[i]);
    free(e->d_a);
    free(e->d_b);
    free(e->scratch);
    free(e->labels);
    free(e->losses);
    free(e);
}

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    const char *why = NULL;
    if (!w || !cfg)
        why = "no workload or configuration";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if (cfg->precision != PREC_FP32)
        why = "the naive backend computes in fp32 only";
    else
        why = workload_check(w);
    if (why) {
        if (err && err_len)
            snprintf(err, err_len, "naive: %s", why);
        return NULL;
    }

    engine *e = calloc(1, sizeof *e);
    if (!e)
        goto oom;
    e->w = *w;
    e->cfg = *cfg;
    const size_t B = (size_t)cfg->batch_size, n = w->param_count;
    e->state_count = (size_t)optimizer_state_per_param(cfg->opt.kind) * n;
    e->params = alloc_floats(n);
    e->grads = alloc_floats(n);
    e->opt_state = alloc_floats(e->state_count);
    e->act[0] = alloc_floats(B * shape3_size(w->input));
    size_t scratch = 0;
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        e->act[i + 1] = alloc_floats(B * shape3_size(l->out));
        if (!e->act[i + 1])
            goto oom;
        size_t s = 0;
        if (l->kind == LAYER_CONV)
            s = conv_scratch_floats(l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
        else if (l->kind == LAYER_DENSE)
            s = dense_scratch_floats((int)B, shape3_size(l->in), l->units);
        if (s > scratch)
            scratch = s;
    }
    const size_t max_act = (size_t)workload_max_activation(w);
    e->d_a = alloc_floats(B * max_act);
    e->d_b = alloc_floats(B * max_act);
    e->scratch = alloc_floats(scratch);
    e->labels = calloc(B, sizeof(int));
    e->losses = alloc_floats(B);
    if (!e->params || !e->grads || !e->opt_state || !e->act[0] || !e->d_a || !e->d_b ||
        !e->scratch || !e->labels || !e->losses)
        goto oom;
    return e;
oom:
    destroy(e);
    if (err && err_len)
        snprintf(err, err_len, "naive: out of memory for workload %s at batch %d", w->name,
                 cfg->batch_size);
    return NULL;
}

static const char *error(engine *e) { return e ? e->err : "naive: no engine"; }

static int set_params(engine *e, const float *params)
{
    memcpy(e->params, params, sizeof(float) * e->w.param_count);
    return 0;
}

static int get_params(engine *e, float *params)
{
    memcpy(params, e->params, sizeof(float) * e->w.param_count);
    return 0;
}

static int check_dataset(engine *e, const dataset *d, const char *which)
{
    if (!d->images || !d->labels || d->count < 0)
        return fail(e, "naive: %s set has no images or labels", which);
    if (e->w.input.c != 1 || d->rows != e->w.input.h || d->cols != e->w.input.w)
        return fail(e, "naive: %s images are %dx%d, workload %s wants %dx%dx%d", which,
                    d->rows, d->cols, e->w.name, e->w.input.c, e->w.input.h, e->w.input.w);
    return 0;
}

static int bind_dataset(engine *e, const dataset *train, const dataset *test)
{
    if ((train && check_dataset(e, train, "training")) ||
        (test && check_dataset(e, test, "test")))
        return -1;
    e->have_train = train != NULL;
    e->have_test = test != NULL;
    if (train)
        e->train = *train;
    if (test)
        e->test = *test;
    return 0;
}

/* Pixels and labels of images idx[0..n) (or first..first+n when idx is NULL)
 * into act[0] and labels. */
static int gather(engine *e, const dataset *d, const int32_t *idx, int first, int n)
{
    const size_t pixels = (size_t)d->rows * d->cols;
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        if (i < 0 || i >= d->count)
            return fail(e, "naive: image index %ld outside 0..%d", i, d->count - 1);
        const int label = d->labels[i];
        if (label >= e->w.classes)
            return fail(e, "naive: image %ld has label %d, workload has %d classes", i,
                        label, e->w.classes);
        e->labels[b] = label;
        const uint8_t *src = d->images + (size_t)i * pixels;
        float *dst = e->act[0] + (size_t)b * pixels;
        for (size_t p = 0; p < pixels; p++)
            dst[p] = lb_pixel(src[p]);
    }
    return 0;
}

static void forward_layer(engine *e, int i, int B)
{
    const layer *l = &e->w.layers[i];
    const float *in = e->act[i];
    float *out = e->act[i + 1];
    switch (l->kind) {
    case LAYER_CONV:
        conv_forward(out, in, e->params + l->weight_offset, e->params + l->bias_offset, B,
                     l->in.c, l->in.h, l->in.w, l->units, l->kernel, l->stride, e->scratch);
        break;
    case LAYER_MAXPOOL:
        maxpool_forward(out, in, B, l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
        break;
    case LAYER_DENSE:
        dense_forward(out, in, e->params + l->weight_offset, e->params + l->bias_offset, B,
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
    const layer *l = &e->w.layers[i];
    const float *in = e->act[i];
    const float *W = e->params + l->weight_offset;
    float *dW = e->grads + l->weight_offset, *db = e->grads + l->bias_offset;
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

static int check_batch(engine *e, int batch)
{
    if (batch < 1 || batch > e->cfg.batch_size)
        return fail(e, "naive: batch of %d images, engine was created for 1..%d", batch,
                    e->cfg.batch_size);
    if (!e->have_train)
        return fail(e, "naive: no training set bound");
    return 0;
}

/* Layer i's turn in the backward pass, swapping the gradient buffers. */
static float *backward_step(engine *e, int i, int B, float *d_out)
{
    float *d_in = i > 0 ? (d_out == e->d_a ? e->d_b : e->d_a) : NULL;
    backward_layer(e, i, B, d_out, d_in);
    return d_in;
}

static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    if (check_batch(e, batch) || gather(e, &e->train, indices, 0, batch))
        return -1;
    const int L = e->w.n_layers;
    for (int i = 0; i < L; i++)
        forward_layer(e, i, batch);
    double sum = softmax_xent(e->d_a, NULL, e->act[L], e->labels, batch, e->w.classes,
                              1.0f / (float)batch);
    memset(e->grads, 0, sizeof(float) * e->w.param_count);
    float *d = e->d_a;
    for (int i = L - 1; i >= 0; i--)
        d = backward_step(e, i, batch, d);
    if (loss)
        *loss = (float)(sum / batch);
    return 0;
}

static int apply_update(engine *e, float grad_scale)
{
    e->step++;
    optimizer_update(&e->w, &e->cfg.opt, e->params, e->grads, grad_scale, e->opt_state,
                     e->step);
    return 0;
}

static int train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
{
    for (int s = 0; s < steps; s++) {
        float loss;
        if (compute_gradients(e, indices + (size_t)s * batch, batch, &loss) ||
            apply_update(e, 1.0f))
            return -1;
        if (losses)
            losses[s] = loss;
    }
    return 0;
}

static int evaluate(engine *e, int limit, eval_counts *out)
{
    if (!e->have_test)
        return fail(e, "naive: no test set bound");
    const int n = limit <= 0 || limit > e->test.count ? e->test.count : limit;
    const int L = e->w.n_layers, classes = e->w.classes;
    memset(out, 0, sizeof *out);
    out->classes = classes;
    for (int first = 0; first < n; first += e->cfg.batch_size) {
        const int B = n - first < e->cfg.batch_size ? n - first : e->cfg.batch_size;
        if (gather(e, &e->test, NULL, first, B))
            return -1;
        for (int i = 0; i < L; i++)
            forward_layer(e, i, B);
        out->loss_sum += softmax_xent(NULL, NULL, e->act[L], e->labels, B, classes, 1.0f);
        for (int b = 0; b < B; b++) {
            int pred = lb_argmax(e->act[L] + (size_t)b * classes, classes);
            out->confusion[e->labels[b] * classes + pred]++;
        }
        out->count += B;
    }
    return 0;
}

static float *buffer(engine *e, engine_buffer which, size_t *count)
{
    switch (which) {
    case BUF_PARAMS:
        *count = e->w.param_count;
        return e->params;
    case BUF_GRADS:
        *count = e->w.param_count;
        return e->grads;
    case BUF_OPT_STATE:
        *count = e->state_count;
        return e->opt_state;
    }
    *count = 0;
    return NULL;
}

static void describe(engine *e, char *buf, size_t len)
{
    (void)e;
    snprintf(buf, len, "fp32, 1 thread");
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Times each layer's forward and backward pass, the loss and the update over
 * `reps` steps on the same batch. The parameters, optimiser state and step
 * count are put back afterwards, so profiling does not change the model. */
static int profile_layers(engine *e, const int32_t *indices, int batch, int reps,
                          layer_times *out)
{
    if (reps < 1)
        return fail(e, "naive: profile needs at least one repetition");
    if (check_batch(e, batch) || gather(e, &e->train, indices, 0, batch))
        return -1;
    const size_t n = e->w.param_count;
    float *saved = malloc(sizeof(float) * (n + e->state_count + 1));
    if (!saved)
        return fail(e, "naive: out of memory saving parameters for profiling");
    memcpy(saved, e->params, sizeof(float) * n);
    memcpy(saved + n, e->opt_state, sizeof(float) * e->state_count);
    const long saved_step = e->step;

    const int L = e->w.n_layers;
    memset(out, 0, sizeof *out);
    out->n_layers = L;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < L; i++) {
            double t0 = now_ms();
            forward_layer(e, i, batch);
            out->forward_ms[i] += now_ms() - t0;
        }
        double t0 = now_ms();
        softmax_xent(e->d_a, NULL, e->act[L], e->labels, batch, e->w.classes,
                     1.0f / (float)batch);
        memset(e->grads, 0, sizeof(float) * n);
        out->loss_ms += now_ms() - t0;
        float *d = e->d_a;
        for (int i = L - 1; i >= 0; i--) {
            t0 = now_ms();
            d = backward_step(e, i, batch, d);
            out->backward_ms[i] += now_ms() - t0;
        }
        t0 = now_ms();
        apply_update(e, 1.0f);
        out->update_ms += now_ms() - t0;
    }
    for (int i = 0; i < L; i++) {
        out->forward_ms[i] /= reps;
        out->backward_ms[i] /= reps;
    }
    out->loss_ms /= reps;
    out->update_ms /= reps;

    memcpy(e->params, saved, sizeof(float) * n);
    memcpy(e->opt_state, saved + n, sizeof(float) * e->state_count);
    e->step = saved_step;
    free(saved);
    return 0;
}

const backend naive_backend = {
    .name = "naive",
    .summary = "reference: plain C loops, one thread, fp32",
    .built = 1,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .error = error,
    .set_params = set_params,
    .get_params = get_params,
    .bind_dataset = bind_dataset,
    .train_steps = train_steps,
    .evaluate = evaluate,
    .compute_gradients = compute_gradients,
    .apply_update = apply_update,
    .buffer = buffer,
    .buffer_space = MEM_HOST,
    .describe = describe,
    .profile_layers = profile_layers,
};
