/* What every CPU engine shares (see host_engine.h). */
#include "backends/common/host_engine.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/common/optimizer.h"

void *host_alloc(size_t bytes)
{
    bytes = (bytes + 63) / 64 * 64;
    if (bytes == 0)
        bytes = 64;
    void *p = aligned_alloc(64, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

float *host_alloc_floats(size_t n) { return host_alloc(n * sizeof(float)); }

void *host_alloc_reals(const host_engine *h, size_t n) { return host_alloc(n * h->real_size); }

/* p, which host_engine_free will free; NULL (p freed) when the list of
 * them cannot grow, or p is NULL. */
static void *own(host_engine *h, void *p)
{
    if (p && h->owned_count == h->owned_capacity) {
        const size_t capacity = h->owned_capacity ? 2 * h->owned_capacity : 32;
        void **owned = realloc(h->owned, capacity * sizeof *owned);
        if (!owned) {
            free(p);
            return NULL;
        }
        h->owned = owned;
        h->owned_capacity = capacity;
    }
    if (p)
        h->owned[h->owned_count++] = p;
    return p;
}

void *host_alloc_counted(host_engine *h, size_t n, size_t *counter)
{
    void *p = own(h, host_alloc_reals(h, n));
    if (p)
        *counter += n * h->real_size;
    return p;
}

int host_fail(host_engine *h, const char *fmt, ...)
{
    int k = snprintf(h->err, sizeof h->err, "%s: ", h->backend->name);
    if (k < 0 || (size_t)k >= sizeof h->err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err + k, sizeof h->err - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

engine *host_engine_create(const backend *b, const host_layers *layers, size_t size,
                           const workload *w, const engine_config *cfg,
                           const char *(*check)(const workload *w, const engine_config *cfg),
                           char *err, size_t err_len)
{
    const char *why = NULL;
    char unsupported[96];
    const unsigned precisions = b->precisions ? b->precisions : 1u << PREC_FP32;
    if (!w || !cfg)
        why = "no workload or configuration";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if (!(precisions & (1u << cfg->precision))) {
        snprintf(unsupported, sizeof unsupported, "the %s backend does not compute in %s",
                 b->name, precision_name(cfg->precision));
        why = unsupported;
    } else if (cfg->stage_slots < 0 || cfg->stage_slots > 1024)
        why = "stage slots must be 0 (a whole network) to 1024";
    else if (cfg->stage_slots && !layers->stage_forward) {
        snprintf(unsupported, sizeof unsupported, "the %s backend offers no model-parallel stages",
                 b->name);
        why = unsupported;
    } else if (cfg->stage_slots && crossing_refusal(CROSS_STAGE, cfg->precision))
        why = crossing_refusal(CROSS_STAGE, cfg->precision);
    else if (w->is_stage && !cfg->stage_slots)
        why = "a part of a network runs only as a model-parallel stage";
    else if (!(why = workload_check(w)) && check)
        why = check(w, cfg);
    if (why) {
        if (err && err_len)
            snprintf(err, err_len, "%s: %s", b->name, why);
        return NULL;
    }

    engine *e = calloc(1, size);
    if (!e) {
        if (err && err_len)
            snprintf(err, err_len, "%s: out of memory for workload %s at batch %d", b->name,
                     w->name, cfg->batch_size);
        return NULL;
    }
    host_engine *h = host_of(e);
    h->backend = b;
    h->layers = layers;
    h->w = *w;
    h->cfg = *cfg;
    h->real_size = precision_wider_than_float(cfg->precision) ? sizeof(double) : sizeof(float);
    h->last_loss = NAN;
    const size_t B = (size_t)cfg->batch_size, n = w->param_count;
    h->state_count = (size_t)optimizer_state_per_param(cfg->opt.kind) * n;
    h->params = own(h, host_alloc_reals(h, n));
    h->grads = own(h, host_alloc_reals(h, n));
    h->opt_state = own(h, host_alloc_reals(h, h->state_count));
    h->labels = own(h, host_alloc(sizeof(int) * B));
    h->predicted = own(h, host_alloc(sizeof(int) * B));
    h->slot_batch = own(h, host_alloc(sizeof(int) * (cfg->stage_slots + 1)));
    if (!h->params || !h->grads || !h->opt_state || !h->labels || !h->predicted ||
        !h->slot_batch)
        return host_engine_out_of_memory(e, err, err_len);
    return e;
}

engine *host_engine_out_of_memory(engine *e, char *err, size_t err_len)
{
    const host_engine *h = host_of(e);
    if (err && err_len)
        snprintf(err, err_len, "%s: out of memory for workload %s at batch %d", h->backend->name,
                 h->w.name, h->cfg.batch_size);
    h->backend->ops->destroy(e);
    return NULL;
}

void host_engine_free(engine *e)
{
    if (!e)
        return;
    host_engine *h = host_of(e);
    for (size_t i = 0; i < h->owned_count; i++)
        free(h->owned[i]);
    free(h->owned);
    free(e);
}

int host_check_batch(host_engine *h, int batch)
{
    if (h->cfg.stage_slots)
        return host_fail(h, "a model-parallel stage trains through stage_forward and "
                            "stage_backward");
    if (batch < 1 || batch > h->cfg.batch_size)
        return host_fail(h, "batch of %d images, engine was created for 1..%d", batch,
                         h->cfg.batch_size);
    if (!h->have_train)
        return host_fail(h, "no training set bound");
    return 0;
}

int host_take_labels(host_engine *h, const dataset *d, const int32_t *idx, int first, int n)
{
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        if (i < 0 || i >= d->count)
            return host_fail(h, "image index %ld outside 0..%d", i, d->count - 1);
        const int label = d->labels[i];
        if (label >= h->w.classes)
            return host_fail(h, "image %ld has label %d, workload has %d classes", i, label,
                             h->w.classes);
        h->labels[b] = label;
    }
    return 0;
}

int host_keep_loss(host_engine *h, double mean, float *loss)
{
    h->last_loss = mean;
    if (loss)
        *loss = (float)mean;
    return 0;
}

/* Entries ---------------------------------------------------------------- */

int host_probe(void *ctx, char *why, size_t why_len)
{
    (void)ctx;
    if (why && why_len)
        why[0] = '\0';
    return 1;
}

const char *host_error(engine *e) { return e ? host_of(e)->err : "no engine"; }

int host_set_params(engine *e, const float *params)
{
    host_engine *h = host_of(e);
    const size_t n = h->w.param_count;
    if (h->real_size == sizeof(double))
        for (size_t i = 0; i < n; i++)
            h->params_f64[i] = params[i];
    else
        memcpy(h->params, params, sizeof(float) * n);
    return 0;
}

int host_get_params(engine *e, float *params)
{
    const host_engine *h = host_of(e);
    const size_t n = h->w.param_count;
    if (h->real_size == sizeof(double))
        for (size_t i = 0; i < n; i++)
            params[i] = (float)h->params_f64[i];
    else
        memcpy(params, h->params, sizeof(float) * n);
    return 0;
}

static int check_dataset(host_engine *h, const dataset *d, const char *which)
{
    if (!d->images || !d->labels || d->count < 0)
        return host_fail(h, "%s set has no images or labels", which);
    if (h->w.input.c != 1 || d->rows != h->w.input.h || d->cols != h->w.input.w)
        return host_fail(h, "%s images are %dx%d, workload %s wants %dx%dx%d", which, d->rows,
                         d->cols, h->w.name, h->w.input.c, h->w.input.h, h->w.input.w);
    return 0;
}

int host_bind_dataset(engine *e, const dataset *train, const dataset *test)
{
    host_engine *h = host_of(e);
    if ((train && check_dataset(h, train, "training")) ||
        (test && check_dataset(h, test, "test")))
        return -1;
    h->have_train = train != NULL;
    h->have_test = test != NULL;
    if (train)
        h->train = *train;
    if (test)
        h->test = *test;
    return 0;
}

int host_train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
{
    const backend *b = host_of(e)->backend;
    for (int s = 0; s < steps; s++) {
        float loss;
        if (b->dp->compute_gradients(e, indices + (size_t)s * batch, batch, &loss) ||
            b->dp->apply_update(e, 1.0f))
            return -1;
        if (losses)
            losses[s] = loss;
    }
    return 0;
}

int host_evaluate(engine *e, int limit, eval_counts *out)
{
    host_engine *h = host_of(e);
    if (h->cfg.stage_slots)
        return host_fail(h, "a model-parallel stage is evaluated through stage_forward");
    if (!h->have_test)
        return host_fail(h, "no test set bound");
    const int n = limit <= 0 || limit > h->test.count ? h->test.count : limit;
    const int classes = h->w.classes, batch_size = h->cfg.batch_size;
    memset(out, 0, sizeof *out);
    out->classes = classes;
    for (int first = 0; first < n; first += batch_size) {
        const int B = n - first < batch_size ? n - first : batch_size;
        if (host_take_labels(h, &h->test, NULL, first, B) ||
            h->layers->score(e, first, B, &out->loss_sum))
            return -1;
        for (int b = 0; b < B; b++)
            out->confusion[h->labels[b] * classes + h->predicted[b]]++;
        out->count += B;
    }
    return 0;
}

float *host_buffer(engine *e, engine_buffer which, size_t *count)
{
    host_engine *h = host_of(e);
    *count = 0;
    if (h->real_size != sizeof(float))
        return NULL;
    switch (which) {
    case BUF_PARAMS:
        *count = h->w.param_count;
        return h->params;
    case BUF_GRADS:
        *count = h->w.param_count;
        return h->grads;
    case BUF_OPT_STATE:
        *count = h->state_count;
        return h->opt_state;
    }
    *count = 0;
    return NULL;
}

int host_compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    return host_of(e)->layers->compute_gradients(e, indices, batch, loss);
}

int host_apply_update(engine *e, float grad_scale)
{
    return host_of(e)->layers->apply_update(e, grad_scale);
}

double host_last_loss(engine *e) { return host_of(e)->last_loss; }

/* Profiling runs real steps on the same batch; the parameters, optimiser
 * state and step count are put back afterwards, so that profiling does
 * not change the model (the gradients may be left overwritten). */
int host_profile_layers(engine *e, const int32_t *indices, int batch, int reps,
                        layer_times *out)
{
    host_engine *h = host_of(e);
    if (reps < 1)
        return host_fail(h, "profile needs at least one repetition");
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch))
        return -1;
    const size_t n = h->w.param_count;
    const size_t size = h->real_size;
    char *saved = malloc(size * (n + h->state_count + 1));
    if (!saved)
        return host_fail(h, "out of memory saving parameters for profiling");
    memcpy(saved, h->params, size * n);
    memcpy(saved + size * n, h->opt_state, size * h->state_count);
    const long saved_step = h->step;

    const int L = h->w.n_layers;
    memset(out, 0, sizeof *out);
    out->n_layers = L;
    h->layers->time_steps(e, indices, batch, reps, out);
    for (int i = 0; i < L; i++) {
        out->forward_ms[i] /= reps;
        out->backward_ms[i] /= reps;
    }
    out->loss_ms /= reps;
    out->update_ms /= reps;

    memcpy(h->params, saved, size * n);
    memcpy(h->opt_state, saved + size * n, size * h->state_count);
    h->step = saved_step;
    free(saved);
    return 0;
}

void host_memory_use(engine *e, memory_use *out)
{
    const host_engine *h = host_of(e);
    out->params = out->grads = h->w.param_count * h->real_size;
    out->opt_state = h->state_count * h->real_size;
    out->activations = h->activation_bytes;
    out->workspace = h->workspace_bytes;
}

static int check_slot(host_engine *h, int slot)
{
    if (!h->cfg.stage_slots)
        return host_fail(h, "not created as a model-parallel stage");
    if (slot < 0 || slot >= h->cfg.stage_slots)
        return host_fail(h, "stage slot %d, engine was created for 0..%d", slot,
                         h->cfg.stage_slots - 1);
    return 0;
}

int host_stage_forward(engine *e, int slot, const float *in, int batch, float *out)
{
    host_engine *h = host_of(e);
    if (check_slot(h, slot))
        return -1;
    if (batch < 1 || batch > h->cfg.batch_size)
        return host_fail(h, "micro-batch of %d images, engine was created for 1..%d", batch,
                         h->cfg.batch_size);
    if (!in || !out)
        return host_fail(h, "stage_forward needs its input and output buffers");
    h->slot_batch[slot] = batch;
    return h->layers->stage_forward(e, slot, in, batch, out);
}

int host_stage_backward(engine *e, int slot, const float *d_out, float *d_in, int accumulate)
{
    host_engine *h = host_of(e);
    if (check_slot(h, slot))
        return -1;
    if (!h->slot_batch[slot])
        return host_fail(h, "stage_backward of slot %d before its stage_forward", slot);
    if (!d_out)
        return host_fail(h, "stage_backward needs the output's gradient");
    return h->layers->stage_backward(e, slot, h->slot_batch[slot], d_out, d_in, accumulate);
}

const data_parallel_ops host_data_parallel = {
    .compute_gradients = host_compute_gradients,
    .apply_update = host_apply_update,
    .buffer = host_buffer,
    .buffer_space = MEM_HOST,
};

const stage_ops host_stages = {.stage_forward = host_stage_forward,
                               .stage_backward = host_stage_backward};
