/* The direct backend's bf16 product set on fp32 FMAs (bf16_fma.h): each
 * product one call of the fp32 register tiles this process chose
 * (direct_active(), as fp32_products.c), on copies of its operands
 * rounded to bf16 and kept as floats. The products of two such floats are
 * exact in fp32, so the tiles sum in fp32 exactly the terms the vdpbf16ps
 * products sum (bf16_products.c), in another order.
 *
 * Where each operand is rounded:
 *   - a convolution's weights once a pass, into a copy of weight_bias
 *     after it (conv_pack_weights), the biases copied unrounded;
 *   - a dense layer's weights once a pass, into the engine's packed copy
 *     (dense_pack_weights), which both dense products are handed;
 *   - the activations and the output gradients into scratch at each
 *     call, over the call's threads;
 * and each bias gradient is summed from the unrounded output gradient in
 * the pass that rounds it (direct_bf16_fma_round_sums: as bf16.c sums it,
 * half_common.h's sum_floats), over what the tiles summed from the
 * rounded one. */
#include "backends/chwn/chwn_products.h"
#include "backends/direct/bf16/bf16_fma.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_common.h"

/* Floats of a piece of scratch, kept to whole cache lines */
static size_t lines(size_t floats) { return round_up(floats, 16); }

/* Where the rounded copy of the weights starts: past [K][R + 1], on a
 * cache line */
static size_t packed_at(int C, int K, int kernel)
{
    return lines((size_t)K * (C * kernel * kernel + 1));
}

/* the padding to a cache line and a copy of [K][R + 1] */
static size_t conv_packed_floats(int C, int K, int kernel) { return packed_at(C, K, kernel); }

static void conv_pack_weights(float *weight_bias, int C, int K, int kernel)
{
    const int R = C * kernel * kernel;
    float *rounded = weight_bias + packed_at(C, K, kernel);
    for (int k = 0; k < K; k++) {
        direct_bf16_fma_round(rounded + (size_t)k * (R + 1), weight_bias + (size_t)k * (R + 1),
                              (size_t)R, 1);
        rounded[(size_t)k * (R + 1) + R] = weight_bias[(size_t)k * (R + 1) + R];
    }
}

static const float *rounded_weights(const float *weight_bias, int C, int K, int kernel)
{
    return weight_bias + packed_at(C, K, kernel);
}

/* A convolution's scratch: the bias gradients (K) and the rounded output
 * gradient first, then the rounded input (forward, weight gradient) or the
 * tiles' own scratch (input gradient), which never meet in one pass. */
typedef struct conv_parts {
    float *sums, *grad, *input, *tiles;
} conv_parts;

static conv_parts conv_parts_of(float *scratch, size_t *floats, int B, int C, int H, int W,
                                int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    const size_t sums = lines((size_t)K), grad = lines((size_t)K * OH * OW * B),
                 input = lines((size_t)C * H * W * B),
                 tiles = lines(direct_conv_scratch_floats(B, C, H, W, K, kernel));
    if (floats)
        *floats = sums + grad + (input > tiles ? input : tiles);
    float *after = scratch ? scratch + sums + grad : NULL;
    return (conv_parts){scratch, scratch ? scratch + sums : NULL, after, after};
}

static size_t conv_scratch_floats(const chwn_products *set, int B, int C, int H, int W, int K,
                                  int kernel, int stride)
{
    (void)set, (void)stride; /* stride 1 (the engine refuses others) */
    size_t floats;
    conv_parts_of(NULL, &floats, B, C, H, W, K, kernel);
    return floats;
}

static void conv_forward(const chwn_products *set, float *out, const float *in,
                         const float *weight_bias, float *scratch, int B, int C, int H, int W,
                         int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    const conv_parts p = conv_parts_of(scratch, NULL, B, C, H, W, K, kernel);
    direct_bf16_fma_round(p.input, in, (size_t)C * H * W * B, threads);
    direct_active()->conv_forward(out, p.input, rounded_weights(weight_bias, C, K, kernel), B, C,
                                  H, W, K, kernel, threads);
}

/* The weight and bias gradients, leaving the whole rounded d_out in the
 * scratch's grad for an input gradient after them */
static void weight_gradient(float *d_weight_bias, const float *d_out, const float *in,
                            const conv_parts p, int B, int C, int H, int W, int K, int kernel,
                            int threads)
{
    const int R = C * kernel * kernel, OH = H - kernel + 1, OW = W - kernel + 1;
    const size_t plane = (size_t)OH * OW * B;
    /* d_out rounded and the bias gradients summed in one read of it */
    direct_bf16_fma_round_sums(p.grad, plane, d_out, plane, K, p.sums, 1, threads);
    direct_bf16_fma_round(p.input, in, (size_t)C * H * W * B, threads);
    direct_active()->conv_backward_weights(d_weight_bias, p.grad, p.input, B, C, H, W, K, kernel,
                                           threads);
    for (int k = 0; k < K; k++)
        d_weight_bias[(size_t)k * (R + 1) + R] = p.sums[k];
}

static void conv_backward_params(const chwn_products *set, float *d_weight_bias,
                                 const float *d_out, const float *in, float *scratch, int B,
                                 int C, int H, int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    weight_gradient(d_weight_bias, d_out, in, conv_parts_of(scratch, NULL, B, C, H, W, K, kernel),
                    B, C, H, W, K, kernel, threads);
}

/* Both gradients with one rounding of d_out (conv2's 410,000 floats a
 * step had been rounded for each): the input gradient's tiles read the
 * copy the weight gradient left, their scratch over the rounded input,
 * which the weight gradient no longer needs. */
static void conv_backward(const chwn_products *set, float *d_weight_bias, float *d_in,
                          const float *d_out, const float *in, const float *weight_bias,
                          float *scratch, int B, int C, int H, int W, int K, int kernel,
                          int stride, int threads)
{
    (void)set, (void)stride;
    const conv_parts p = conv_parts_of(scratch, NULL, B, C, H, W, K, kernel);
    weight_gradient(d_weight_bias, d_out, in, p, B, C, H, W, K, kernel, threads);
    direct_active()->conv_backward_data(d_in, p.grad, rounded_weights(weight_bias, C, K, kernel),
                                        p.tiles, B, C, H, W, K, kernel, threads);
}

static void conv_backward_data(const chwn_products *set, float *d_in, const float *d_out,
                               const float *weight_bias, float *scratch, int B, int C, int H,
                               int W, int K, int kernel, int stride, int threads)
{
    (void)set, (void)stride;
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    const conv_parts p = conv_parts_of(scratch, NULL, B, C, H, W, K, kernel);
    direct_bf16_fma_round(p.grad, d_out, (size_t)K * OH * OW * B, threads);
    direct_active()->conv_backward_data(d_in, p.grad, rounded_weights(weight_bias, C, K, kernel),
                                        p.tiles, B, C, H, W, K, kernel, threads);
}

/* A dense layer's weights rounded once a pass (the engine's packed copy,
 * chwn_products.h): fc1's 400,000 had been rounded in the forward pass and
 * again in the backward pass. The weights do not change between the two:
 * the engine packs them again whenever they may have. */
static size_t dense_packed_floats(int n_in, int n_out) { return (size_t)n_out * n_in; }

static void dense_pack_weights(float *packed, const float *weight, int n_in, int n_out,
                               const chwn_team *team)
{
    direct_bf16_fma_round(packed, weight, (size_t)n_out * n_in, team->threads);
}

/* A dense layer's scratch: the rounded input and output gradient, and the
 * tiles' bias sums (which the set's own sums replace) */
typedef struct dense_parts {
    float *sums, *input, *grad;
} dense_parts;

static dense_parts dense_parts_of(float *scratch, size_t *floats, int B, int n_in, int n_out)
{
    dense_parts p;
    p.sums = scratch;
    p.input = p.sums + lines((size_t)n_out);
    p.grad = p.input + lines((size_t)n_in * B);
    if (floats)
        *floats = (size_t)(p.grad - scratch) + lines((size_t)n_out * B);
    return p;
}

static size_t dense_scratch_floats(int B, int n_in, int n_out)
{
    size_t floats;
    dense_parts_of(NULL, &floats, B, n_in, n_out);
    return floats;
}

/* weight: the packed copy (dense_pack_weights), already rounded */
static void dense_forward(const chwn_products *set, float *out, const float *in,
                          const float *weight, const float *bias, float *scratch, int B,
                          int n_in, int n_out, const chwn_team *team)
{
    (void)set;
    const dense_parts p = dense_parts_of(scratch, NULL, B, n_in, n_out);
    direct_bf16_fma_round(p.input, in, (size_t)n_in * B, team->threads);
    direct_active()->dense_forward(out, p.input, weight, bias, B, n_in, n_out, team->threads);
}

static void dense_backward(const chwn_products *set, float *d_weight, float *d_bias,
                           float *d_in, const float *d_out, const float *in,
                           const float *weight, float *scratch, int B, int n_in, int n_out,
                           const chwn_team *team)
{
    (void)set;
    const dense_parts p = dense_parts_of(scratch, NULL, B, n_in, n_out);
    direct_bf16_fma_round(p.input, in, (size_t)n_in * B, team->threads);
    /* d_out rounded and the bias gradients summed in one read of it; the
     * tiles' sums of the rounded d_out go to scratch */
    direct_bf16_fma_round_sums(p.grad, (size_t)B, d_out, (size_t)B, n_out, d_bias, 1,
                               team->threads);
    direct_active()->dense_backward(d_weight, p.sums, d_in, p.grad, p.input, weight, B, n_in,
                                    n_out, team->threads);
}

const chwn_products direct_bf16_fma_products = {
    .name = "direct bf16 (fp32 FMAs)",
    .arithmetic = ARITHMETIC_FP32,
    .conv_packed_floats = conv_packed_floats,
    .conv_pack_weights = conv_pack_weights,
    .backward_conv = conv_backward,
    .dense_packed_floats = dense_packed_floats,
    .dense_pack_weights = dense_pack_weights,
    DIRECT_PRODUCT_ENTRIES,
};
