/* The CHWN engine of the blas and direct backends: the workload's dense
 * layers over the whole mini-batch and its convolutions group by group of
 * images, every product an OpenBLAS GEMM (a convolution over its unfolded
 * input) in the blas builds, or the direct register tiles in the direct
 * build (backends/direct/direct.h); everything else as OpenMP loops.
 * Activations are CHWN (blas_layers.h); parameters, gradients and optimiser
 * state use the flat layout of every backend, so the harness and a
 * data-parallel coordinator see the same floats as with the naive backend.
 *
 * Written over `real` and built five times (backends/common/real.h): for
 * blas fp32 (sgemm), fp64 (dgemm; double parameters, gradients, optimiser
 * state and activations) and bf16 (fp32 everything, bf16 GEMM operands,
 * bf16.h), and for direct fp32 (the direct kernels, no OpenBLAS) and
 * direct bf16 (fp32 everything, the direct bf16 products of
 * backends/direct/bf16.h, each packing its operands as bf16 in the
 * engine's scratch). The plain float build holds the blas backend's table,
 * whose create picks the build for the precision asked; the direct fp32
 * build holds the direct backend's. struct engine has the same layout in every build (pointers),
 * so one destroy frees them all. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LB_REAL_DIRECT
#include "backends/direct/direct.h"
#else
#include <cblas.h>

#include "backends/blas/bf16.h"
#include "backends/blas/sgemm_peak.h"
#endif
#include "backends/blas/blas.h"
#include "backends/common/host_engine.h"
#include "backends/common/optimizer.h"
#include "backends/module.h"
#include "base/clock.h"

/* Images per group in the convolution stage when the engine shares out the
 * work: a group's activations stay in a core's L2 and L3 from one layer to
 * the next. With GEMMs, small enough that a group's unfolded conv2 input
 * (2 MiB at 16) stays in a core's cache, large enough for one efficient
 * sgemm per layer. The direct tiles read the input in place, and want rows
 * (OW x images floats) long enough for their column tiles: on a Zen 1 core
 * 32 ran 5% faster per step than 16 and 3% faster than 64 (batch 128, 1
 * and 2 threads). -DLB_GROUP_IMAGES=N builds another size, to measure. */
#ifndef LB_GROUP_IMAGES
#ifdef LB_REAL_DIRECT
#define LB_GROUP_IMAGES 32
#else
#define LB_GROUP_IMAGES 16
#endif
#endif
enum { GROUP_IMAGES = LB_GROUP_IMAGES };

struct engine {
    host_engine h; /* first, so that the host_* entries find it */
    blas_team team;

    /* Layers [0, conv_layers) (convolutions, pools and ReLUs before the
     * first dense layer) run group by group: their activations act[0..
     * conv_layers] are CHWN blocks of one group after another. The dense
     * layers run over the whole batch on [features][B] matrices: rows holds
     * the conv stage's output in that form, act[i + 1] for i >= conv_layers
     * too (a stage may end in the conv stage: rows is then its output). Conv
     * layers keep their unfolded input (col; NULL for the direct ones,
     * direct.h), their weights with each channel's bias appended
     * (weight_bias, blas_layers.h) and each group's gradients in that form
     * (partial). */
    int conv_layers;
    real *act[WORKLOAD_MAX_LAYERS + 1], *rows, *d_rows;
    real *col[WORKLOAD_MAX_LAYERS], *weight_bias[WORKLOAD_MAX_LAYERS];
    real *partial[WORKLOAD_MAX_LAYERS];
    real *d_a, *d_b;       /* gradients flowing back, in turn */
    size_t max_act;         /* floats per image of the largest activation */
    real *d_col;           /* one slot of conv scratch per thread */
    size_t d_col_per_image; /* floats of d_col scratch per image */
    real *losses, *softmax_rows;
    real *dense_scratch; /* for the dense layers' backward pass */

    /* What the forward pass keeps for the backward pass (act, col, rows),
     * once per micro-batch slot of a stage (one for a whole network):
     * slot_buf[slot * slot_stride(L) + ...], see use_slot. They own the
     * buffers; use_slot points act, col and rows at one slot's, so that
     * the layers' code sees one set. */
    real **slot_buf;
    int slots;
    /* Stages: the gradients of a stage_backward that adds to BUF_GRADS,
     * before they are added (the layers write theirs whole). */
    real *stage_grads;
    int want_d_in; /* the stage's first layer computes its input gradient */
};

static const host_layers R(blas_layers);

/* Each build's create (the table's create picks one). */
engine *blas_create_f32(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_f64(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_bf16(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_direct(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_direct_bf16(const workload *w, const engine_config *cfg, char *err,
                                size_t err_len);
#ifdef LB_REAL_DIRECT
#define THIS_BACKEND direct_backend
#else
#define THIS_BACKEND blas_backend
#endif

#ifdef LB_REAL_PLAIN
static const char *parallel_name(void)
{
    switch (openblas_get_parallel()) {
    case 0:
        return "sequential";
    case 1:
        return "pthreads";
    case 2:
        return "openmp";
    }
    return "unknown threading";
}

void blas_library_info(char *buf, size_t len)
{
    /* the configuration string starts "OpenBLAS 0.3.21 ..." */
    char version[64] = "OpenBLAS";
    const char *config = openblas_get_config();
    if (config && strncmp(config, "OpenBLAS ", 9) == 0)
        snprintf(version, sizeof version, "OpenBLAS %.*s", (int)strcspn(config + 9, " "),
                 config + 9);
    snprintf(buf, len, "%s %s (%s)", version, openblas_get_corename(), parallel_name());
}

static void library_info(char *buf, size_t len) { blas_library_info(buf, len); }

/* 1024^3 is big enough for OpenBLAS to reach its speed and takes about
 * 0.1 s at 100 GFLOP/s (the tool's default, 2048^3 five times, seconds). */
static double library_peak_gflops(int threads)
{
    return blas_sgemm_peak_gflops_sized(threads, 1024, 3);
}

#endif

#if defined(LB_REAL_PLAIN) || defined(LB_REAL_DIRECT_FP32)
static void destroy(engine *e)
{
    if (!e)
        return;
    if (e->slot_buf)
        for (int j = 0; j < e->slots * (2 * e->h.w.n_layers + 2); j++)
            free(e->slot_buf[j]);
    free(e->slot_buf);
    for (int i = 0; i < WORKLOAD_MAX_LAYERS; i++) {
        free(e->partial[i]);
        free(e->weight_bias[i]);
    }
    free(e->stage_grads);
    free(e->d_rows);
    free(e->d_a);
    free(e->d_b);
    free(e->d_col);
    free(e->dense_scratch);
    free(e->losses);
    free(e->softmax_rows);
    host_engine_free(e);
}
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

/* What the blas engine asks beyond what every CPU engine asks. A stage
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
#ifdef LB_REAL_DIRECT
    for (int i = 0; i < w->n_layers; i++)
        if (w->layers[i].kind == LAYER_CONV && !direct_conv_suits(w->layers[i].kernel,
                                                                 w->layers[i].stride))
            return "strided convolutions are not supported (the direct kernels take stride 1)";
#endif
    for (int i = 0; i < w->n_layers; i++) {
        const layer *l = &w->layers[i];
        if (l->kind == LAYER_MAXPOOL && l->kernel > 15)
            return "pool windows above 15x15 are not supported";
    }
    return NULL;
}

static int group_count(int B) { return (B + GROUP_IMAGES - 1) / GROUP_IMAGES; }

/* Floats per image of d_col scratch that conv layer l needs in groups of n
 * images (the scratch of some products is not a multiple of one image's),
 * in whole cache lines so that every thread's slot starts on one. */
static size_t conv_scratch_per_image(const layer *l, int n)
{
    const size_t floats = blas_conv_scratch_floats(n, l->in.c, l->in.h, l->in.w, l->units,
                                                   l->kernel, l->stride);
    const size_t per_image = (floats + n - 1) / n, line = 64 / sizeof(real);
    return (per_image + line - 1) / line * line;
}

/* Whether conv layer l unfolds its input into col: the direct build's
 * kernels read the input itself. */
static int conv_unfolds(const layer *l)
{
    (void)l;
#ifdef LB_REAL_DIRECT
    return 0;
#else
    return 1;
#endif
}

/* A slot's buffers in slot_buf: act[0..L], then col[0..L), then rows. */
static int slot_stride(int L) { return 2 * L + 2; }

static void use_slot(engine *e, int slot)
{
    const int L = e->h.w.n_layers;
    real **buf = e->slot_buf + (size_t)slot * slot_stride(L);
    for (int i = 0; i <= L; i++)
        e->act[i] = buf[i];
    for (int i = 0; i < L; i++)
        e->col[i] = buf[L + 1 + i];
    e->rows = buf[2 * L + 1];
}

/* One slot's buffers, counted as activations; 0 or -1 out of memory. */
static int allocate_slot(engine *e, int slot)
{
    host_engine *h = &e->h;
    const workload *w = &h->w;
    const int L = w->n_layers, C = e->conv_layers;
    const size_t B = (size_t)h->cfg.batch_size;
    real **buf = e->slot_buf + (size_t)slot * slot_stride(L);
    for (int i = 0; i <= L; i++) {
        const shape3 s = i ? w->layers[i - 1].out : w->input;
        if (!(buf[i] = host_alloc_counted(h, B * shape3_size(s), &h->activation_bytes)))
            return -1;
    }
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        if (l->kind == LAYER_CONV && conv_unfolds(l) &&
            !(buf[L + 1 + i] = host_alloc_counted(
                  h, B * blas_conv_col_floats(1, l->in.c, l->in.h, l->in.w, l->kernel, l->stride),
                  &h->activation_bytes)))
            return -1;
    }
    /* the conv stage's output as a [features][B] matrix */
    if (C > 0 && !(buf[2 * L + 1] = host_alloc_counted(
                       h, B * shape3_size(w->layers[C - 1].out), &h->activation_bytes)))
        return -1;
    return 0;
}

engine *R(blas_create)(const workload *w, const engine_config *cfg, char *err, size_t err_len)
{
    engine *e = host_engine_create(&THIS_BACKEND, &R(blas_layers), sizeof *e, w, cfg,
                                   check_workload, err, err_len);
    if (!e)
        return NULL;
    host_engine *h = &e->h;
    size_t *scratch_bytes = &h->workspace_bytes;
    e->team.threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    e->team.split = BLAS_SPLIT_OWN;
    const int C = e->conv_layers = conv_stage_layers(w);
    const int B = cfg->batch_size, G = group_count(B), L = w->n_layers;
    e->slots = cfg->stage_slots > 0 ? cfg->stage_slots : 1;
    e->slot_buf = calloc((size_t)e->slots * slot_stride(L), sizeof *e->slot_buf);
    if (!e->slot_buf)
        return host_engine_out_of_memory(e, err, err_len);
    for (int s = 0; s < e->slots; s++)
        if (allocate_slot(e, s))
            return host_engine_out_of_memory(e, err, err_len);
    use_slot(e, 0);
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        if (l->kind != LAYER_CONV)
            continue;
        /* one group per GROUP_IMAGES images, or the whole batch as one */
        e->weight_bias[i] = host_alloc_counted(h, l->weight_count + l->bias_count, scratch_bytes);
        e->partial[i] = host_alloc_counted(h, (l->weight_count + l->bias_count) * G, scratch_bytes);
        if (!e->weight_bias[i] || !e->partial[i])
            return host_engine_out_of_memory(e, err, err_len);
        /* the forward pass's scratch too (blas_conv_scratch_floats); the
         * first layer passes a gradient back only in a stage, but the bf16
         * products pack their operands there in every pass; a group is
         * GROUP_IMAGES images, or the whole batch in one */
#ifdef LB_DIRECT_BF16
        const int full_scratch = 1;
#else
        const int full_scratch = i > 0 || cfg->stage_slots;
#endif
        size_t scratch = (size_t)shape3_size(l->out);
        if (full_scratch) {
            const size_t grouped = conv_scratch_per_image(l, GROUP_IMAGES < B ? GROUP_IMAGES : B);
            const size_t whole = conv_scratch_per_image(l, B);
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
        (size_t)slots * GROUP_IMAGES > (size_t)B ? (size_t)slots * GROUP_IMAGES : (size_t)B;
    /* the conv stage's output gradient as [features][B], or a stage's
     * input gradient when its first layer is dense or a ReLU after none */
    const size_t d_rows = C > 0 ? (size_t)shape3_size(w->layers[C - 1].out)
                          : cfg->stage_slots ? (size_t)shape3_size(w->input)
                                        : 0;
    if (d_rows && !(e->d_rows = host_alloc_counted(h, (size_t)B * d_rows, scratch_bytes)))
        return host_engine_out_of_memory(e, err, err_len);
    e->d_a = host_alloc_counted(h, (size_t)B * max_act, scratch_bytes);
    e->d_b = host_alloc_counted(h, (size_t)B * max_act, scratch_bytes);
    e->d_col = host_alloc_counted(h, e->d_col_per_image * slots_images, scratch_bytes);
    if (!e->d_a || !e->d_b || !e->d_col)
        return host_engine_out_of_memory(e, err, err_len);
    size_t dense_scratch = 0;
    for (int i = C; i < L; i++)
        if (w->layers[i].kind == LAYER_DENSE) {
            const size_t n = blas_dense_scratch_floats(B, shape3_size(w->layers[i].in),
                                                       w->layers[i].units);
            dense_scratch = n > dense_scratch ? n : dense_scratch;
        }
    if (dense_scratch &&
        !(e->dense_scratch = host_alloc_counted(h, dense_scratch, scratch_bytes)))
        return host_engine_out_of_memory(e, err, err_len);
    if (cfg->stage_slots) /* no loss; gradients that may be added */
        e->stage_grads = host_alloc_counted(h, w->param_count, scratch_bytes);
    else {
        e->losses = host_alloc_counted(h, (size_t)B, scratch_bytes);
        e->softmax_rows = host_alloc_counted(h, 2 * (size_t)B * w->classes, scratch_bytes);
    }
    if (cfg->stage_slots ? !e->stage_grads : !e->losses || !e->softmax_rows)
        return host_engine_out_of_memory(e, err, err_len);
    return e;
}

#if defined(LB_REAL_PLAIN) || defined(LB_REAL_DIRECT_FP32)
void blas_engine_set_split(engine *e, blas_split split) { e->team.split = split; }
#endif

/* ---------------------------------------------------------------------- */
/* The conv stage, one group of images at a time                            */

/* A group's block of a per-layer buffer whose images hold s each. */
static real *group_block(real *base, shape3 s, int b0)
{
    return base + (size_t)b0 * shape3_size(s);
}

/* A group's block of d_a or d_b, which carry gradients of every shape: a
 * fixed stride per image keeps the groups' blocks apart whichever layer
 * each group has reached. */
static real *group_grad(const engine *e, real *base, int b0)
{
    return base + (size_t)b0 * e->max_act;
}

/* A group's block of conv layer i's unfolded input (NULL when the layer
 * reads its input directly). */
static real *col_block(const engine *e, int i, int b0)
{
    const layer *l = &e->h.w.layers[i];
    return e->col[i] ? e->col[i] + (size_t)b0 *
                                       blas_conv_col_floats(1, l->in.c, l->in.h, l->in.w,
                                                            l->kernel, l->stride)
                     : NULL;
}

/* Where a pass's input comes from: images of a data set (d, idx, first as
 * blas_gather_chwn), or the NCHW floats handed to a stage. */
typedef struct source {
    const dataset *d;
    const int32_t *idx;
    int first;
    const float *floats;
} source;

/* Images b0..b0+n of the batch into their block of act[0] (the conv
 * stage), or into the [features][B] matrix when the first layer is dense
 * or a ReLU before none. */
static void gather(engine *e, const source *src, int b0, int n, int ld, int threads)
{
    const size_t F = (size_t)shape3_size(e->h.w.input);
    real *x = e->conv_layers ? e->act[0] + (size_t)b0 * F : e->act[0] + b0;
    if (src->floats)
        blas_chwn_from_nchw(x, ld, src->floats + (size_t)b0 * F, F, n, threads);
    else
        blas_gather_chwn(x, ld, src->d->images, F, src->idx ? src->idx + b0 : NULL,
                         src->first + b0, n, threads);
}

/* Conv-stage layer i forward for the n images from b0; the stage's last
 * layer also hands its output to the dense stage as columns of `rows`. */
static void group_forward_layer(engine *e, int i, int B, int b0, int n, real *scratch,
                                int threads)
{
    const layer *l = &e->h.w.layers[i];
    const real *in = group_block(e->act[i], l->in, b0);
    real *out = group_block(e->act[i + 1], l->out, b0);
    switch (l->kind) {
    case LAYER_CONV:
        blas_conv_forward(out, col_block(e, i, b0), in,
                          e->weight_bias[i], scratch, n, l->in.c, l->in.h, l->in.w, l->units, l->kernel,
                          l->stride, threads);
        break;
    case LAYER_MAXPOOL:
        blas_maxpool_forward(out, in, n, l->in.c, l->in.h, l->in.w, l->kernel, l->stride,
                             threads);
        break;
    case LAYER_RELU:
        blas_relu_forward(out, in, (size_t)n * shape3_size(l->in), threads);
        break;
    case LAYER_DENSE:
        break; /* not in the conv stage */
    }
    if (i == e->conv_layers - 1)
        blas_rows_from_group(e->rows, B, b0, out, shape3_size(l->out), n);
}

/* Conv-stage layer i backward for group g (the n images from b0). Layer
 * i's output gradient is in d_a when an even number of layers follow it in
 * the stage, else in d_b; its input gradient goes to the other one. The
 * stage's last layer first takes its gradient from the columns of d_rows.
 * Weight and bias gradients go to the group's slot of partial[i]. */
static void group_backward_layer(engine *e, int i, int B, int g, int b0, int n, real *d_col,
                                 int threads)
{
    const layer *l = &e->h.w.layers[i];
    const int after = e->conv_layers - 1 - i;
    real *d = group_grad(e, after % 2 ? e->d_b : e->d_a, b0);
    real *d_in =
        i > 0 || e->want_d_in ? group_grad(e, after % 2 ? e->d_a : e->d_b, b0) : NULL;
    if (after == 0)
        blas_group_from_rows(d, e->d_rows, B, b0, shape3_size(l->out), n);
    switch (l->kind) {
    case LAYER_CONV: {
        real *part = e->partial[i] + (size_t)g * (l->weight_count + l->bias_count);
        blas_conv_backward_params(part, d, col_block(e, i, b0),
                                  group_block(e->act[i], l->in, b0), d_col, n, l->in.c,
                                  l->in.h, l->in.w, l->units, l->kernel, l->stride, threads);
        if (d_in)
            blas_conv_backward_data(d_in, d_col, d, e->weight_bias[i], n, l->in.c, l->in.h,
                                    l->in.w, l->units, l->kernel, l->stride, threads);
        break;
    }
    case LAYER_MAXPOOL:
        if (d_in)
            blas_maxpool_backward(d_in, d, group_block(e->act[i], l->in, b0),
                                  group_block(e->act[i + 1], l->out, b0), n, l->in.c, l->in.h,
                                  l->in.w, l->kernel, l->stride, threads);
        break;
    case LAYER_RELU:
        if (d_in)
            blas_relu_backward(d_in, d, group_block(e->act[i + 1], l->out, b0),
                               (size_t)n * shape3_size(l->in), threads);
        break;
    case LAYER_DENSE:
        break; /* not in the conv stage */
    }
}

/* Who works on what: with BLAS_SPLIT_OWN the groups are GROUP_IMAGES
 * images and go to the engine's threads, each running its layers on one
 * thread; otherwise the batch is one group and each layer uses every
 * thread (OpenBLAS for the sgemm, OpenMP for the loops). */
typedef struct plan {
    int group_images, groups, group_threads, layer_threads;
} plan;

static plan plan_for(const engine *e, int B)
{
    plan p;
    const int own = e->team.split == BLAS_SPLIT_OWN;
    p.group_images = own ? GROUP_IMAGES : B;
    p.groups = (B + p.group_images - 1) / p.group_images;
    p.group_threads = !own || p.groups == 1        ? 1
                      : e->team.threads < p.groups ? e->team.threads
                                                   : p.groups;
    p.layer_threads = own ? 1 : e->team.threads;
    return p;
}

static int group_size(const plan *p, int B, int g)
{
    const int b0 = g * p->group_images;
    return B - b0 < p->group_images ? B - b0 : p->group_images;
}

/* This thread's slot of col2im scratch. */
static real *d_col_slot(const engine *e, const plan *p)
{
    const int slot = p->group_threads > 1 ? omp_get_thread_num() : 0;
    return e->d_col + (size_t)slot * GROUP_IMAGES * e->d_col_per_image;
}

/* Each conv layer's weights and biases as the GEMMs want them, from the
 * current parameters. */
static void join_conv_weights(engine *e)
{
    for (int i = 0; i < e->conv_layers; i++) {
        const layer *l = &e->h.w.layers[i];
        if (l->kind == LAYER_CONV)
            blas_join_weight_bias(e->weight_bias[i], e->h.TYPED(params) + l->weight_offset,
                                  e->h.TYPED(params) + l->bias_offset, l->units,
                                  (int)(l->weight_count / l->bias_count));
    }
}

/* Conv-stage layers [lo, hi) forward for the batch, group after group (a
 * whole pass in one parallel region, each group's data still in its
 * thread's cache from the layer before), the input gathered from src
 * first unless src is NULL; a workload without a conv stage just gathers
 * it. */
static void conv_stage_forward(engine *e, const source *src, int B, int lo, int hi)
{
    if (e->conv_layers == 0) {
        if (src)
            gather(e, src, 0, B, B, e->team.threads);
        return;
    }
    if (src) /* a new pass: the parameters may have changed */
        join_conv_weights(e);
    const plan p = plan_for(e, B);
#pragma omp parallel for schedule(dynamic, 1)                                                 \
    num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = group_size(&p, B, g);
        if (src)
            gather(e, src, b0, n, n, p.layer_threads);
        for (int i = lo; i < hi; i++)
            group_forward_layer(e, i, B, b0, n, d_col_slot(e, &p), p.layer_threads);
    }
}

/* Conv-stage layers [lo, hi) backward, from hi - 1 down. */
static void conv_stage_backward(engine *e, int B, int lo, int hi)
{
    const plan p = plan_for(e, B);
#pragma omp parallel for schedule(dynamic, 1)                                                 \
    num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = group_size(&p, B, g);
        real *d_col = d_col_slot(e, &p);
        for (int i = hi - 1; i >= lo; i--)
            group_backward_layer(e, i, B, g, b0, n, d_col, p.layer_threads);
    }
}

/* The groups' [K][R + 1] gradients, summed in group order so that the sum
 * does not depend on which thread did which group, and split into the
 * flat layout's weights [K][R] and bias [K]. */
static void conv_stage_sum_gradients(engine *e, int B)
{
    const plan p = plan_for(e, B);
    for (int i = 0; i < e->conv_layers; i++) {
        const layer *l = &e->h.w.layers[i];
        if (l->kind != LAYER_CONV)
            continue;
        const int K = l->units, R = (int)(l->weight_count / l->bias_count);
        const size_t count = l->weight_count + l->bias_count;
        real *dw = e->h.TYPED(grads) + l->weight_offset, *db = e->h.TYPED(grads) + l->bias_offset;
        for (int k = 0; k < K; k++) {
            const real *src = e->partial[i] + (size_t)k * (R + 1);
            memcpy(dw + (size_t)k * R, src, sizeof(real) * R);
            db[k] = src[R];
        }
        for (int g = 1; g < p.groups; g++)
            for (int k = 0; k < K; k++) {
                const real *src = e->partial[i] + g * count + (size_t)k * (R + 1);
                real *w = dw + (size_t)k * R;
                for (int r = 0; r < R; r++)
                    w[r] += src[r];
                db[k] += src[R];
            }
    }
}

/* ---------------------------------------------------------------------- */
/* The dense stage, over the whole batch                                    */

/* The [features][B] input of layer i >= conv_layers. */
static const real *dense_input(const engine *e, int i)
{
    return i == e->conv_layers && e->conv_layers > 0 ? e->rows : e->act[i];
}

static void dense_forward_layer(engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const real *in = dense_input(e, i);
    if (l->kind == LAYER_DENSE)
        blas_dense_forward(e->act[i + 1], in, e->h.TYPED(params) + l->weight_offset,
                           e->h.TYPED(params) + l->bias_offset, e->dense_scratch, B,
                           shape3_size(l->in), l->units, &e->team);
    else /* a ReLU */
        blas_relu_forward(e->act[i + 1], in, (size_t)B * shape3_size(l->in), e->team.threads);
}

/* Layer i's output gradient is in d_a when an even number of layers follow
 * it (the loss, or a stage's d_out, writes the last one's into d_a), else
 * in d_b; its input gradient goes to the other one, or to d_rows for the
 * first dense layer after a conv stage and a stage's first layer when its
 * input gradient is wanted, else nowhere for the first layer. */
static void dense_backward_layer(engine *e, int i, int B)
{
    const layer *l = &e->h.w.layers[i];
    const int after = e->h.w.n_layers - 1 - i;
    const real *d = after % 2 ? e->d_b : e->d_a;
    real *d_in = i == e->conv_layers ? (i > 0 || e->want_d_in ? e->d_rows : NULL)
                 : after % 2           ? e->d_a
                                       : e->d_b;
    if (l->kind == LAYER_DENSE)
        blas_dense_backward(e->h.TYPED(grads) + l->weight_offset, e->h.TYPED(grads) + l->bias_offset, d_in, d,
                            dense_input(e, i), e->h.TYPED(params) + l->weight_offset,
                            e->dense_scratch, B, shape3_size(l->in), l->units, &e->team);
    else if (d_in)
        blas_relu_backward(d_in, d, e->act[i + 1], (size_t)B * shape3_size(l->in),
                           e->team.threads);
}

/* Mean loss of the batch in act[L], the images' losses summed in order in
 * double as the naive backend does; dlogits into d_a. */
static double loss_and_dlogits(engine *e, int B)
{
    const int L = e->h.w.n_layers;
    blas_softmax_xent(e->d_a, e->losses, NULL, e->act[L], e->h.labels, B, e->h.w.classes,
                      1 / (real)B, e->softmax_rows);
    double sum = 0.0;
    for (int b = 0; b < B; b++)
        sum += e->losses[b];
    return sum / B;
}

/* Every conv and dense layer writes its gradients whole, and every
 * parameter belongs to one of them, so nothing needs zeroing. */
static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    blas_team_enter(&e->team);
    host_engine *h = &e->h;
    if (host_check_batch(h, batch) || host_take_labels(h, &h->train, indices, 0, batch))
        return -1;
    const int C = e->conv_layers, L = h->w.n_layers;
    conv_stage_forward(e, &(source){&h->train, indices, 0, NULL}, batch, 0, C);
    for (int i = C; i < L; i++)
        dense_forward_layer(e, i, batch);
    const double mean = loss_and_dlogits(e, batch);
    for (int i = L - 1; i >= C; i--)
        dense_backward_layer(e, i, batch);
    conv_stage_backward(e, batch, 0, C);
    conv_stage_sum_gradients(e, batch);
#ifdef LB_REAL_BF16
    if (blas_bf16_take_failure())
        return host_fail(h, "out of memory for the bf16 copies of a GEMM's operands");
#endif
    h->last_loss = mean;
    if (loss)
        *loss = (float)mean;
    return 0;
}

/* The shared update, cut into ranges that the threads take as they come
 * free; each element's update is independent, so the result is the same
 * for any cut. */
static void update(engine *e, float grad_scale)
{
    enum { RANGE = 16384 };
    host_engine *h = &e->h;
    const size_t n = h->w.param_count;
    const int ranges = (int)((n + RANGE - 1) / RANGE);
    h->step++;
#pragma omp parallel for schedule(dynamic, 1) num_threads(e->team.threads) if (ranges > 1)
    for (int r = 0; r < ranges; r++) {
        const size_t lo = (size_t)r * RANGE, hi = lo + RANGE < n ? lo + RANGE : n;
        optimizer_update_range(&h->w, &h->cfg.opt, h->TYPED(params), h->TYPED(grads), grad_scale,
                               h->TYPED(opt_state), h->step, lo, hi);
    }
}

static int apply_update(engine *e, float grad_scale)
{
    blas_team_enter(&e->team);
    update(e, grad_scale);
    return 0;
}

/* Test images [first, first + n): predicted classes and the sum of their
 * losses, added image by image in order. */
static int score(engine *e, int first, int n, double *loss_sum)
{
    blas_team_enter(&e->team);
    host_engine *h = &e->h;
    const int L = h->w.n_layers;
    conv_stage_forward(e, &(source){&h->test, NULL, first, NULL}, n, 0, e->conv_layers);
    for (int i = e->conv_layers; i < L; i++)
        dense_forward_layer(e, i, n);
    blas_softmax_xent(NULL, e->losses, h->predicted, e->act[L], h->labels, n, h->w.classes,
                      1, e->softmax_rows);
    for (int b = 0; b < n; b++)
        *loss_sum += e->losses[b];
#ifdef LB_REAL_BF16
    if (blas_bf16_take_failure())
        return host_fail(h, "out of memory for the bf16 copies of a GEMM's operands");
#endif
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Model-parallel stages                                                    */

/* The stage's output as [features][B]: the dense stage's last activation,
 * or the conv stage's output matrix when the stage has no dense part. */
static real *stage_output(engine *e)
{
    return e->conv_layers == e->h.w.n_layers ? e->rows : e->act[e->h.w.n_layers];
}

/* The slot's input (NCHW floats) through the stage's layers into out. */
static int stage_forward(engine *e, int slot, const float *in, int batch, float *out)
{
    blas_team_enter(&e->team);
    host_engine *h = &e->h;
    const int C = e->conv_layers, L = h->w.n_layers;
    use_slot(e, slot);
    conv_stage_forward(e, &(source){NULL, NULL, 0, in}, batch, 0, C);
    for (int i = C; i < L; i++)
        dense_forward_layer(e, i, batch);
    blas_nchw_from_chwn(out, stage_output(e), batch, shape3_size(h->w.layers[L - 1].out), batch,
                        e->team.threads);
#ifdef LB_REAL_BF16
    if (blas_bf16_take_failure())
        return host_fail(h, "out of memory for the bf16 copies of a GEMM's operands");
#endif
    return 0;
}

/* The first layer's input gradient, left by the backward pass as CHWN
 * group blocks (conv stage) or as [features][B] in d_rows, into d_in. */
static void stage_input_gradient(engine *e, int B, float *d_in)
{
    const int C = e->conv_layers, F = shape3_size(e->h.w.input);
    if (C == 0) {
        blas_nchw_from_chwn(d_in, e->d_rows, B, F, B, e->team.threads);
        return;
    }
    real *base = (C - 1) % 2 ? e->d_a : e->d_b; /* as group_backward_layer */
    const plan p = plan_for(e, B);
#pragma omp parallel for schedule(static) num_threads(p.group_threads) if (p.group_threads > 1)
    for (int g = 0; g < p.groups; g++) {
        const int b0 = g * p.group_images, n = group_size(&p, B, g);
        blas_nchw_from_chwn(d_in + (size_t)b0 * F, group_grad(e, base, b0), n, F, n,
                            p.layer_threads);
    }
}

/* The layers write their gradients whole; to add them to BUF_GRADS they
 * are written to stage_grads first. */
static int stage_backward(engine *e, int slot, int batch, const float *d_out, float *d_in,
                          int accumulate)
{
    blas_team_enter(&e->team);
    host_engine *h = &e->h;
    const int C = e->conv_layers, L = h->w.n_layers;
    use_slot(e, slot);
    join_conv_weights(e); /* the parameters may have changed since the forward pass */
    real *grads = h->TYPED(grads);
    if (accumulate)
        h->TYPED(grads) = e->stage_grads;
    e->want_d_in = d_in != NULL;
    blas_chwn_from_nchw(C == L ? e->d_rows : e->d_a, batch, d_out,
                        shape3_size(h->w.layers[L - 1].out), batch, e->team.threads);
    for (int i = L - 1; i >= C; i--)
        dense_backward_layer(e, i, batch);
    conv_stage_backward(e, batch, 0, C);
    conv_stage_sum_gradients(e, batch);
    if (d_in)
        stage_input_gradient(e, batch, d_in);
    e->want_d_in = 0;
    if (accumulate) {
        h->TYPED(grads) = grads;
        const real *add = e->stage_grads;
        const long n = (long)h->w.param_count;
#pragma omp parallel for simd schedule(static) num_threads(e->team.threads) if (n >= 1 << 16)
        for (long j = 0; j < n; j++)
            grads[j] += add[j];
    }
#ifdef LB_REAL_BF16
    if (blas_bf16_take_failure())
        return host_fail(h, "out of memory for the bf16 copies of a GEMM's operands");
#endif
    return 0;
}

static void time_steps(engine *e, const int32_t *indices, int batch, int reps,
                       layer_times *out);

static const host_layers R(blas_layers) = {
    .compute_gradients = compute_gradients,
    .apply_update = apply_update,
    .score = score,
    .time_steps = time_steps,
    .stage_forward = stage_forward,
    .stage_backward = stage_backward,
};

#if defined(LB_REAL_PLAIN) || defined(LB_REAL_DIRECT_FP32)
static void placement(engine *e, int *threads, int *devices, int *replicas)
{
    *threads = e->team.threads;
    *devices = 0;
    *replicas = 1;
}
#endif

#ifdef LB_REAL_DIRECT_FP32
/* Whether bf16 runs: the build has the products (bf16.mk) and the CPU
 * AVX512_BF16; else 0 and the reason. */
static int bf16_runs(char *why, size_t why_len)
{
#ifdef HAVE_DIRECT_BF16
    return direct_bf16_supported(why, why_len);
#else
    snprintf(why, why_len, "bf16 products left out of this build (the compiler has no "
                           "-mavx512bf16)");
    return 0;
#endif
}

/* The fp32 kernels this engine was created with (direct_choose, at
 * create); bf16 runs the one AVX512_BF16 build of its products, whatever
 * LENET_BENCH_DIRECT_ISA says. */
static void describe(engine *e, char *buf, size_t len)
{
    const int threads = e->team.threads;
    if (e->h.cfg.precision == PREC_BF16) {
        snprintf(buf, len,
                 "bf16 (bf16 products (vdpbf16ps), fp32 master weights), %d thread%s, ISA "
                 "avx512_bf16 (AVX-512 with AVX512_BF16)",
                 threads, threads == 1 ? "" : "s");
        return;
    }
    const direct_kernels *k = direct_active();
    snprintf(buf, len, "%s (direct register tiles: %s), %d thread%s, ISA %s (%s)",
             precision_name(e->h.cfg.precision), k->description, threads,
             threads == 1 ? "" : "s", k->isa,
             getenv("LENET_BENCH_DIRECT_ISA") && *getenv("LENET_BENCH_DIRECT_ISA")
                 ? "forced by LENET_BENCH_DIRECT_ISA"
                 : "the best this CPU runs");
}

static void library_info(char *buf, size_t len)
{
    const direct_kernels *k = direct_active();
    char why[256];
    snprintf(buf, len, "direct kernels %s (%s); bf16 products (vdpbf16ps): %s", k->isa,
             k->description, bf16_runs(why, sizeof why) ? "available" : "not on this CPU");
}

/* A forced instruction set the CPU lacks makes fp32 not runnable, a CPU
 * without AVX512_BF16 (or a build without the products) bf16, with the
 * reason. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    if (p == PREC_BF16)
        return bf16_runs(why, why_len);
    return direct_choose(why, why_len) != NULL;
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    char why[256];
    if (cfg && cfg->precision == PREC_BF16) {
        if (!bf16_runs(why, sizeof why)) {
            snprintf(err, err_len, "direct: %s", why);
            return NULL;
        }
#ifdef HAVE_DIRECT_BF16
        return blas_create_direct_bf16(w, cfg, err, err_len);
#endif
    }
    if (!direct_choose(why, sizeof why)) {
        snprintf(err, err_len, "direct: %s", why);
        return NULL;
    }
    return blas_create_direct(w, cfg, err, err_len);
}
#endif

#ifdef LB_REAL_PLAIN
static void describe(engine *e, char *buf, size_t len)
{
    static const char *const gemms[PRECISION_COUNT] = {
        [PREC_FP32] = "sgemm",
        [PREC_BF16] = "sbgemm on bf16 operands, fp32 sums",
        [PREC_FP64] = "dgemm"};
    const precision p = e->h.cfg.precision;
    snprintf(buf, len, "%s (%s), %d thread%s, OpenBLAS %s %s, work split by %s",
             precision_name(p), gemms[p] ? gemms[p] : "?", e->team.threads,
             e->team.threads == 1 ? "" : "s", parallel_name(), openblas_get_corename(),
             e->team.split == BLAS_SPLIT_OWN ? "the engine" : "OpenBLAS");
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    const precision p = cfg ? cfg->precision : PREC_FP32;
    char why[256];
    if (p == PREC_BF16 && !blas_bf16_available(why, sizeof why)) {
        snprintf(err, err_len, "blas: %s", why);
        return NULL;
    }
    return p == PREC_FP64   ? blas_create_f64(w, cfg, err, err_len)
           : p == PREC_BF16 ? blas_create_bf16(w, cfg, err, err_len)
                            : blas_create_f32(w, cfg, err, err_len);
}

/* bf16 needs the CPU's AVX512_BF16 and an OpenBLAS with cblas_sbgemm. */
static int probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    (void)ctx;
    return p != PREC_BF16 || blas_bf16_available(why, why_len);
}
#endif

/* Layer by layer: the conv stage's groups go through one layer at a time
 * here, not all layers at once, so that each can be timed; the group
 * gradients' sum counts in the first layer's backward pass. */
static void time_steps(engine *e, const int32_t *indices, int batch, int reps,
                       layer_times *out)
{
    blas_team_enter(&e->team);
    const int C = e->conv_layers, L = e->h.w.n_layers;
    conv_stage_forward(e, &(source){&e->h.train, indices, 0, NULL}, batch, 0, 0);
    for (int r = 0; r < reps; r++) {
        join_conv_weights(e);
        for (int i = 0; i < L; i++) {
            double t0 = now_ms();
            if (i < C)
                conv_stage_forward(e, NULL, batch, i, i + 1);
            else
                dense_forward_layer(e, i, batch);
            out->forward_ms[i] += now_ms() - t0;
        }
        double t0 = now_ms();
        loss_and_dlogits(e, batch);
        out->loss_ms += now_ms() - t0;
        for (int i = L - 1; i >= 0; i--) {
            t0 = now_ms();
            if (i < C)
                conv_stage_backward(e, batch, i, i + 1);
            else
                dense_backward_layer(e, i, batch);
            if (i == 0)
                conv_stage_sum_gradients(e, batch);
            out->backward_ms[i] += now_ms() - t0;
        }
        t0 = now_ms();
        update(e, 1);
        out->update_ms += now_ms() - t0;
    }
}

/* The entries the blas and direct tables share: each build's own create
 * and layers, the host engine's bookkeeping. */
#define CHWN_ENGINE_ENTRIES                                                                        \
    HOST_ENGINE_ENTRIES, .probe_precision = probe_precision, .create = create,                    \
    .destroy = destroy, .compute_gradients = host_compute_gradients,                              \
    .apply_update = host_apply_update, .placement = placement, .describe = describe,              \
    .library_info = library_info

#ifdef LB_REAL_PLAIN
const backend blas_backend = {
    .name = "blas",
    .summary = "OpenBLAS GEMMs (convolutions over unfolded inputs, dense layers over the "
               "whole batch) + OpenMP loops, fp32, fp64 or bf16",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_FP64 | 1u << PREC_BF16,
    CHWN_ENGINE_ENTRIES,
    .library_peak_gflops = library_peak_gflops,
};

LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    if (strcmp(table, "backend") == 0)
        return &blas_backend;
    if (strcmp(table, "kernel_probe") == 0)
        return &blas_kernel_probe_table;
    return NULL;
}
#endif

#ifdef LB_REAL_DIRECT_FP32
const backend direct_backend = {
    .name = "direct",
    .summary = "the project's own register tiles (no library), vector width and tiles "
               "chosen per CPU when it runs (AVX-512, AVX2, generic) + OpenMP loops, fp32; "
               "bf16 products (vdpbf16ps, AVX512_BF16) with fp32 master weights",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_BF16,
    CHWN_ENGINE_ENTRIES,
};

LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    if (strcmp(table, "backend") == 0)
        return &direct_backend;
    return NULL;
}
#endif
