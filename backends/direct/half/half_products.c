/* The entries the half-precision product sets share (half_products.h). */
#include "backends/direct/half/half_products.h"

static const direct_half_ops *ops_of(const chwn_products *set) { return set->ctx; }

/* Where the packed copy of the weights starts: past [K][R + 1], on a cache
 * line */
static size_t packed_at(int C, int K, int kernel)
{
    return ((size_t)K * (C * kernel * kernel + 1) + 15) / 16 * 16;
}

static size_t floats_for(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

size_t direct_half_packed_floats(const direct_half_ops *ops, int C, int K, int kernel)
{
    return packed_at(C, K, kernel) - (size_t)K * (C * kernel * kernel + 1) +
           floats_for(ops->conv_weight_bytes(C, K, kernel));
}

void direct_half_pack_weights(const direct_half_ops *ops, float *weight_bias, int C, int K,
                              int kernel)
{
    ops->pack_conv_weights(weight_bias + packed_at(C, K, kernel), weight_bias, C, K, kernel);
}

size_t direct_half_dense_scratch_floats(const direct_half_ops *ops, int B, int n_in, int n_out)
{
    return floats_for(ops->dense_scratch_bytes(B, n_in, n_out));
}

size_t direct_half_dense_packed_floats(const direct_half_ops *ops, int n_in, int n_out)
{
    return floats_for(ops->dense_weight_bytes(n_in, n_out));
}

size_t direct_half_conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W,
                                       int K, int kernel, int stride)
{
    (void)stride; /* 1: the engine refuses others (direct_refuses_conv) */
    return floats_for(ops_of(set)->conv_scratch_bytes(B, C, H, W, K, kernel));
}

void direct_half_conv_forward(const chwn_products *set, float *out, const float *in,
                              const float *weight_bias, float *scratch, int B, int C, int H,
                              int W, int K, int kernel, int stride, int threads)
{
    (void)stride;
    ops_of(set)->conv_forward(out, in, weight_bias, weight_bias + packed_at(C, K, kernel),
                              scratch, B, C, H, W, K, kernel, threads);
}

void direct_half_conv_backward_params(const chwn_products *set, float *d_weight_bias,
                                      const float *d_out, const float *in, float *scratch,
                                      int B, int C, int H, int W, int K, int kernel, int stride,
                                      int threads)
{
    (void)stride;
    ops_of(set)->conv_backward_params(d_weight_bias, d_out, in, scratch, B, C, H, W, K, kernel,
                                      threads);
}

void direct_half_conv_backward_data(const chwn_products *set, float *d_in, const float *d_out,
                                    const float *weight_bias, float *scratch, int B, int C,
                                    int H, int W, int K, int kernel, int stride, int threads)
{
    (void)stride;
    ops_of(set)->conv_backward_data(d_in, d_out, weight_bias + packed_at(C, K, kernel), scratch,
                                    B, C, H, W, K, kernel, threads);
}

/* weight: the engine's packed copy (dense_pack_weights) */
void direct_half_dense_forward(const chwn_products *set, float *out, const float *in,
                               const float *weight, const float *bias, float *scratch, int B,
                               int n_in, int n_out, const chwn_team *team)
{
    ops_of(set)->dense_forward(out, in, weight, bias, scratch, B, n_in, n_out, team->threads);
}

void direct_half_dense_backward(const chwn_products *set, float *d_weight, float *d_bias,
                                float *d_in, const float *d_out, const float *in,
                                const float *weight, float *scratch, int B, int n_in, int n_out,
                                const chwn_team *team)
{
    ops_of(set)->dense_backward(d_weight, d_bias, d_in, d_out, in, weight, scratch, B, n_in,
                                n_out, team->threads);
}
