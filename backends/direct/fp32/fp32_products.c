/* The direct backend's fp32 product set (backends/chwn/chwn_products.h):
 * each product one call of the register tiles this process chose
 * (direct.h, direct_choose at create), which read a convolution's input
 * in place (stride 1 only) and need scratch only for its input gradient. */
#include <omp.h>

#include "backends/chwn/chwn_products.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/direct_backend.h"

/* No library: the loops name their thread counts. */
void direct_team_enter(const chwn_team *t)
{
    (void)t;
    omp_set_num_threads(1);
}

const char *direct_refuses_conv(int kernel, int stride)
{
    return direct_conv_suits(kernel, stride)
               ? NULL
               : "strided convolutions are not supported (the direct kernels take stride 1)";
}

static size_t conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W, int K,
                                  int kernel, int stride)
{
    (void)set, (void)stride; /* stride 1 (the engine refuses others) */
    return direct_conv_scratch_floats(B, C, H, W, K, kernel);
}

static void conv_forward(const chwn_products *set, float *out, const float *in,
                         const float *weight_bias, float *scratch, int B, int C, int H, int W,
                         int K, int kernel, int stride, int threads)
{
    (void)set, (void)scratch, (void)stride; /* read in place; stride 1 */
    direct_active()->conv_forward(out, in, weight_bias, B, C, H, W, K, kernel, threads);
}

static void conv_backward_params(const chwn_products *set, float *d_weight_bias,
                                 const float *d_out, const float *in, float *scratch, int B,
                                 int C, int H, int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)scratch, (void)stride;
    direct_active()->conv_backward_params(d_weight_bias, d_out, in, B, C, H, W, K, kernel,
                                          threads);
}

static void conv_backward_data(const chwn_products *set, float *d_in, const float *d_out,
                               const float *weight_bias, float *scratch, int B, int C, int H,
                               int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    direct_active()->conv_backward_data(d_in, d_out, weight_bias, scratch, B, C, H, W, K, kernel,
                                        threads);
}

/* none: the kernels transpose the input a strip at a time on the stack */
static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    (void)B, (void)n_in, (void)n_out;
    return 0;
}

/* The kernels share out a dense layer themselves, whatever the split. */
static void dense_forward(const chwn_products *set, float *out, const float *in,
                          const float *weight, const float *bias, float *scratch, int B,
                          int n_in, int n_out, const chwn_team *team)
{
    (void)set, (void)scratch;
    direct_active()->dense_forward(out, in, weight, bias, B, n_in, n_out, team->threads);
}

static void dense_backward(const chwn_products *set, float *d_weight, float *d_bias,
                           float *d_in, const float *d_out, const float *in,
                           const float *weight, float *scratch, int B, int n_in, int n_out,
                           const chwn_team *team)
{
    (void)set, (void)scratch;
    direct_active()->dense_backward(d_weight, d_bias, d_in, d_out, in, weight, B, n_in, n_out,
                                    team->threads);
}

const chwn_products direct_fp32_products = {
    .name = "direct fp32",
    .arithmetic = ARITHMETIC_FP32,
    .conv_scratch_for_input_gradient_only = 1,
    DIRECT_PRODUCT_ENTRIES,
};
