/* Per-element maths shared by every backend: the CPU engines call these in
 * their loops and the CUDA kernels call the very same functions, so the CPU
 * tests exercise the code the GPU runs.
 *
 * Each function is written once, over a type, in elementwise_real.h, and
 * made here for float and for double. C callers use the plain names
 * (lb_relu(x), lb_softmax_xent(logits, ...)), which pick the version by the
 * type of the first argument (float, or double for the fp64 engines); C++
 * (the CUDA kernels) gets the two versions as overloads of the same name. */
#ifndef LB_ELEMENTWISE_H
#define LB_ELEMENTWISE_H

#include <math.h>

#ifdef __CUDACC__
#define LB_HD __host__ __device__ __forceinline__
#else
#define LB_HD static inline
#endif

/* Pixels are the same floats at every precision: an fp64 engine widens
 * them exactly, so every engine trains on the same inputs. */
LB_HD float lb_pixel(unsigned char p) { return (float)p * (1.0f / 255.0f); }

#ifdef __cplusplus
#define LB_FN(name, suffix) name
#else
#define LB_FN(name, suffix) name##_##suffix
#endif

#define LB_T float
#define LB_NAME(name) LB_FN(name, f32)
#define LB_MATH(fn) fn##f
#include "backends/common/elementwise_real.h"
#undef LB_T
#undef LB_NAME
#undef LB_MATH

#define LB_T double
#define LB_NAME(name) LB_FN(name, f64)
#define LB_MATH(fn) fn
#include "backends/common/elementwise_real.h"
#undef LB_T
#undef LB_NAME
#undef LB_MATH
#undef LB_FN

#ifndef __cplusplus
/* The version for the first argument's type ((x)[0] for arrays). */
#define LB_PICK(x, name) _Generic((x), double: name##_f64, default: name##_f32)
#define lb_relu(x) LB_PICK(x, lb_relu)(x)
#define lb_relu_backward(y, dy) LB_PICK(y, lb_relu_backward)(y, dy)
#define lb_decayed_grad(g, w, decay) LB_PICK(g, lb_decayed_grad)(g, w, decay)
#define lb_sgd_step(w, ...) LB_PICK(w, lb_sgd_step)(w, __VA_ARGS__)
#define lb_nesterov_step(w, ...) LB_PICK(w, lb_nesterov_step)(w, __VA_ARGS__)
#define lb_adam_step(w, ...) LB_PICK(w, lb_adam_step)(w, __VA_ARGS__)
#define lb_softmax_xent(logits, ...) LB_PICK((logits)[0], lb_softmax_xent)(logits, __VA_ARGS__)
#define lb_argmax(v, n) LB_PICK((v)[0], lb_argmax)(v, n)
#endif

#endif
