/* What every CPU engine shares, so that a CPU backend writes only its
 * layers: the flat buffers the contract exposes (parameters, gradients,
 * optimiser state), the bound data sets, the error text, the checks of a
 * configuration, a batch and its images, and the contract's entries that do
 * not depend on how the layers are computed.
 *
 * A CPU engine embeds a host_engine as the first member of its struct
 * engine, so that a pointer to the engine is a pointer to its host_engine
 * (host_of) and the host_* entries below go straight into its backend's
 * tables. What is left to the backend: create (host_engine_create first),
 * destroy (host_engine_free last, which also frees every buffer
 * host_alloc_counted handed out), compute_gradients, apply_update, and
 * the two callbacks of host_layers that evaluation and layer profiling
 * call. */
#ifndef LB_HOST_ENGINE_H
#define LB_HOST_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backends/engine.h"

typedef struct host_layers {
    /* For backends whose compute_gradients and apply_update entries are
     * host_compute_gradients and host_apply_update: the engine's own, at
     * its precision (NULL otherwise). */
    int (*compute_gradients)(engine *e, const int32_t *indices, int batch, float *loss);
    int (*apply_update)(engine *e, float grad_scale);
    /* Forward pass of test images [first, first + n) (their labels are in
     * labels): each image's predicted class into predicted, the images'
     * cross-entropies added to *loss_sum. 0, or -1 after host_fail. */
    int (*score)(engine *e, int first, int n, double *loss_sum);
    /* `reps` training steps on the batch `indices` (its labels are in
     * labels), each layer's forward and backward time, the loss's and the
     * update's added to out, in milliseconds. */
    void (*time_steps)(engine *e, const int32_t *indices, int batch, int reps,
                       layer_times *out);
    /* Model parallelism (NULL: the backend offers no stages): the
     * contract's stage_forward and stage_backward, called by
     * host_stage_forward and host_stage_backward once they have checked
     * the slot, the batch and the buffers; batch is the slot's. */
    int (*stage_forward)(engine *e, int slot, const float *in, int batch, float *out);
    int (*stage_backward)(engine *e, int slot, int batch, const float *d_out, float *d_in,
                          int accumulate);
} host_layers;

typedef struct host_engine {
    const backend *backend; /* its name heads every message; train_steps calls its entries */
    const host_layers *layers;
    workload w;
    engine_config cfg;
    char err[256];

    /* param_count numbers each, and the optimiser state (0, 1 or 2 x
     * param_count, optimizer.h); 64-byte aligned, zeroed at creation.
     * float in fp32 engines (and bf16: the master weights), double in fp64
     * engines (real_size 8), as the _f64 names. The _f32 names are the
     * float ones again, so that code written over `real` (real.h) can say
     * h->TYPED(params). */
    size_t real_size;
    union { float *params; float *params_f32; double *params_f64; };
    union { float *grads; float *grads_f32; double *grads_f64; };
    union { float *opt_state; float *opt_state_f32; double *opt_state_f64; };
    size_t state_count;
    long step; /* optimiser steps taken, for Adam's bias correction */
    double last_loss; /* of the last compute_gradients, before rounding to float */

    int *labels;    /* batch_size: the labels of the batch being computed */
    int *predicted; /* batch_size: what score() predicted */

    dataset train, test;
    int have_train, have_test;

    int *slot_batch; /* stage engines: each slot's batch, 0 until its forward */
    /* Bytes of the backend's own buffers, counted by host_alloc_counted,
     * for memory_use. */
    size_t activation_bytes, workspace_bytes;
    /* Every buffer above and those of host_alloc_counted, which
     * host_engine_free frees. */
    void **owned;
    size_t owned_count, owned_capacity;
} host_engine;

static inline host_engine *host_of(engine *e) { return (host_engine *)e; }

/* 64-byte aligned (the GEMMs and the simd loops like aligned rows) and
 * zeroed; free() releases it. NULL when out of memory. */
void *host_alloc(size_t bytes);
float *host_alloc_floats(size_t n);
/* n numbers of the engine's precision (h->real_size bytes each). */
void *host_alloc_reals(const host_engine *h, size_t n);

/* host_alloc_reals that adds the bytes to *counter (h->activation_bytes or
 * h->workspace_bytes) and that the engine owns: host_engine_free frees it,
 * so a destroy does not. */
void *host_alloc_counted(host_engine *h, size_t n, size_t *counter);

/* The start of a CPU backend's create: checks w and cfg (a workload,
 * batch size >= 1, a precision in b->precisions (fp32 when 0), workload_check, then `check` when
 * not NULL, which returns NULL or why the backend cannot train w), then
 * allocates `size` zeroed bytes whose first member is the host_engine and
 * its buffers. NULL with "<backend>: <why>" in err on failure. */
engine *host_engine_create(const backend *b, const host_layers *layers, size_t size,
                           const workload *w, const engine_config *cfg,
                           const char *(*check)(const workload *w, const engine_config *cfg),
                           char *err, size_t err_len);
/* For a create that runs out of memory after host_engine_create: destroys e
 * through its backend, writes the message to err and returns NULL. */
engine *host_engine_out_of_memory(engine *e, char *err, size_t err_len);
/* The end of a backend's destroy: frees the host_engine's buffers, those
 * of host_alloc_counted, and e. */
void host_engine_free(engine *e);

/* The message of a failed call, "<backend>: <fmt ...>"; returns -1. */
int host_fail(host_engine *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* -1 after host_fail when a training batch of `batch` images cannot run. */
int host_check_batch(host_engine *h, int batch);
/* Checks images idx[0..n) of d (first..first+n when idx is NULL) and keeps
 * their labels in labels; -1 after host_fail on an index or label out of
 * range. */
int host_take_labels(host_engine *h, const dataset *d, const int32_t *idx, int first, int n);
/* The end of a compute_gradients: keeps the step's mean loss at the
 * engine's precision (last_loss) and gives it, rounded to float, to *loss
 * unless loss is NULL; returns 0. */
int host_keep_loss(host_engine *h, double mean, float *loss);

/* Entries of the contract, for the backend table ------------------------ */

/* The engine_ops entries, as designated initialisers:
 *   static const engine_ops mine_ops = {HOST_ENGINE_OPS, .destroy = destroy};
 *   const backend mine = {.name = "mine", ..., .probe = host_probe,
 *                         .create = create, .ops = &mine_ops,
 *                         .dp = &host_data_parallel, .stage = &host_stages}; */
#define HOST_ENGINE_OPS                                                                        \
    .error = host_error, .set_params = host_set_params, .get_params = host_get_params,        \
    .bind_dataset = host_bind_dataset, .train_steps = host_train_steps,                       \
    .evaluate = host_evaluate, .profile_layers = host_profile_layers,                         \
    .last_loss = host_last_loss, .memory_use = host_memory_use

/* host_compute_gradients, host_apply_update and host_buffer, in host
 * memory; and host_stage_forward and host_stage_backward, for backends
 * whose host_layers offer stages. */
extern const data_parallel_ops host_data_parallel;
extern const stage_ops host_stages;

int host_probe(void *ctx, char *why, size_t why_len); /* a CPU always can */
const char *host_error(engine *e);
/* fp64 engines widen the floats on the way in and round on the way out. */
int host_set_params(engine *e, const float *params);
int host_get_params(engine *e, float *params);
/* Keeps the pointers, after checking that the images fit the workload. */
int host_bind_dataset(engine *e, const dataset *train, const dataset *test);
/* compute_gradients, then apply_update(1), step after step. */
int host_train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses);
/* Batch after batch through layers->score. */
int host_evaluate(engine *e, int limit, eval_counts *out);
/* NULL (count 0) in fp64 engines: their buffers are double, and the
 * data-parallel coordinator, which reduces floats, refuses them. */
float *host_buffer(engine *e, engine_buffer which, size_t *count);
/* Through the host_layers' own, for backends that compute at several
 * precisions. */
int host_compute_gradients(engine *e, const int32_t *indices, int batch, float *loss);
int host_apply_update(engine *e, float grad_scale);
double host_last_loss(engine *e);
void host_memory_use(engine *e, memory_use *out);
/* Check the call, then hand it to the host_layers' own. */
int host_stage_forward(engine *e, int slot, const float *in, int batch, float *out);
int host_stage_backward(engine *e, int slot, const float *d_out, float *d_in, int accumulate);
/* Checks the request, takes the batch's labels, saves the parameters,
 * optimiser state and step count, times the steps (layers->time_steps),
 * averages the times over reps and puts the model back as it was. */
int host_profile_layers(engine *e, const int32_t *indices, int batch, int reps,
                        layer_times *out);

#endif
