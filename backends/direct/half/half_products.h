/* What the direct backend's half-precision product sets (bf16_products.c,
 * fp16_products.c) share: bf16.h and fp16.h have the same shapes, so one
 * set of chwn_products entries (half_products.c) serves both, reading the
 * format's functions from the set's ctx; each set's file keeps only the
 * entries the table calls without the set (the packed weights' size and
 * packing, the dense scratch). Each product rounds and packs its operands
 * in the engine's scratch; the weights are packed once a pass: the
 * convolutions' after weight_bias, the dense layers' into the engine's
 * copy (dense_pack_weights), which both dense products read. */
#ifndef LB_DIRECT_HALF_PRODUCTS_H
#define LB_DIRECT_HALF_PRODUCTS_H

#include <stddef.h>

#include "backends/chwn/chwn_products.h"

/* One format's products, as bf16.h and fp16.h declare them */
typedef struct direct_half_ops {
    size_t (*conv_scratch_bytes)(int B, int C, int H, int W, int K, int kernel);
    size_t (*conv_weight_bytes)(int C, int K, int kernel);
    void (*pack_conv_weights)(void *packed, const float *weight_bias, int C, int K, int kernel);
    void (*conv_forward)(float *out, const float *in, const float *weight_bias,
                         const void *packed_weights, void *scratch, int B, int C, int H, int W,
                         int K, int kernel, int threads);
    void (*conv_backward_data)(float *d_in, const float *d_out, const void *packed_weights,
                               void *scratch, int B, int C, int H, int W, int K, int kernel,
                               int threads);
    void (*conv_backward_params)(float *d_weight_bias, const float *d_out, const float *in,
                                 void *scratch, int B, int C, int H, int W, int K, int kernel,
                                 int threads);
    size_t (*dense_scratch_bytes)(int B, int n_in, int n_out);
    size_t (*dense_weight_bytes)(int n_in, int n_out);
    void (*pack_dense_weights)(void *packed, const float *weight, int n_in, int n_out,
                               int threads);
    void (*dense_forward)(float *out, const float *in, const void *packed_weights,
                          const float *bias, void *scratch, int B, int n_in, int n_out,
                          int threads);
    void (*dense_backward)(float *d_weight, float *d_bias, float *d_in, const float *d_out,
                           const float *in, const void *packed_weights, void *scratch, int B,
                           int n_in, int n_out, int threads);
} direct_half_ops;

/* The entries a set's file writes over its ops (NULL-free): the floats
 * after weight_bias[K][R + 1] that the packed copy takes, the packing,
 * the dense scratch in floats, and the floats of the dense weights'
 * packed copy. */
size_t direct_half_packed_floats(const direct_half_ops *ops, int C, int K, int kernel);
void direct_half_pack_weights(const direct_half_ops *ops, float *weight_bias, int C, int K,
                              int kernel);
size_t direct_half_dense_scratch_floats(const direct_half_ops *ops, int B, int n_in, int n_out);
size_t direct_half_dense_packed_floats(const direct_half_ops *ops, int n_in, int n_out);

/* The shared entries, reading set->ctx as a direct_half_ops */
size_t direct_half_conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W,
                                       int K, int kernel, int stride);
void direct_half_conv_forward(const chwn_products *set, float *out, const float *in,
                              const float *weight_bias, float *scratch, int B, int C, int H,
                              int W, int K, int kernel, int stride, int threads);
void direct_half_conv_backward_params(const chwn_products *set, float *d_weight_bias,
                                      const float *d_out, const float *in, float *scratch,
                                      int B, int C, int H, int W, int K, int kernel, int stride,
                                      int threads);
void direct_half_conv_backward_data(const chwn_products *set, float *d_in, const float *d_out,
                                    const float *weight_bias, float *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int stride, int threads);
void direct_half_dense_forward(const chwn_products *set, float *out, const float *in,
                               const float *weight, const float *bias, float *scratch, int B,
                               int n_in, int n_out, const chwn_team *team);
void direct_half_dense_backward(const chwn_products *set, float *d_weight, float *d_bias,
                                float *d_in, const float *d_out, const float *in,
                                const float *weight, float *scratch, int B, int n_in, int n_out,
                                const chwn_team *team);

/* A format's ops from the prefix its header's functions share:
 * DIRECT_HALF_OPS(direct_bf16) is direct_bf16_conv_scratch_bytes,
 * direct_bf16_conv_weight_bytes, ... (bf16.h) */
#define DIRECT_HALF_OPS(PREFIX)                                                            \
    {                                                                                      \
        .conv_scratch_bytes = PREFIX##_conv_scratch_bytes,                                 \
        .conv_weight_bytes = PREFIX##_conv_weight_bytes,                                   \
        .pack_conv_weights = PREFIX##_pack_conv_weights,                                   \
        .conv_forward = PREFIX##_conv_forward,                                             \
        .conv_backward_data = PREFIX##_conv_backward_data,                                 \
        .conv_backward_params = PREFIX##_conv_backward_params,                             \
        .dense_scratch_bytes = PREFIX##_dense_scratch_bytes,                               \
        .dense_weight_bytes = PREFIX##_dense_weight_bytes,                                 \
        .pack_dense_weights = PREFIX##_pack_dense_weights,                                 \
        .dense_forward = PREFIX##_dense_forward,                                           \
        .dense_backward = PREFIX##_dense_backward,                                         \
    }

/* The five entries a set's file defines over its ops (OPS, a pointer),
 * for DIRECT_HALF_PRODUCT_SET: static functions, since the table calls
 * them without the set */
#define DIRECT_HALF_SET_ENTRIES(OPS)                                                           \
    static size_t conv_packed_floats(int C, int K, int kernel)                                 \
    {                                                                                          \
        return direct_half_packed_floats(OPS, C, K, kernel);                                   \
    }                                                                                          \
    static void conv_pack_weights(float *weight_bias, int C, int K, int kernel)                \
    {                                                                                          \
        direct_half_pack_weights(OPS, weight_bias, C, K, kernel);                              \
    }                                                                                          \
    static size_t dense_scratch_floats(int B, int n_in, int n_out)                             \
    {                                                                                          \
        return direct_half_dense_scratch_floats(OPS, B, n_in, n_out);                          \
    }                                                                                          \
    static size_t dense_packed_floats(int n_in, int n_out)                                     \
    {                                                                                          \
        return direct_half_dense_packed_floats(OPS, n_in, n_out);                              \
    }                                                                                          \
    static void dense_pack_weights(float *packed, const float *weight, int n_in, int n_out,    \
                                   const chwn_team *team)                                      \
    {                                                                                          \
        (OPS)->pack_dense_weights(packed, weight, n_in, n_out, team->threads);                 \
    }

/* A half set's table: its name, arithmetic (engine.h's key), ops, the
 * function that enters a pass (direct_team_enter, or one of its own that
 * calls it) and the five entries of its file (DIRECT_HALF_SET_ENTRIES);
 * 32 images a group, as the fp32 set (direct_backend.h). Each set's file
 * spells its definition out:
 *     const chwn_products direct_bf16_products =
 *         DIRECT_HALF_PRODUCT_SET("direct bf16", ARITHMETIC_BF16_DOT, &bf16_ops,
 *                                 direct_team_enter);
 */
#define DIRECT_HALF_PRODUCT_SET(NAME, ARITH, OPS, ENTER)                                       \
    {                                                                                          \
        .name = NAME, .arithmetic = ARITH, .ctx = OPS, .group_images = 32, .enter = ENTER,     \
        .refuses_conv = direct_refuses_conv, .conv_packed_floats = conv_packed_floats,         \
        .conv_pack_weights = conv_pack_weights,                                                \
        .conv_scratch_floats = direct_half_conv_scratch_floats,                                \
        .forward_conv = direct_half_conv_forward,                                              \
        .backward_conv_params = direct_half_conv_backward_params,                              \
        .backward_conv_data = direct_half_conv_backward_data,                                  \
        .dense_scratch_floats = dense_scratch_floats,                                          \
        .dense_packed_floats = dense_packed_floats, .dense_pack_weights = dense_pack_weights,  \
        .forward_dense = direct_half_dense_forward,                                            \
        .backward_dense = direct_half_dense_backward,                                          \
    }

#endif
