/* The direct backend's bf16 product set (backends/chwn/chwn_products.h):
 * the vdpbf16ps products of bf16.h, fp32 activations and master weights,
 * each product rounding and packing its operands in the engine's scratch,
 * and the convolutions' weights packed once a pass after weight_bias. */
#include "backends/chwn/chwn_products.h"
#include "backends/direct/bf16.h"
#include "backends/direct/direct_backend.h"

/* Where the packed copy of the weights starts: past [K][R + 1], on a cache
 * line */
static size_t packed_at(int C, int K, int kernel)
{
    return ((size_t)K * (C * kernel * kernel + 1) + 15) / 16 * 16;
}

static size_t conv_packed_floats(int C, int K, int kernel)
{
    return packed_at(C, K, kernel) - (size_t)K * (C * kernel * kernel + 1) +
           (direct_bf16_conv_weight_bytes(C, K, kernel) + sizeof(float) - 1) / sizeof(float);
}

static void conv_pack_weights(float *weight_bias, int C, int K, int kernel)
{
    direct_bf16_pack_conv_weights(weight_bias + packed_at(C, K, kernel), weight_bias, C, K,
                                  kernel);
}

static size_t conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W, int K,
                                  int kernel, int stride)
{
    (void)set, (void)stride;
    return (direct_bf16_conv_scratch_bytes(B, C, H, W, K, kernel) + sizeof(float) - 1) /
           sizeof(float);
}

static void conv_forward(const chwn_products *set, float *out, const float *in,
                         const float *weight_bias, float *scratch, int B, int C, int H, int W,
                         int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    direct_bf16_conv_forward(out, in, weight_bias, weight_bias + packed_at(C, K, kernel), scratch,
                             B, C, H, W, K, kernel, threads);
}

static void conv_backward_params(const chwn_products *set, float *d_weight_bias,
                                 const float *d_out, const float *in, float *scratch, int B,
                                 int C, int H, int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    direct_bf16_conv_backward_params(d_weight_bias, d_out, in, scratch, B, C, H, W, K, kernel,
                                     threads);
}

static void conv_backward_data(const chwn_products *set, float *d_in, const float *d_out,
                               const float *weight_bias, float *scratch, int B, int C, int H,
                               int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    direct_bf16_conv_backward_data(d_in, d_out, weight_bias + packed_at(C, K, kernel), scratch, B,
                                   C, H, W, K, kernel, threads);
}

static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    return (direct_bf16_dense_scratch_bytes(B, n_in, n_out) + sizeof(float) - 1) / sizeof(float);
}

static void dense_forward(const chwn_products *set, float *out, const float *in,
                          const float *weight, const float *bias, float *scratch, int B,
                          int n_in, int n_out, const chwn_team *team)
{
    (void)set;
    direct_bf16_dense_forward(out, in, weight, bias, scratch, B, n_in, n_out, team->threads);
}

static void dense_backward(const chwn_products *set, float *d_weight, float *d_bias,
                           float *d_in, const float *d_out, const float *in,
                           const float *weight, float *scratch, int B, int n_in, int n_out,
                           const chwn_team *team)
{
    (void)set;
    direct_bf16_dense_backward(d_weight, d_bias, d_in, d_out, in, weight, scratch, B, n_in,
                               n_out, team->threads);
}

const chwn_products direct_bf16_products = {
    .name = "direct bf16",
    .conv_packed_floats = conv_packed_floats,
    .conv_pack_weights = conv_pack_weights,
    DIRECT_PRODUCT_ENTRIES,
};
