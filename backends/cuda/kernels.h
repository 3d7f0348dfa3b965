/* The CUDA engine's own kernels (kernels.cu), behind a plain C interface.
 * Everything heavy (convolutions, pooling, dense products) goes through
 * cuDNN and cuBLAS; these are the small per-element and per-image steps,
 * each built on the shared functions of backends/common/elementwise.h.
 *
 * Every function enqueues on `stream` and returns cudaGetLastError() after
 * its launch. Typed buffers are void pointers with an lbk_dtype saying what
 * they hold; per-element arithmetic is in float, or in double for double
 * buffers (the fp64 engine). No kernel uses
 * floating-point atomics, so every result is bitwise repeatable. */
#ifndef LB_CUDA_KERNELS_H
#define LB_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backends/cuda/step_state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lbk_dtype { LBK_F32, LBK_F16, LBK_BF16, LBK_F64 } lbk_dtype;

static inline size_t lbk_dtype_size(lbk_dtype t)
{
    return t == LBK_F64 ? 8 : t == LBK_F32 ? 4 : 2;
}

/* The optimiser's settings (engine.h's optimizer_config, by value). */
typedef struct lbk_optimizer {
    int kind; /* optimizer_kind */
    float lr, momentum, weight_decay, beta1, beta2, eps;
} lbk_optimizer;

/* x[b][p] = pixel of image row(b), labels_out[b] = its label, for b < n, where
 * row(b) = indices[slot * n + b] (slot from state, 0 when state is NULL), or
 * first + b when indices is NULL. */
cudaError_t lbk_gather(cudaStream_t stream, lbk_dtype t, void *x, int *labels_out,
                       const uint8_t *images, const uint8_t *labels, const int32_t *indices,
                       const cuda_step_state *state, long first, int n, int pixels);

/* y[b][c][p] += bias[c] over n x C x P. */
cudaError_t lbk_bias_add(cudaStream_t stream, lbk_dtype t, void *y, const void *bias, int n, int C,
                         int P);

/* d_bias[c] = sum over b < n and p < P of dy[b][c][p] (overwrites; with
 * accumulate, adds the sum to d_bias[c]), summed in float (double for
 * LBK_F64) in a fixed order. partial holds lbk_bias_backward_partials()
 * doubles. */
size_t lbk_bias_backward_partials(int n, int C, int P);
cudaError_t lbk_bias_backward(cudaStream_t stream, lbk_dtype t, void *d_bias, const void *dy, int n,
                              int C, int P, void *partial, int accumulate);

/* y = relu(x); dx = dy where y > 0, else 0 (count elements). */
cudaError_t lbk_relu_forward(cudaStream_t stream, lbk_dtype t, void *y, const void *x,
                             size_t count);
cudaError_t lbk_relu_backward(cudaStream_t stream, lbk_dtype t, void *dx, const void *dy,
                              const void *y, size_t count);

/* Softmax cross-entropy over logits[n][classes] (classes <= 16): d_logits
 * receives the gradient of loss_scale * mean loss, losses[slot] the mean
 * loss (loss_scale and slot from state; 1 and 0 when state is NULL), a
 * double so that an fp64 engine's loss keeps its digits. */
cudaError_t lbk_softmax_xent(cudaStream_t stream, lbk_dtype t, void *d_logits, const void *logits,
                             const int *labels, int n, int classes, const cuda_step_state *state,
                             double *losses);

/* Evaluation: confusion[label * classes + predicted] += 1 per image and
 * *loss_sum += the sum of the images' losses. */
cudaError_t lbk_eval_count(cudaStream_t stream, lbk_dtype t, const void *logits, const int *labels,
                           int n, int classes, unsigned long long *confusion, double *loss_sum);

/* Sets state->overflow when any of grads[0..count) is Inf or NaN. */
cudaError_t lbk_check_finite(cudaStream_t stream, lbk_dtype t, const void *grads, size_t count,
                             cuda_step_state *state);

/* One optimiser step over the flat parameter vector, unless state->overflow:
 * g = grads[i] * grad_scale (divided by state->loss_scale when
 * unscale_by_loss_scale), plus weight_decay * w where decay_mask[i];
 * params[i] updated by the rule of opt.kind with opt_state (nesterov: v;
 * adam: m then s, count numbers each) and t = state->step + 1; params_lo[i]
 * (of type lo, may be NULL) receives the new value rounded. params and
 * opt_state are of type master (LBK_F32, or LBK_F64 for the fp64 engine,
 * which then does the arithmetic in double too). */
cudaError_t lbk_update(cudaStream_t stream, lbk_optimizer opt, void *params, lbk_dtype master,
                       void *params_lo, lbk_dtype lo, const void *grads, lbk_dtype grad_type,
                       void *opt_state, const uint8_t *decay_mask, size_t count, float grad_scale,
                       int unscale_by_loss_scale, const cuda_step_state *state);

/* lb_finish_step(state, cfg) on the device, one thread. */
cudaError_t lbk_finish_step(cudaStream_t stream, cuda_step_state *state, loss_scaling cfg);

/* dst[i] = src[i] converted (count elements). When
 * divide_by_loss_scale, each value is divided by state->loss_scale. */
cudaError_t lbk_convert(cudaStream_t stream, void *dst, lbk_dtype dst_type, const void *src,
                        lbk_dtype src_type, size_t count, int divide_by_loss_scale,
                        const cuda_step_state *state);

/* dst[i] += src[i] in float (count elements): a model-parallel stage in
 * bf16 adds each micro-batch's 16-bit gradients into its fp32 ones. */
cudaError_t lbk_add_to_f32(cudaStream_t stream, float *dst, const void *src, lbk_dtype src_type,
                           size_t count);

#ifdef __cplusplus
}
#endif

#endif
