/* The direct backend's bf16 product set (backends/chwn/chwn_products.h):
 * the vdpbf16ps products of bf16.h, fp32 activations and master weights,
 * through the entries the half-precision sets share (half_products.h).
 * The "dot" row of the bf16 candidates (backends/direct/candidates.h). */
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_products.h"

static const direct_half_ops bf16_ops = {
    .conv_scratch_bytes = direct_bf16_conv_scratch_bytes,
    .conv_weight_bytes = direct_bf16_conv_weight_bytes,
    .pack_conv_weights = direct_bf16_pack_conv_weights,
    .conv_forward = direct_bf16_conv_forward,
    .conv_backward_data = direct_bf16_conv_backward_data,
    .conv_backward_params = direct_bf16_conv_backward_params,
    .dense_scratch_bytes = direct_bf16_dense_scratch_bytes,
    .dense_forward = direct_bf16_dense_forward,
    .dense_backward = direct_bf16_dense_backward,
};

static size_t conv_packed_floats(int C, int K, int kernel)
{
    return direct_half_packed_floats(&bf16_ops, C, K, kernel);
}

static void conv_pack_weights(float *weight_bias, int C, int K, int kernel)
{
    direct_half_pack_weights(&bf16_ops, weight_bias, C, K, kernel);
}

static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    return direct_half_dense_scratch_floats(&bf16_ops, B, n_in, n_out);
}

const chwn_products direct_bf16_products =
    DIRECT_HALF_PRODUCT_SET("direct bf16", ARITHMETIC_BF16_DOT, &bf16_ops, direct_team_enter);
