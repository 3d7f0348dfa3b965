/* The engine contract: how the harness drives a backend.
 *
 * Coarse on purpose, so a backend may fuse layers, keep data resident on a
 * device and replay CUDA graphs. Every backend sees the same flat parameter
 * layout (workloads/workload.h), the same initial parameters and the same
 * batch order, so any two can be compared step by step.
 *
 * Conventions: a probe or a question (probe, probe_precision, the
 * registry's backend_runnable and the like) answers 1 for yes and 0 for no,
 * with the reason in why; an operation returns 0 on success and -1 on
 * failure, with a one-line message from error(). An engine never reads
 * files, parses flags or prints. */
#ifndef LB_ENGINE_H
#define LB_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "workloads/workload.h"

/* Images as uint8 pixels (scaled to [0,1] by the engine: x = p / 255),
 * row-major count x rows x cols, and labels 0..classes-1. */
typedef struct dataset {
    int count, rows, cols;
    const uint8_t *images;
    const uint8_t *labels;
} dataset;

typedef enum optimizer_kind { OPT_SGD, OPT_NESTEROV, OPT_ADAM } optimizer_kind;

/* Update rules (PyTorch's conventions), g = dL/dw + weight_decay * w for
 * weights, g = dL/db for biases:
 *   sgd:      w -= lr * g
 *   nesterov: v = momentum * v + g;  w -= lr * (g + momentum * v)
 *   adam:     m = b1 m + (1-b1) g;  s = b2 s + (1-b2) g^2;
 *             w -= lr * (m / (1-b1^t)) / (sqrt(s / (1-b2^t)) + eps)
 * The per-element code is in backends/common/elementwise.h. */
typedef struct optimizer_config {
    optimizer_kind kind;
    float lr, momentum, weight_decay;
    float beta1, beta2, eps;
} optimizer_config;

/* The arithmetic keys (./bench peaks, system.json's cpu_peaks, the rows'
 * peak_arithmetic) */
#define ARITHMETIC_FP64 "fp64"         /* fp64 FMA */
#define ARITHMETIC_FP32 "fp32"         /* fp32 FMA */
#define ARITHMETIC_BF16_DOT "bf16-dot" /* bf16 pairs into fp32 (vdpbf16ps) */
#define ARITHMETIC_FP16 "fp16"         /* fp16 FMA (vfmadd231ph) */
#define ARITHMETIC_AMX_BF16 "amx-bf16" /* AMX tiles, bf16 into fp32 */

/* What an engine computes in. Whatever it is, the contract's parameters
 * stay float (set_params, get_params, buffer, the parameter files): an fp64
 * engine widens them on set_params, keeps its parameters, gradients,
 * optimiser state and activations in double, and rounds them to float on
 * get_params. The facts about each are one row of precision_of's table;
 * PRECISION_COUNT, the last member, counts them. */
typedef enum precision {
    PREC_FP32,
    PREC_TF32,
    PREC_BF16,
    PREC_FP16,
    PREC_FP64,
    PRECISION_COUNT
} precision;

/* One precision's facts, read by every engine, the tests and (through
 * build/precisions.json, written by backends/precision_table.c) the
 * scripts. */
typedef struct precision_info {
    precision precision; /* its own member: a row out of place is caught (test_model) */
    const char *name;    /* what --precision takes and the CSV shows */
    /* The CPU peak (an ARITHMETIC_* key) a row in it is held to unless its
     * engine names another (engine_ops.arithmetic). */
    const char *arithmetic;
    int storage_bytes; /* bytes of an operand as the products read it */
    /* Stored narrower than float: parameters, gradients and optimiser
     * state stay fp32 (master weights), the products read a rounded copy. */
    int mixed;
    /* A range narrower than fp32's: the gradients are those of a scaled
     * loss (dynamic loss scaling, backends/common/loss_scale.h). */
    int loss_scaled;
    /* How far a step's loss may be from naive fp32's (relative, with the
     * floor below which it is compared absolutely), products summing in
     * fp32 or wider; and where the products also sum in this precision
     * (an engine whose arithmetic entry names the precision's own: fp16
     * FMA chains), 0 where no arithmetic does. fp32 and fp64 are held
     * tighter by the tests, which know where ties fall. */
    double loss_rel, loss_floor;
    double chain_loss_rel, chain_loss_floor;
} precision_info;

/* The row of p (that of no precision, named "unknown", when p is not
 * one). Adding a precision is a member above and a row here; each backend
 * that computes in it sets its bit in backend.precisions. */
static inline const precision_info *precision_of(precision p)
{
    static const precision_info rows[PRECISION_COUNT + 1] = {
        /* precision, name, arithmetic, storage bytes, mixed, loss-scaled,
         * loss tolerance (relative, floor), summing in it (relative, floor) */
        {PREC_FP32, "fp32", ARITHMETIC_FP32, 4, 0, 0, 1e-4, 1e-6, 0, 0},
        {PREC_TF32, "tf32", ARITHMETIC_FP32, 4, 0, 0, 1e-2, 1e-2, 0, 0},
        {PREC_BF16, "bf16", ARITHMETIC_BF16_DOT, 2, 1, 0, 6e-2, 5e-2, 0, 0},
        {PREC_FP16, "fp16", ARITHMETIC_FP16, 2, 1, 1, 2e-2, 2e-2, 6e-2, 5e-2},
        {PREC_FP64, "fp64", ARITHMETIC_FP64, 8, 0, 0, 1e-4, 1e-2, 0, 0},
        {PRECISION_COUNT, "unknown", ARITHMETIC_FP32, 0, 0, 0, 0, 0, 0, 0},
    };
    const unsigned count = (unsigned)PRECISION_COUNT;
    return &rows[(unsigned)p < count ? (unsigned)p : count];
}

/* The name --precision takes and the CSV shows. */
static inline const char *precision_name(precision p) { return precision_of(p)->name; }

/* Wider than the contract's float (fp64): its engine's parameters,
 * gradients and activations are double. */
static inline int precision_wider_than_float(precision p)
{
    return precision_of(p)->storage_bytes > (int)sizeof(float);
}

/* How engines hand numbers to each other: a data-parallel coordinator
 * reduces the float buffers buffer() hands out (CROSS_REDUCE); a
 * model-parallel stage takes and gives its activations as host floats
 * (CROSS_STAGE). */
typedef enum crossing { CROSS_REDUCE, CROSS_STAGE } crossing;

/* NULL when an engine computing in p may take part in c, else why not: the
 * one place the rule is written. An fp64 engine's buffers and activations
 * are double, and would be rounded on the way across; fp16's dynamic loss
 * scale belongs to a whole network (every stage would have to agree on a
 * skipped step and a new scale). */
static inline const char *crossing_refusal(crossing c, precision p)
{
    if (precision_wider_than_float(p))
        return c == CROSS_REDUCE
                   ? "data parallelism runs fp32 engines only (an fp64 engine's buffers are double)"
                   : "model-parallel stages hand activations over as float, so fp64 is not offered";
    if (precision_of(p)->loss_scaled && c == CROSS_STAGE)
        return "fp16's dynamic loss scale belongs to a whole network, so model-parallel stages "
               "are not offered in fp16";
    return NULL;
}

typedef struct engine_config {
    int batch_size;  /* largest batch a step will be given */
    optimizer_config opt;
    int threads;     /* CPU engines: 0 means every core */
    int device;      /* GPU engines: device index */
    precision precision;
    int cuda_graph;      /* GPU: capture the step as a graph and replay it */
    int data_on_device;  /* GPU: training set resident on the device */
    /* Model parallelism: 0 for an engine that trains a whole network; n >= 1
     * makes it a stage (see stage_forward) that keeps the activations of n
     * micro-batches at once, each of at most batch_size images. */
    int stage_slots;
} engine_config;

/* The checks every engine makes of what it is given, worded once (the
 * engine puts its name in front): NULL when fine, else the reason, written
 * into why. */
static inline const char *dataset_refusal(const workload *w, const dataset *d, const char *which,
                                          char *why, size_t why_len)
{
    if (!d->images || !d->labels || d->count < 0)
        snprintf(why, why_len, "%s set has no images or labels", which);
    else if (w->input.c != 1 || d->rows != w->input.h || d->cols != w->input.w)
        snprintf(why, why_len, "%s images are %dx%d, workload %s wants %dx%dx%d", which, d->rows,
                 d->cols, w->name, w->input.c, w->input.h, w->input.w);
    else
        return NULL;
    return why;
}

/* A model-parallel stage's slot. */
static inline const char *slot_refusal(const engine_config *cfg, int slot, char *why,
                                       size_t why_len)
{
    if (!cfg->stage_slots)
        snprintf(why, why_len, "not created as a model-parallel stage");
    else if (slot < 0 || slot >= cfg->stage_slots)
        snprintf(why, why_len, "stage slot %d, engine was created for 0..%d", slot,
                 cfg->stage_slots - 1);
    else
        return NULL;
    return why;
}

/* A batch for train_steps (or the entries that step like it). */
static inline const char *batch_refusal(const engine_config *cfg, int batch, char *why,
                                        size_t why_len)
{
    if (cfg->stage_slots)
        snprintf(why, why_len, "a model-parallel stage trains through stage_forward and "
                               "stage_backward");
    else if (batch < 1 || batch > cfg->batch_size)
        snprintf(why, why_len, "batch of %d images, engine was created for 1..%d", batch,
                 cfg->batch_size);
    else
        return NULL;
    return why;
}

/* Evaluation result: confusion[true * classes + predicted] counts. */
typedef struct eval_counts {
    int classes;
    long count;
    double loss_sum; /* sum over images of the cross-entropy */
    long confusion[WORKLOAD_MAX_CLASSES * WORKLOAD_MAX_CLASSES];
} eval_counts;

/* Per-layer timing for --profile-layers, milliseconds per batch. */
typedef struct layer_times {
    int n_layers;
    double forward_ms[WORKLOAD_MAX_LAYERS];
    double backward_ms[WORKLOAD_MAX_LAYERS];
    double loss_ms, update_ms;
} layer_times;

/* Which flat buffers a data-parallel coordinator may reach. */
typedef enum engine_buffer {
    BUF_PARAMS,    /* param_count floats */
    BUF_GRADS,     /* param_count floats, written by compute_gradients */
    BUF_OPT_STATE, /* optimiser state: 0 (sgd), 1 (nesterov) or 2 (adam) x param_count;
                      count 0 (pointer may be NULL) for sgd */
} engine_buffer;

typedef enum memory_space { MEM_HOST, MEM_DEVICE } memory_space;

/* Bytes an engine holds, by what they are for (host or device, wherever
 * the engine keeps them). */
typedef struct memory_use {
    size_t params, grads, opt_state;
    size_t activations; /* what the forward pass keeps for the backward pass */
    size_t workspace;   /* everything else: scratch, staging, library workspace */
} memory_use;

static inline size_t memory_use_total(const memory_use *m)
{
    return m->params + m->grads + m->opt_state + m->activations + m->workspace;
}

/* An opaque handle that no file defines: each backend has a struct of its
 * own name (naive_engine, chwn_engine, ...) and converts the handle at its
 * table entries with one static inline (naive_of(e)), returning
 * (engine *)its_struct from create. */
typedef struct engine engine;

/* What an engine does, once created. The first entries are required; the
 * rest are optional (NULL when not offered; backends/registry.h has
 * wrappers that supply the defaults, so no caller tests a pointer). */
typedef struct engine_ops {
    void (*destroy)(engine *e);
    const char *(*error)(engine *e);

    int (*set_params)(engine *e, const float *params);
    int (*get_params)(engine *e, float *params);
    /* The engine may keep the pointers (the harness keeps the data alive
     * until destroy) or copy the data once, e.g. to a device. Images have
     * one channel. */
    int (*bind_dataset)(engine *e, const dataset *train, const dataset *test);

    /* Runs `steps` training steps of `batch` images each; indices holds
     * steps * batch training-set indices. losses (may be NULL) receives each
     * step's mean cross-entropy, written when the call returns. */
    int (*train_steps)(engine *e, const int32_t *indices, int batch, int steps,
                       float *losses);
    /* Scores the first `limit` test images (all when limit <= 0). */
    int (*evaluate)(engine *e, int limit, eval_counts *out);

    /* Optional ------------------------------------------------------------ */

    /* Where it runs: CPU threads, GPUs and replicas used (NULL: 1, 0, 1). */
    void (*placement)(engine *e, int *threads, int *devices, int *replicas);
    /* Free text for the CSV: precision, math mode, algorithms chosen. */
    void (*describe)(engine *e, char *buf, size_t len);
    /* Peak device memory in bytes (GPU engines). */
    size_t (*peak_memory)(engine *e);
    /* Times each layer's forward and backward over `reps` steps. Leaves
     * parameters and optimiser state as they were (gradients may be
     * overwritten). */
    int (*profile_layers)(engine *e, const int32_t *indices, int batch, int reps,
                          layer_times *out);
    /* Measured peak GFLOP/s of the device the engine runs on (a short GEMM
     * probe), for "% of peak" in the summary. NULL on CPU engines: the
     * harness then probes the CPU with the engine's thread count. */
    double (*peak_gflops)(engine *e);
    /* The loss of the last training step at the engine's own precision,
     * before it was rounded to float for train_steps' losses (NAN when not
     * recorded), so that tests compare fp64 engines beyond float's seven
     * digits. */
    double (*last_loss)(engine *e);
    /* What the engine holds, by kind (NULL: not itemised). */
    void (*memory_use)(engine *e, memory_use *out);
    /* The arithmetic its products run on, as the CPU peaks name it
     * (ARITHMETIC_FP32 ...): a CPU row's GFLOP/s are held to that peak.
     * NULL entry: the precision's own (backend_arithmetic). */
    const char *(*arithmetic)(engine *e);
} engine_ops;

/* Data parallelism: gradients of the mean loss over `batch` images into
 * BUF_GRADS without updating; then apply_update(scale) multiplies the
 * gradients by `scale` and applies one optimiser step. The buffers are
 * float: an fp64 engine hands out none (NULL), and the coordinator refuses
 * it (crossing_refusal). */
typedef struct data_parallel_ops {
    int (*compute_gradients)(engine *e, const int32_t *indices, int batch, float *loss);
    int (*apply_update)(engine *e, float grad_scale);
    float *(*buffer)(engine *e, engine_buffer which, size_t *count);
    memory_space buffer_space; /* where buffer's pointers point */
} data_parallel_ops;

/* Model parallelism: an engine created with cfg->stage_slots >= 1 runs its
 * workload, a stage of a larger network (workload_stage: any input shape,
 * no loss), as one worker of a model-parallel coordinator. Activations and
 * their gradients cross as host floats, image after image in the
 * workload's NCHW layout ([batch][c][h][w]; a dense layer's
 * [batch][units]); the first stage is handed pixels already scaled
 * (lb_pixel). Float at every precision, so fp64 engines offer no stages.
 * slot (0 .. stage_slots - 1) names a micro-batch in flight: stage_forward
 * keeps its activations until its stage_backward, so that several
 * micro-batches can be between the two at once. A stage also needs the
 * data-parallel entries (BUF_GRADS, apply_update). */
typedef struct stage_ops {
    int (*stage_forward)(engine *e, int slot, const float *in, int batch, float *out);
    /* From d_out, the gradient of the step's loss with respect to slot's
     * out: the parameter gradients into BUF_GRADS (written when accumulate
     * is 0, added when 1) and, unless d_in is NULL, the gradient with
     * respect to slot's in. apply_update(1) then applies BUF_GRADS. */
    int (*stage_backward)(engine *e, int slot, const float *d_out, float *d_in, int accumulate);
} stage_ops;

/* A backend: what is known of it without an engine, and its tables. */
typedef struct backend {
    const char *name;
    const char *summary; /* one line for --list */
    int built;           /* 0: compiled out; not_built_reason says why */
    const char *not_built_reason;
    unsigned precisions; /* bit (1u << precision) per supported one; 0: fp32 only */
    /* In place of `precisions`, for a backend made of another (the
     * coordinators' wrappers): asked each time, since the inner backend's
     * are known only once its module has loaded. NULL for most. */
    unsigned (*precisions_of)(void *ctx);

    /* Handed back to the functions below, so that one set of them can
     * serve many backends (each data-parallel wrapper points it at its own
     * options). NULL for most backends. */
    void *ctx;
    /* 1 if the backend can run here; else 0 with the reason in why. Changes
     * nothing a reader of the backend sees. */
    int (*probe)(void *ctx, char *why, size_t why_len);
    /* Optional: 1 if precision p, one of `precisions`, runs on this
     * machine; else 0 with the reason ("this CPU lacks AVX512_BF16"). */
    int (*probe_precision)(void *ctx, precision p, char *why, size_t why_len);
    engine *(*create)(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len);
    /* Optional: libraries and versions for the system record, e.g.
     * "OpenBLAS 0.3.21". */
    void (*library_info)(void *ctx, char *buf, size_t len);
    /* Optional, CPU backends: GFLOP/s their GEMM library reaches on
     * `threads` threads (a short sgemm probe), which the harness's own
     * multiply-add probe of the CPU may be raised to; <= 0 when not
     * measured. */
    double (*library_peak_gflops)(int threads);

    const engine_ops *ops;
    const data_parallel_ops *dp; /* NULL: no data parallelism */
    const stage_ops *stage;      /* NULL: no model-parallel stages (needs dp too) */
} backend;

#endif
