/* The cuda engine: one GPU. cuDNN does the convolutions and max-pooling
 * (legacy API, NCHW), cuBLAS the dense layers; kernels.cu holds the small
 * per-element steps. Activations are the precision's storage type; the
 * flat parameter vector is fp32 everywhere.
 *
 * How a training step runs without the host:
 *  - bind_dataset copies the training and test sets to the device once, as
 *    uint8 pixels (data_on_device, the default).
 *  - train_steps copies the call's indices (steps x batch int32) to a device
 *    buffer in one transfer. A small device struct (cuda_step_state) holds
 *    the slot: step s of the call reads indices[s * batch ...] and writes its
 *    loss to losses[s]; the last kernel of a step advances the slot. So every
 *    step is the same sequence of kernels with the same pointers, which is
 *    captured once as a CUDA graph and replayed with one cudaGraphLaunch per
 *    step. The losses are copied back once, when the call returns.
 *  - A smaller last batch runs the same kernels without the graph, with
 *    cuDNN descriptors for its size (a "plan" per batch size). bind_dataset
 *    builds the plans of the sizes the run meets (B, and the sets' short
 *    last batches: plan_sizes.h) and sizes the workspace for them before
 *    it captures the graph.
 *  - data_on_device off: the host gathers each batch into one of two pinned
 *    staging buffers and a second stream copies it to the device; events make
 *    the copy of batch n+1 overlap the compute of batch n and keep a staging
 *    buffer from being overwritten while it is still in use. The indices then
 *    name rows of the staging buffers, so the same graph serves.
 *
 * A model-parallel stage (stage_slots >= 1) runs its workload, a part of a
 * larger network, on activations handed over as host floats: stage_forward
 * copies them through a pinned buffer into the slot's own activation
 * buffers (one set per micro-batch in flight), runs the layers and copies
 * the output back; stage_backward runs back from the slot's activations,
 * writes or adds the parameter gradients (beta = 1 in cuDNN and cuBLAS, the
 * bias kernel's accumulate) and hands back the gradient to the stage's
 * input, the first layer's included. No data set, loss or graph. fp32,
 * tf32 and bf16 (whose 16-bit gradients are added into fp32 ones); not
 * fp64 (floats cross) nor fp16 (its loss scale belongs to a whole network).
 *
 * Precision: fp64 (everything in double: cuDNN with CUDNN_DATA_DOUBLE,
 * cuBLAS with CUBLAS_COMPUTE_64F, double master weights and optimiser
 * state; set_params and get_params convert from and to float on the
 * device), fp32 (cuDNN FMA math, cuBLAS default math: no TF32), tf32
 * (tensor-op math on fp32 data), and mixed bf16 and fp16: activations,
 * gradients and a copy of the weights in 16 bits with fp32 accumulation,
 * fp32 master weights that the update kernel rounds into the copy. fp16
 * uses dynamic loss scaling (step_state.h): the gradients are those of
 * 1024 * loss, a step whose gradients overflow is skipped and halves the
 * scale, 1000 clean steps double it.
 *
 * Every CUDA, cuDNN and cuBLAS call is checked: a failure records
 * "file:line: call: reason" in the engine's error buffer and the function
 * returns -1. Every kernel wrapper returns cudaGetLastError() after its
 * launch, which is checked the same way.  *
 * The engine's files: cuda_backend.c (probe, create, parameters, data
 * sets, the backend's tables), cuda_resources.c (errors, memory, the
 * buffers that grow: what the others call, calling none), plans.c (cuDNN descriptors and algorithm
 * choice per batch size), step.c (the layers, one training step, graph
 * capture, staging, training, evaluation, the data-parallel entries),
 * stages.c (model-parallel stages), describe.c (placement, description,
 * layer profile, peak). This header holds what they share. */
#ifndef LB_CUDA_ENGINE_IMPL_H
#define LB_CUDA_ENGINE_IMPL_H

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backends/common/optimizer.h"
#include "backends/cuda/dense_gemm.h"
#include "backends/cuda/devmem.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/plan_sizes.h"
#include "backends/engine.h"
#include "backends/module.h"
#include "base/errmsg.h"

#define MAX_LAYERS WORKLOAD_MAX_LAYERS
/* cached plans for other batch sizes: at least the short last batches of
 * the two bound sets, planned before the capture */
#define PARTIAL_PLANS (CUDA_PLAN_SIZES_MAX - 1)
#define CONV_WORKSPACE_LIMIT ((size_t)512 << 20) /* per algorithm */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

/* Why a convolution algorithm taken falls short of what the engine prefers
 * (FALLBACK_NONE: it does not). Preferred: deterministic (so runs repeat
 * bitwise and graph replays equal eager steps) and, in fp32, plain FMA. */
enum fallback_reason { FALLBACK_NONE, FALLBACK_NONDETERMINISTIC, FALLBACK_NOT_FMA };

/* cuDNN descriptors and algorithms for one batch size. */
typedef struct plan {
    int n; /* images; 0 while unused */
    unsigned long last_used;
    cudnnTensorDescriptor_t in[MAX_LAYERS], out[MAX_LAYERS];
    /* one convolution descriptor per direction: each carries its math type */
    cudnnConvolutionDescriptor_t fwd[MAX_LAYERS], bwd_data[MAX_LAYERS], bwd_filter[MAX_LAYERS];
    cudnnConvolutionFwdAlgo_t fwd_algo[MAX_LAYERS];
    cudnnConvolutionBwdDataAlgo_t bwd_data_algo[MAX_LAYERS];
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo[MAX_LAYERS];
    cudnnMathType_t fwd_math[MAX_LAYERS], bwd_data_math[MAX_LAYERS], bwd_filter_math[MAX_LAYERS];
    /* per direction (enum conv_direction) and layer: FALLBACK_NONE when the
     * algorithm is a preferred one, else what the one taken (the fastest
     * usable, no preferred one being offered) falls short in */
    unsigned char fallback[3][MAX_LAYERS];
    size_t workspace_bytes;
} plan;

/* The engine behind the opaque handle of backends/engine.h: the table
 * entries (cuda_backend.c's ops, dp and stage tables) take the handle and convert
 * it with cuda_of; everything inside takes a cuda_engine. */
typedef struct cuda_engine cuda_engine;
struct cuda_engine {
    workload w;
    engine_config cfg;
    char err[512];
    int device;

    lbk_dtype act_type; /* activations, gradients and the weight copy */
    lbk_dtype master;   /* parameters and optimiser state: LBK_F32, or LBK_F64 in fp64 */
    int mixed;          /* bf16, fp16: fp32 master weights + low-precision copy */
    const char *math;   /* how it computes, for describe ("tf32 tensor cores") */
    cudnnDataType_t cudnn_type;
    cudaDataType_t blas_type;
    cublasComputeType_t blas_compute;
    loss_scaling scaling;
    lbk_optimizer opt;

    cudaStream_t stream, copy_stream;
    cudaEvent_t copy_done[2], compute_done[2];
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *cublas_workspace;

    cudnnFilterDescriptor_t filter[MAX_LAYERS];
    cudnnPoolingDescriptor_t pool[MAX_LAYERS];
    plan plans[1 + PARTIAL_PLANS]; /* [0]: the full batch, the one captured */
    unsigned long plan_clock;
    void *workspace;
    size_t workspace_bytes;

    /* flat vectors on the device */
    size_t n_params, state_floats; /* state_floats: numbers of optimiser state */
    void *params;    /* master */
    void *params_lo; /* mixed only */
    void *grads;     /* act_type */
    float *grads32;  /* mixed only: unscaled fp32 gradients for compute_gradients */
    float *params32; /* fp64 only: the float parameters on their way in and out */
    void *opt_state; /* master */
    uint8_t *decay_mask;
    cuda_step_state *state, *state_saved;
    void *saved; /* params then optimiser state, put back after a warm-up or profile */

    /* activations: act[0] the batch, act[i + 1] the output of layer i; the
     * current slot's of slot_act (slots x (n_layers + 1) buffers: one slot
     * unless the engine is a model-parallel stage, whose every micro-batch
     * in flight keeps its own until its stage_backward) */
    void *act[MAX_LAYERS + 1];
    void **slot_act;
    int slots;
    int *slot_batch; /* stage engines: each slot's micro-batch, 0 until its forward */
    void *grad_a, *grad_b;
    int *batch_labels;
    void *bias_partial;

    int capacity_steps; /* of the index and loss buffers */
    int32_t *indices_dev, *indices_host;
    double *losses_dev, *losses_host; /* double: an fp64 engine's loss keeps its digits */
    double last_loss;
    unsigned long long *confusion;
    double *loss_sum;

    dataset train, test;
    int have_train, have_test;
    uint8_t *train_images, *train_labels, *test_images, *test_labels; /* resident */
    size_t pixels;
    uint8_t *stage_host, *stage_dev; /* 2 x batch images, then 2 x batch labels */
    /* stage engines: activations and their gradients cross as host floats
     * through io_host (pinned); in bf16 io_dev holds them as floats on the
     * device, on their way to or from the 16-bit buffers */
    float *io_host, *io_dev;
    size_t io_floats;

    cudaGraphExec_t graph;
    int graph_failed;
    char graph_note[200];

    size_t mem_free_at_start, mem_peak, tracked_bytes, tracked_peak;
    size_t activation_bytes, pinned_bytes; /* for memory_use */
    double peak_gflops; /* 0 until measured */
};

static inline cuda_engine *cuda_of(engine *e) { return (cuda_engine *)e; }

/* cuDNN's reason for a failed call: the status's name and, from cuDNN 9 on,
 * the library's own message of its last error (which parameter it refused
 * and why), or the name alone. One buffer per thread, overwritten by the
 * next failure. */
static inline const char *cudnn_reason(cudnnStatus_t status)
{
    static _Thread_local char text[512];
    char last[384] = "";
#if CUDNN_MAJOR >= 9
    cudnnGetLastErrorString(last, sizeof last);
#endif
    snprintf(text, sizeof text, "%s%s%s", cudnnGetErrorString(status), last[0] ? ": " : "", last);
    return text;
}

/* A library call whose status is not `ok`: the engine's error names it
 * (`text`: the call as written) with the library's reason, and the caller
 * returns -1. */
#define CK_STATUS(type, call, text, ok, reason_of)                                                 \
    do {                                                                                           \
        type ck_ = (call);                                                                         \
        if (ck_ != (ok))                                                                           \
            return cuda_call_failed(e, __FILE__, __LINE__, text, reason_of(ck_));                  \
    } while (0)
#define CK_CUDA(call) CK_STATUS(cudaError_t, call, #call, cudaSuccess, cudaGetErrorString)
#define CK_CUDNN(call) CK_STATUS(cudnnStatus_t, call, #call, CUDNN_STATUS_SUCCESS, cudnn_reason)
#define CK_CUBLAS(call)                                                                            \
    CK_STATUS(cublasStatus_t, call, #call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
#define CK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            return -1;                                                                             \
    } while (0)
#define BEGIN(e) CK_CUDA(cudaSetDevice((e)->device))


static inline size_t act_size(const cuda_engine *e) { return lbk_dtype_size(e->act_type); }

static inline size_t master_size(const cuda_engine *e) { return lbk_dtype_size(e->master); }

/* Whether the precision computes in plain FMA maths, no tensor-core
 * shortcuts: fp32 (no TF32) and fp64. */
static inline int plain_math(const cuda_engine *e)
{
    return e->cfg.precision == PREC_FP32 || e->cfg.precision == PREC_FP64;
}

/* The scaling factors alpha = 1 and beta = 0 cuDNN and cuBLAS take: double
 * for double data, float otherwise. */
static inline const void *one_of(const cuda_engine *e)
{
    static const float one_f = 1.0f;
    static const double one_d = 1.0;
    return e->master == LBK_F64 ? (const void *)&one_d : (const void *)&one_f;
}

static inline const void *zero_of(const cuda_engine *e)
{
    static const float zero_f = 0.0f;
    static const double zero_d = 0.0;
    return e->master == LBK_F64 ? (const void *)&zero_d : (const void *)&zero_f;
}

/* cuda_resources.c: errors, device and pinned memory, the buffers that
 * grow, the graph they invalidate, a slot's activations */
/* "reason" into the engine's error text; -1 */
#define cuda_fail(e, ...) errmsg_fail((e)->err, sizeof (e)->err, __VA_ARGS__)
int cuda_call_failed(cuda_engine *e, const char *file, int line, const char *call,
                     const char *reason);
void cuda_sample_memory(cuda_engine *e);
int cuda_device_alloc(cuda_engine *e, void **p, size_t bytes, const char *what);
void cuda_device_free(cuda_engine *e, void **p, size_t bytes);
int cuda_pinned_alloc(cuda_engine *e, void **p, size_t bytes, const char *what);
void cuda_pinned_free(cuda_engine *e, void **p, size_t bytes);
void cuda_drop_graph(cuda_engine *e);
int cuda_ensure_workspace(cuda_engine *e, size_t bytes);
int cuda_ensure_capacity(cuda_engine *e, int steps);
void cuda_use_slot(cuda_engine *e, int slot);

/* cuda_backend.c: probe, libraries, create, destroy, parameters, data
 * sets, the backend's tables; and what each precision hands cuDNN and
 * cuBLAS */
int cuda_probe(void *ctx, char *why, size_t why_len);
void cuda_library_info(void *ctx, char *buf, size_t len);
void cuda_destroy(engine *handle);
engine *cuda_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                    size_t err_len);
const char *cuda_error(engine *handle);
int cuda_set_params(engine *handle, const float *params);
int cuda_get_params(engine *handle, float *params);
int cuda_bind_dataset(engine *handle, const dataset *train, const dataset *test);

/* plans.c: cuDNN descriptors and algorithms per batch size */
const char *cuda_fwd_algo_name(int a);
const char *cuda_bwd_data_algo_name(int a);
const char *cuda_bwd_filter_algo_name(int a);
int cuda_needs_input_gradient(const cuda_engine *e, int li);
int cuda_build_plan(cuda_engine *e, plan *p, int n, int allocate);
void cuda_destroy_plan(plan *p);
plan *cuda_plan_for(cuda_engine *e, int n);
int cuda_prepare_plans(cuda_engine *e);

/* step.c: layers, a step, graph, staging, training, evaluation, data parallel */
int cuda_gemm(cuda_engine *e, dense_product which, int n, int in, int out, const void *A,
                     const void *B, void *C);
int cuda_forward_layer(cuda_engine *e, const plan *p, int i, int n);
int cuda_backward_layer(cuda_engine *e, const plan *p, int i, int n, const void *dy, void *dx,
                               int accumulate);
int cuda_gather_training_batch(cuda_engine *e, int n);
int cuda_update_and_finish(cuda_engine *e);
int cuda_refresh_low_copy(cuda_engine *e);
int cuda_save_model(cuda_engine *e);
int cuda_restore_model(cuda_engine *e);
int cuda_reset_slot(cuda_engine *e);
int cuda_capture_graph(cuda_engine *e);
int cuda_stage_batch(cuda_engine *e, const dataset *d, const int32_t *rows, long first, int n,
                     int k);
int cuda_check_batch(cuda_engine *e, const int32_t *indices, int batch, int steps);
int cuda_upload_indices(cuda_engine *e, const int32_t *indices, int batch, int steps);
int cuda_train_steps(engine *handle, const int32_t *indices, int batch, int steps, float *losses);
int cuda_evaluate(engine *handle, int limit, eval_counts *out);
int cuda_compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss);
int cuda_apply_update(engine *handle, float grad_scale);
float *cuda_buffer(engine *handle, engine_buffer which, size_t *count);
double cuda_last_loss(engine *handle);

/* stages.c: model-parallel stages */
int cuda_stage_forward(engine *handle, int slot, const float *in, int batch, float *out);
int cuda_stage_backward(engine *handle, int slot, const float *d_out, float *d_in, int accumulate);
void cuda_memory_use_of(engine *handle, memory_use *out);

/* describe.c: placement, description, profile, peak */
void cuda_placement(engine *handle, int *threads, int *devices, int *replicas);
size_t cuda_peak_memory(engine *handle);
void cuda_describe(engine *handle, char *buf, size_t len);
int cuda_profile_layers(engine *handle, const int32_t *indices, int batch, int reps,
                        layer_times *out);
double cuda_peak_gflops(engine *handle);

#endif
