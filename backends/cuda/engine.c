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
 *    cuDNN descriptors for its size (a "plan" per batch size).
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
 * launch, which is checked the same way. */
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
#include "backends/engine.h"
#include "backends/module.h"

#define MAX_LAYERS WORKLOAD_MAX_LAYERS
#define PARTIAL_PLANS 2                          /* cached plans for other batch sizes */
#define CONV_WORKSPACE_LIMIT ((size_t)512 << 20) /* per algorithm */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

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

struct engine {
    workload w;
    engine_config cfg;
    char err[512];
    int device;

    lbk_dtype act_type; /* activations, gradients and the weight copy */
    lbk_dtype master;   /* parameters and optimiser state: LBK_F32, or LBK_F64 in fp64 */
    int mixed;          /* bf16, fp16: fp32 master weights + low-precision copy */
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

/* ------------------------------------------------------------------ errors */

static int fail(engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* "file:line: function: reason"; only the function's name of the call. */
static int call_failed(engine *e, const char *file, int line, const char *call, const char *reason)
{
    int name_len = (int)strcspn(call, "(");
    fail(e, "cuda: %s:%d: %.*s: %s", file, line, name_len, call, reason);
    cudaGetLastError(); /* clear a non-sticky error so later calls start clean */
    return -1;
}

#define CK_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t ck_ = (call);                                                                  \
        if (ck_ != cudaSuccess)                                                                    \
            return call_failed(e, __FILE__, __LINE__, #call, cudaGetErrorString(ck_));             \
    } while (0)
#define CK_CUDNN(call)                                                                             \
    do {                                                                                           \
        cudnnStatus_t ck_ = (call);                                                                \
        if (ck_ != CUDNN_STATUS_SUCCESS)                                                           \
            return call_failed(e, __FILE__, __LINE__, #call, cudnnGetErrorString(ck_));            \
    } while (0)
#define CK_CUBLAS(call)                                                                            \
    do {                                                                                           \
        cublasStatus_t ck_ = (call);                                                               \
        if (ck_ != CUBLAS_STATUS_SUCCESS)                                                          \
            return call_failed(e, __FILE__, __LINE__, #call, cublasGetStatusString(ck_));          \
    } while (0)
#define CK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            return -1;                                                                             \
    } while (0)

/* ------------------------------------------------------------------ probe */

static int probe(void *ctx, char *why, size_t why_len)
{
    (void)ctx;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        if (why && why_len)
            snprintf(why, why_len, "%s", cudaGetErrorString(rc));
        return 0;
    }
    if (count < 1) {
        if (why && why_len)
            snprintf(why, why_len, "no CUDA-capable device is detected");
        return 0;
    }
    if (why && why_len)
        why[0] = '\0';
    return 1;
}

/* Where the library holding `symbol` was loaded from, short: the wheel
 * folder ("wheel nvidia/cudnn") or the directory. */
static void library_dir(const void *symbol, char *out, size_t len)
{
    Dl_info info;
    snprintf(out, len, "?");
    if (!dladdr(symbol, &info) || !info.dli_fname)
        return;
    const char *path = info.dli_fname, *slash = strrchr(path, '/');
    const char *wheel = strstr(path, "-packages/nvidia/");
    if (wheel) {
        const char *name = wheel + strlen("-packages/");
        snprintf(out, len, "wheel %.*s", (int)strcspn(name + strlen("nvidia/"), "/") +
                                             (int)strlen("nvidia/"), name);
    } else if (slash) {
        snprintf(out, len, "%.*s", (int)(slash - path), path);
    }
}

static void library_info(char *buf, size_t len)
{
    int runtime = 0, driver = 0, blas[3] = {0, 0, 0};
    cudaRuntimeGetVersion(&runtime);
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    cublasGetProperty(MAJOR_VERSION, &blas[0]);
    cublasGetProperty(MINOR_VERSION, &blas[1]);
    cublasGetProperty(PATCH_LEVEL, &blas[2]);
    size_t dnn = cudnnGetVersion();
    char drv[32];
    if (driver > 0)
        snprintf(drv, sizeof drv, "driver %d.%d", driver / 1000, driver % 1000 / 10);
    else
        snprintf(drv, sizeof drv, "no driver");
    char rt_at[160], dnn_at[160], blas_at[160];
    library_dir((const void *)cudaRuntimeGetVersion, rt_at, sizeof rt_at);
    library_dir((const void *)cudnnGetVersion, dnn_at, sizeof dnn_at);
    library_dir((const void *)cublasGetProperty, blas_at, sizeof blas_at);
    snprintf(buf, len, "CUDA runtime %d.%d (%s), cuDNN %zu.%zu.%zu (%s), cuBLAS %d.%d.%d (%s), %s",
             runtime / 1000, runtime % 1000 / 10, rt_at, dnn / 10000, dnn % 10000 / 100, dnn % 100,
             dnn_at, blas[0], blas[1], blas[2], blas_at, drv);
    cudaGetLastError();
}

/* ------------------------------------------------------------------ memory */

static void sample_memory(engine *e)
{
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    if (e->mem_free_at_start > free_bytes && e->mem_free_at_start - free_bytes > e->mem_peak)
        e->mem_peak = e->mem_free_at_start - free_bytes;
}

/* Zeroed device memory; *p stays NULL on failure. */
static int device_alloc(engine *e, void **p, size_t bytes, const char *what)
{
    *p = NULL;
    if (bytes == 0)
        bytes = 16;
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        cudaGetLastError();
        return fail(e, "cuda: %s:%d: cudaMalloc: %s: %zu bytes for %s (%zu MiB free of %zu)",
                    __FILE__, __LINE__, cudaGetErrorString(rc), bytes, what, free_bytes >> 20,
                    total >> 20);
    }
    e->tracked_bytes += bytes;
    if (e->tracked_bytes > e->tracked_peak)
        e->tracked_peak = e->tracked_bytes;
    CK_CUDA(cudaMemsetAsync(*p, 0, bytes, e->stream));
    return 0;
}

static void device_free(engine *e, void **p, size_t bytes)
{
    if (*p) {
        cudaFree(*p);
        e->tracked_bytes -= bytes < e->tracked_bytes ? bytes : e->tracked_bytes;
    }
    *p = NULL;
}

static int host_alloc(engine *e, void **p, size_t bytes, const char *what)
{
    *p = NULL;
    cudaError_t rc = cudaHostAlloc(p, bytes ? bytes : 16, cudaHostAllocDefault);
    if (rc != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return fail(e, "cuda: %s:%d: cudaHostAlloc: %s: %zu pinned bytes for %s", __FILE__,
                    __LINE__, cudaGetErrorString(rc), bytes, what);
    }
    memset(*p, 0, bytes ? bytes : 16);
    e->pinned_bytes += bytes ? bytes : 16;
    return 0;
}

static void host_free(engine *e, void **p, size_t bytes)
{
    if (*p) {
        cudaFreeHost(*p);
        bytes = bytes ? bytes : 16;
        e->pinned_bytes -= bytes < e->pinned_bytes ? bytes : e->pinned_bytes;
    }
    *p = NULL;
}

static size_t act_size(const engine *e) { return lbk_dtype_size(e->act_type); }
static size_t master_size(const engine *e) { return lbk_dtype_size(e->master); }

/* Whether the precision computes in plain FMA maths, no tensor-core
 * shortcuts: fp32 (no TF32) and fp64. */
static int plain_math(const engine *e)
{
    return e->cfg.precision == PREC_FP32 || e->cfg.precision == PREC_FP64;
}

/* The scaling factors alpha = 1 and beta = 0 cuDNN and cuBLAS take: double
 * for double data, float otherwise. */
static const void *one_of(const engine *e)
{
    static const float one_f = 1.0f;
    static const double one_d = 1.0;
    return e->master == LBK_F64 ? (const void *)&one_d : (const void *)&one_f;
}

static const void *zero_of(const engine *e)
{
    static const float zero_f = 0.0f;
    static const double zero_d = 0.0;
    return e->master == LBK_F64 ? (const void *)&zero_d : (const void *)&zero_f;
}

/* A replayed graph holds raw pointers: drop it when a buffer it uses moves. */
static void drop_graph(engine *e)
{
    if (e->graph) {
        cudaStreamSynchronize(e->stream);
        cudaGraphExecDestroy(e->graph);
        cudaGetLastError();
        e->graph = NULL;
    }
}

static int ensure_workspace(engine *e, size_t bytes)
{
    if (bytes <= e->workspace_bytes && e->workspace)
        return 0;
    drop_graph(e);
    CK_CUDA(cudaStreamSynchronize(e->stream));
    device_free(e, &e->workspace, e->workspace_bytes);
    e->workspace_bytes = 0;
    CK(device_alloc(e, &e->workspace, bytes, "the cuDNN workspace"));
    e->workspace_bytes = bytes;
    return 0;
}

/* Index and loss buffers for `steps` steps of a full batch. */
static int ensure_capacity(engine *e, int steps)
{
    if (steps <= e->capacity_steps)
        return 0;
    drop_graph(e);
    CK_CUDA(cudaStreamSynchronize(e->stream));
    const size_t old_steps = (size_t)e->capacity_steps, B = (size_t)e->cfg.batch_size;
    device_free(e, (void **)&e->indices_dev, old_steps * B * sizeof(int32_t));
    device_free(e, (void **)&e->losses_dev, old_steps * sizeof(double));
    host_free(e, (void **)&e->indices_host, old_steps * B * sizeof(int32_t));
    host_free(e, (void **)&e->losses_host, old_steps * sizeof(double));
    e->capacity_steps = 0;
    const size_t n = (size_t)steps;
    CK(device_alloc(e, (void **)&e->indices_dev, n * B * sizeof(int32_t), "batch indices"));
    CK(device_alloc(e, (void **)&e->losses_dev, n * sizeof(double), "losses"));
    CK(host_alloc(e, (void **)&e->indices_host, n * B * sizeof(int32_t), "batch indices"));
    CK(host_alloc(e, (void **)&e->losses_host, n * sizeof(double), "losses"));
    e->capacity_steps = steps;
    return 0;
}

/* ------------------------------------------------------------------ plans */

static const char *fwd_algo_name(int a)
{
    static const char *names[] = {
        "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
        "winograd",      "winograd_nonfused"};
    return a >= 0 && a < 8 ? names[a] : "?";
}

static const char *bwd_data_algo_name(int a)
{
    static const char *names[] = {"algo0",      "algo1",    "fft",
                                  "fft_tiling", "winograd", "winograd_nonfused"};
    return a >= 0 && a < 6 ? names[a] : "?";
}

static const char *bwd_filter_algo_name(int a)
{
    static const char *names[] = {
        "algo0", "algo1", "fft", "algo3", "winograd", "winograd_nonfused", "fft_tiling"};
    return a >= 0 && a < 7 ? names[a] : "?";
}

/* The math type a convolution descriptor starts with: fp32 allows only FMA
 * (CUDNN_DEFAULT_MATH would let Ampere and later use TF32); the others allow
 * tensor cores. CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is never used: it may
 * convert fp32 data down to fp16. */
static cudnnMathType_t initial_math(const engine *e)
{
    return plain_math(e) ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* One candidate of cuDNN's heuristic list, whatever the direction. */
typedef struct candidate {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
    size_t memory;
} candidate;

/* Why a candidate falls short of what the engine prefers (0: it does not).
 * Preferred: deterministic (so runs repeat bitwise and graph replays equal
 * eager steps) and, in fp32, plain FMA maths. */
enum fallback_reason { FALLBACK_NONE, FALLBACK_NONDETERMINISTIC, FALLBACK_NOT_FMA };

static const char *fallback_text(int why)
{
    return why == FALLBACK_NONDETERMINISTIC ? "non-deterministic"
           : why == FALLBACK_NOT_FMA        ? "not plain FMA maths"
                                            : "";
}

/* Whether a heuristic result can be used at all: it ran, its workspace is
 * bounded, and it never converts fp32 data down to fp16. */
static int usable(const candidate *c)
{
    return c->status == CUDNN_STATUS_SUCCESS && c->memory <= CONV_WORKSPACE_LIMIT &&
           c->math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* Of a usable candidate: what keeps it from being preferred, or
 * FALLBACK_NONE. */
static int shortfall(const engine *e, const candidate *c)
{
    if (c->determinism != CUDNN_DETERMINISTIC)
        return FALLBACK_NONDETERMINISTIC;
    if (plain_math(e) && c->math != CUDNN_FMA_MATH && c->math != CUDNN_DEFAULT_MATH)
        return FALLBACK_NOT_FMA;
    return FALLBACK_NONE;
}

/* The math type set on the descriptor for a chosen candidate. */
static cudnnMathType_t chosen_math(const engine *e, const candidate *c)
{
    return plain_math(e) ? CUDNN_FMA_MATH : c->math;
}

enum conv_direction { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER };

/* FFT algorithms round more than the direct ones and build cuFFT plans
 * behind the scenes (memory, and calls that may not be capturable): they
 * are taken only when nothing else is offered. */
static int is_fft(enum conv_direction dir, int algo)
{
    switch (dir) {
    case CONV_FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING;
    case CONV_BWD_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING;
    case CONV_BWD_FILTER:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
    }
    return 0;
}

/* Asks cuDNN's heuristics (cudnnGetConvolution*Algorithm_v7, deterministic
 * for a given GPU and library, unlike the timing-based Find, whose choice
 * could change from run to run) for layer li's algorithm in one direction,
 * takes the first preferred one in the heuristics' order (FFT ones last),
 * else the fastest usable one, sets its math type and adds its workspace to
 * the plan. */
static int choose_algorithm(engine *e, plan *p, int li, enum conv_direction dir, int n)
{
    const layer *l = &e->w.layers[li];
    candidate cand[16];
    int got = 0;
    cudnnConvolutionDescriptor_t conv = dir == CONV_FWD        ? p->fwd[li]
                                        : dir == CONV_BWD_DATA ? p->bwd_data[li]
                                                               : p->bwd_filter[li];
    CK_CUDNN(cudnnSetConvolutionMathType(conv, initial_math(e)));
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        CK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(
            e->cudnn, p->in[li], e->filter[li], conv, p->out[li], CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
            &got, perf));
        for (int i = 0; i < got; i++)
            cand[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].determinism,
                                  perf[i].mathType, perf[i].memory};
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        CK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            e->cudnn, e->filter[li], p->out[li], conv, p->in[li],
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        for (int i = 0; i < got; i++)
            cand[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].determinism,
                                  perf[i].mathType, perf[i].memory};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        CK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            e->cudnn, p->in[li], p->out[li], conv, e->filter[li],
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
        for (int i = 0; i < got; i++)
            cand[i] = (candidate){(int)perf[i].algo, perf[i].status, perf[i].determinism,
                                  perf[i].mathType, perf[i].memory};
    }
    /* passes 0 and 1: the preferred candidates, non-FFT ones first; passes 2
     * and 3: when none of them fits, the fastest usable one (the heuristics
     * list them fastest first), recorded in the plan with why */
    for (int pass = 0; pass < 4; pass++) {
        for (int i = 0; i < got; i++) {
            if (!usable(&cand[i]) || is_fft(dir, cand[i].algo) != (pass & 1))
                continue;
            const int why = shortfall(e, &cand[i]);
            if (pass < 2 && why != FALLBACK_NONE)
                continue;
            const cudnnMathType_t math = chosen_math(e, &cand[i]);
            size_t bytes = 0;
            cudnnStatus_t rc = cudnnSetConvolutionMathType(conv, math);
            if (rc == CUDNN_STATUS_SUCCESS && dir == CONV_FWD)
                rc = cudnnGetConvolutionForwardWorkspaceSize(
                    e->cudnn, p->in[li], e->filter[li], conv, p->out[li],
                    (cudnnConvolutionFwdAlgo_t)cand[i].algo, &bytes);
            else if (rc == CUDNN_STATUS_SUCCESS && dir == CONV_BWD_DATA)
                rc = cudnnGetConvolutionBackwardDataWorkspaceSize(
                    e->cudnn, e->filter[li], p->out[li], conv, p->in[li],
                    (cudnnConvolutionBwdDataAlgo_t)cand[i].algo, &bytes);
            else if (rc == CUDNN_STATUS_SUCCESS)
                rc = cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    e->cudnn, p->in[li], p->out[li], conv, e->filter[li],
                    (cudnnConvolutionBwdFilterAlgo_t)cand[i].algo, &bytes);
            if (rc != CUDNN_STATUS_SUCCESS)
                continue; /* this one does not fit these shapes after all: try the next */
            if (dir == CONV_FWD) {
                p->fwd_algo[li] = (cudnnConvolutionFwdAlgo_t)cand[i].algo;
                p->fwd_math[li] = math;
            } else if (dir == CONV_BWD_DATA) {
                p->bwd_data_algo[li] = (cudnnConvolutionBwdDataAlgo_t)cand[i].algo;
                p->bwd_data_math[li] = math;
            } else {
                p->bwd_filter_algo[li] = (cudnnConvolutionBwdFilterAlgo_t)cand[i].algo;
                p->bwd_filter_math[li] = math;
            }
            p->fallback[dir][li] = (unsigned char)why;
            if (bytes > p->workspace_bytes)
                p->workspace_bytes = bytes;
            return 0;
        }
    }
    static const char *dir_names[] = {"forward", "backward-data", "backward-filter"};
    return fail(e,
                "cuda: %s: cuDNN offers no usable %s algorithm for batch %d in %s "
                "(%d candidates: each failed, needs over the %zu MiB workspace limit or "
                "converts fp32 down to fp16)",
                l->name, dir_names[dir], n, precision_name(e->cfg.precision), got,
                (size_t)CONV_WORKSPACE_LIMIT >> 20);
}

/* Whether layer li's backward pass computes the gradient to its input:
 * not for the first layer of a whole network (its input is the images),
 * always in a model-parallel stage (the stage before needs it). */
static int needs_input_gradient(const engine *e, int li)
{
    return li > 0 || e->cfg.stage_slots > 0;
}

static int set_tensor(engine *e, cudnnTensorDescriptor_t d, int n, shape3 s)
{
    CK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, e->cudnn_type, n, s.c, s.h, s.w));
    return 0;
}

/* Descriptors and algorithms for batches of n images; with allocate, the
 * workspace grows to what they need. */
static int build_plan(engine *e, plan *p, int n, int allocate)
{
    p->n = 0; /* until every step below has succeeded: a failed plan is never handed out */
    p->workspace_bytes = 0;
    for (int li = 0; li < e->w.n_layers; li++) {
        const layer *l = &e->w.layers[li];
        if (l->kind != LAYER_CONV && l->kind != LAYER_MAXPOOL)
            continue;
        if (!p->in[li])
            CK_CUDNN(cudnnCreateTensorDescriptor(&p->in[li]));
        if (!p->out[li])
            CK_CUDNN(cudnnCreateTensorDescriptor(&p->out[li]));
        if (l->kind == LAYER_CONV && !p->fwd[li])
            CK_CUDNN(cudnnCreateConvolutionDescriptor(&p->fwd[li]));
        if (l->kind == LAYER_CONV && !p->bwd_data[li])
            CK_CUDNN(cudnnCreateConvolutionDescriptor(&p->bwd_data[li]));
        if (l->kind == LAYER_CONV && !p->bwd_filter[li])
            CK_CUDNN(cudnnCreateConvolutionDescriptor(&p->bwd_filter[li]));
        CK(set_tensor(e, p->in[li], n, l->in));
        CK(set_tensor(e, p->out[li], n, l->out));
        int dims[4];
        if (l->kind == LAYER_CONV) {
            cudnnConvolutionDescriptor_t convs[3] = {p->fwd[li], p->bwd_data[li],
                                                     p->bwd_filter[li]};
            /* cross-correlation like the naive layers, fp32 accumulation in
             * every precision but fp64 (the "pseudo half" configurations) */
            for (int k = 0; k < 3; k++)
                CK_CUDNN(cudnnSetConvolution2dDescriptor(
                    convs[k], 0, 0, l->stride, l->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                    e->master == LBK_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
            CK_CUDNN(cudnnGetConvolution2dForwardOutputDim(p->fwd[li], p->in[li], e->filter[li],
                                                           &dims[0], &dims[1], &dims[2], &dims[3]));
        } else {
            CK_CUDNN(cudnnGetPooling2dForwardOutputDim(e->pool[li], p->in[li], &dims[0], &dims[1],
                                                       &dims[2], &dims[3]));
        }
        if (dims[0] != n || dims[1] != l->out.c || dims[2] != l->out.h || dims[3] != l->out.w)
            return fail(e, "cuda: %s: cuDNN gives a %dx%dx%dx%d output, the workload %dx%dx%dx%d",
                        l->name, dims[0], dims[1], dims[2], dims[3], n, l->out.c, l->out.h,
                        l->out.w);
    }
    for (int li = 0; li < e->w.n_layers; li++) {
        if (e->w.layers[li].kind != LAYER_CONV)
            continue;
        CK(choose_algorithm(e, p, li, CONV_FWD, n));
        CK(choose_algorithm(e, p, li, CONV_BWD_FILTER, n));
        if (needs_input_gradient(e, li))
            CK(choose_algorithm(e, p, li, CONV_BWD_DATA, n));
    }
    if (allocate)
        CK(ensure_workspace(e, p->workspace_bytes));
    p->n = n;
    return 0;
}

static void destroy_plan(plan *p)
{
    for (int li = 0; li < MAX_LAYERS; li++) {
        if (p->in[li])
            cudnnDestroyTensorDescriptor(p->in[li]);
        if (p->out[li])
            cudnnDestroyTensorDescriptor(p->out[li]);
        if (p->fwd[li])
            cudnnDestroyConvolutionDescriptor(p->fwd[li]);
        if (p->bwd_data[li])
            cudnnDestroyConvolutionDescriptor(p->bwd_data[li]);
        if (p->bwd_filter[li])
            cudnnDestroyConvolutionDescriptor(p->bwd_filter[li]);
    }
}

/* The plan for n images: the full one, a cached one, or a new one in the
 * least recently used slot. */
static plan *plan_for(engine *e, int n)
{
    if (n == e->plans[0].n)
        return &e->plans[0];
    plan *oldest = &e->plans[1];
    for (int i = 1; i <= PARTIAL_PLANS; i++) {
        plan *p = &e->plans[i];
        if (p->n == n) {
            p->last_used = ++e->plan_clock;
            return p;
        }
        if (p->last_used < oldest->last_used)
            oldest = p;
    }
    oldest->last_used = ++e->plan_clock;
    return build_plan(e, oldest, n, 1) == 0 ? oldest : NULL;
}

/* ------------------------------------------------------------------ layers */

static const void *weights_at(engine *e, size_t offset)
{
    if (e->mixed)
        return (const char *)e->params_lo + offset * act_size(e);
    return (const char *)e->params + offset * master_size(e);
}

static void *grads_at(engine *e, size_t offset) { return (char *)e->grads + offset * act_size(e); }

/* C = product, or C += product with accumulate (cuBLAS's beta = 1). */
static int gemm_into(engine *e, dense_product which, int n, int in, int out, const void *A,
                     const void *B, void *C, int accumulate)
{
    const gemm_args g = dense_gemm_args(which, n, in, out);
    /* scalars of the compute type: 32F, or 64F in fp64 */
    CK_CUBLAS(cublasGemmEx(e->cublas, g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                           g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, one_of(e), A,
                           e->blas_type, g.lda, B, e->blas_type, g.ldb,
                           accumulate ? one_of(e) : zero_of(e), C, e->blas_type, g.ldc,
                           e->blas_compute, CUBLAS_GEMM_DEFAULT));
    return 0;
}

static int gemm(engine *e, dense_product which, int n, int in, int out, const void *A,
                const void *B, void *C)
{
    return gemm_into(e, which, n, in, out, A, B, C, 0);
}

static int forward_layer(engine *e, const plan *p, int i, int n)
{
    const layer *l = &e->w.layers[i];
    const void *one = one_of(e), *zero = zero_of(e);
    void *x = e->act[i], *y = e->act[i + 1];
    switch (l->kind) {
    case LAYER_CONV:
        CK_CUDNN(cudnnConvolutionForward(e->cudnn, one, p->in[i], x, e->filter[i],
                                         weights_at(e, l->weight_offset), p->fwd[i], p->fwd_algo[i],
                                         e->workspace, e->workspace_bytes, zero, p->out[i], y));
        CK_CUDA(lbk_bias_add(e->stream, e->act_type, y, weights_at(e, l->bias_offset), n, l->out.c,
                             l->out.h * l->out.w));
        break;
    case LAYER_MAXPOOL:
        CK_CUDNN(cudnnPoolingForward(e->cudnn, e->pool[i], one, p->in[i], x, zero, p->out[i], y));
        break;
    case LAYER_DENSE:
        CK(gemm(e, DENSE_FORWARD, n, shape3_size(l->in), l->units, weights_at(e, l->weight_offset),
                x, y));
        CK_CUDA(
            lbk_bias_add(e->stream, e->act_type, y, weights_at(e, l->bias_offset), n, l->units, 1));
        break;
    case LAYER_RELU:
        CK_CUDA(lbk_relu_forward(e->stream, e->act_type, y, x, (size_t)n * shape3_size(l->in)));
        break;
    }
    return 0;
}

/* Parameter gradients of layer i (overwritten, or added to with
 * accumulate: cuDNN's and cuBLAS's beta = 1), and the gradient to its input
 * into dx unless dx is NULL. */
static int backward_layer(engine *e, const plan *p, int i, int n, const void *dy, void *dx,
                          int accumulate)
{
    const layer *l = &e->w.layers[i];
    const void *one = one_of(e), *zero = zero_of(e);
    const void *grad_beta = accumulate ? one : zero;
    const void *x = e->act[i], *y = e->act[i + 1];
    switch (l->kind) {
    case LAYER_CONV:
        CK_CUDNN(cudnnConvolutionBackwardFilter(e->cudnn, one, p->in[i], x, p->out[i], dy,
                                                p->bwd_filter[i], p->bwd_filter_algo[i],
                                                e->workspace, e->workspace_bytes, grad_beta,
                                                e->filter[i], grads_at(e, l->weight_offset)));
        CK_CUDA(lbk_bias_backward(e->stream, e->act_type, grads_at(e, l->bias_offset), dy, n,
                                  l->out.c, l->out.h * l->out.w, e->bias_partial, accumulate));
        if (dx)
            CK_CUDNN(cudnnConvolutionBackwardData(e->cudnn, one, e->filter[i],
                                                  weights_at(e, l->weight_offset), p->out[i], dy,
                                                  p->bwd_data[i], p->bwd_data_algo[i], e->workspace,
                                                  e->workspace_bytes, zero, p->in[i], dx));
        break;
    case LAYER_MAXPOOL:
        if (dx)
            CK_CUDNN(cudnnPoolingBackward(e->cudnn, e->pool[i], one, p->out[i], y, p->out[i], dy,
                                          p->in[i], x, zero, p->in[i], dx));
        break;
    case LAYER_DENSE:
        CK(gemm_into(e, DENSE_BACKWARD_WEIGHTS, n, shape3_size(l->in), l->units, x, dy,
                     grads_at(e, l->weight_offset), accumulate));
        CK_CUDA(lbk_bias_backward(e->stream, e->act_type, grads_at(e, l->bias_offset), dy, n,
                                  l->units, 1, e->bias_partial, accumulate));
        if (dx)
            CK(gemm(e, DENSE_BACKWARD_DATA, n, shape3_size(l->in), l->units,
                    weights_at(e, l->weight_offset), dy, dx));
        break;
    case LAYER_RELU:
        if (dx)
            CK_CUDA(lbk_relu_backward(e->stream, e->act_type, dx, dy, y,
                                      (size_t)n * shape3_size(l->in)));
        break;
    }
    return 0;
}

/* Where the gather kernel reads training images from: the resident set, or
 * the staging buffers (whose rows the indices then name). */
static int gather_training_batch(engine *e, int n)
{
    const uint8_t *images = e->train_images, *labels = e->train_labels;
    if (!e->cfg.data_on_device) {
        images = e->stage_dev;
        labels = e->stage_dev + 2 * (size_t)e->cfg.batch_size * e->pixels;
    }
    CK_CUDA(lbk_gather(e->stream, e->act_type, e->act[0], e->batch_labels, images, labels,
                       e->indices_dev, e->state, 0, n, (int)e->pixels));
    return 0;
}

/* Forward, loss and backward for the batch in the slot; gradients of
 * loss_scale * mean loss end in e->grads. */
static int forward_backward(engine *e, const plan *p, int n)
{
    const int L = e->w.n_layers;
    CK(gather_training_batch(e, n));
    for (int i = 0; i < L; i++)
        CK(forward_layer(e, p, i, n));
    CK_CUDA(lbk_softmax_xent(e->stream, e->act_type, e->grad_a, e->act[L], e->batch_labels, n,
                             e->w.classes, e->state, e->losses_dev));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *d_in = i > 0 ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(backward_layer(e, p, i, n, d, d_in, 0));
        d = d_in;
    }
    return 0;
}

/* The optimiser step from e->grads and the step's bookkeeping. */
static int update_and_finish(engine *e)
{
    if (e->scaling.dynamic)
        CK_CUDA(lbk_check_finite(e->stream, e->act_type, e->grads, e->n_params, e->state));
    CK_CUDA(lbk_update(e->stream, e->opt, e->params, e->master, e->params_lo, e->act_type,
                       e->grads, e->act_type, e->opt_state, e->decay_mask, e->n_params, 1.0f, 1,
                       e->state));
    CK_CUDA(lbk_finish_step(e->stream, e->state, e->scaling));
    return 0;
}

/* One whole training step: exactly what the graph captures. */
static int enqueue_step(engine *e, const plan *p, int n)
{
    CK(forward_backward(e, p, n));
    return update_and_finish(e);
}

/* ------------------------------------------------------------------ state */

static int refresh_low_copy(engine *e)
{
    if (e->mixed)
        CK_CUDA(lbk_convert(e->stream, e->params_lo, e->act_type, e->params, LBK_F32, e->n_params,
                            0, NULL));
    return 0;
}

static int save_model(engine *e)
{
    const size_t size = master_size(e);
    CK_CUDA(cudaMemcpyAsync(e->saved, e->params, e->n_params * size, cudaMemcpyDeviceToDevice,
                            e->stream));
    if (e->state_floats)
        CK_CUDA(cudaMemcpyAsync((char *)e->saved + e->n_params * size, e->opt_state,
                                e->state_floats * size, cudaMemcpyDeviceToDevice, e->stream));
    CK_CUDA(cudaMemcpyAsync(e->state_saved, e->state, sizeof(cuda_step_state),
                            cudaMemcpyDeviceToDevice, e->stream));
    return 0;
}

static int restore_model(engine *e)
{
    const size_t size = master_size(e);
    CK_CUDA(cudaMemcpyAsync(e->params, e->saved, e->n_params * size, cudaMemcpyDeviceToDevice,
                            e->stream));
    if (e->state_floats)
        CK_CUDA(cudaMemcpyAsync(e->opt_state, (char *)e->saved + e->n_params * size,
                                e->state_floats * size, cudaMemcpyDeviceToDevice, e->stream));
    CK_CUDA(cudaMemcpyAsync(e->state, e->state_saved, sizeof(cuda_step_state),
                            cudaMemcpyDeviceToDevice, e->stream));
    return refresh_low_copy(e);
}

static int reset_slot(engine *e)
{
    CK_CUDA(cudaMemsetAsync(&e->state->slot, 0, sizeof(int), e->stream));
    return 0;
}

/* Captures one full-batch step as a graph. First one eager step runs and the
 * model is put back, so that cuDNN, cuBLAS and the kernels do any lazy
 * set-up outside the capture. The step's indices must already be in slot 0.
 * A capture that fails is not an error: the steps then run eagerly and
 * describe() says why. */
static int capture_graph(engine *e)
{
    const int B = e->cfg.batch_size;
    CK(reset_slot(e));
    CK(save_model(e));
    CK(enqueue_step(e, &e->plans[0], B));
    CK(restore_model(e));
    CK(reset_slot(e));
    CK_CUDA(cudaStreamSynchronize(e->stream));

    cudaGraph_t g = NULL;
    CK_CUDA(cudaStreamBeginCapture(e->stream, cudaStreamCaptureModeThreadLocal));
    int rc = enqueue_step(e, &e->plans[0], B);
    char reason[160] = "";
    if (rc)
        snprintf(reason, sizeof reason, "%.150s", e->err);
    cudaError_t end = cudaStreamEndCapture(e->stream, &g);
    if (!rc && end != cudaSuccess)
        snprintf(reason, sizeof reason, "cudaStreamEndCapture: %s", cudaGetErrorString(end));
    if (!rc && end == cudaSuccess) {
        cudaError_t inst = cudaGraphInstantiateWithFlags(&e->graph, g, 0);
        if (inst != cudaSuccess) {
            e->graph = NULL;
            snprintf(reason, sizeof reason, "cudaGraphInstantiateWithFlags: %s",
                     cudaGetErrorString(inst));
        }
    }
    if (g)
        cudaGraphDestroy(g);
    cudaGetLastError();
    if (!e->graph) {
        e->graph_failed = 1;
        snprintf(e->graph_note, sizeof e->graph_note, "graph capture failed, eager steps (%.150s)",
                 reason);
        e->err[0] = '\0';
    }
    sample_memory(e);
    return 0;
}

/* ------------------------------------------------------------------ staging */

/* data_on_device off: copies images rows[0..n) (first..first+n when rows is
 * NULL) of d into staging buffer k, on the copy stream, and makes the
 * compute stream wait for it. The caller records compute_done[k] after the
 * work that reads the buffer. */
static int stage_batch(engine *e, const dataset *d, const int32_t *rows, long first, int n, int k)
{
    const size_t B = (size_t)e->cfg.batch_size, P = e->pixels;
    uint8_t *host_images = e->stage_host + k * B * P;
    uint8_t *host_labels = e->stage_host + 2 * B * P + k * B;
    /* the previous copy out of this pinned buffer must be done */
    CK_CUDA(cudaEventSynchronize(e->copy_done[k]));
    for (int b = 0; b < n; b++) {
        const long row = rows ? rows[b] : first + b;
        memcpy(host_images + (size_t)b * P, d->images + (size_t)row * P, P);
        host_labels[b] = d->labels[row];
    }
    /* and the compute that last read the device buffer must be done */
    CK_CUDA(cudaStreamWaitEvent(e->copy_stream, e->compute_done[k], 0));
    CK_CUDA(cudaMemcpyAsync(e->stage_dev + k * B * P, host_images, (size_t)n * P,
                            cudaMemcpyHostToDevice, e->copy_stream));
    CK_CUDA(cudaMemcpyAsync(e->stage_dev + 2 * B * P + k * B, host_labels, (size_t)n,
                            cudaMemcpyHostToDevice, e->copy_stream));
    CK_CUDA(cudaEventRecord(e->copy_done[k], e->copy_stream));
    CK_CUDA(cudaStreamWaitEvent(e->stream, e->copy_done[k], 0));
    return 0;
}

/* ------------------------------------------------------------------ create */

/* The slot's activations into act[]. */
static void use_slot(engine *e, int slot)
{
    const int per_slot = e->w.n_layers + 1;
    for (int i = 0; i < per_slot; i++)
        e->act[i] = e->slot_act[slot * per_slot + i];
}

static int init_engine(engine *e)
{
    const workload *w = &e->w;
    const size_t B = (size_t)e->cfg.batch_size;
    int count = 0;
    CK_CUDA(cudaGetDeviceCount(&count));
    if (e->device >= count)
        return fail(e, "cuda: --device %d, but this machine has %d GPU%s", e->device, count,
                    count == 1 ? "" : "s");
    CK_CUDA(cudaSetDevice(e->device));
    CK_CUDA(cudaFree(NULL)); /* creates the context before the memory baseline */
    size_t total = 0;
    CK_CUDA(cudaMemGetInfo(&e->mem_free_at_start, &total));

    CK_CUDA(cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking));
    CK_CUDA(cudaStreamCreateWithFlags(&e->copy_stream, cudaStreamNonBlocking));
    for (int k = 0; k < 2; k++) {
        CK_CUDA(cudaEventCreateWithFlags(&e->copy_done[k], cudaEventDisableTiming));
        CK_CUDA(cudaEventCreateWithFlags(&e->compute_done[k], cudaEventDisableTiming));
    }
    CK_CUDNN(cudnnCreate(&e->cudnn));
    CK_CUDNN(cudnnSetStream(e->cudnn, e->stream));
    CK_CUBLAS(cublasCreate(&e->cublas));
    /* cublasSetStream resets the workspace, so the workspace comes after; an
     * explicit workspace keeps cuBLAS from allocating during graph capture */
    CK_CUBLAS(cublasSetStream(e->cublas, e->stream));
    CK(device_alloc(e, &e->cublas_workspace, CUBLAS_WORKSPACE_BYTES, "the cuBLAS workspace"));
    CK_CUBLAS(cublasSetWorkspace(e->cublas, e->cublas_workspace, CUBLAS_WORKSPACE_BYTES));
    CK_CUBLAS(cublasSetMathMode(e->cublas, (cublasMath_t)dense_math_mode(e->cfg.precision)));

    /* descriptors that do not depend on the batch size */
    for (int li = 0; li < w->n_layers; li++) {
        const layer *l = &w->layers[li];
        if (l->kind == LAYER_CONV) {
            CK_CUDNN(cudnnCreateFilterDescriptor(&e->filter[li]));
            CK_CUDNN(cudnnSetFilter4dDescriptor(e->filter[li], e->cudnn_type, CUDNN_TENSOR_NCHW,
                                                l->units, l->in.c, l->kernel, l->kernel));
        } else if (l->kind == LAYER_MAXPOOL) {
            CK_CUDNN(cudnnCreatePoolingDescriptor(&e->pool[li]));
            /* deterministic backward; NaN propagates so a divergence shows */
            CK_CUDNN(cudnnSetPooling2dDescriptor(e->pool[li], CUDNN_POOLING_MAX_DETERMINISTIC,
                                                 CUDNN_PROPAGATE_NAN, l->kernel, l->kernel, 0, 0,
                                                 l->stride, l->stride));
        }
    }
    e->plans[0].last_used = ~0UL; /* never evicted */
    CK(build_plan(e, &e->plans[0], (int)B, 0));
    /* One workspace for every batch size 1..B, sized now: growing it later
     * (for an epoch's short last batch, 60000 mod 128 = 96) would drop the
     * captured graph in the middle of an epoch. A size cuDNN has no
     * algorithm for is left out here and says so when it is used. */
    size_t workspace = e->plans[0].workspace_bytes;
    for (int n = 1; n < (int)B; n++)
        if (build_plan(e, &e->plans[1], n, 0) == 0 && e->plans[1].workspace_bytes > workspace)
            workspace = e->plans[1].workspace_bytes;
    e->plans[1].n = 0;
    e->err[0] = '\0';
    CK(ensure_workspace(e, workspace));

    /* flat vectors */
    const size_t n = w->param_count;
    e->n_params = n;
    e->state_floats = (size_t)optimizer_state_per_param(e->cfg.opt.kind) * n;
    CK(device_alloc(e, &e->params, n * master_size(e), "parameters"));
    if (e->master == LBK_F64)
        CK(device_alloc(e, (void **)&e->params32, n * sizeof(float), "float parameters"));
    CK(device_alloc(e, &e->grads, n * act_size(e), "gradients"));
    if (e->mixed) {
        CK(device_alloc(e, &e->params_lo, n * act_size(e), "low-precision parameters"));
        CK(device_alloc(e, (void **)&e->grads32, n * sizeof(float), "fp32 gradients"));
    }
    CK(device_alloc(e, &e->opt_state, e->state_floats * master_size(e), "optimiser state"));
    CK(device_alloc(e, &e->saved, (n + e->state_floats) * master_size(e), "saved parameters"));
    CK(device_alloc(e, (void **)&e->state, sizeof(cuda_step_state), "step state"));
    CK(device_alloc(e, (void **)&e->state_saved, sizeof(cuda_step_state), "saved step state"));

    /* decay on weights, not on biases */
    uint8_t *mask = calloc(n ? n : 1, 1);
    if (!mask)
        return fail(e, "cuda: out of host memory for the decay mask");
    for (int li = 0; li < w->n_layers; li++)
        memset(mask + w->layers[li].weight_offset, 1, w->layers[li].weight_count);
    int rc = device_alloc(e, (void **)&e->decay_mask, n, "decay mask");
    if (!rc &&
        cudaMemcpyAsync(e->decay_mask, mask, n, cudaMemcpyHostToDevice, e->stream) != cudaSuccess)
        rc = fail(e, "cuda: copying the decay mask to the device failed");
    if (!rc && cudaStreamSynchronize(e->stream) != cudaSuccess)
        rc = fail(e, "cuda: copying the decay mask to the device failed");
    free(mask);
    if (rc)
        return -1;
    cuda_step_state st = {0, 0, e->scaling.initial, 0, 0, 0};
    CK_CUDA(cudaMemcpyAsync(e->state, &st, sizeof st, cudaMemcpyHostToDevice, e->stream));

    /* activations, one set per slot, and their gradients */
    const int L = w->n_layers;
    const size_t max_act = (size_t)workload_max_activation(w);
    e->slots = e->cfg.stage_slots > 0 ? e->cfg.stage_slots : 1;
    e->slot_act = calloc((size_t)e->slots * (L + 1), sizeof *e->slot_act);
    e->slot_batch = calloc((size_t)e->slots, sizeof *e->slot_batch);
    if (!e->slot_act || !e->slot_batch)
        return fail(e, "cuda: out of host memory for %d slots of activations", e->slots);
    for (int slot = 0; slot < e->slots; slot++)
        for (int i = 0; i <= L; i++) {
            const shape3 shape = i ? w->layers[i - 1].out : w->input;
            const size_t bytes = B * shape3_size(shape) * act_size(e);
            CK(device_alloc(e, &e->slot_act[slot * (L + 1) + i], bytes, "activations"));
            e->activation_bytes += bytes;
        }
    use_slot(e, 0);
    size_t partials = 0;
    for (int li = 0; li < w->n_layers; li++) {
        const layer *l = &w->layers[li];
        size_t s = 0;
        if (l->kind == LAYER_CONV)
            s = lbk_bias_backward_partials((int)B, l->out.c, l->out.h * l->out.w);
        else if (l->kind == LAYER_DENSE)
            s = lbk_bias_backward_partials((int)B, l->units, 1);
        if (s > partials)
            partials = s;
    }
    CK(device_alloc(e, &e->grad_a, B * max_act * act_size(e), "activation gradients"));
    CK(device_alloc(e, &e->grad_b, B * max_act * act_size(e), "activation gradients"));
    CK(device_alloc(e, (void **)&e->batch_labels, B * sizeof(int), "batch labels"));
    CK(device_alloc(e, &e->bias_partial, partials * sizeof(double), "bias partials"));
    CK(device_alloc(e, (void **)&e->confusion,
                    sizeof(unsigned long long) * WORKLOAD_MAX_CLASSES * WORKLOAD_MAX_CLASSES,
                    "confusion counts"));
    CK(device_alloc(e, (void **)&e->loss_sum, sizeof(double), "loss sum"));
    CK(ensure_capacity(e, 1));

    if (e->cfg.stage_slots) {
        const int in = shape3_size(w->input), out = shape3_size(w->layers[L - 1].out);
        e->io_floats = B * (size_t)(in > out ? in : out);
        CK(host_alloc(e, (void **)&e->io_host, e->io_floats * sizeof(float),
                      "activations crossing to and from the host"));
        if (e->act_type != LBK_F32)
            CK(device_alloc(e, (void **)&e->io_dev, e->io_floats * sizeof(float),
                            "activations as floats"));
    }

    e->pixels = (size_t)shape3_size(w->input);
    if (!e->cfg.data_on_device && !e->cfg.stage_slots) {
        const size_t bytes = 2 * B * e->pixels + 2 * B;
        CK(host_alloc(e, (void **)&e->stage_host, bytes, "staging buffers"));
        CK(device_alloc(e, (void **)&e->stage_dev, bytes, "staging buffers"));
    }
    CK_CUDA(cudaStreamSynchronize(e->stream));
    sample_memory(e);
    return 0;
}

static void destroy(engine *e)
{
    if (!e)
        return;
    if (e->device >= 0 && cudaSetDevice(e->device) == cudaSuccess && e->stream)
        cudaStreamSynchronize(e->stream);
    if (e->graph)
        cudaGraphExecDestroy(e->graph);
    for (int i = 0; i <= PARTIAL_PLANS; i++)
        destroy_plan(&e->plans[i]);
    for (int li = 0; li < MAX_LAYERS; li++) {
        if (e->filter[li])
            cudnnDestroyFilterDescriptor(e->filter[li]);
        if (e->pool[li])
            cudnnDestroyPoolingDescriptor(e->pool[li]);
    }
    void *device_buffers[] = {
        e->params,      e->params_lo,    e->grads,        e->grads32,         e->opt_state,
        e->params32,
        e->decay_mask,  e->state,        e->state_saved,  e->saved,           e->grad_a,
        e->grad_b,      e->batch_labels, e->bias_partial, e->indices_dev,     e->losses_dev,
        e->confusion,   e->loss_sum,     e->train_images, e->train_labels,    e->test_images,
        e->test_labels, e->stage_dev,    e->workspace,    e->cublas_workspace, e->io_dev};
    for (size_t i = 0; i < sizeof device_buffers / sizeof device_buffers[0]; i++)
        if (device_buffers[i])
            cudaFree(device_buffers[i]);
    if (e->slot_act)
        for (int i = 0; i < e->slots * (e->w.n_layers + 1); i++)
            if (e->slot_act[i])
                cudaFree(e->slot_act[i]);
    free(e->slot_act);
    free(e->slot_batch);
    if (e->io_host)
        cudaFreeHost(e->io_host);
    if (e->indices_host)
        cudaFreeHost(e->indices_host);
    if (e->losses_host)
        cudaFreeHost(e->losses_host);
    if (e->stage_host)
        cudaFreeHost(e->stage_host);
    if (e->cublas)
        cublasDestroy(e->cublas);
    if (e->cudnn)
        cudnnDestroy(e->cudnn);
    for (int k = 0; k < 2; k++) {
        if (e->copy_done[k])
            cudaEventDestroy(e->copy_done[k]);
        if (e->compute_done[k])
            cudaEventDestroy(e->compute_done[k]);
    }
    if (e->copy_stream)
        cudaStreamDestroy(e->copy_stream);
    if (e->stream)
        cudaStreamDestroy(e->stream);
    cudaGetLastError();
    free(e);
}

static engine *create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                      size_t err_len)
{
    (void)ctx;
    const char *why = NULL;
    if (!w || !cfg)
        why = "no workload or configuration";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if ((int)cfg->precision < (int)PREC_FP32 || (int)cfg->precision > (int)PREC_FP64)
        why = "unknown precision";
    else if ((int)cfg->opt.kind < (int)OPT_SGD || (int)cfg->opt.kind > (int)OPT_ADAM)
        why = "unknown optimiser";
    else if (cfg->device < 0)
        why = "device index must be 0 or more";
    else if (cfg->stage_slots < 0 || cfg->stage_slots > 1024)
        why = "stage slots must be 0 (a whole network) to 1024";
    else if (cfg->stage_slots && cfg->precision == PREC_FP64)
        why = "model-parallel stages hand activations over as float, so fp64 is not offered";
    else if (cfg->stage_slots && cfg->precision == PREC_FP16)
        /* a skipped step and a new scale would have to be agreed by every stage */
        why = "fp16's dynamic loss scale belongs to a whole network, so model-parallel stages "
              "are not offered in fp16";
    else if (w->is_stage && !cfg->stage_slots)
        why = "a part of a network runs only as a model-parallel stage";
    else if (!cfg->stage_slots && w->input.c != 1)
        why = "the input must have one channel (uint8 images)";
    else
        why = workload_check(w);
    if (why) {
        if (err && err_len)
            snprintf(err, err_len, "cuda: %s", why);
        return NULL;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        if (err && err_len)
            snprintf(err, err_len, "cuda: out of host memory");
        return NULL;
    }
    e->w = *w;
    e->cfg = *cfg;
    e->device = cfg->device;
    e->opt = (lbk_optimizer){(int)cfg->opt.kind,    cfg->opt.lr,    cfg->opt.momentum,
                             cfg->opt.weight_decay, cfg->opt.beta1, cfg->opt.beta2,
                             cfg->opt.eps};
    e->scaling = (loss_scaling){0, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1 << 30};
    e->master = LBK_F32;
    e->last_loss = NAN;
    switch (cfg->precision) {
    case PREC_FP64:
        e->act_type = LBK_F64;
        e->master = LBK_F64;
        e->cudnn_type = CUDNN_DATA_DOUBLE;
        e->blas_type = CUDA_R_64F;
        e->blas_compute = CUBLAS_COMPUTE_64F;
        break;
    case PREC_FP32:
    case PREC_TF32:
        e->act_type = LBK_F32;
        e->cudnn_type = CUDNN_DATA_FLOAT;
        e->blas_type = CUDA_R_32F;
        e->blas_compute =
            cfg->precision == PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        break;
    case PREC_BF16:
        e->act_type = LBK_BF16;
        e->cudnn_type = CUDNN_DATA_BFLOAT16;
        e->blas_type = CUDA_R_16BF;
        e->blas_compute = CUBLAS_COMPUTE_32F;
        e->mixed = 1;
        break;
    case PREC_FP16:
        e->act_type = LBK_F16;
        e->cudnn_type = CUDNN_DATA_HALF;
        e->blas_type = CUDA_R_16F;
        e->blas_compute = CUBLAS_COMPUTE_32F;
        e->mixed = 1;
        /* fp16's range needs loss scaling; bf16 has fp32's range */
        e->scaling = (loss_scaling){1, 1024.0f, 2.0f, 0.5f, 1.0f, 65536.0f, 1000};
        break;
    }
    if (init_engine(e) != 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s", e->err);
        destroy(e);
        return NULL;
    }
    return e;
}

static const char *error(engine *e) { return e ? e->err : "cuda: no engine"; }

#define BEGIN(e) CK_CUDA(cudaSetDevice((e)->device))

/* ------------------------------------------------------------------ params */

static int set_params(engine *e, const float *params)
{
    BEGIN(e);
    float *to = e->master == LBK_F64 ? e->params32 : e->params;
    CK_CUDA(cudaMemcpyAsync(to, params, e->n_params * sizeof(float), cudaMemcpyHostToDevice,
                            e->stream));
    if (e->master == LBK_F64)
        CK_CUDA(lbk_convert(e->stream, e->params, LBK_F64, e->params32, LBK_F32, e->n_params, 0,
                            NULL));
    CK(refresh_low_copy(e));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    return 0;
}

static int get_params(engine *e, float *params)
{
    BEGIN(e);
    const float *from = e->params;
    if (e->master == LBK_F64) {
        CK_CUDA(lbk_convert(e->stream, e->params32, LBK_F32, e->params, LBK_F64, e->n_params, 0,
                            NULL));
        from = e->params32;
    }
    CK_CUDA(cudaMemcpyAsync(params, from, e->n_params * sizeof(float), cudaMemcpyDeviceToHost,
                            e->stream));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    return 0;
}

static int check_dataset(engine *e, const dataset *d, const char *which)
{
    if (!d->images || !d->labels || d->count < 0)
        return fail(e, "cuda: %s set has no images or labels", which);
    if (e->w.input.c != 1 || d->rows != e->w.input.h || d->cols != e->w.input.w)
        return fail(e, "cuda: %s images are %dx%d, workload %s wants %dx%dx%d", which, d->rows,
                    d->cols, e->w.name, e->w.input.c, e->w.input.h, e->w.input.w);
    if (e->cfg.stage_slots)
        return 0; /* a stage scores nothing: its labels are the loss's business */
    for (int i = 0; i < d->count; i++)
        if (d->labels[i] >= e->w.classes)
            return fail(e, "cuda: %s image %d has label %d, workload has %d classes", which, i,
                        d->labels[i], e->w.classes);
    return 0;
}

static int upload_set(engine *e, const dataset *d, uint8_t **images, uint8_t **labels,
                      const char *what)
{
    const size_t bytes = (size_t)d->count * e->pixels;
    CK_CUDA(cudaStreamSynchronize(e->stream));
    device_free(e, (void **)images, bytes);
    device_free(e, (void **)labels, (size_t)d->count);
    CK(device_alloc(e, (void **)images, bytes, what));
    CK(device_alloc(e, (void **)labels, (size_t)d->count, what));
    CK_CUDA(cudaMemcpyAsync(*images, d->images, bytes, cudaMemcpyHostToDevice, e->stream));
    CK_CUDA(
        cudaMemcpyAsync(*labels, d->labels, (size_t)d->count, cudaMemcpyHostToDevice, e->stream));
    return 0;
}

static int bind_dataset(engine *e, const dataset *train, const dataset *test)
{
    BEGIN(e);
    if ((train && check_dataset(e, train, "training")) || (test && check_dataset(e, test, "test")))
        return -1;
    if (e->cfg.stage_slots)
        return 0; /* a stage is handed its input by stage_forward: nothing to keep */
    drop_graph(e); /* the resident images may move */
    if (train) {
        e->train = *train;
        if (e->cfg.data_on_device)
            CK(upload_set(e, train, &e->train_images, &e->train_labels, "the training set"));
        const int B = e->cfg.batch_size;
        CK(ensure_capacity(e, train->count / B + 1));
        e->have_train = train->count > 0;
    }
    if (test) {
        e->test = *test;
        if (e->cfg.data_on_device)
            CK(upload_set(e, test, &e->test_images, &e->test_labels, "the test set"));
        e->have_test = 1;
    }
    CK_CUDA(cudaStreamSynchronize(e->stream));
    /* capture now, on slot 0 of zeroed indices (image 0), so describe()
     * can tell whether the graph is in use */
    if (e->have_train && e->cfg.cuda_graph && !e->graph && !e->graph_failed) {
        CK_CUDA(cudaMemsetAsync(e->indices_dev, 0, (size_t)e->cfg.batch_size * sizeof(int32_t),
                                e->stream));
        CK(capture_graph(e));
    }
    sample_memory(e);
    return 0;
}

/* ------------------------------------------------------------------ training */

static int check_batch(engine *e, const int32_t *indices, int batch, int steps)
{
    if (e->cfg.stage_slots)
        return fail(e, "cuda: a model-parallel stage trains through stage_forward and "
                       "stage_backward");
    if (batch < 1 || batch > e->cfg.batch_size)
        return fail(e, "cuda: batch of %d images, engine was created for 1..%d", batch,
                    e->cfg.batch_size);
    if (steps < 0)
        return fail(e, "cuda: %d steps asked", steps);
    if (!e->have_train)
        return fail(e, "cuda: no training set bound");
    if (!indices && steps > 0)
        return fail(e, "cuda: no batch indices");
    const long n = (long)steps * batch;
    for (long i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= e->train.count)
            return fail(e, "cuda: image index %d outside 0..%d", indices[i], e->train.count - 1);
    return 0;
}

/* Puts the indices of `steps` steps into the device index buffer: the
 * images themselves when the set is resident, else the staging rows that
 * step s will find its batch in (buffer s % 2). */
static int upload_indices(engine *e, const int32_t *indices, int batch, int steps)
{
    CK(ensure_capacity(e, steps));
    const size_t n = (size_t)steps * batch;
    if (e->cfg.data_on_device) {
        memcpy(e->indices_host, indices, n * sizeof(int32_t));
    } else {
        for (int s = 0; s < steps; s++)
            for (int b = 0; b < batch; b++)
                e->indices_host[(size_t)s * batch + b] = (s % 2) * e->cfg.batch_size + b;
    }
    CK_CUDA(cudaMemcpyAsync(e->indices_dev, e->indices_host, n * sizeof(int32_t),
                            cudaMemcpyHostToDevice, e->stream));
    return reset_slot(e);
}

static int train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
{
    BEGIN(e);
    CK(check_batch(e, indices, batch, steps));
    if (steps == 0)
        return 0;
    const plan *p = plan_for(e, batch);
    if (!p)
        return -1;
    CK(upload_indices(e, indices, batch, steps));
    CK(refresh_low_copy(e)); /* in case BUF_PARAMS was written directly */
    const int use_graph = e->cfg.cuda_graph && batch == e->cfg.batch_size && !e->graph_failed;
    if (use_graph && !e->graph)
        CK(capture_graph(e));
    for (int s = 0; s < steps; s++) {
        const int k = s % 2;
        if (!e->cfg.data_on_device)
            CK(stage_batch(e, &e->train, indices + (size_t)s * batch, 0, batch, k));
        if (use_graph && e->graph)
            CK_CUDA(cudaGraphLaunch(e->graph, e->stream));
        else
            CK(enqueue_step(e, p, batch));
        if (!e->cfg.data_on_device)
            CK_CUDA(cudaEventRecord(e->compute_done[k], e->stream));
    }
    CK_CUDA(cudaMemcpyAsync(e->losses_host, e->losses_dev, (size_t)steps * sizeof(double),
                            cudaMemcpyDeviceToHost, e->stream));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    if (losses)
        for (int s = 0; s < steps; s++)
            losses[s] = (float)e->losses_host[s];
    e->last_loss = e->losses_host[steps - 1];
    sample_memory(e);
    return 0;
}

static int evaluate(engine *e, int limit, eval_counts *out)
{
    BEGIN(e);
    if (e->cfg.stage_slots)
        return fail(e, "cuda: a model-parallel stage is evaluated through stage_forward");
    if (!e->have_test)
        return fail(e, "cuda: no test set bound");
    /* BUF_PARAMS may have been written directly (parameter averaging): the
     * 16-bit copy the layers read must follow */
    CK(refresh_low_copy(e));
    const int n = limit <= 0 || limit > e->test.count ? e->test.count : limit;
    const int L = e->w.n_layers, classes = e->w.classes, B = e->cfg.batch_size;
    const size_t confusion_bytes = sizeof(unsigned long long) * classes * classes;
    CK_CUDA(cudaMemsetAsync(e->confusion, 0, confusion_bytes, e->stream));
    CK_CUDA(cudaMemsetAsync(e->loss_sum, 0, sizeof(double), e->stream));
    for (int first = 0, batch_no = 0; first < n; first += B, batch_no++) {
        const int m = n - first < B ? n - first : B;
        const plan *p = plan_for(e, m);
        if (!p)
            return -1;
        const int k = batch_no % 2;
        if (e->cfg.data_on_device) {
            CK_CUDA(lbk_gather(e->stream, e->act_type, e->act[0], e->batch_labels, e->test_images,
                               e->test_labels, NULL, NULL, first, m, (int)e->pixels));
        } else {
            CK(stage_batch(e, &e->test, NULL, first, m, k));
            CK_CUDA(lbk_gather(e->stream, e->act_type, e->act[0], e->batch_labels, e->stage_dev,
                               e->stage_dev + 2 * (size_t)B * e->pixels, NULL, NULL, (long)k * B, m,
                               (int)e->pixels));
        }
        for (int i = 0; i < L; i++)
            CK(forward_layer(e, p, i, m));
        CK_CUDA(lbk_eval_count(e->stream, e->act_type, e->act[L], e->batch_labels, m, classes,
                               e->confusion, e->loss_sum));
        if (!e->cfg.data_on_device)
            CK_CUDA(cudaEventRecord(e->compute_done[k], e->stream));
    }
    unsigned long long confusion[WORKLOAD_MAX_CLASSES * WORKLOAD_MAX_CLASSES];
    double loss_sum = 0;
    CK_CUDA(cudaMemcpyAsync(confusion, e->confusion, confusion_bytes, cudaMemcpyDeviceToHost,
                            e->stream));
    CK_CUDA(
        cudaMemcpyAsync(&loss_sum, e->loss_sum, sizeof(double), cudaMemcpyDeviceToHost, e->stream));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    memset(out, 0, sizeof *out);
    out->classes = classes;
    out->count = n;
    out->loss_sum = loss_sum;
    for (int i = 0; i < classes * classes; i++)
        out->confusion[i] = (long)confusion[i];
    sample_memory(e);
    return 0;
}

/* ------------------------------------------------------------------ data parallel */

/* Gradients of the mean loss over one batch, unscaled fp32, into BUF_GRADS. */
static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    BEGIN(e);
    CK(check_batch(e, indices, batch, 1));
    const plan *p = plan_for(e, batch);
    if (!p)
        return -1;
    CK(upload_indices(e, indices, batch, 1));
    CK(refresh_low_copy(e));
    if (!e->cfg.data_on_device)
        CK(stage_batch(e, &e->train, indices, 0, batch, 0));
    CK(forward_backward(e, p, batch));
    if (!e->cfg.data_on_device)
        CK_CUDA(cudaEventRecord(e->compute_done[0], e->stream));
    if (e->mixed)
        CK_CUDA(lbk_convert(e->stream, e->grads32, LBK_F32, e->grads, e->act_type, e->n_params, 1,
                            e->state));
    double l = 0;
    CK_CUDA(cudaMemcpyAsync(&l, e->losses_dev, sizeof l, cudaMemcpyDeviceToHost, e->stream));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    e->last_loss = l;
    if (loss)
        *loss = (float)l;
    return 0;
}

static int apply_update(engine *e, float grad_scale)
{
    BEGIN(e);
    const void *g = e->mixed ? (void *)e->grads32 : e->grads;
    const lbk_dtype g_type = e->mixed ? LBK_F32 : e->act_type;
    if (e->scaling.dynamic)
        CK_CUDA(lbk_check_finite(e->stream, g_type, g, e->n_params, e->state));
    CK_CUDA(lbk_update(e->stream, e->opt, e->params, e->master, e->params_lo, e->act_type, g,
                       g_type, e->opt_state, e->decay_mask, e->n_params, grad_scale, 0, e->state));
    CK_CUDA(lbk_finish_step(e->stream, e->state, e->scaling));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    return 0;
}

/* None in fp64: the buffers are double, and the coordinator reduces floats. */
static float *buffer(engine *e, engine_buffer which, size_t *count)
{
    if (e->master != LBK_F32) {
        *count = 0;
        return NULL;
    }
    switch (which) {
    case BUF_PARAMS:
        *count = e->n_params;
        return e->params;
    case BUF_GRADS:
        *count = e->n_params;
        return e->mixed ? e->grads32 : (float *)e->grads;
    case BUF_OPT_STATE:
        *count = e->state_floats;
        return e->opt_state;
    }
    *count = 0;
    return NULL;
}

static double last_loss(engine *e) { return e->last_loss; }

/* ------------------------------------------------------------------ model parallel */

static int check_slot(engine *e, int slot)
{
    if (!e->cfg.stage_slots)
        return fail(e, "cuda: not created as a model-parallel stage");
    if (slot < 0 || slot >= e->cfg.stage_slots)
        return fail(e, "cuda: stage slot %d, engine was created for 0..%d", slot,
                    e->cfg.stage_slots - 1);
    return 0;
}

/* count host floats into the device buffer to (of the activation type),
 * through the pinned buffer; enqueued, the pinned buffer in use until the
 * stream gets there. */
static int floats_to_device(engine *e, void *to, const float *from, size_t count)
{
    memcpy(e->io_host, from, count * sizeof(float));
    if (e->act_type == LBK_F32) {
        CK_CUDA(cudaMemcpyAsync(to, e->io_host, count * sizeof(float), cudaMemcpyHostToDevice,
                                e->stream));
    } else {
        CK_CUDA(cudaMemcpyAsync(e->io_dev, e->io_host, count * sizeof(float),
                                cudaMemcpyHostToDevice, e->stream));
        CK_CUDA(lbk_convert(e->stream, to, e->act_type, e->io_dev, LBK_F32, count, 0, NULL));
    }
    return 0;
}

/* count numbers of the device buffer from (of the activation type) into
 * host floats, after everything enqueued before: returns when they are
 * there. */
static int floats_to_host(engine *e, float *to, const void *from, size_t count)
{
    if (e->act_type != LBK_F32) {
        CK_CUDA(lbk_convert(e->stream, e->io_dev, LBK_F32, from, e->act_type, count, 0, NULL));
        from = e->io_dev;
    }
    CK_CUDA(cudaMemcpyAsync(e->io_host, from, count * sizeof(float), cudaMemcpyDeviceToHost,
                            e->stream));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    memcpy(to, e->io_host, count * sizeof(float));
    return 0;
}

/* The stage's layers on the floats handed over, in the slot's activations,
 * which stay on the device until the slot's stage_backward. */
static int stage_forward(engine *e, int slot, const float *in, int batch, float *out)
{
    BEGIN(e);
    CK(check_slot(e, slot));
    if (batch < 1 || batch > e->cfg.batch_size)
        return fail(e, "cuda: micro-batch of %d images, engine was created for 1..%d", batch,
                    e->cfg.batch_size);
    if (!in || !out)
        return fail(e, "cuda: stage_forward needs its input and output buffers");
    const plan *p = plan_for(e, batch);
    if (!p)
        return -1;
    /* a call that failed half-way may have left copies out of the pinned
     * buffer in flight */
    CK_CUDA(cudaStreamSynchronize(e->stream));
    e->slot_batch[slot] = 0; /* until its activations are whole again */
    CK(refresh_low_copy(e)); /* in case BUF_PARAMS was written directly */
    use_slot(e, slot);
    const workload *w = &e->w;
    const int L = w->n_layers;
    CK(floats_to_device(e, e->act[0], in, (size_t)batch * shape3_size(w->input)));
    for (int i = 0; i < L; i++)
        CK(forward_layer(e, p, i, batch));
    CK(floats_to_host(e, out, e->act[L], (size_t)batch * shape3_size(w->layers[L - 1].out)));
    e->slot_batch[slot] = batch;
    return 0;
}

/* From d_out, the slot's parameter gradients into BUF_GRADS (written, or
 * added with accumulate) and the gradient to its input into d_in unless it
 * is NULL. In bf16 the layers write 16-bit gradients, which are then
 * converted into (or added to) the fp32 BUF_GRADS apply_update reads. */
static int stage_backward(engine *e, int slot, const float *d_out, float *d_in, int accumulate)
{
    BEGIN(e);
    CK(check_slot(e, slot));
    const int n = e->slot_batch[slot];
    if (!n)
        return fail(e, "cuda: stage_backward of slot %d before its stage_forward", slot);
    if (!d_out)
        return fail(e, "cuda: stage_backward needs the output's gradient");
    const plan *p = plan_for(e, n);
    if (!p)
        return -1;
    CK_CUDA(cudaStreamSynchronize(e->stream));
    use_slot(e, slot);
    const workload *w = &e->w;
    const int L = w->n_layers;
    CK(floats_to_device(e, e->grad_a, d_out, (size_t)n * shape3_size(w->layers[L - 1].out)));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *next = i > 0 || d_in ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(backward_layer(e, p, i, n, d, next, accumulate && !e->mixed));
        d = next;
    }
    if (e->mixed && accumulate)
        CK_CUDA(lbk_add_to_f32(e->stream, e->grads32, e->grads, e->act_type, e->n_params));
    else if (e->mixed)
        CK_CUDA(lbk_convert(e->stream, e->grads32, LBK_F32, e->grads, e->act_type, e->n_params, 0,
                            NULL));
    if (d_in)
        CK(floats_to_host(e, d_in, d, (size_t)n * shape3_size(w->input)));
    else
        CK_CUDA(cudaStreamSynchronize(e->stream));
    return 0;
}

/* Bytes by kind. params: the master parameters and the 16-bit copy; grads:
 * the gradients and their fp32 copy; activations: every slot's layer
 * outputs; workspace: everything else, on the device (cuDNN and cuBLAS
 * workspaces, activation gradients, the resident data set, the saved model,
 * index and loss buffers) and pinned on the host (staging buffers). */
static void memory_use_of(engine *e, memory_use *out)
{
    const size_t n = e->n_params;
    out->params = n * master_size(e) + (e->mixed ? n * act_size(e) : 0);
    out->grads = n * act_size(e) + (e->mixed ? n * sizeof(float) : 0);
    out->opt_state = e->state_floats * master_size(e);
    out->activations = e->activation_bytes;
    const size_t itemised = out->params + out->grads + out->opt_state + out->activations;
    out->workspace =
        (e->tracked_bytes > itemised ? e->tracked_bytes - itemised : 0) + e->pinned_bytes;
}

/* ------------------------------------------------------------------ reporting */

static void placement(engine *e, int *threads, int *devices, int *replicas)
{
    (void)e;
    *threads = 1;
    *devices = 1;
    *replicas = 1;
}

static size_t peak_memory(engine *e)
{
    if (cudaSetDevice(e->device) == cudaSuccess)
        sample_memory(e);
    cudaGetLastError();
    return e->mem_peak > e->tracked_peak ? e->mem_peak : e->tracked_peak;
}

static const char *math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_FMA_MATH:
        return "";
    case CUDNN_DEFAULT_MATH:
        return "/default";
    case CUDNN_TENSOR_OP_MATH:
        return "/tc";
    default:
        return "/other";
    }
}

static void describe(engine *e, char *buf, size_t len)
{
    static const char *math[PRECISION_COUNT] = {
        "fp32 FMA (no TF32)", "tf32 tensor cores", "bf16 mixed, fp32 master weights",
        "fp16 mixed, fp32 master weights, dynamic loss scale", "fp64 throughout"};
    size_t at = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (at < len)                                                                              \
            at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__);                               \
    } while (0)
    if (e->cfg.stage_slots)
        ADD("%s; model-parallel stage, %d micro-batch slot%s, activations through pinned host "
            "memory",
            math[e->cfg.precision], e->cfg.stage_slots, e->cfg.stage_slots == 1 ? "" : "s");
    else
        ADD("%s; %s; %s", math[e->cfg.precision],
            e->graph          ? "CUDA graph"
            : e->graph_failed ? e->graph_note
                              : "no CUDA graph",
            e->cfg.data_on_device ? "data on device" : "data staged from pinned host memory");
    const plan *p = &e->plans[0];
    for (int li = 0; li < e->w.n_layers; li++) {
        if (e->w.layers[li].kind != LAYER_CONV)
            continue;
        ADD("; %s fwd %s%s", e->w.layers[li].name, fwd_algo_name(p->fwd_algo[li]),
            math_name(p->fwd_math[li]));
        if (needs_input_gradient(e, li))
            ADD(" bwd-data %s%s", bwd_data_algo_name(p->bwd_data_algo[li]),
                math_name(p->bwd_data_math[li]));
        ADD(" bwd-filter %s%s", bwd_filter_algo_name(p->bwd_filter_algo[li]),
            math_name(p->bwd_filter_math[li]));
    }
    /* an algorithm taken as the fastest usable one, not a preferred one */
    static const char *dir_names[] = {"fwd", "bwd-data", "bwd-filter"};
    for (int dir = 0; dir < 3; dir++)
        for (int li = 0; li < e->w.n_layers; li++)
            if (e->w.layers[li].kind == LAYER_CONV && p->fallback[dir][li])
                ADD("; algorithm fallback: %s %s: no deterministic%s candidate offered, the "
                    "fastest usable one taken (%s: runs may not repeat bitwise)",
                    e->w.layers[li].name, dir_names[dir], plain_math(e) ? ", plain-FMA" : "",
                    fallback_text(p->fallback[dir][li]));
#undef ADD
}

/* ------------------------------------------------------------------ profile */

/* One timed step on the batch in slot 0: an event after each part. */
static int profile_once(engine *e, const plan *p, int batch, cudaEvent_t *mark, layer_times *out)
{
    const int L = e->w.n_layers;
    int m = 0;
    CK(reset_slot(e));
    CK(gather_training_batch(e, batch));
    CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    for (int i = 0; i < L; i++) {
        CK(forward_layer(e, p, i, batch));
        CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    }
    CK_CUDA(lbk_softmax_xent(e->stream, e->act_type, e->grad_a, e->act[L], e->batch_labels, batch,
                             e->w.classes, e->state, e->losses_dev));
    CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *d_in = i > 0 ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(backward_layer(e, p, i, batch, d, d_in, 0));
        CK_CUDA(cudaEventRecord(mark[m++], e->stream));
        d = d_in;
    }
    CK(update_and_finish(e));
    CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    CK_CUDA(cudaEventSynchronize(mark[m - 1]));
    /* marks: 0 | forward 1..L | loss L+1 | backward of layer L-1..0 | update */
    for (int j = 1; j < m; j++) {
        float ms = 0;
        CK_CUDA(cudaEventElapsedTime(&ms, mark[j - 1], mark[j]));
        if (j <= L)
            out->forward_ms[j - 1] += ms;
        else if (j == L + 1)
            out->loss_ms += ms;
        else if (j <= 2 * L + 1)
            out->backward_ms[L - 1 - (j - L - 2)] += ms;
        else
            out->update_ms += ms;
    }
    return 0;
}

/* Times each layer's forward and backward, the loss and the update with
 * events over `reps` eager steps on one batch; the parameters, optimiser
 * state and step count are put back afterwards. */
static int profile_layers(engine *e, const int32_t *indices, int batch, int reps, layer_times *out)
{
    BEGIN(e);
    if (reps < 1)
        return fail(e, "cuda: profile needs at least one repetition");
    CK(check_batch(e, indices, batch, 1));
    const plan *p = plan_for(e, batch);
    if (!p)
        return -1;
    const int L = e->w.n_layers;
    cudaEvent_t mark[2 * WORKLOAD_MAX_LAYERS + 3];
    memset(out, 0, sizeof *out);
    out->n_layers = L;
    int made = 0, rc = 0;
    for (; made < 2 * L + 3; made++) {
        cudaError_t ev = cudaEventCreate(&mark[made]);
        if (ev != cudaSuccess) {
            rc = call_failed(e, __FILE__, __LINE__, "cudaEventCreate", cudaGetErrorString(ev));
            break;
        }
    }
    if (!rc)
        rc = upload_indices(e, indices, batch, 1);
    if (!rc && !e->cfg.data_on_device)
        rc = stage_batch(e, &e->train, indices, 0, batch, 0);
    int saved = !rc && save_model(e) == 0;
    for (int r = 0; r < reps && saved && !rc; r++)
        rc = profile_once(e, p, batch, mark, out);
    if (!e->cfg.data_on_device) {
        cudaError_t rec = cudaEventRecord(e->compute_done[0], e->stream);
        if (rec != cudaSuccess && !rc)
            rc = call_failed(e, __FILE__, __LINE__, "cudaEventRecord", cudaGetErrorString(rec));
    }
    if (saved && restore_model(e) != 0)
        rc = -1;
    if (!saved)
        rc = -1;
    if (!rc)
        rc = reset_slot(e);
    /* the restore copies are asynchronous: their errors surface here */
    cudaError_t done = cudaStreamSynchronize(e->stream);
    if (done != cudaSuccess && !rc)
        rc = call_failed(e, __FILE__, __LINE__, "cudaStreamSynchronize", cudaGetErrorString(done));
    for (int i = 0; i < made; i++)
        cudaEventDestroy(mark[i]);
    if (rc)
        return -1;
    for (int i = 0; i < L; i++) {
        out->forward_ms[i] /= reps;
        out->backward_ms[i] /= reps;
    }
    out->loss_ms /= reps;
    out->update_ms /= reps;
    return 0;
}

/* ------------------------------------------------------------------ peak */

/* Times square GEMMs in the engine's precision and math mode: the device's
 * practical peak for "% of peak". 0 when it cannot be measured. */
static int measure_peak(engine *e, double *gflops)
{
    const int N = 8192, reps = 10;
    const size_t bytes = (size_t)N * N * act_size(e);
    void *m[3] = {NULL, NULL, NULL};
    cudaEvent_t t0 = NULL, t1 = NULL;
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        rc = device_alloc(e, &m[i], bytes, "the peak GEMM probe") ||
             cudaMemsetAsync(m[i], 0x3c, bytes, e->stream) != cudaSuccess; /* about 1 or 0.01 */
    if (!rc && (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess))
        rc = fail(e, "cuda: cannot create events for the peak probe");
    for (int i = 0; i < 2 && !rc; i++) /* warm-up */
        rc = gemm(e, DENSE_BACKWARD_DATA, N, N, N, m[0], m[1], m[2]);
    if (!rc && cudaEventRecord(t0, e->stream) != cudaSuccess)
        rc = -1;
    for (int i = 0; i < reps && !rc; i++)
        rc = gemm(e, DENSE_BACKWARD_DATA, N, N, N, m[0], m[1], m[2]);
    float ms = 0;
    if (!rc &&
        (cudaEventRecord(t1, e->stream) != cudaSuccess || cudaEventSynchronize(t1) != cudaSuccess ||
         cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess))
        rc = -1;
    cudaStreamSynchronize(e->stream);
    for (int i = 0; i < 3; i++)
        device_free(e, &m[i], bytes);
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cudaGetLastError();
    if (rc)
        e->err[0] = '\0'; /* not measured is not an error */
    *gflops = !rc && ms > 0 ? 2.0 * N * N * (double)N * reps / (ms * 1e-3) * 1e-9 : 0.0;
    return rc;
}

static double peak_gflops(engine *e)
{
    /* the probe's matrices are not the training's memory */
    const size_t tracked_peak = e->tracked_peak;
    if (e->peak_gflops <= 0 && cudaSetDevice(e->device) == cudaSuccess)
        measure_peak(e, &e->peak_gflops);
    e->tracked_peak = tracked_peak;
    cudaGetLastError();
    return e->peak_gflops;
}

const backend cuda_backend = {
    .name = "cuda",
    .summary = "one GPU: cuDNN convolutions, cuBLAS dense layers",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_TF32 | 1u << PREC_BF16 | 1u << PREC_FP16 |
                  1u << PREC_FP64,
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
    .buffer_space = MEM_DEVICE,
    .placement = placement,
    .describe = describe,
    .peak_memory = peak_memory,
    .library_info = library_info,
    .profile_layers = profile_layers,
    .peak_gflops = peak_gflops,
    .last_loss = last_loss,
    .memory_use = memory_use_of,
    .stage_forward = stage_forward,
    .stage_backward = stage_backward,
};

/* The cuda module's tables: the backend, and device memory helpers for the
 * data-parallel communicators. */
LB_MODULE_EXPORT const void *lb_module_entry(int abi, const char *table)
{
    if (abi != LB_MODULE_ABI)
        return NULL;
    if (strcmp(table, "backend") == 0)
        return &cuda_backend;
    if (strcmp(table, "devmem") == 0)
        return &cuda_devmem_table;
    return NULL;
}
