/* The CHWN engine (chwn_engine_impl.h): create and destroy, the training
 * step, the update, scoring and the layers' timing; the passes are
 * chwn_passes.c's, the stages chwn_stages.c's. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/chwn/chwn_engine_impl.h"
#include "backends/common/parallel_update.h"
#include "base/clock.h"

static const host_layers chwn_layers;

#ifdef LB_REAL_PLAIN
/* Once, in the float build: the entries do not depend on the real type. */

/* The buffers are the host engine's (host_alloc_counted), but for the
 * slots' table of them. */
void chwn_destroy(engine *e)
{
    if (e)
        free(chwn_of(e)->slot_buf);
    host_engine_free(e);
}

void chwn_placement(engine *e, int *threads, int *devices, int *replicas)
{
    *threads = chwn_of(e)->team.threads;
    *devices = 0;
    *replicas = 1;
}

chwn_team chwn_team_of(engine *e) { return chwn_of(e)->team; }

const char *chwn_arithmetic(engine *e) { return chwn_of(e)->arithmetic; }

void chwn_set_split(engine *e, chwn_split split) { chwn_of(e)->team.split = split; }
#endif

/* The layer count of the conv stage: everything before the first dense
 * layer. Returns -1 when a convolution or pool comes after a dense layer. */
static int conv_stage_layers(const workload *w)
{
    int n = 0;
    while (n < w->n_layers && w->layers[n].kind != LAYER_DENSE)
        n++;
    for (int i = n; i < w->n_layers; i++)
        if (w->layers[i].kind == LAYER_CONV || w->layers[i].kind == LAYER_MAXPOOL)
            return -1;
    return n;
}

/* What the CHWN engine asks beyond what every CPU engine asks. A stage
 * (a part of a network) may begin and end at any layer; a whole network
 * ends in the dense layer whose [classes][B] logits the loss reads. */
static const char *check_workload(const workload *w, const engine_config *cfg)
{
    if (cfg->threads < 0)
        return "thread count must be 0 (every core) or more";
    if (!w->is_stage && w->layers[w->n_layers - 1].kind != LAYER_DENSE)
        return "workload's last layer must be a dense layer";
    if (conv_stage_layers(w) < 0)
        return "a convolution or pool after a dense layer is not supported";
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        if (l->kind == LAYER_MAXPOOL && l->kernel > 15)
            return "pool windows above 15x15 are not supported";
    }
    return NULL;
}

/* NULL, or why the product set cannot compute one of w's convolutions. */
static const char *refused_by_products(const chwn_products *set, const workload *w)
{
    for (int i = 0; i < w->n_layers && set->refuses_conv; i++) {
        const layer *l = &w->layers[i];
        const char *why = l->kind == LAYER_CONV ? set->refuses_conv(l->kernel, l->stride) : NULL;
        if (why)
            return why;
    }
    return NULL;
}

/* Floats per image of d_col scratch that conv layer l needs in groups of n
 * images (the scratch of some products is not a multiple of one image's),
 * in whole cache lines so that every thread's slot starts on one. */
static size_t conv_scratch_per_image(const chwn_products *set, const layer *l, int n)
{
    const size_t floats = set->conv_scratch_floats(set, n, l->in.c, l->in.h, l->in.w, l->units,
                                                   l->kernel, l->stride);
    const size_t per_image = (floats + n - 1) / n, line = 64 / sizeof(real);
    return (per_image + line - 1) / line * line;
}

/* A pool that records its windows' winners (one byte an output) */
static int records_argmax(const layer *l)
{
    return l->kind == LAYER_MAXPOOL && chwn_maxpool_records_argmax(l->kernel, l->stride);
}

/* One slot's buffers, counted as activations; 0 or -1 out of memory. */
static int allocate_slot(chwn_engine *e, int slot)
{
    host_engine *h = &e->h;
    const workload *w = &h->w;
    const int L = w->n_layers, C = e->conv_layers;
    const size_t B = (size_t)h->cfg.batch_size;
    real **buf = e->slot_buf + (size_t)slot * chwn_slot_stride(L);
    for (int i = 0; i <= L; i++) {
        const shape3 s = i ? w->layers[i - 1].out : w->input;
        if (!(buf[i] = host_alloc_counted(h, B * shape3_size(s), &h->activation_bytes)))
            return -1;
    }
    /* the conv stage's output as a [features][B] matrix */
    if (C > 0 && !(buf[L + 1] = host_alloc_counted(
                       h, B * shape3_size(w->layers[C - 1].out), &h->activation_bytes)))
        return -1;
    for (int i = 0; i < C; i++) {
        const size_t bytes = B * shape3_size(w->layers[i].out);
        if (records_argmax(&w->layers[i]) &&
            !(buf[L + 2 + i] = host_alloc_counted(h, (bytes + sizeof(real) - 1) / sizeof(real),
                                                  &h->activation_bytes)))
            return -1;
    }
    return 0;
}

static engine *chwn_create_engine(const backend *b, const chwn_products *set, const workload *w,
                                  const engine_config *cfg, char *err, size_t err_len)
{
    chwn_engine *e = (chwn_engine *)host_engine_create(b, &chwn_layers, sizeof *e, w, cfg,
                                                       check_workload, err, err_len);
    if (!e)
        return NULL;
    const char *refused = refused_by_products(set, w);
    if (refused) {
        snprintf(err, err_len, "%s: %s", b->name, refused);
        chwn_destroy((engine *)e);
        return NULL;
    }
    e->products = set;
    e->arithmetic = set->arithmetic;
    /* as the products say, or their precision's row (fp16's range needs
     * loss scaling, as the cuda row's fp16) */
    const int scaled = set->loss_scaling ? set->loss_scaling == CHWN_LOSS_SCALED
                                         : precision_of(cfg->precision)->loss_scaled;
    e->scaling = scaled ? LB_FP16_LOSS_SCALING : LB_NO_LOSS_SCALING;
    e->loss_scale = e->scaling.initial;
    const int group_images = e->group_images = set->group_images;
    host_engine *h = &e->h;
    size_t *scratch_bytes = &h->workspace_bytes;
    e->team.threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    e->team.split = CHWN_SPLIT_OWN;
    const int C = e->conv_layers = conv_stage_layers(w);
    const int B = cfg->batch_size, G = (B + group_images - 1) / group_images, L = w->n_layers;
    e->slots = cfg->stage_slots > 0 ? cfg->stage_slots : 1;
    e->slot_buf = calloc((size_t)e->slots * chwn_slot_stride(L), sizeof *e->slot_buf);
    if (!e->slot_buf)
        return host_engine_out_of_memory((engine *)e, err, err_len);
    for (int s = 0; s < e->slots; s++)
        if (allocate_slot(e, s))
            return host_engine_out_of_memory((engine *)e, err, err_len);
    chwn_use_slot(e, 0);
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        if (l->kind != LAYER_CONV)
            continue;
        /* one group per group_images images, or the whole batch as one */
        const size_t packed =
            set->conv_packed_floats ? set->conv_packed_floats(l->in.c, l->units, l->kernel) : 0;
        e->weight_bias[i] =
            host_alloc_counted(h, l->weight_count + l->bias_count + packed, scratch_bytes);
        e->partial[i] = host_alloc_counted(h, (l->weight_count + l->bias_count) * G, scratch_bytes);
        if (!e->weight_bias[i] || !e->partial[i])
            return host_engine_out_of_memory((engine *)e, err, err_len);
        /* the product set's scratch (conv_scratch_floats): the GEMM
         * sets unfold every convolution's input there in every pass and
         * the bf16 products pack their operands there; a set that needs
         * it only for an input gradient needs none for the first layer
         * but in a stage, the only place that layer passes one back. A
         * group is group_images images, or the whole batch in one */
        const int full_scratch =
            !set->conv_scratch_for_input_gradient_only || i > 0 || cfg->stage_slots;
        size_t scratch = (size_t)shape3_size(l->out);
        if (full_scratch) {
            const size_t grouped =
                conv_scratch_per_image(set, l, group_images < B ? group_images : B);
            const size_t whole = conv_scratch_per_image(set, l, B);
            scratch = grouped > whole ? grouped : whole;
        }
        if (scratch > e->d_col_per_image)
            e->d_col_per_image = scratch;
    }
    const size_t max_act = (size_t)workload_max_activation(w);
    e->max_act = max_act;
    /* a slot per thread that takes groups (at most one per group), or the
     * whole batch in one */
    const int slots = e->team.threads < G ? e->team.threads : G;
    const size_t slots_images =
        (size_t)slots * group_images > (size_t)B ? (size_t)slots * group_images : (size_t)B;
    /* the conv stage's output gradient as [features][B], or a stage's
     * input gradient when its first layer is dense or a ReLU after none */
    const size_t d_rows = C > 0 ? (size_t)shape3_size(w->layers[C - 1].out)
                          : cfg->stage_slots ? (size_t)shape3_size(w->input)
                                        : 0;
    if (d_rows && !(e->d_rows = host_alloc_counted(h, (size_t)B * d_rows, scratch_bytes)))
        return host_engine_out_of_memory((engine *)e, err, err_len);
    e->d_a = host_alloc_counted(h, (size_t)B * max_act, scratch_bytes);
    e->d_b = host_alloc_counted(h, (size_t)B * max_act, scratch_bytes);
    e->d_col = host_alloc_counted(h, e->d_col_per_image * slots_images, scratch_bytes);
    if (!e->d_a || !e->d_b || !e->d_col)
        return host_engine_out_of_memory((engine *)e, err, err_len);
    for (int i = 0; i + 1 < C; i++)
        if (w->layers[i].kind == LAYER_CONV && records_argmax(&w->layers[i + 1]) &&
            (size_t)shape3_size(w->layers[i].out) > e->handoff_per_image)
            e->handoff_per_image = (size_t)shape3_size(w->layers[i].out);
    if (e->handoff_per_image &&
        !(e->handoff = host_alloc_counted(h, e->handoff_per_image * slots * group_images,
                                          scratch_bytes)))
        return host_engine_out_of_memory((engine *)e, err, err_len);
    size_t dense_scratch = 0;
    for (int i = C; i < L; i++)
        if (w->layers[i].kind == LAYER_DENSE) {
            const size_t n = set->dense_scratch_floats(B, shape3_size(w->layers[i].in),
                                                       w->layers[i].units);
            dense_scratch = n > dense_scratch ? n : dense_scratch;
        }
    if (dense_scratch &&
        !(e->dense_scratch = host_alloc_counted(h, dense_scratch, scratch_bytes)))
        return host_engine_out_of_memory((engine *)e, err, err_len);
    for (int i = C; i < L; i++)
        if (w->layers[i].kind == LAYER_DENSE && set->dense_pack_weights &&
            !(e->dense_packed[i] = host_alloc_counted(
                  h, set->dense_packed_floats(shape3_size(w->layers[i].in), w->layers[i].units),
                  scratch_bytes)))
            return host_engine_out_of_memory((engine *)e, err, err_len);
    if (cfg->stage_slots) /* no loss; gradients that may be added */
        e->stage_grads = host_alloc_counted(h, w->param_count, scratch_bytes);
    else {
        e->losses = host_alloc_counted(h, (size_t)B, scratch_bytes);
        e->softmax_rows = host_alloc_counted(h, 2 * (size_t)B * w->classes, scratch_bytes);
    }
    if (cfg->stage_slots ? !e->stage_grads : !e->losses || !e->softmax_rows)
        return host_engine_out_of_memory((engine *)e, err, err_len);
    return (engine *)e;
}

/* The entry points under this build's name (chwn.h). */
#ifdef LB_REAL_DOUBLE
const chwn_products *chwn_products_of_f64(engine *e) { return chwn_of(e)->products; }

engine *chwn_create_f64(const backend *b, const chwn_products *set, const workload *w,
                        const engine_config *cfg, char *err, size_t err_len)
{
    return chwn_create_engine(b, set, w, cfg, err, err_len);
}
#else
const chwn_products *chwn_products_of_f32(engine *e) { return chwn_of(e)->products; }

engine *chwn_create_f32(const backend *b, const chwn_products *set, const workload *w,
                        const engine_config *cfg, char *err, size_t err_len)
{
    return chwn_create_engine(b, set, w, cfg, err, err_len);
}
#endif



/* Mean loss of the batch in act[L], the images' losses summed in order in
 * double as the naive backend does; dlogits, those of loss_scale times the
 * mean loss, into d_a. */
static double loss_and_dlogits(chwn_engine *e, int B)
{
    const int L = e->h.w.n_layers;
    chwn_softmax_xent(e->d_a, e->losses, NULL, e->act[L], e->h.labels, B, e->h.w.classes,
                      (real)e->loss_scale / (real)B, e->softmax_rows);
    double sum = 0.0;
    for (int b = 0; b < B; b++)
        sum += e->losses[b];
    return sum / B;
}

/* The parameter gradients divided by the loss scale (a power of two:
 * exactly), so that they are the mean loss's, as every engine hands them
 * out; an Inf or NaN stays one. */
static void unscale_gradients(chwn_engine *e)
{
    if (e->loss_scale == 1)
        return;
    real *g = e->h.TYPED(grads);
    const real f = 1 / (real)e->loss_scale;
    const size_t n = e->h.w.param_count;
#pragma omp parallel for schedule(static) num_threads(e->team.threads) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        g[i] *= f;
}

/* 1 when g[0..n) holds an Inf or NaN: x - x is 0 for every finite x and
 * NaN otherwise, a test the compiler makes a vector at a time (an early
 * exit, element by element, kept the loop scalar: more than the update's
 * own time on fp16 steps) */
static int holds_inf_or_nan(const real *g, size_t n, int threads)
{
    int bad = 0;
#pragma omp parallel for simd reduction(| : bad) schedule(static) num_threads(threads) \
    if (parallel : n > 65536)
    for (size_t i = 0; i < n; i++)
        bad |= !(g[i] - g[i] == 0);
    return bad;
}

/* The update unless the gradients overflowed (fp16: then the step is
 * skipped, Adam's t not advanced), and the loss scale adjusted. */
static void update_unless_overflow(chwn_engine *e, float grad_scale)
{
    const int overflow = e->scaling.dynamic &&
                         holds_inf_or_nan(e->h.TYPED(grads), e->h.w.param_count, e->team.threads);
    if (!overflow)
        host_update_in_ranges(&e->h, grad_scale, e->team.threads);
    lb_adjust_loss_scale(&e->loss_scale, &e->good_steps, overflow, e->scaling);
}

/* Every conv and dense layer writes its gradients whole, and every
 * parameter belongs to one of them, so nothing needs zeroing. */
static int compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    host_engine *h = &e->h;
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch))
        return -1;
    const int C = e->conv_layers, L = h->w.n_layers;
    chwn_conv_stage_forward(e, &(source){&h->train, indices, 0, NULL, 0}, batch, 0, C);
    for (int i = C; i < L; i++)
        chwn_dense_forward_layer(e, i, batch);
    const double mean = loss_and_dlogits(e, batch);
    for (int i = L - 1; i >= C; i--)
        chwn_dense_backward_layer(e, i, batch);
    chwn_conv_stage_backward(e, batch, 0, C);
    chwn_conv_stage_sum_gradients(e, batch);
    unscale_gradients(e);
    return chwn_pass_failed(e) ? -1 : host_keep_loss(h, mean, loss);
}

static int apply_update(engine *handle, float grad_scale)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    update_unless_overflow(e, grad_scale);
    return 0;
}

/* Test images [first, first + n): predicted classes and the sum of their
 * losses, added image by image in order. */
static int score(engine *handle, int first, int n, double *loss_sum)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    host_engine *h = &e->h;
    const int L = h->w.n_layers;
    chwn_conv_stage_forward(e, &(source){&h->test, NULL, first, NULL, 1}, n, 0, e->conv_layers);
    for (int i = e->conv_layers; i < L; i++)
        chwn_dense_forward_layer(e, i, n);
    chwn_softmax_xent(NULL, e->losses, h->predicted, e->act[L], h->labels, n, h->w.classes,
                      1, e->softmax_rows);
    for (int b = 0; b < n; b++)
        *loss_sum += e->losses[b];
    return chwn_pass_failed(e);
}

/* Layer by layer: the conv stage's groups go through one layer at a time
 * here, not all layers at once, so that each can be timed; the group
 * gradients' sum counts in the first layer's backward pass. The loss
 * scale is put back afterwards, as the harness puts back the model. */
static void time_steps(engine *handle, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
    chwn_engine *e = chwn_of(handle);
    e->products->enter(&e->team);
    const int C = e->conv_layers, L = e->h.w.n_layers;
    const float saved_scale = e->loss_scale;
    const int saved_good_steps = e->good_steps;
    chwn_conv_stage_forward(e, &(source){&e->h.train, indices, 0, NULL, 0}, batch, 0, 0);
    for (int r = 0; r < reps; r++) {
        chwn_join_weights(e);
        for (int i = 0; i < L; i++) {
            double t0 = now_ms();
            if (i < C)
                chwn_conv_stage_forward(e, NULL, batch, i, i + 1);
            else
                chwn_dense_forward_layer(e, i, batch);
            out->forward_ms[i] += now_ms() - t0;
        }
        double t0 = now_ms();
        loss_and_dlogits(e, batch);
        out->loss_ms += now_ms() - t0;
        for (int i = L - 1; i >= 0; i--) {
            t0 = now_ms();
            if (i < C)
                chwn_conv_stage_backward(e, batch, i, i + 1);
            else
                chwn_dense_backward_layer(e, i, batch);
            if (i == 0)
                chwn_conv_stage_sum_gradients(e, batch);
            out->backward_ms[i] += now_ms() - t0;
        }
        t0 = now_ms();
        unscale_gradients(e);
        update_unless_overflow(e, 1);
        out->update_ms += now_ms() - t0;
    }
    e->loss_scale = saved_scale;
    e->good_steps = saved_good_steps;
}

static const host_layers chwn_layers = {
    .compute_gradients = compute_gradients, .apply_update = apply_update, .score = score,
    .time_steps = time_steps, .stage_forward = chwn_stage_forward,
    .stage_backward = chwn_stage_backward};
