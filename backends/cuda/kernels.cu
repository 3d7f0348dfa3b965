/* The CUDA engine's own kernels: gather, bias, ReLU, softmax cross-entropy,
 * evaluation counts, the optimiser update and the step bookkeeping. The
 * per-element maths is the shared code of elementwise.h (and step_state.h),
 * so the CPU tests exercise what runs here. Reductions run in a fixed order
 * (shared-memory trees, no floating-point atomics): results are bitwise
 * repeatable. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/common/elementwise.h"
#include "backends/cuda/kernels.h"
#include "backends/engine.h"

namespace
{

constexpr int kThreads = 256;
constexpr int kMaxClasses = WORKLOAD_MAX_CLASSES;

/* The type the arithmetic on a storage type is done in: float, or double
 * for double storage (the fp64 engine). */
template <typename T> struct acc_of {
    using type = float;
};
template <> struct acc_of<double> {
    using type = double;
};
template <typename T> using acc_t = typename acc_of<T>::type;

/* Loads and stores in the arithmetic type, whatever the storage type. */
__device__ __forceinline__ double load(const double *p, size_t i) { return p[i]; }
__device__ __forceinline__ void store(double *p, size_t i, double v) { p[i] = v; }
__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, size_t i)
{
    return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16 *p, size_t i, float v)
{
    p[i] = __float2bfloat16_rn(v);
}

/* Blocks for a grid-stride loop over count elements. */
unsigned blocks_for(size_t count)
{
    size_t b = (count + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > 8192 ? 8192 : b);
}

/* body(T *) for one storage type T, and what the launches in it left. */
template <typename T, typename Body> cudaError_t run_as(Body body)
{
    body(static_cast<T *>(nullptr));
    return cudaGetLastError();
}

/* Calls body(T *) with T the C++ type of t (a null pointer: only its type
 * counts). */
template <typename Body> cudaError_t dispatch(lbk_dtype t, Body body)
{
    switch (t) {
    case LBK_F32:
        return run_as<float>(body);
    case LBK_F16:
        return run_as<__half>(body);
    case LBK_BF16:
        return run_as<__nv_bfloat16>(body);
    case LBK_F64:
        return run_as<double>(body);
    default:
        return cudaErrorInvalidValue;
    }
}

/* Sum of v over the block, in a fixed order; every thread gets it. */
template <typename A> __device__ A block_sum(A v, A *shared)
{
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
        if ((int)threadIdx.x < width)
            shared[threadIdx.x] += shared[threadIdx.x + width];
        __syncthreads();
    }
    A total = shared[0];
    __syncthreads();
    return total;
}

template <typename T>
__global__ void gather_kernel(T *x, int *labels_out, const uint8_t *images, const uint8_t *labels,
                              const int32_t *indices, const cuda_step_state *state, long first,
                              int n, int pixels)
{
    const int b = blockIdx.x;
    long row;
    if (indices) {
        const long slot = state ? state->slot : 0;
        row = indices[slot * n + b];
    } else {
        row = first + b;
    }
    const uint8_t *src = images + (size_t)row * pixels;
    for (int p = threadIdx.x; p < pixels; p += blockDim.x)
        store(x, (size_t)b * pixels + p, lb_pixel(src[p]));
    if (threadIdx.x == 0)
        labels_out[b] = labels[row];
}

template <typename T>
__global__ void bias_add_kernel(T *y, const T *bias, int C, int P, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)((i / P) % C);
        store(y, i, load(y, i) + load(bias, c));
    }
}

/* Block (s, c) sums channel c over images [s * per, (s + 1) * per); with
 * one split it writes (or adds to) d_bias directly, else a partial. */
template <typename T>
__global__ void bias_partial_kernel(T *d_bias, acc_t<T> *partial, const T *dy, int n, int C, int P,
                                    int images_per_split, int accumulate)
{
    using A = acc_t<T>;
    __shared__ A shared[kThreads];
    const int s = blockIdx.x, c = blockIdx.y, splits = gridDim.x;
    const int b0 = s * images_per_split;
    const int b1 = min(n, b0 + images_per_split);
    const long elements = (long)(b1 > b0 ? b1 - b0 : 0) * P;
    A sum = 0;
    for (long j = threadIdx.x; j < elements; j += blockDim.x) {
        const long b = b0 + j / P, p = j % P;
        sum += load(dy, ((size_t)b * C + c) * P + p);
    }
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        if (splits == 1)
            store(d_bias, c, accumulate ? load(d_bias, c) + sum : sum);
        else
            partial[(size_t)c * splits + s] = sum;
    }
}

template <typename T>
__global__ void bias_finish_kernel(T *d_bias, const acc_t<T> *partial, int C, int splits,
                                   int accumulate)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    acc_t<T> sum = 0;
    for (int s = 0; s < splits; s++)
        sum += partial[(size_t)c * splits + s];
    store(d_bias, c, accumulate ? load(d_bias, c) + sum : sum);
}

/* Splits so that each block sums about 4096 elements, at most 64. */
int bias_splits(int n, int P)
{
    long per_channel = (long)n * P;
    long s = (per_channel + 4095) / 4096;
    if (s < 1)
        s = 1;
    if (s > 64)
        s = 64;
    if (s > n)
        s = n;
    return (int)s;
}

template <typename T> __global__ void relu_forward_kernel(T *y, const T *x, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        store(y, i, lb_relu(load(x, i)));
}

template <typename T>
__global__ void relu_backward_kernel(T *dx, const T *dy, const T *y, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        store(dx, i, lb_relu_backward(load(y, i), load(dy, i)));
}

/* One block; thread t takes images t, t + blockDim.x, ... */
template <typename T>
__global__ void softmax_xent_kernel(T *d_logits, const T *logits, const int *labels, int n,
                                    int classes, const cuda_step_state *state, double *losses)
{
    using A = acc_t<T>;
    __shared__ A shared[kThreads];
    const A loss_scale = state ? state->loss_scale : 1.0f;
    const A scale = loss_scale / (A)n;
    A sum = 0;
    for (int b = threadIdx.x; b < n; b += blockDim.x) {
        A z[kMaxClasses], dz[kMaxClasses];
        for (int k = 0; k < classes; k++)
            z[k] = load(logits, (size_t)b * classes + k);
        sum += lb_softmax_xent(z, classes, labels[b], scale, dz);
        for (int k = 0; k < classes; k++)
            store(d_logits, (size_t)b * classes + k, dz[k]);
    }
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0)
        losses[state ? state->slot : 0] = sum / (A)n;
}

template <typename T>
__global__ void eval_count_kernel(const T *logits, const int *labels, int n, int classes,
                                  unsigned long long *confusion, double *loss_sum)
{
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (int b = threadIdx.x; b < n; b += blockDim.x) {
        acc_t<T> z[kMaxClasses];
        for (int k = 0; k < classes; k++)
            z[k] = load(logits, (size_t)b * classes + k);
        sum += lb_softmax_xent(z, classes, labels[b], acc_t<T>(1), nullptr);
        atomicAdd(&confusion[labels[b] * classes + lb_argmax(z, classes)], 1ULL);
    }
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0)
        *loss_sum += sum;
}

template <typename T>
__global__ void check_finite_kernel(const T *grads, size_t count, cuda_step_state *state)
{
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        bad |= !isfinite(load(grads, i));
    /* every writer writes the same 1, so the race is harmless */
    if (__syncthreads_or(bad) && threadIdx.x == 0)
        state->overflow = 1;
}

__device__ __forceinline__ float power(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double power(double x, double y) { return pow(x, y); }

/* M: the master weights' type, float or double, in which the update is
 * computed; the float settings are widened as the CPU optimiser widens
 * them. */
template <typename M, typename L, typename G>
__global__ void update_kernel(lbk_optimizer opt, M *params, L *params_lo, const G *grads,
                              M *opt_state, const uint8_t *decay_mask, size_t count,
                              float grad_scale, int unscale, const cuda_step_state *state)
{
    if (state->overflow)
        return; /* skipped step: the fp16 gradients overflowed */
    const M g_scale = unscale ? grad_scale / state->loss_scale : grad_scale;
    const M lr = opt.lr, mu = opt.momentum, b1 = opt.beta1, b2 = opt.beta2, eps = opt.eps;
    M c1 = 1, c2 = 1;
    if (opt.kind == OPT_ADAM) {
        const M t = (M)(state->step + 1);
        c1 = 1 - power(b1, t);
        c2 = 1 - power(b2, t);
    }
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        M w = params[i];
        const M decay = decay_mask[i] ? opt.weight_decay : 0.0f;
        const M g = lb_decayed_grad((M)load(grads, i) * g_scale, w, decay);
        switch (opt.kind) {
        case OPT_SGD:
            w = lb_sgd_step(w, g, lr);
            break;
        case OPT_NESTEROV:
            w = lb_nesterov_step(w, g, &opt_state[i], lr, mu);
            break;
        case OPT_ADAM:
            w = lb_adam_step(w, g, &opt_state[i], &opt_state[count + i], lr, b1, b2, eps, c1, c2);
            break;
        }
        params[i] = w;
        if (params_lo)
            store(params_lo, i, w);
    }
}

__global__ void finish_step_kernel(cuda_step_state *state, loss_scaling cfg)
{
    lb_finish_step(state, cfg);
}

template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, size_t count, int divide,
                               const cuda_step_state *state)
{
    const acc_t<S> f = divide ? 1.0f / state->loss_scale : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        store(dst, i, divide ? load(src, i) * f : load(src, i));
}

template <typename S> __global__ void add_kernel(float *dst, const S *src, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = dst[i] + (float)load(src, i);
}

/* The update with master type M: two more levels of dispatch, the
 * low-precision copy's type and the gradients' type. */
template <typename M>
cudaError_t launch_update(cudaStream_t stream, lbk_optimizer opt, M *params, void *params_lo,
                          lbk_dtype lo, const void *grads, lbk_dtype grad_type, M *opt_state,
                          const uint8_t *decay_mask, size_t count, float grad_scale,
                          int unscale_by_loss_scale, const cuda_step_state *state)
{
    cudaError_t err = cudaSuccess;
    cudaError_t outer = dispatch(lo, [&](auto *lo_type) {
        using L = std::remove_pointer_t<decltype(lo_type)>;
        err = dispatch(grad_type, [&](auto *grad_type_ptr) {
            using G = std::remove_pointer_t<decltype(grad_type_ptr)>;
            update_kernel<M, L, G><<<blocks_for(count), kThreads, 0, stream>>>(
                opt, params, static_cast<L *>(params_lo), static_cast<const G *>(grads), opt_state,
                decay_mask, count, grad_scale, unscale_by_loss_scale, state);
        });
    });
    return err != cudaSuccess ? err : outer;
}

} // namespace

extern "C" {

cudaError_t lbk_gather(cudaStream_t stream, lbk_dtype t, void *x, int *labels_out,
                       const uint8_t *images, const uint8_t *labels, const int32_t *indices,
                       const cuda_step_state *state, long first, int n, int pixels)
{
    if (n < 1)
        return cudaSuccess;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        gather_kernel<T><<<n, kThreads, 0, stream>>>(static_cast<T *>(x), labels_out, images,
                                                     labels, indices, state, first, n, pixels);
    });
}

cudaError_t lbk_bias_add(cudaStream_t stream, lbk_dtype t, void *y, const void *bias, int n, int C,
                         int P)
{
    const size_t count = (size_t)n * C * P;
    if (count == 0)
        return cudaSuccess;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        bias_add_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
            static_cast<T *>(y), static_cast<const T *>(bias), C, P, count);
    });
}

size_t lbk_bias_backward_partials(int n, int C, int P)
{
    return (size_t)C * bias_splits(n < 1 ? 1 : n, P);
}

cudaError_t lbk_bias_backward(cudaStream_t stream, lbk_dtype t, void *d_bias, const void *dy, int n,
                              int C, int P, void *partial, int accumulate)
{
    if (n < 1 || C < 1)
        return cudaSuccess;
    const int splits = bias_splits(n, P);
    const int per = (n + splits - 1) / splits;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        using A = acc_t<T>;
        bias_partial_kernel<T><<<dim3(splits, C), kThreads, 0, stream>>>(
            static_cast<T *>(d_bias), static_cast<A *>(partial), static_cast<const T *>(dy), n, C,
            P, per, accumulate);
        if (splits > 1)
            bias_finish_kernel<T><<<(C + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
                static_cast<T *>(d_bias), static_cast<const A *>(partial), C, splits, accumulate);
    });
}

cudaError_t lbk_relu_forward(cudaStream_t stream, lbk_dtype t, void *y, const void *x, size_t count)
{
    if (count == 0)
        return cudaSuccess;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        relu_forward_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
            static_cast<T *>(y), static_cast<const T *>(x), count);
    });
}

cudaError_t lbk_relu_backward(cudaStream_t stream, lbk_dtype t, void *dx, const void *dy,
                              const void *y, size_t count)
{
    if (count == 0)
        return cudaSuccess;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        relu_backward_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
            static_cast<T *>(dx), static_cast<const T *>(dy), static_cast<const T *>(y), count);
    });
}

cudaError_t lbk_softmax_xent(cudaStream_t stream, lbk_dtype t, void *d_logits, const void *logits,
                             const int *labels, int n, int classes, const cuda_step_state *state,
                             double *losses)
{
    if (n < 1 || classes < 1 || classes > kMaxClasses)
        return cudaErrorInvalidValue;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        softmax_xent_kernel<T><<<1, kThreads, 0, stream>>>(static_cast<T *>(d_logits),
                                                           static_cast<const T *>(logits), labels,
                                                           n, classes, state, losses);
    });
}

cudaError_t lbk_eval_count(cudaStream_t stream, lbk_dtype t, const void *logits, const int *labels,
                           int n, int classes, unsigned long long *confusion, double *loss_sum)
{
    if (n < 1)
        return cudaSuccess;
    if (classes < 1 || classes > kMaxClasses)
        return cudaErrorInvalidValue;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        eval_count_kernel<T><<<1, kThreads, 0, stream>>>(static_cast<const T *>(logits), labels, n,
                                                         classes, confusion, loss_sum);
    });
}

cudaError_t lbk_check_finite(cudaStream_t stream, lbk_dtype t, const void *grads, size_t count,
                             cuda_step_state *state)
{
    if (count == 0)
        return cudaSuccess;
    return dispatch(t, [&](auto *type) {
        using T = std::remove_pointer_t<decltype(type)>;
        check_finite_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
            static_cast<const T *>(grads), count, state);
    });
}

cudaError_t lbk_update(cudaStream_t stream, lbk_optimizer opt, void *params, lbk_dtype master,
                       void *params_lo, lbk_dtype lo, const void *grads, lbk_dtype grad_type,
                       void *opt_state, const uint8_t *decay_mask, size_t count, float grad_scale,
                       int unscale_by_loss_scale, const cuda_step_state *state)
{
    if (count == 0)
        return cudaSuccess;
    if (master == LBK_F64)
        return launch_update(stream, opt, static_cast<double *>(params), params_lo, lo, grads,
                             grad_type, static_cast<double *>(opt_state), decay_mask, count,
                             grad_scale, unscale_by_loss_scale, state);
    if (master != LBK_F32)
        return cudaErrorInvalidValue;
    return launch_update(stream, opt, static_cast<float *>(params), params_lo, lo, grads,
                         grad_type, static_cast<float *>(opt_state), decay_mask, count, grad_scale,
                         unscale_by_loss_scale, state);
}

cudaError_t lbk_finish_step(cudaStream_t stream, cuda_step_state *state, loss_scaling cfg)
{
    finish_step_kernel<<<1, 1, 0, stream>>>(state, cfg);
    return cudaGetLastError();
}

cudaError_t lbk_convert(cudaStream_t stream, void *dst, lbk_dtype dst_type, const void *src,
                        lbk_dtype src_type, size_t count, int divide_by_loss_scale,
                        const cuda_step_state *state)
{
    if (count == 0)
        return cudaSuccess;
    cudaError_t err = cudaSuccess;
    cudaError_t outer = dispatch(dst_type, [&](auto *dst_ptr) {
        using D = std::remove_pointer_t<decltype(dst_ptr)>;
        err = dispatch(src_type, [&](auto *src_ptr) {
            using S = std::remove_pointer_t<decltype(src_ptr)>;
            convert_kernel<D, S><<<blocks_for(count), kThreads, 0, stream>>>(
                static_cast<D *>(dst), static_cast<const S *>(src), count, divide_by_loss_scale,
                state);
        });
    });
    return err != cudaSuccess ? err : outer;
}

cudaError_t lbk_add_to_f32(cudaStream_t stream, float *dst, const void *src, lbk_dtype src_type,
                           size_t count)
{
    if (count == 0)
        return cudaSuccess;
    return dispatch(src_type, [&](auto *type) {
        using S = std::remove_pointer_t<decltype(type)>;
        add_kernel<S><<<blocks_for(count), kThreads, 0, stream>>>(dst, static_cast<const S *>(src),
                                                                  count);
    });
}

} // extern "C"
