/* The cuda engine's reports: placement, the row's description, the
 * per-layer profile and the GEMM peak. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ reporting */

static const char *fallback_text(int why)
{
    return why == FALLBACK_NONDETERMINISTIC ? "non-deterministic"
           : why == FALLBACK_NOT_FMA        ? "not plain FMA maths"
                                            : "";
}

void cuda_placement(engine *handle, int *threads, int *devices, int *replicas)
{
    cuda_engine *e = cuda_of(handle);
    (void)e;
    *threads = 1;
    *devices = 1;
    *replicas = 1;
}

size_t cuda_peak_memory(engine *handle)
{
    cuda_engine *e = cuda_of(handle);
    if (cudaSetDevice(e->device) == cudaSuccess)
        cuda_sample_memory(e);
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

void cuda_describe(engine *handle, char *buf, size_t len)
{
    cuda_engine *e = cuda_of(handle);
    size_t at = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (at < len)                                                                              \
            at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__);                               \
    } while (0)
    if (e->cfg.stage_slots)
        ADD("%s; model-parallel stage, %d micro-batch slot%s, activations through pinned host "
            "memory",
            e->math, e->cfg.stage_slots, e->cfg.stage_slots == 1 ? "" : "s");
    else
        ADD("%s; %s; %s", e->math,
            e->graph          ? "CUDA graph"
            : e->graph_failed ? e->graph_note
                              : "no CUDA graph",
            e->cfg.data_on_device ? "data on device" : "data staged from pinned host memory");
    const plan *p = &e->plans[0];
    for (int li = 0; li < e->w.n_layers; li++) {
        if (e->w.layers[li].kind != LAYER_CONV)
            continue;
        ADD("; %s fwd %s%s", e->w.layers[li].name, cuda_fwd_algo_name(p->fwd_algo[li]),
            math_name(p->fwd_math[li]));
        if (cuda_needs_input_gradient(e, li))
            ADD(" bwd-data %s%s", cuda_bwd_data_algo_name(p->bwd_data_algo[li]),
                math_name(p->bwd_data_math[li]));
        ADD(" bwd-filter %s%s", cuda_bwd_filter_algo_name(p->bwd_filter_algo[li]),
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
static int profile_once(cuda_engine *e, const plan *p, int batch, cudaEvent_t *mark,
                        layer_times *out)
{
    const int L = e->w.n_layers;
    int m = 0;
    CK(cuda_reset_slot(e));
    CK(cuda_gather_training_batch(e, batch));
    CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    for (int i = 0; i < L; i++) {
        CK(cuda_forward_layer(e, p, i, batch));
        CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    }
    CK_CUDA(lbk_softmax_xent(e->stream, e->act_type, e->grad_a, e->act[L], e->batch_labels, batch,
                             e->w.classes, e->state, e->losses_dev));
    CK_CUDA(cudaEventRecord(mark[m++], e->stream));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *d_in = i > 0 ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(cuda_backward_layer(e, p, i, batch, d, d_in, 0));
        CK_CUDA(cudaEventRecord(mark[m++], e->stream));
        d = d_in;
    }
    CK(cuda_update_and_finish(e));
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
int cuda_profile_layers(engine *handle, const int32_t *indices, int batch, int reps,
                        layer_times *out)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    if (reps < 1)
        return cuda_fail(e, "cuda: profile needs at least one repetition");
    CK(cuda_check_batch(e, indices, batch, 1));
    const plan *p = cuda_plan_for(e, batch);
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
            rc = cuda_call_failed(e, __FILE__, __LINE__, "cudaEventCreate", cudaGetErrorString(ev));
            break;
        }
    }
    if (!rc)
        rc = cuda_upload_indices(e, indices, batch, 1);
    if (!rc && !e->cfg.data_on_device)
        rc = cuda_stage_batch(e, &e->train, indices, 0, batch, 0);
    int saved = !rc && cuda_save_model(e) == 0;
    for (int r = 0; r < reps && saved && !rc; r++)
        rc = profile_once(e, p, batch, mark, out);
    if (!e->cfg.data_on_device) {
        cudaError_t rec = cudaEventRecord(e->compute_done[0], e->stream);
        if (rec != cudaSuccess && !rc)
            rc = cuda_call_failed(e, __FILE__, __LINE__, "cudaEventRecord",
                                  cudaGetErrorString(rec));
    }
    if (saved && cuda_restore_model(e) != 0)
        rc = -1;
    if (!saved)
        rc = -1;
    if (!rc)
        rc = cuda_reset_slot(e);
    /* the restore copies are asynchronous: their errors surface here */
    cudaError_t done = cudaStreamSynchronize(e->stream);
    if (done != cudaSuccess && !rc)
        rc = cuda_call_failed(e, __FILE__, __LINE__, "cudaStreamSynchronize",
                              cudaGetErrorString(done));
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

/* Fills the probe's matrix m (count elements of the engine's type) with
 * uniform random values in [-1, 1): BLOCK floats drawn on the host (from
 * seed), converted into m's first BLOCK elements, then doubled by copies.
 * Constant data flatters the peak (fewer bits toggle in the multipliers: a
 * bf16 GEMM ran 13% faster on zeros than on random data on an H200). */
static int fill_random(cuda_engine *e, void *m, size_t count, uint32_t seed, float *host,
                       float *dev, size_t block)
{
    /* host and dev are reused from one call to the next */
    if (cudaStreamSynchronize(e->stream) != cudaSuccess)
        return -1;
    uint32_t x = seed | 1u;
    for (size_t i = 0; i < block; i++) {
        x ^= x << 13; /* xorshift32 */
        x ^= x >> 17;
        x ^= x << 5;
        host[i] = (float)((x >> 8) * (2.0 / 16777216.0) - 1.0);
    }
    const size_t size = act_size(e);
    size_t done = block < count ? block : count;
    if (cudaMemcpyAsync(dev, host, block * sizeof(float), cudaMemcpyHostToDevice, e->stream) !=
            cudaSuccess ||
        lbk_convert(e->stream, m, e->act_type, dev, LBK_F32, done, 0, NULL) != cudaSuccess)
        return -1;
    while (done < count) {
        size_t n = done < count - done ? done : count - done;
        if (cudaMemcpyAsync((char *)m + done * size, m, n * size, cudaMemcpyDeviceToDevice,
                            e->stream) != cudaSuccess)
            return -1;
        done += n;
    }
    return 0;
}

/* Times square GEMMs in the engine's precision and math mode, on random
 * data: the device's practical peak for "% of peak". 0 when it cannot be
 * measured. */
static int measure_peak(cuda_engine *e, double *gflops)
{
    const int N = 8192, reps = 10;
    const size_t count = (size_t)N * N, bytes = count * act_size(e);
    const size_t block = (size_t)1 << 20; /* random floats drawn on the host */
    void *m[3] = {NULL, NULL, NULL};
    cudaEvent_t t0 = NULL, t1 = NULL;
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        rc = cuda_device_alloc(e, &m[i], bytes, "the peak GEMM probe");
    /* m[2], the product, is the floats' staging room until the first GEMM */
    float *host = rc ? NULL : malloc(block * sizeof(float));
    if (!rc && !host)
        rc = -1;
    for (int i = 0; i < 2 && !rc; i++)
        rc = fill_random(e, m[i], count, 0x9e3779b9u * (uint32_t)(i + 1), host, (float *)m[2],
                         block);
    if (!rc && cudaStreamSynchronize(e->stream) != cudaSuccess) /* before host is freed */
        rc = -1;
    free(host);
    if (!rc && (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess))
        rc = cuda_fail(e, "cuda: cannot create events for the peak probe");
    for (int i = 0; i < 2 && !rc; i++) /* warm-up */
        rc = cuda_gemm(e, DENSE_BACKWARD_DATA, N, N, N, m[0], m[1], m[2]);
    if (!rc && cudaEventRecord(t0, e->stream) != cudaSuccess)
        rc = -1;
    for (int i = 0; i < reps && !rc; i++)
        rc = cuda_gemm(e, DENSE_BACKWARD_DATA, N, N, N, m[0], m[1], m[2]);
    float ms = 0;
    if (!rc &&
        (cudaEventRecord(t1, e->stream) != cudaSuccess || cudaEventSynchronize(t1) != cudaSuccess ||
         cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess))
        rc = -1;
    cudaStreamSynchronize(e->stream);
    for (int i = 0; i < 3; i++)
        cuda_device_free(e, &m[i], bytes);
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

double cuda_peak_gflops(engine *handle)
{
    cuda_engine *e = cuda_of(handle);
    /* the probe's matrices are not the training's memory */
    const size_t tracked_peak = e->tracked_peak;
    if (e->peak_gflops <= 0 && cudaSetDevice(e->device) == cudaSuccess)
        measure_peak(e, &e->peak_gflops);
    e->tracked_peak = tracked_peak;
    cudaGetLastError();
    return e->peak_gflops;
}
