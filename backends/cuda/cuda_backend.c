/* The cuda backend (engine_impl.h says how the engine works): the probe,
 * the libraries, create and destroy, parameters, data sets and the
 * backend's tables. Its resources (memory, errors) are cuda_resources.c. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ probe */

int cuda_probe(void *ctx, char *why, size_t why_len)
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

void cuda_library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
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

/* ------------------------------------------------------------------ create */

static int init_engine(cuda_engine *e)
{
    const workload *w = &e->w;
    const size_t B = (size_t)e->cfg.batch_size;
    int count = 0;
    CK_CUDA(cudaGetDeviceCount(&count));
    if (e->device >= count)
        return cuda_fail(e, "cuda: --device %d, but this machine has %d GPU%s", e->device, count,
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
    CK(cuda_device_alloc(e, &e->cublas_workspace, CUBLAS_WORKSPACE_BYTES, "the cuBLAS workspace"));
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
    /* the full batch's plan; the short last batches' come with the data
     * sets (cuda_prepare_plans) */
    CK(cuda_build_plan(e, &e->plans[0], (int)B, 1));

    /* flat vectors */
    const size_t n = w->param_count;
    e->n_params = n;
    e->state_floats = (size_t)optimizer_state_per_param(e->cfg.opt.kind) * n;
    CK(cuda_device_alloc(e, &e->params, n * master_size(e), "parameters"));
    if (e->master == LBK_F64)
        CK(cuda_device_alloc(e, (void **)&e->params32, n * sizeof(float), "float parameters"));
    CK(cuda_device_alloc(e, &e->grads, n * act_size(e), "gradients"));
    if (e->mixed) {
        CK(cuda_device_alloc(e, &e->params_lo, n * act_size(e), "low-precision parameters"));
        CK(cuda_device_alloc(e, (void **)&e->grads32, n * sizeof(float), "fp32 gradients"));
    }
    CK(cuda_device_alloc(e, &e->opt_state, e->state_floats * master_size(e), "optimiser state"));
    CK(cuda_device_alloc(e, &e->saved, (n + e->state_floats) * master_size(e), "saved parameters"));
    CK(cuda_device_alloc(e, (void **)&e->state, sizeof(cuda_step_state), "step state"));
    CK(cuda_device_alloc(e, (void **)&e->state_saved, sizeof(cuda_step_state), "saved step state"));

    /* decay on weights, not on biases */
    uint8_t *mask = calloc(n ? n : 1, 1);
    if (!mask)
        return cuda_fail(e, "cuda: out of host memory for the decay mask");
    for (int li = 0; li < w->n_layers; li++)
        memset(mask + w->layers[li].weight_offset, 1, w->layers[li].weight_count);
    int rc = cuda_device_alloc(e, (void **)&e->decay_mask, n, "decay mask");
    if (!rc &&
        cudaMemcpyAsync(e->decay_mask, mask, n, cudaMemcpyHostToDevice, e->stream) != cudaSuccess)
        rc = cuda_fail(e, "cuda: copying the decay mask to the device failed");
    if (!rc && cudaStreamSynchronize(e->stream) != cudaSuccess)
        rc = cuda_fail(e, "cuda: copying the decay mask to the device failed");
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
        return cuda_fail(e, "cuda: out of host memory for %d slots of activations", e->slots);
    for (int slot = 0; slot < e->slots; slot++)
        for (int i = 0; i <= L; i++) {
            const shape3 shape = i ? w->layers[i - 1].out : w->input;
            const size_t bytes = B * shape3_size(shape) * act_size(e);
            CK(cuda_device_alloc(e, &e->slot_act[slot * (L + 1) + i], bytes, "activations"));
            e->activation_bytes += bytes;
        }
    cuda_use_slot(e, 0);
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
    CK(cuda_device_alloc(e, &e->grad_a, B * max_act * act_size(e), "activation gradients"));
    CK(cuda_device_alloc(e, &e->grad_b, B * max_act * act_size(e), "activation gradients"));
    CK(cuda_device_alloc(e, (void **)&e->batch_labels, B * sizeof(int), "batch labels"));
    CK(cuda_device_alloc(e, &e->bias_partial, partials * sizeof(double), "bias partials"));
    CK(cuda_device_alloc(e, (void **)&e->confusion,
                         sizeof(unsigned long long) * WORKLOAD_MAX_CLASSES * WORKLOAD_MAX_CLASSES,
                         "confusion counts"));
    CK(cuda_device_alloc(e, (void **)&e->loss_sum, sizeof(double), "loss sum"));
    CK(cuda_ensure_capacity(e, 1));

    if (e->cfg.stage_slots) {
        const int in = shape3_size(w->input), out = shape3_size(w->layers[L - 1].out);
        e->io_floats = B * (size_t)(in > out ? in : out);
        CK(cuda_pinned_alloc(e, (void **)&e->io_host, e->io_floats * sizeof(float),
                      "activations crossing to and from the host"));
        if (e->act_type != LBK_F32)
            CK(cuda_device_alloc(e, (void **)&e->io_dev, e->io_floats * sizeof(float),
                                 "activations as floats"));
    }

    e->pixels = (size_t)shape3_size(w->input);
    if (!e->cfg.data_on_device && !e->cfg.stage_slots) {
        const size_t bytes = 2 * B * e->pixels + 2 * B;
        CK(cuda_pinned_alloc(e, (void **)&e->stage_host, bytes, "staging buffers"));
        CK(cuda_device_alloc(e, (void **)&e->stage_dev, bytes, "staging buffers"));
    }
    CK_CUDA(cudaStreamSynchronize(e->stream));
    cuda_sample_memory(e);
    return 0;
}

void cuda_destroy(engine *handle)
{
    cuda_engine *e = cuda_of(handle);
    if (!e)
        return;
    if (e->device >= 0 && cudaSetDevice(e->device) == cudaSuccess && e->stream)
        cudaStreamSynchronize(e->stream);
    if (e->graph)
        cudaGraphExecDestroy(e->graph);
    for (int i = 0; i <= PARTIAL_PLANS; i++)
        cuda_destroy_plan(&e->plans[i]);
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
    void *pinned_buffers[] = {e->io_host, e->indices_host, e->losses_host, e->stage_host};
    for (size_t i = 0; i < sizeof pinned_buffers / sizeof pinned_buffers[0]; i++)
        if (pinned_buffers[i])
            cudaFreeHost(pinned_buffers[i]);
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
    cudaStream_t streams[] = {e->copy_stream, e->stream};
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++)
        if (streams[i])
            cudaStreamDestroy(streams[i]);
    cudaGetLastError();
    free(e);
}

/* What each precision stores its activations and gradients in, the data
 * types and compute type it hands cuDNN and cuBLAS, and how describe
 * words it; the rest of its facts are the contract's (precision_of). A
 * precision cuda_backend.precisions does not list has no row. */
extern const backend cuda_backend;

static const struct cuda_precision {
    lbk_dtype act;
    cudnnDataType_t cudnn;
    cudaDataType_t blas;
    cublasComputeType_t compute;
    const char *math;
} cuda_precisions[PRECISION_COUNT] = {
    [PREC_FP32] = {LBK_F32, CUDNN_DATA_FLOAT, CUDA_R_32F, CUBLAS_COMPUTE_32F,
                   "fp32 FMA (no TF32)"},
    [PREC_TF32] = {LBK_F32, CUDNN_DATA_FLOAT, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
                   "tf32 tensor cores"},
    [PREC_BF16] = {LBK_BF16, CUDNN_DATA_BFLOAT16, CUDA_R_16BF, CUBLAS_COMPUTE_32F,
                   "bf16 mixed, fp32 master weights"},
    [PREC_FP16] = {LBK_F16, CUDNN_DATA_HALF, CUDA_R_16F, CUBLAS_COMPUTE_32F,
                   "fp16 mixed, fp32 master weights, dynamic loss scale"},
    [PREC_FP64] = {LBK_F64, CUDNN_DATA_DOUBLE, CUDA_R_64F, CUBLAS_COMPUTE_64F,
                   "fp64 throughout"},
};

engine *cuda_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                           size_t err_len)
{
    (void)ctx;
    const char *why = NULL;
    if (!w || !cfg)
        why = "no workload or configuration";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if ((unsigned)cfg->precision >= PRECISION_COUNT ||
             !(cuda_backend.precisions & 1u << cfg->precision))
        why = "unknown precision";
    else if ((int)cfg->opt.kind < (int)OPT_SGD || (int)cfg->opt.kind > (int)OPT_ADAM)
        why = "unknown optimiser";
    else if (cfg->device < 0)
        why = "device index must be 0 or more";
    else if (cfg->stage_slots < 0 || cfg->stage_slots > 1024)
        why = "stage slots must be 0 (a whole network) to 1024";
    else if (cfg->stage_slots && crossing_refusal(CROSS_STAGE, cfg->precision))
        why = crossing_refusal(CROSS_STAGE, cfg->precision);
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
    cuda_engine *e = calloc(1, sizeof *e);
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
    e->scaling = LB_NO_LOSS_SCALING;
    e->last_loss = NAN;
    const struct cuda_precision *t = &cuda_precisions[cfg->precision];
    const precision_info *info = precision_of(cfg->precision);
    e->act_type = t->act;
    e->cudnn_type = t->cudnn;
    e->blas_type = t->blas;
    e->blas_compute = t->compute;
    e->master = info->storage_bytes == (int)sizeof(double) ? LBK_F64 : LBK_F32;
    e->mixed = info->mixed;
    e->math = t->math;
    if (info->loss_scaled) /* fp16's range needs loss scaling; bf16 has fp32's range */
        e->scaling = LB_FP16_LOSS_SCALING;
    if (init_engine(e) != 0) {
        if (err && err_len)
            snprintf(err, err_len, "%s", e->err);
        cuda_destroy((engine *)e);
        return NULL;
    }
    return (engine *)e;
}

const char *cuda_error(engine *handle)
{
    return handle ? cuda_of(handle)->err : "cuda: no engine";
}

/* ------------------------------------------------------------------ params */

int cuda_set_params(engine *handle, const float *params)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    float *to = e->master == LBK_F64 ? e->params32 : e->params;
    CK_CUDA(cudaMemcpyAsync(to, params, e->n_params * sizeof(float), cudaMemcpyHostToDevice,
                            e->stream));
    if (e->master == LBK_F64)
        CK_CUDA(lbk_convert(e->stream, e->params, LBK_F64, e->params32, LBK_F32, e->n_params, 0,
                            NULL));
    CK(cuda_refresh_low_copy(e));
    CK_CUDA(cudaStreamSynchronize(e->stream));
    return 0;
}

int cuda_get_params(engine *handle, float *params)
{
    cuda_engine *e = cuda_of(handle);
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

static int check_dataset(cuda_engine *e, const dataset *d, const char *which)
{
    char why[256];
    if (dataset_refusal(&e->w, d, which, why, sizeof why))
        return cuda_fail(e, "cuda: %s", why);
    if (e->cfg.stage_slots)
        return 0; /* a stage scores nothing: its labels are the loss's business */
    for (int i = 0; i < d->count; i++)
        if (d->labels[i] >= e->w.classes)
            return cuda_fail(e, "cuda: %s image %d has label %d, workload has %d classes", which, i,
                             d->labels[i], e->w.classes);
    return 0;
}

static int upload_set(cuda_engine *e, const dataset *d, uint8_t **images, uint8_t **labels,
                      const char *what)
{
    const size_t bytes = (size_t)d->count * e->pixels;
    CK_CUDA(cudaStreamSynchronize(e->stream));
    cuda_device_free(e, (void **)images, bytes);
    cuda_device_free(e, (void **)labels, (size_t)d->count);
    CK(cuda_device_alloc(e, (void **)images, bytes, what));
    CK(cuda_device_alloc(e, (void **)labels, (size_t)d->count, what));
    CK_CUDA(cudaMemcpyAsync(*images, d->images, bytes, cudaMemcpyHostToDevice, e->stream));
    CK_CUDA(
        cudaMemcpyAsync(*labels, d->labels, (size_t)d->count, cudaMemcpyHostToDevice, e->stream));
    return 0;
}

int cuda_bind_dataset(engine *handle, const dataset *train, const dataset *test)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    if ((train && check_dataset(e, train, "training")) || (test && check_dataset(e, test, "test")))
        return -1;
    if (e->cfg.stage_slots)
        return 0; /* a stage is handed its input by stage_forward: nothing to keep */
    cuda_drop_graph(e); /* the resident images may move */
    if (train) {
        e->train = *train;
        if (e->cfg.data_on_device)
            CK(upload_set(e, train, &e->train_images, &e->train_labels, "the training set"));
        const int B = e->cfg.batch_size;
        CK(cuda_ensure_capacity(e, train->count / B + 1));
        e->have_train = train->count > 0;
    }
    if (test) {
        e->test = *test;
        if (e->cfg.data_on_device)
            CK(upload_set(e, test, &e->test_images, &e->test_labels, "the test set"));
        e->have_test = 1;
    }
    CK_CUDA(cudaStreamSynchronize(e->stream));
    /* the plans of the sets' short last batches, and the workspace they
     * need, before the capture: growing the workspace later would drop the
     * graph in the middle of an epoch */
    CK(cuda_prepare_plans(e));
    /* capture now, on slot 0 of zeroed indices (image 0), so describe()
     * can tell whether the graph is in use */
    if (e->have_train && e->cfg.cuda_graph && !e->graph && !e->graph_failed) {
        CK_CUDA(cudaMemsetAsync(e->indices_dev, 0, (size_t)e->cfg.batch_size * sizeof(int32_t),
                                e->stream));
        CK(cuda_capture_graph(e));
    }
    cuda_sample_memory(e);
    return 0;
}

static const engine_ops cuda_ops = {
    .destroy = cuda_destroy, .error = cuda_error, .set_params = cuda_set_params,
    .get_params = cuda_get_params, .bind_dataset = cuda_bind_dataset,
    .train_steps = cuda_train_steps, .evaluate = cuda_evaluate, .placement = cuda_placement,
    .describe = cuda_describe, .peak_memory = cuda_peak_memory,
    .profile_layers = cuda_profile_layers, .peak_gflops = cuda_peak_gflops,
    .last_loss = cuda_last_loss, .memory_use = cuda_memory_use_of};

static const data_parallel_ops cuda_data_parallel = {
    .compute_gradients = cuda_compute_gradients, .apply_update = cuda_apply_update,
    .buffer = cuda_buffer, .buffer_space = MEM_DEVICE};

static const stage_ops cuda_stages = {.stage_forward = cuda_stage_forward,
                                      .stage_backward = cuda_stage_backward};

const backend cuda_backend = {
    .name = "cuda",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_TF32 | 1u << PREC_BF16 | 1u << PREC_FP16 |
                  1u << PREC_FP64,
    .probe = cuda_probe,
    .create = cuda_create,
    .library_info = cuda_library_info,
    .ops = &cuda_ops,
    .dp = &cuda_data_parallel,
    .stage = &cuda_stages,
};

/* The cuda module's tables: the backend, and device memory helpers for the
 * data-parallel communicators. */
LB_MODULE_TABLES({"backend", &cuda_backend}, {"devmem", &cuda_devmem_table})
