/* The cuda engine's resources (engine_impl.h says how the engine works):
 * the error text of a failed call, device and pinned host memory, the
 * workspace and the per-call buffers that grow, the graph they invalidate
 * and a slot's activations. What create, the step, the plans, the stages
 * and describe all call; it calls none of them. */
#include "backends/cuda/engine_impl.h"

/* ------------------------------------------------------------------ errors */

/* "file:line: function: reason"; only the function's name of the call. */
int cuda_call_failed(cuda_engine *e, const char *file, int line, const char *call,
                     const char *reason)
{
    int name_len = (int)strcspn(call, "(");
    cuda_fail(e, "cuda: %s:%d: %.*s: %s", file, line, name_len, call, reason);
    cudaGetLastError(); /* clear a non-sticky error so later calls start clean */
    return -1;
}

/* ------------------------------------------------------------------ memory */

void cuda_sample_memory(cuda_engine *e)
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
int cuda_device_alloc(cuda_engine *e, void **p, size_t bytes, const char *what)
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
        return cuda_fail(e, "cuda: %s:%d: cudaMalloc: %s: %zu bytes for %s (%zu MiB free of %zu)",
                         __FILE__, __LINE__, cudaGetErrorString(rc), bytes, what, free_bytes >> 20,
                         total >> 20);
    }
    e->tracked_bytes += bytes;
    if (e->tracked_bytes > e->tracked_peak)
        e->tracked_peak = e->tracked_bytes;
    CK_CUDA(cudaMemsetAsync(*p, 0, bytes, e->stream));
    return 0;
}

void cuda_device_free(cuda_engine *e, void **p, size_t bytes)
{
    if (*p) {
        cudaFree(*p);
        e->tracked_bytes -= bytes < e->tracked_bytes ? bytes : e->tracked_bytes;
    }
    *p = NULL;
}

int cuda_pinned_alloc(cuda_engine *e, void **p, size_t bytes, const char *what)
{
    *p = NULL;
    cudaError_t rc = cudaHostAlloc(p, bytes ? bytes : 16, cudaHostAllocDefault);
    if (rc != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return cuda_fail(e, "cuda: %s:%d: cudaHostAlloc: %s: %zu pinned bytes for %s", __FILE__,
                         __LINE__, cudaGetErrorString(rc), bytes, what);
    }
    memset(*p, 0, bytes ? bytes : 16);
    e->pinned_bytes += bytes ? bytes : 16;
    return 0;
}

void cuda_pinned_free(cuda_engine *e, void **p, size_t bytes)
{
    if (*p) {
        cudaFreeHost(*p);
        bytes = bytes ? bytes : 16;
        e->pinned_bytes -= bytes < e->pinned_bytes ? bytes : e->pinned_bytes;
    }
    *p = NULL;
}

/* A replayed graph holds raw pointers: drop it when a buffer it uses moves. */
void cuda_drop_graph(cuda_engine *e)
{
    if (e->graph) {
        cudaStreamSynchronize(e->stream);
        cudaGraphExecDestroy(e->graph);
        cudaGetLastError();
        e->graph = NULL;
    }
}

int cuda_ensure_workspace(cuda_engine *e, size_t bytes)
{
    if (bytes <= e->workspace_bytes && e->workspace)
        return 0;
    cuda_drop_graph(e);
    CK_CUDA(cudaStreamSynchronize(e->stream));
    cuda_device_free(e, &e->workspace, e->workspace_bytes);
    e->workspace_bytes = 0;
    CK(cuda_device_alloc(e, &e->workspace, bytes, "the cuDNN workspace"));
    e->workspace_bytes = bytes;
    return 0;
}

/* Index and loss buffers for `steps` steps of a full batch. */
int cuda_ensure_capacity(cuda_engine *e, int steps)
{
    if (steps <= e->capacity_steps)
        return 0;
    cuda_drop_graph(e);
    CK_CUDA(cudaStreamSynchronize(e->stream));
    const size_t old_steps = (size_t)e->capacity_steps, B = (size_t)e->cfg.batch_size;
    cuda_device_free(e, (void **)&e->indices_dev, old_steps * B * sizeof(int32_t));
    cuda_device_free(e, (void **)&e->losses_dev, old_steps * sizeof(double));
    cuda_pinned_free(e, (void **)&e->indices_host, old_steps * B * sizeof(int32_t));
    cuda_pinned_free(e, (void **)&e->losses_host, old_steps * sizeof(double));
    e->capacity_steps = 0;
    const size_t n = (size_t)steps;
    CK(cuda_device_alloc(e, (void **)&e->indices_dev, n * B * sizeof(int32_t), "batch indices"));
    CK(cuda_device_alloc(e, (void **)&e->losses_dev, n * sizeof(double), "losses"));
    CK(cuda_pinned_alloc(e, (void **)&e->indices_host, n * B * sizeof(int32_t), "batch indices"));
    CK(cuda_pinned_alloc(e, (void **)&e->losses_host, n * sizeof(double), "losses"));
    e->capacity_steps = steps;
    return 0;
}

/* ------------------------------------------------------------------ slots */

/* The slot's activations into act[]. */
void cuda_use_slot(cuda_engine *e, int slot)
{
    const int per_slot = e->w.n_layers + 1;
    for (int i = 0; i < per_slot; i++)
        e->act[i] = e->slot_act[slot * per_slot + i];
}
