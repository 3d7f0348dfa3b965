/* Per-element maths shared by every backend: the CPU engines call these in
 * their loops and the CUDA kernels call the very same functions, so the CPU
 * tests exercise the code the GPU runs. */
#ifndef LB_ELEMENTWISE_H
#define LB_ELEMENTWISE_H

#include <math.h>

#ifdef __CUDACC__
#define LB_HD __host__ __device__ __forceinline__
#else
#define LB_HD static inline
#endif

LB_HD float lb_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* Gradient through ReLU given its output y. */
LB_HD float lb_relu_backward(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

LB_HD float lb_pixel(unsigned char p) { return (float)p * (1.0f / 255.0f); }

/* Gradient with L2 decay folded in (decay 0 for biases). */
LB_HD float lb_decayed_grad(float grad, float w, float decay) { return grad + decay * w; }

LB_HD float lb_sgd_step(float w, float g, float lr) { return w - lr * g; }

/* PyTorch's Nesterov: v = mu v + g; w -= lr (g + mu v). Updates *v. */
LB_HD float lb_nesterov_step(float w, float g, float *v, float lr, float mu)
{
    float nv = mu * *v + g;
    *v = nv;
    return w - lr * (g + mu * nv);
}

/* Adam with bias correction; c1 = 1 - b1^t and c2 = 1 - b2^t are computed
 * once per step by the caller. Updates *m and *s. */
LB_HD float lb_adam_step(float w, float g, float *m, float *s, float lr, float b1, float b2,
                         float eps, float c1, float c2)
{
    float nm = b1 * *m + (1.0f - b1) * g;
    float ns = b2 * *s + (1.0f - b2) * g * g;
    *m = nm;
    *s = ns;
    return w - lr * (nm / c1) / (sqrtf(ns / c2) + eps);
}

/* Softmax cross-entropy for one image over `classes` logits: writes the
 * gradient of (loss * scale) into dlogits and returns the loss. Uses the
 * max-shift so large logits cannot overflow. */
LB_HD float lb_softmax_xent(const float *logits, int classes, int label, float scale,
                            float *dlogits)
{
    float mx = logits[0];
    for (int k = 1; k < classes; k++)
        mx = logits[k] > mx ? logits[k] : mx;
    float sum = 0.0f;
    for (int k = 0; k < classes; k++)
        sum += expf(logits[k] - mx);
    float log_sum = logf(sum);
    if (dlogits) {
        for (int k = 0; k < classes; k++) {
            float p = expf(logits[k] - mx - log_sum);
            dlogits[k] = (p - (k == label ? 1.0f : 0.0f)) * scale;
        }
    }
    return log_sum + mx - logits[label];
}

/* Index of the largest logit (first on ties): the predicted class. */
LB_HD int lb_argmax(const float *v, int n)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (v[k] > v[best])
            best = k;
    return best;
}

#endif
