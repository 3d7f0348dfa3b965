/* The naive engine's training and scoring: the layers of layers.h applied
 * in the order of the workload's layer list, then the shared optimiser
 * update. Written over `real` and built twice (backends/common/real.h): the
 * fp32 engine and the fp64 engine run this same code. */
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/common/optimizer.h"
#include "backends/naive/layers.h"
#include "backends/naive/naive.h"
#include "base/clock.h"

/* The current slot's activations into act[]. */
static void use_slot(naive_engine *e, int slot)
{
    const int per_slot = e->h.w.n_layers + 1;
    for (int i = 0; i < per_slot; i++)
        e->act[i] = e->slot_act[slot * per_slot + i];
}

static int allocate(naive_engine *e)
{
    host_engine *h = &e->h;
    const workload *w = &h->w;
    const size_t B = (size_t)h->cfg.batch_size;
    const int L = w->n_layers;
    e->slots = h->cfg.stage_slots > 0 ? h->cfg.stage_slots : 1;
    e->slot_act = calloc((size_t)e->slots * (L + 1), sizeof *e->slot_act);
    if (!e->slot_act)
        return -1;
    for (int s = 0; s < e->slots; s++)
        for (int i = 0; i <= L; i++) {
            const shape3 shape = i ? w->layers[i - 1].out : w->input;
            void **act = &e->slot_act[s * (L + 1) + i];
            if (!(*act = host_alloc_counted(h, B * shape3_size(shape), &h->activation_bytes)))
                return -1;
        }
    use_slot(e, 0);
    size_t scratch = 0;
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        size_t s = 0;
        if (l->kind == LAYER_CONV)
            s = conv_scratch_count(l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
        else if (l->kind == LAYER_DENSE)
            s = dense_scratch_count((int)B, shape3_size(l->in), l->units);
        if (s > scratch)
            scratch = s;
    }
    const size_t max_act = (size_t)workload_max_activation(w);
    e->d_a = host_alloc_counted(h, B * max_act, &h->workspace_bytes);
    e->d_b = host_alloc_counted(h, B * max_act, &h->workspace_bytes);
    e->scratch = host_alloc_counted(h, scratch, &h->workspace_bytes);
    return e->d_a && e->d_b && e->scratch ? 0 : -1;
}

/* Pixels of images idx[0..n) (or first..first+n when idx is NULL), whose
 * indices host_take_labels has checked, into act[0]. */
static void load_pixels(naive_engine *e, const dataset *d, const int32_t *idx, int first, int n)
{
    const size_t pixels = (size_t)d->rows * d->cols;
    real *act = e->act[0];
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        const uint8_t *src = d->images + (size_t)i * pixels;
        real *dst = act + (size_t)b * pixels;
        for (size_t p = 0; p < pixels; p++)
            dst[p] = lb_pixel(src[p]);
    }
}

static void forward_layer(naive_engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const real *in = e->act[i], *params = e->h.TYPED(params);
    real *out = e->act[i + 1];
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
static void backward_layer(naive_engine *e, int i, int B, const real *d_out, real *d_in)
{
    const layer *l = &e->h.w.layers[i];
    const real *in = e->act[i];
    const real *W = e->h.TYPED(params) + l->weight_offset;
    real *dW = e->h.TYPED(grads) + l->weight_offset, *db = e->h.TYPED(grads) + l->bias_offset;
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
static real *backward_step(naive_engine *e, int i, int B, real *d_out)
{
    real *d_in = i > 0 ? (d_out == e->d_a ? e->d_b : e->d_a) : NULL;
    backward_layer(e, i, B, d_out, d_in);
    return d_in;
}

/* Sum of the batch's cross-entropies from the logits in act[L]; their
 * gradient (of the mean) into d_a, and the gradients zeroed for the
 * backward pass to add to. */
static double loss_and_dlogits(naive_engine *e, int B)
{
    const int L = e->h.w.n_layers;
    const double sum = softmax_xent(e->d_a, NULL, e->act[L], e->h.labels, B, e->h.w.classes,
                                    1 / (real)B);
    memset(e->h.grads, 0, sizeof(real) * e->h.w.param_count);
    return sum;
}

static int compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss)
{
    naive_engine *e = naive_of(handle);
    host_engine *h = &e->h;
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch))
        return -1;
    load_pixels(e, &h->train, indices, 0, batch);
    const int L = h->w.n_layers;
    for (int i = 0; i < L; i++)
        forward_layer(e, i, batch);
    const double sum = loss_and_dlogits(e, batch);
    real *d = e->d_a;
    for (int i = L - 1; i >= 0; i--)
        d = backward_step(e, i, batch, d);
    return host_keep_loss(h, sum / batch, loss);
}

static int apply_update(engine *handle, float grad_scale)
{
    naive_engine *e = naive_of(handle);
    host_engine *h = &e->h;
    h->step++;
    optimizer_update(&h->w, &h->cfg.opt, h->TYPED(params), h->TYPED(grads), grad_scale,
                     h->TYPED(opt_state), h->step);
    return 0;
}

static int score(engine *handle, int first, int n, double *loss_sum)
{
    naive_engine *e = naive_of(handle);
    host_engine *h = &e->h;
    const int L = h->w.n_layers, classes = h->w.classes;
    const real *logits = e->act[L];
    load_pixels(e, &h->test, NULL, first, n);
    for (int i = 0; i < L; i++)
        forward_layer(e, i, n);
    *loss_sum += softmax_xent(NULL, NULL, logits, h->labels, n, classes, 1);
    for (int b = 0; b < n; b++)
        h->predicted[b] = lb_argmax(logits + (size_t)b * classes, classes);
    return 0;
}

static void time_steps(engine *handle, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
    naive_engine *e = naive_of(handle);
    load_pixels(e, &e->h.train, indices, 0, batch);
    const int L = e->h.w.n_layers;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < L; i++) {
            double t0 = now_ms();
            forward_layer(e, i, batch);
            out->forward_ms[i] += now_ms() - t0;
        }
        double t0 = now_ms();
        loss_and_dlogits(e, batch);
        out->loss_ms += now_ms() - t0;
        real *d = e->d_a;
        for (int i = L - 1; i >= 0; i--) {
            t0 = now_ms();
            d = backward_step(e, i, batch, d);
            out->backward_ms[i] += now_ms() - t0;
        }
        t0 = now_ms();
        apply_update((engine *)e, 1);
        out->update_ms += now_ms() - t0;
    }
}

/* Model parallelism: the stage's layers on floats handed over, in the
 * slot's activations. */
static int stage_forward(engine *handle, int slot, const float *in, int batch, float *out)
{
    naive_engine *e = naive_of(handle);
    const workload *w = &e->h.w;
    const int L = w->n_layers;
    use_slot(e, slot);
    real *x = e->act[0];
    const size_t n_in = (size_t)batch * shape3_size(w->input);
    for (size_t j = 0; j < n_in; j++)
        x[j] = (real)in[j];
    for (int i = 0; i < L; i++)
        forward_layer(e, i, batch);
    const real *y = e->act[L];
    const size_t n_out = (size_t)batch * shape3_size(w->layers[L - 1].out);
    for (size_t j = 0; j < n_out; j++)
        out[j] = (float)y[j];
    return 0;
}

/* The layers add their parameter gradients, so accumulating is not
 * zeroing them first. */
static int stage_backward(engine *handle, int slot, int batch, const float *d_out, float *d_in,
                          int accumulate)
{
    naive_engine *e = naive_of(handle);
    host_engine *h = &e->h;
    const workload *w = &h->w;
    const int L = w->n_layers;
    use_slot(e, slot);
    if (!accumulate)
        memset(h->grads, 0, h->real_size * w->param_count);
    real *d = e->d_a;
    const size_t n_out = (size_t)batch * shape3_size(w->layers[L - 1].out);
    for (size_t j = 0; j < n_out; j++)
        d[j] = (real)d_out[j];
    for (int i = L - 1; i >= 0; i--) {
        real *next = i > 0 || d_in ? (d == e->d_a ? e->d_b : e->d_a) : NULL;
        backward_layer(e, i, batch, d, next);
        d = next;
    }
    if (d_in) {
        const size_t n_in = (size_t)batch * shape3_size(w->input);
        for (size_t j = 0; j < n_in; j++)
            d_in[j] = (float)d[j];
    }
    return 0;
}

static const host_layers layers = {
    .compute_gradients = compute_gradients, .apply_update = apply_update, .score = score,
    .time_steps = time_steps, .stage_forward = stage_forward, .stage_backward = stage_backward};

/* The entry points under this build's names (naive.h). */
#ifdef LB_REAL_DOUBLE
int naive_allocate_f64(naive_engine *e) { return allocate(e); }
const host_layers *const naive_layers_f64 = &layers;
#else
int naive_allocate_f32(naive_engine *e) { return allocate(e); }
const host_layers *const naive_layers_f32 = &layers;
#endif
