/* The direct backend's fp16 product set (backends/chwn/chwn_products.h):
 * the vfmadd231ph products of fp16.h (or their emulation, when
 * direct_fp16_emulate is set), fp32 activations and master weights, through
 * the entries the half-precision sets share (half_products.h). The engine
 * scales the loss for fp16 (backends/common/loss_scale.h). */
#include "backends/direct/fp16.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half_products.h"

static const direct_half_ops fp16_ops = {
    .conv_scratch_bytes = direct_fp16_conv_scratch_bytes,
    .conv_weight_bytes = direct_fp16_conv_weight_bytes,
    .pack_conv_weights = direct_fp16_pack_conv_weights,
    .conv_forward = direct_fp16_conv_forward,
    .conv_backward_data = direct_fp16_conv_backward_data,
    .conv_backward_params = direct_fp16_conv_backward_params,
    .dense_scratch_bytes = direct_fp16_dense_scratch_bytes,
    .dense_forward = direct_fp16_dense_forward,
    .dense_backward = direct_fp16_dense_backward,
};

static size_t conv_packed_floats(int C, int K, int kernel)
{
    return direct_half_packed_floats(&fp16_ops, C, K, kernel);
}

static void conv_pack_weights(float *weight_bias, int C, int K, int kernel)
{
    direct_half_pack_weights(&fp16_ops, weight_bias, C, K, kernel);
}

static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    return direct_half_dense_scratch_floats(&fp16_ops, B, n_in, n_out);
}

const chwn_products direct_fp16_products = DIRECT_HALF_PRODUCT_SET("direct fp16", &fp16_ops);
