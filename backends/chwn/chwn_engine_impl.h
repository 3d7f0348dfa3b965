/* The CHWN engine (chwn.h) inside, shared by its parts: chwn_engine.c
 * (create, destroy, the training step, scoring, layer timing),
 * chwn_passes.c (the conv stage group by group, the dense stage over the
 * batch) and chwn_stages.c (model-parallel stages). The dense layers run
 * over the whole mini-batch and the convolutions group by group of images,
 * every product through the engine's product set (chwn_products.h);
 * everything else as OpenMP loops (chwn_layers.h).
 *
 * Written over `real` and built twice (backends/common/real.h): float
 * (fp32, and the bf16 sets, whose activations and master weights stay
 * fp32) and double (fp64: double parameters, gradients, optimiser state
 * and activations). struct chwn_engine has the same layout in both builds
 * (pointers), so one destroy frees either. The functions below link into
 * one module from both builds, so each is the symbol with the build's
 * suffix (chwn_use_slot_f32, chwn_use_slot_f64, both spelled out below),
 * and only that suffix. */
#ifndef LB_CHWN_ENGINE_IMPL_H
#define LB_CHWN_ENGINE_IMPL_H

#include <stdint.h>

#include "backends/chwn/chwn.h"
#include "backends/chwn/chwn_layers.h"
#include "backends/chwn/chwn_products.h"
#include "backends/common/host_engine.h"
#include "backends/common/loss_scale.h"
#include "backends/common/real.h"

typedef struct chwn_engine chwn_engine;

struct chwn_engine {
    host_engine h; /* first, so that the host_* entries find it */
    chwn_team team;
    const char *arithmetic;        /* the product set's, read by every real type */
    const chwn_products *products; /* chosen at create */
    int group_images;              /* the product set's */

    /* Layers [0, conv_layers) (convolutions, pools and ReLUs before the
     * first dense layer) run group by group: their activations act[0..
     * conv_layers] are CHWN blocks of one group after another. The dense
     * layers run over the whole batch on [features][B] matrices: rows holds
     * the conv stage's output in that form, act[i + 1] for i >= conv_layers
     * too (a stage may end in the conv stage: rows is then its output). Conv
     * layers keep their weights with each channel's bias appended
     * (weight_bias, chwn_layers.h; then the set's packed copy, if any) and
     * each group's gradients in that form (partial); the products' scratch
     * is d_col. */
    int conv_layers;
    real *act[WORKLOAD_MAX_LAYERS + 1], *rows, *d_rows;
    real *weight_bias[WORKLOAD_MAX_LAYERS];
    real *partial[WORKLOAD_MAX_LAYERS];
    real *d_a, *d_b;        /* gradients flowing back, in turn */
    size_t max_act;         /* floats per image of the largest activation */
    real *d_col;            /* one slot of conv scratch per thread */
    size_t d_col_per_image; /* floats of d_col scratch per image */
    /* Which input won each window of a 2x2 pool (chwn_maxpool_records_
     * argmax), for its backward pass; NULL for the other layers. */
    unsigned char *argmax[WORKLOAD_MAX_LAYERS];
    /* A convolution whose output only such a pool reads hands it over, in
     * a pass through both, in the thread's block of handoff (one group's
     * worth), not in act: a block that stays in the core's caches from one
     * group to the next, where act's go out to memory and come back. */
    real *handoff;
    size_t handoff_per_image;
    real *losses, *softmax_rows;
    real *dense_scratch; /* for the dense layers' products */
    /* The set's packed copy of each dense layer's weights (its
     * dense_pack_weights), else NULL */
    real *dense_packed[WORKLOAD_MAX_LAYERS];

    /* What the forward pass keeps for the backward pass (act, rows and
     * argmax), once per micro-batch slot of a stage (one for a whole network):
     * slot_buf[slot * chwn_slot_stride(L) + ...], see chwn_use_slot. The host
     * engine owns the buffers (host_alloc_counted); use_slot points act
     * and rows at one slot's, so that the layers' code sees one set. */
    real **slot_buf;
    int slots;
    /* Stages: the gradients of a stage_backward that adds to BUF_GRADS,
     * before they are added (the layers write theirs whole). */
    real *stage_grads;
    int want_d_in; /* the stage's first layer computes its input gradient */

    /* fp16 (backends/common/loss_scale.h): the loss's gradient is scaled
     * by loss_scale, the parameter gradients divided by it before they
     * are handed out, and a step whose gradients overflowed skipped; no
     * scaling (1) in the other precisions. */
    loss_scaling scaling;
    float loss_scale;
    int good_steps;
};

static inline chwn_engine *chwn_of(engine *e) { return (chwn_engine *)e; }

#define chwn_use_slot REAL_NAME(chwn_use_slot_f32, chwn_use_slot_f64)
#define chwn_plan_for REAL_NAME(chwn_plan_for_f32, chwn_plan_for_f64)
#define chwn_group_size REAL_NAME(chwn_group_size_f32, chwn_group_size_f64)
#define chwn_group_grad REAL_NAME(chwn_group_grad_f32, chwn_group_grad_f64)
#define chwn_join_weights REAL_NAME(chwn_join_weights_f32, chwn_join_weights_f64)
#define chwn_conv_stage_forward REAL_NAME(chwn_conv_stage_forward_f32, chwn_conv_stage_forward_f64)
#define chwn_conv_stage_backward                                                                   \
    REAL_NAME(chwn_conv_stage_backward_f32, chwn_conv_stage_backward_f64)
#define chwn_conv_stage_sum_gradients                                                              \
    REAL_NAME(chwn_conv_stage_sum_gradients_f32, chwn_conv_stage_sum_gradients_f64)
#define chwn_dense_forward_layer                                                                   \
    REAL_NAME(chwn_dense_forward_layer_f32, chwn_dense_forward_layer_f64)
#define chwn_dense_backward_layer                                                                  \
    REAL_NAME(chwn_dense_backward_layer_f32, chwn_dense_backward_layer_f64)
#define chwn_stage_forward REAL_NAME(chwn_stage_forward_f32, chwn_stage_forward_f64)
#define chwn_stage_backward REAL_NAME(chwn_stage_backward_f32, chwn_stage_backward_f64)
#define chwn_pass_failed REAL_NAME(chwn_pass_failed_f32, chwn_pass_failed_f64)

/* A slot's buffers in slot_buf: act[0..L], rows, then argmax[0..L) (NULL
 * for a layer that records none). */
static inline int chwn_slot_stride(int L) { return 2 * L + 2; }

/* chwn_passes.c: points act, rows and argmax at slot `slot`'s buffers. */
void chwn_use_slot(chwn_engine *e, int slot);
/* After a pass: -1 after host_fail when a product could not run (the
 * set's take_failure), else 0. */
int chwn_pass_failed(chwn_engine *e);

/* Where a pass's input comes from: images of a data set (d, idx, first as
 * chwn_gather), or the NCHW floats handed to a stage; forward_only
 * for a pass no backward pass follows (scoring), which keeps no pool
 * winners. */
typedef struct source {
    const dataset *d;
    const int32_t *idx;
    int first;
    const float *floats;
    int forward_only;
} source;

/* Who works on what: with CHWN_SPLIT_OWN the groups are group_images
 * images and go to the engine's threads, each running its layers on one
 * thread; otherwise the batch is one group and each layer uses every
 * thread (the product set's for the products, OpenMP for the loops). */
typedef struct plan {
    int group_images, groups, group_threads, layer_threads;
} plan;

/* chwn_passes.c ---------------------------------------------------------- */

plan chwn_plan_for(const chwn_engine *e, int B);
/* Images in group g of a batch of B. */
int chwn_group_size(const plan *p, int B, int g);
/* A group's block of d_a or d_b (base), from image b0. */
real *chwn_group_grad(const chwn_engine *e, real *base, int b0);
/* Each conv layer's weights and biases as the products want them, and the
 * set's packed copies of the dense weights, from the current parameters. */
void chwn_join_weights(chwn_engine *e);
/* Conv-stage layers [lo, hi) forward for the batch, the input gathered
 * from src first unless src is NULL. */
void chwn_conv_stage_forward(chwn_engine *e, const source *src, int B, int lo, int hi);
/* Conv-stage layers [lo, hi) backward, from hi - 1 down. */
void chwn_conv_stage_backward(chwn_engine *e, int B, int lo, int hi);
/* The groups' gradients summed into the flat layout. */
void chwn_conv_stage_sum_gradients(chwn_engine *e, int B);
void chwn_dense_forward_layer(chwn_engine *e, int i, int B);
void chwn_dense_backward_layer(chwn_engine *e, int i, int B);

/* chwn_stages.c: the host_layers' stage entries. */
int chwn_stage_forward(engine *e, int slot, const float *in, int batch, float *out);
int chwn_stage_backward(engine *e, int slot, int batch, const float *d_out, float *d_in,
                        int accumulate);

#endif
