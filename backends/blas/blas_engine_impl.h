/* The CHWN engine of the blas and direct backends, shared by its parts:
 * blas.c (create, destroy, the training step, scoring, layer timing),
 * blas_passes.c (the conv stage group by group, the dense stage over the
 * batch), blas_stages.c (model-parallel stages) and blas_tables.c (the
 * blas and direct backend tables). The dense layers run over the whole
 * mini-batch and the convolutions group by group of images, every product
 * an OpenBLAS GEMM (a convolution over its unfolded input) in the blas
 * builds, or the direct register tiles in the direct build
 * (backends/direct/direct.h); everything else as OpenMP loops.
 * Activations are CHWN (blas_layers.h); parameters, gradients and
 * optimiser state use the flat layout of every backend, so the harness and
 * a data-parallel coordinator see the same floats as with the naive
 * backend.
 *
 * Written over `real` and built five times (backends/common/real.h): for
 * blas fp32 (sgemm), fp64 (dgemm; double parameters, gradients, optimiser
 * state and activations) and bf16 (fp32 everything, bf16 GEMM operands,
 * bf16.h), and for direct fp32 (the direct kernels, no OpenBLAS) and
 * direct bf16 (fp32 everything, the direct bf16 products of
 * backends/direct/bf16.h, each packing its operands as bf16 in the
 * engine's scratch). The plain float build holds the blas backend's table,
 * whose create picks the build for the precision asked; the direct fp32
 * build holds the direct backend's. struct engine has the same layout in
 * every build (pointers), so one destroy frees them all. */
#ifndef LB_BLAS_ENGINE_IMPL_H
#define LB_BLAS_ENGINE_IMPL_H

#include <stdint.h>

#include "backends/blas/blas.h"
#include "backends/common/host_engine.h"
#include "backends/common/real.h"
#ifdef LB_REAL_BF16
#include "backends/blas/bf16.h"
#endif

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
     * layers keep their weights with each channel's bias appended
     * (weight_bias, blas_layers.h) and each group's gradients in that form
     * (partial); their unfolded input is made a chunk at a time in d_col. */
    int conv_layers;
    real *act[WORKLOAD_MAX_LAYERS + 1], *rows, *d_rows;
    real *weight_bias[WORKLOAD_MAX_LAYERS];
    real *partial[WORKLOAD_MAX_LAYERS];
    real *d_a, *d_b;       /* gradients flowing back, in turn */
    size_t max_act;         /* floats per image of the largest activation */
    real *d_col;           /* one slot of conv scratch per thread */
    size_t d_col_per_image; /* floats of d_col scratch per image */
    /* Which input won each window of a 2x2 pool (blas_maxpool_records_
     * argmax), for its backward pass; NULL for the other layers. */
    unsigned char *argmax[WORKLOAD_MAX_LAYERS];
    /* A convolution whose output only such a pool reads hands it over, in
     * a pass through both, in the thread's block of handoff (one group's
     * worth), not in act: a block that stays in the core's caches from one
     * group to the next, where act's go out to memory and come back. */
    real *handoff;
    size_t handoff_per_image;
    real *losses, *softmax_rows;
    real *dense_scratch; /* for the dense layers' backward pass */

    /* What the forward pass keeps for the backward pass (act, rows and
     * argmax), once per micro-batch slot of a stage (one for a whole network):
     * slot_buf[slot * slot_stride(L) + ...], see use_slot. The host
     * engine owns the buffers (host_alloc_counted); use_slot points act
     * and rows at one slot's, so that the layers' code sees one set. */
    real **slot_buf;
    int slots;
    /* Stages: the gradients of a stage_backward that adds to BUF_GRADS,
     * before they are added (the layers write theirs whole). */
    real *stage_grads;
    int want_d_in; /* the stage's first layer computes its input gradient */
};

/* Each build's create and, in the plain and direct fp32 builds, destroy
 * (the tables' create picks the build; one destroy frees any). */
engine *blas_create_f32(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_f64(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_bf16(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_direct(const workload *w, const engine_config *cfg, char *err, size_t err_len);
engine *blas_create_direct_bf16(const workload *w, const engine_config *cfg, char *err,
                                size_t err_len);
void R(blas_destroy)(engine *e);

/* The parts' functions, named per build (R) so that the builds link
 * together. */
#define use_slot R(chwn_use_slot)
#define plan_for R(chwn_plan_for)
#define group_size R(chwn_group_size)
#define group_grad R(chwn_group_grad)
#define join_conv_weights R(chwn_join_conv_weights)
#define conv_stage_forward R(chwn_conv_stage_forward)
#define conv_stage_backward R(chwn_conv_stage_backward)
#define conv_stage_sum_gradients R(chwn_conv_stage_sum_gradients)
#define dense_forward_layer R(chwn_dense_forward_layer)
#define dense_backward_layer R(chwn_dense_backward_layer)

/* blas.c: points act, rows and argmax at slot `slot`'s buffers. */
void use_slot(engine *e, int slot);

/* Where a pass's input comes from: images of a data set (d, idx, first as
 * blas_gather_chwn), or the NCHW floats handed to a stage; forward_only
 * for a pass no backward pass follows (scoring), which keeps no pool
 * winners. */
typedef struct source {
    const dataset *d;
    const int32_t *idx;
    int first;
    const float *floats;
    int forward_only;
} source;

/* Who works on what: with BLAS_SPLIT_OWN the groups are GROUP_IMAGES
 * images and go to the engine's threads, each running its layers on one
 * thread; otherwise the batch is one group and each layer uses every
 * thread (OpenBLAS for the sgemm, OpenMP for the loops). */
typedef struct plan {
    int group_images, groups, group_threads, layer_threads;
} plan;

/* blas_passes.c ---------------------------------------------------------- */

plan plan_for(const engine *e, int B);
/* Images in group g of a batch of B. */
int group_size(const plan *p, int B, int g);
/* A group's block of d_a or d_b (base), from image b0. */
real *group_grad(const engine *e, real *base, int b0);
/* Each conv layer's weights and biases as the products want them, from
 * the current parameters. */
void join_conv_weights(engine *e);
/* Conv-stage layers [lo, hi) forward for the batch, the input gathered
 * from src first unless src is NULL. */
void conv_stage_forward(engine *e, const source *src, int B, int lo, int hi);
/* Conv-stage layers [lo, hi) backward, from hi - 1 down. */
void conv_stage_backward(engine *e, int B, int lo, int hi);
/* The groups' gradients summed into the flat layout. */
void conv_stage_sum_gradients(engine *e, int B);
void dense_forward_layer(engine *e, int i, int B);
void dense_backward_layer(engine *e, int i, int B);

/* blas_stages.c: the host_layers' stage entries. */
int R(blas_stage_forward)(engine *e, int slot, const float *in, int batch, float *out);
int R(blas_stage_backward)(engine *e, int slot, int batch, const float *d_out, float *d_in,
                           int accumulate);

/* After a pass: -1 after host_fail when the bf16 build could not copy a
 * product's operands (bf16.h), else 0. */
static inline int bf16_copies_failed(host_engine *h)
{
#ifdef LB_REAL_BF16
    if (blas_bf16_take_failure())
        return host_fail(h, "out of memory for the bf16 copies of a GEMM's operands");
#else
    (void)h;
#endif
    return 0;
}

#endif
