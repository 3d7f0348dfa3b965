/* The per-element functions of elementwise.h, written once over LB_T
 * (float or double); elementwise.h includes this file once per type, with
 * LB_NAME(name) giving each version its name and LB_MATH(f) the libm
 * function of that type (expf or exp). No include guard, on purpose. */

LB_HD LB_T LB_NAME(lb_relu)(LB_T x) { return x > 0 ? x : (LB_T)0; }

/* Gradient through ReLU given its output y. */
LB_HD LB_T LB_NAME(lb_relu_backward)(LB_T y, LB_T dy) { return y > 0 ? dy : (LB_T)0; }

/* Gradient with L2 decay folded in (decay 0 for biases). */
LB_HD LB_T LB_NAME(lb_decayed_grad)(LB_T grad, LB_T w, LB_T decay) { return grad + decay * w; }

LB_HD LB_T LB_NAME(lb_sgd_step)(LB_T w, LB_T g, LB_T lr) { return w - lr * g; }

/* PyTorch's Nesterov: v = mu v + g; w -= lr (g + mu v). Updates *v. */
LB_HD LB_T LB_NAME(lb_nesterov_step)(LB_T w, LB_T g, LB_T *v, LB_T lr, LB_T mu)
{
    LB_T nv = mu * *v + g;
    *v = nv;
    return w - lr * (g + mu * nv);
}

/* Adam with bias correction; c1 = 1 - b1^t and c2 = 1 - b2^t are computed
 * once per step by the caller. Updates *m and *s. */
LB_HD LB_T LB_NAME(lb_adam_step)(LB_T w, LB_T g, LB_T *m, LB_T *s, LB_T lr, LB_T b1, LB_T b2,
                                 LB_T eps, LB_T c1, LB_T c2)
{
    LB_T nm = b1 * *m + (1 - b1) * g;
    LB_T ns = b2 * *s + (1 - b2) * g * g;
    *m = nm;
    *s = ns;
    return w - lr * (nm / c1) / (LB_MATH(sqrt)(ns / c2) + eps);
}

/* Softmax cross-entropy for one image over `classes` logits: writes the
 * gradient of (loss * scale) into dlogits and returns the loss. Uses the
 * max-shift so large logits cannot overflow. */
LB_HD LB_T LB_NAME(lb_softmax_xent)(const LB_T *logits, int classes, int label, LB_T scale,
                                    LB_T *dlogits)
{
    LB_T mx = logits[0];
    for (int k = 1; k < classes; k++)
        mx = logits[k] > mx ? logits[k] : mx;
    LB_T sum = 0;
    for (int k = 0; k < classes; k++)
        sum += LB_MATH(exp)(logits[k] - mx);
    LB_T log_sum = LB_MATH(log)(sum);
    if (dlogits) {
        for (int k = 0; k < classes; k++) {
            LB_T p = LB_MATH(exp)(logits[k] - mx - log_sum);
            dlogits[k] = (p - (k == label ? 1 : 0)) * scale;
        }
    }
    return log_sum + mx - logits[label];
}

/* Index of the largest logit (first on ties): the predicted class. */
LB_HD int LB_NAME(lb_argmax)(const LB_T *v, int n)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (v[k] > v[best])
            best = k;
    return best;
}
