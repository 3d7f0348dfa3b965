/* The cuda engine's training step: the layers forward and back, the
 * optimiser, the step captured as a CUDA graph, host-fed staging, training,
 * evaluation and the data-parallel entries. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ layers */

static const void *weights_at(cuda_engine *e, size_t offset)
{
    if (e->mixed)
        return (const char *)e->params_lo + offset * act_size(e);
    return (const char *)e->params + offset * master_size(e);
}

static void *grads_at(cuda_engine *e, size_t offset)
{
    return (char *)e->grads + offset * act_size(e);
}

/* C = product, or C += product with accumulate (cuBLAS's beta = 1). */
static int gemm_into(cuda_engine *e, dense_product which, int n, int in, int out, const void *A,
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

int cuda_gemm(cuda_engine *e, dense_product which, int n, int in, int out, const void *A,
                     const void *B, void *C)
{
    return gemm_into(e, which, n, in, out, A, B, C, 0);
}

int cuda_forward_layer(cuda_engine *e, const plan *p, int i, int n)
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
        CK(cuda_gemm(e, DENSE_FORWARD, n, shape3_size(l->in), l->units,
                     weights_at(e, l->weight_offset), x, y));
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
int cuda_backward_layer(cuda_engine *e, const plan *p, int i, int n, const void *dy, void *dx,
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
            CK(cuda_gemm(e, DENSE_BACKWARD_DATA, n, shape3_size(l->in), l->units,
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
int cuda_gather_training_batch(cuda_engine *e, int n)
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
static int forward_backward(cuda_engine *e, const plan *p, int n)
{
    const int L = e->w.n_layers;
    CK(cuda_gather_training_batch(e, n));
    for (int i = 0; i < L; i++)
        CK(cuda_forward_layer(e, p, i, n));
    CK_CUDA(lbk_softmax_xent(e->stream, e->act_type, e->grad_a, e->act[L], e->batch_labels, n,
                             e->w.classes, e->state, e->losses_dev));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *d_in = i > 0 ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(cuda_backward_layer(e, p, i, n, d, d_in, 0));
        d = d_in;
    }
    return 0;
}

/* The optimiser step from e->grads and the step's bookkeeping. */
int cuda_update_and_finish(cuda_engine *e)
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
static int enqueue_step(cuda_engine *e, const plan *p, int n)
{
    CK(forward_backward(e, p, n));
    return cuda_update_and_finish(e);
}

/* ------------------------------------------------------------------ state */

int cuda_refresh_low_copy(cuda_engine *e)
{
    if (e->mixed)
        CK_CUDA(lbk_convert(e->stream, e->params_lo, e->act_type, e->params, LBK_F32, e->n_params,
                            0, NULL));
    return 0;
}

/* The master parameters, the optimiser state and the step state copied
 * into their saved copies (save) or back from them, on the stream. */
static int copy_model(cuda_engine *e, int save)
{
    const size_t size = master_size(e);
    const struct {
        void *live, *kept;
        size_t bytes;
    } parts[] = {
        {e->params, e->saved, e->n_params * size},
        {e->opt_state, (char *)e->saved + e->n_params * size, e->state_floats * size},
        {e->state, e->state_saved, sizeof(cuda_step_state)},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].bytes)
            CK_CUDA(cudaMemcpyAsync(save ? parts[i].kept : parts[i].live,
                                    save ? parts[i].live : parts[i].kept, parts[i].bytes,
                                    cudaMemcpyDeviceToDevice, e->stream));
    return 0;
}

int cuda_save_model(cuda_engine *e) { return copy_model(e, 1); }

int cuda_restore_model(cuda_engine *e)
{
    CK(copy_model(e, 0));
    return cuda_refresh_low_copy(e);
}

int cuda_reset_slot(cuda_engine *e)
{
    CK_CUDA(cudaMemsetAsync(&e->state->slot, 0, sizeof(int), e->stream));
    return 0;
}

/* Captures one full-batch step as a graph. First one eager step runs and the
 * model is put back, so that cuDNN, cuBLAS and the kernels do any lazy
 * set-up outside the capture. The step's indices must already be in slot 0.
 * A capture that fails is not an error: the steps then run eagerly and
 * describe() says why. */
int cuda_capture_graph(cuda_engine *e)
{
    const int B = e->cfg.batch_size;
    CK(cuda_reset_slot(e));
    CK(cuda_save_model(e));
    CK(enqueue_step(e, &e->plans[0], B));
    CK(cuda_restore_model(e));
    CK(cuda_reset_slot(e));
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
    cuda_sample_memory(e);
    return 0;
}

/* ------------------------------------------------------------------ staging */

/* data_on_device off: copies images rows[0..n) (first..first+n when rows is
 * NULL) of d into staging buffer k, on the copy stream, and makes the
 * compute stream wait for it. The caller records compute_done[k] after the
 * work that reads the buffer. */
int cuda_stage_batch(cuda_engine *e, const dataset *d, const int32_t *rows, long first, int n,
                     int k)
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

/* ------------------------------------------------------------------ training */

int cuda_check_batch(cuda_engine *e, const int32_t *indices, int batch, int steps)
{
    char why[128];
    if (batch_refusal(&e->cfg, batch, why, sizeof why))
        return cuda_fail(e, "cuda: %s", why);
    if (steps < 0)
        return cuda_fail(e, "cuda: %d steps asked", steps);
    if (!e->have_train)
        return cuda_fail(e, "cuda: no training set bound");
    if (!indices && steps > 0)
        return cuda_fail(e, "cuda: no batch indices");
    const long n = (long)steps * batch;
    for (long i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= e->train.count)
            return cuda_fail(e, "cuda: image index %d outside 0..%d", indices[i],
                             e->train.count - 1);
    return 0;
}

/* Puts the indices of `steps` steps into the device index buffer: the
 * images themselves when the set is resident, else the staging rows that
 * step s will find its batch in (buffer s % 2). */
int cuda_upload_indices(cuda_engine *e, const int32_t *indices, int batch, int steps)
{
    CK(cuda_ensure_capacity(e, steps));
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
    return cuda_reset_slot(e);
}

int cuda_train_steps(engine *handle, const int32_t *indices, int batch, int steps, float *losses)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    CK(cuda_check_batch(e, indices, batch, steps));
    if (steps == 0)
        return 0;
    const plan *p = cuda_plan_for(e, batch);
    if (!p)
        return -1;
    CK(cuda_upload_indices(e, indices, batch, steps));
    CK(cuda_refresh_low_copy(e)); /* in case BUF_PARAMS was written directly */
    const int use_graph = e->cfg.cuda_graph && batch == e->cfg.batch_size && !e->graph_failed;
    if (use_graph && !e->graph)
        CK(cuda_capture_graph(e));
    for (int s = 0; s < steps; s++) {
        const int k = s % 2;
        if (!e->cfg.data_on_device)
            CK(cuda_stage_batch(e, &e->train, indices + (size_t)s * batch, 0, batch, k));
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
    cuda_sample_memory(e);
    return 0;
}

int cuda_evaluate(engine *handle, int limit, eval_counts *out)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    if (e->cfg.stage_slots)
        return cuda_fail(e, "cuda: a model-parallel stage is evaluated through stage_forward");
    if (!e->have_test)
        return cuda_fail(e, "cuda: no test set bound");
    /* BUF_PARAMS may have been written directly (parameter averaging): the
     * 16-bit copy the layers read must follow */
    CK(cuda_refresh_low_copy(e));
    const int n = limit <= 0 || limit > e->test.count ? e->test.count : limit;
    const int L = e->w.n_layers, classes = e->w.classes, B = e->cfg.batch_size;
    const size_t confusion_bytes = sizeof(unsigned long long) * classes * classes;
    CK_CUDA(cudaMemsetAsync(e->confusion, 0, confusion_bytes, e->stream));
    CK_CUDA(cudaMemsetAsync(e->loss_sum, 0, sizeof(double), e->stream));
    for (int first = 0, batch_no = 0; first < n; first += B, batch_no++) {
        const int m = n - first < B ? n - first : B;
        const plan *p = cuda_plan_for(e, m);
        if (!p)
            return -1;
        const int k = batch_no % 2;
        if (e->cfg.data_on_device) {
            CK_CUDA(lbk_gather(e->stream, e->act_type, e->act[0], e->batch_labels, e->test_images,
                               e->test_labels, NULL, NULL, first, m, (int)e->pixels));
        } else {
            CK(cuda_stage_batch(e, &e->test, NULL, first, m, k));
            CK_CUDA(lbk_gather(e->stream, e->act_type, e->act[0], e->batch_labels, e->stage_dev,
                               e->stage_dev + 2 * (size_t)B * e->pixels, NULL, NULL, (long)k * B, m,
                               (int)e->pixels));
        }
        for (int i = 0; i < L; i++)
            CK(cuda_forward_layer(e, p, i, m));
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
    cuda_sample_memory(e);
    return 0;
}

/* ------------------------------------------------------------------ data parallel */

/* Gradients of the mean loss over one batch, unscaled fp32, into BUF_GRADS. */
int cuda_compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    CK(cuda_check_batch(e, indices, batch, 1));
    const plan *p = cuda_plan_for(e, batch);
    if (!p)
        return -1;
    CK(cuda_upload_indices(e, indices, batch, 1));
    CK(cuda_refresh_low_copy(e));
    if (!e->cfg.data_on_device)
        CK(cuda_stage_batch(e, &e->train, indices, 0, batch, 0));
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

int cuda_apply_update(engine *handle, float grad_scale)
{
    cuda_engine *e = cuda_of(handle);
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
float *cuda_buffer(engine *handle, engine_buffer which, size_t *count)
{
    cuda_engine *e = cuda_of(handle);
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

double cuda_last_loss(engine *handle) { return cuda_of(handle)->last_loss; }
