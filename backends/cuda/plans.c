/* The cuda engine's plans: cuDNN tensor and convolution descriptors and
 * the algorithm each convolution direction uses, per batch size. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ plans */

const char *cuda_fwd_algo_name(int a)
{
    static const char *names[] = {
        "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
        "winograd",      "winograd_nonfused"};
    return a >= 0 && a < 8 ? names[a] : "?";
}

const char *cuda_bwd_data_algo_name(int a)
{
    static const char *names[] = {"algo0",      "algo1",    "fft",
                                  "fft_tiling", "winograd", "winograd_nonfused"};
    return a >= 0 && a < 6 ? names[a] : "?";
}

const char *cuda_bwd_filter_algo_name(int a)
{
    static const char *names[] = {
        "algo0", "algo1", "fft", "algo3", "winograd", "winograd_nonfused", "fft_tiling"};
    return a >= 0 && a < 7 ? names[a] : "?";
}

/* The math type a convolution descriptor starts with: fp32 allows only FMA
 * (CUDNN_DEFAULT_MATH would let Ampere and later use TF32); the others allow
 * tensor cores. CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is never used: it may
 * convert fp32 data down to fp16. */
static cudnnMathType_t initial_math(const cuda_engine *e)
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

/* got answers of the heuristics as candidates: cuDNN's three perf structs
 * (forward, backward data, backward filter) have the same fields. */
#define AS_CANDIDATES(perf, got, cand)                                                             \
    for (int i_ = 0; i_ < (got); i_++)                                                             \
        (cand)[i_] = (candidate){(int)(perf)[i_].algo, (perf)[i_].status,                          \
                                 (perf)[i_].determinism, (perf)[i_].mathType, (perf)[i_].memory}

/* Whether a heuristic result can be used at all: it ran, its workspace is
 * bounded, and it never converts fp32 data down to fp16. */
static int usable(const candidate *c)
{
    return c->status == CUDNN_STATUS_SUCCESS && c->memory <= CONV_WORKSPACE_LIMIT &&
           c->math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* Of a usable candidate: what keeps it from being preferred, or
 * FALLBACK_NONE. */
static int shortfall(const cuda_engine *e, const candidate *c)
{
    if (c->determinism != CUDNN_DETERMINISTIC)
        return FALLBACK_NONDETERMINISTIC;
    if (plain_math(e) && c->math != CUDNN_FMA_MATH && c->math != CUDNN_DEFAULT_MATH)
        return FALLBACK_NOT_FMA;
    return FALLBACK_NONE;
}

/* The math type set on the descriptor for a chosen candidate. */
static cudnnMathType_t chosen_math(const cuda_engine *e, const candidate *c)
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
static int choose_algorithm(cuda_engine *e, plan *p, int li, enum conv_direction dir, int n)
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
        AS_CANDIDATES(perf, got, cand);
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        CK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            e->cudnn, e->filter[li], p->out[li], conv, p->in[li],
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        AS_CANDIDATES(perf, got, cand);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        CK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            e->cudnn, p->in[li], p->out[li], conv, e->filter[li],
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
        AS_CANDIDATES(perf, got, cand);
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
    return cuda_fail(e,
                     "cuda: %s: cuDNN offers no usable %s algorithm for batch %d in %s "
                     "(%d candidates: each failed, needs over the %zu MiB workspace limit or "
                     "converts fp32 down to fp16)",
                     l->name, dir_names[dir], n, precision_name(e->cfg.precision), got,
                     (size_t)CONV_WORKSPACE_LIMIT >> 20);
}

/* Whether layer li's backward pass computes the gradient to its input:
 * not for the first layer of a whole network (its input is the images),
 * always in a model-parallel stage (the stage before needs it). */
int cuda_needs_input_gradient(const cuda_engine *e, int li)
{
    return li > 0 || e->cfg.stage_slots > 0;
}

static int set_tensor(cuda_engine *e, cudnnTensorDescriptor_t d, int n, shape3 s)
{
    CK_CUDNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, e->cudnn_type, n, s.c, s.h, s.w));
    return 0;
}

/* Descriptors and algorithms for batches of n images; with allocate, the
 * workspace grows to what they need. */
int cuda_build_plan(cuda_engine *e, plan *p, int n, int allocate)
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
            return cuda_fail(e,
                             "cuda: %s: cuDNN gives a %dx%dx%dx%d output, the workload %dx%dx%dx%d",
                             l->name, dims[0], dims[1], dims[2], dims[3], n, l->out.c, l->out.h,
                             l->out.w);
    }
    for (int li = 0; li < e->w.n_layers; li++) {
        if (e->w.layers[li].kind != LAYER_CONV)
            continue;
        CK(choose_algorithm(e, p, li, CONV_FWD, n));
        CK(choose_algorithm(e, p, li, CONV_BWD_FILTER, n));
        if (cuda_needs_input_gradient(e, li))
            CK(choose_algorithm(e, p, li, CONV_BWD_DATA, n));
    }
    if (allocate)
        CK(cuda_ensure_workspace(e, p->workspace_bytes));
    p->n = n;
    return 0;
}

void cuda_destroy_plan(plan *p)
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
plan *cuda_plan_for(cuda_engine *e, int n)
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
    return cuda_build_plan(e, oldest, n, 1) == 0 ? oldest : NULL;
}

/* Plans for every batch size a run over the bound sets meets (B and the
 * sets' short last batches, plan_sizes.h), the workspace grown to fit
 * them: called before the graph is captured. Other sizes (a data-parallel
 * replica's share, a model-parallel micro-batch, an evaluation limit) are
 * planned when first met. */
int cuda_prepare_plans(cuda_engine *e)
{
    int sizes[CUDA_PLAN_SIZES_MAX];
    const int count = cuda_plan_sizes(e->cfg.batch_size, e->have_train ? e->train.count : 0,
                                      e->have_test ? e->test.count : 0, sizes);
    for (int i = 1; i < count; i++)
        if (!cuda_plan_for(e, sizes[i]))
            return -1;
    return 0;
}
