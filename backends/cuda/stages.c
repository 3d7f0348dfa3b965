/* The cuda engine as a model-parallel stage: activations in and out as
 * host floats, one slot per micro-batch in flight. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ model parallel */

static int check_slot(cuda_engine *e, int slot)
{
    char why[128];
    return slot_refusal(&e->cfg, slot, why, sizeof why) ? cuda_fail(e, "cuda: %s", why) : 0;
}

/* count host floats into the device buffer to (of the activation type),
 * through the pinned buffer; enqueued, the pinned buffer in use until the
 * stream gets there. */
static int floats_to_device(cuda_engine *e, void *to, const float *from, size_t count)
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
static int floats_to_host(cuda_engine *e, float *to, const void *from, size_t count)
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
int cuda_stage_forward(engine *handle, int slot, const float *in, int batch, float *out)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    CK(check_slot(e, slot));
    if (batch < 1 || batch > e->cfg.batch_size)
        return cuda_fail(e, "cuda: micro-batch of %d images, engine was created for 1..%d", batch,
                         e->cfg.batch_size);
    if (!in || !out)
        return cuda_fail(e, "cuda: stage_forward needs its input and output buffers");
    const plan *p = cuda_plan_for(e, batch);
    if (!p)
        return -1;
    /* a call that failed half-way may have left copies out of the pinned
     * buffer in flight */
    CK_CUDA(cudaStreamSynchronize(e->stream));
    e->slot_batch[slot] = 0; /* until its activations are whole again */
    CK(cuda_refresh_low_copy(e)); /* in case BUF_PARAMS was written directly */
    cuda_use_slot(e, slot);
    const workload *w = &e->w;
    const int L = w->n_layers;
    CK(floats_to_device(e, e->act[0], in, (size_t)batch * shape3_size(w->input)));
    for (int i = 0; i < L; i++)
        CK(cuda_forward_layer(e, p, i, batch));
    CK(floats_to_host(e, out, e->act[L], (size_t)batch * shape3_size(w->layers[L - 1].out)));
    e->slot_batch[slot] = batch;
    return 0;
}

/* From d_out, the slot's parameter gradients into BUF_GRADS (written, or
 * added with accumulate) and the gradient to its input into d_in unless it
 * is NULL. In bf16 the layers write 16-bit gradients, which are then
 * converted into (or added to) the fp32 BUF_GRADS apply_update reads. */
int cuda_stage_backward(engine *handle, int slot, const float *d_out, float *d_in, int accumulate)
{
    cuda_engine *e = cuda_of(handle);
    BEGIN(e);
    CK(check_slot(e, slot));
    const int n = e->slot_batch[slot];
    if (!n)
        return cuda_fail(e, "cuda: stage_backward of slot %d before its stage_forward", slot);
    if (!d_out)
        return cuda_fail(e, "cuda: stage_backward needs the output's gradient");
    const plan *p = cuda_plan_for(e, n);
    if (!p)
        return -1;
    CK_CUDA(cudaStreamSynchronize(e->stream));
    cuda_use_slot(e, slot);
    const workload *w = &e->w;
    const int L = w->n_layers;
    CK(floats_to_device(e, e->grad_a, d_out, (size_t)n * shape3_size(w->layers[L - 1].out)));
    void *d = e->grad_a;
    for (int i = L - 1; i >= 0; i--) {
        void *next = i > 0 || d_in ? (d == e->grad_a ? e->grad_b : e->grad_a) : NULL;
        CK(cuda_backward_layer(e, p, i, n, d, next, accumulate && !e->mixed));
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
void cuda_memory_use_of(engine *handle, memory_use *out)
{
    cuda_engine *e = cuda_of(handle);
    const size_t n = e->n_params;
    out->params = n * master_size(e) + (e->mixed ? n * act_size(e) : 0);
    out->grads = n * act_size(e) + (e->mixed ? n * sizeof(float) : 0);
    out->opt_state = e->state_floats * master_size(e);
    out->activations = e->activation_bytes;
    const size_t itemised = out->params + out->grads + out->opt_state + out->activations;
    out->workspace =
        (e->tracked_bytes > itemised ? e->tracked_bytes - itemised : 0) + e->pinned_bytes;
}
