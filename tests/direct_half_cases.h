/* The cases of the half-precision products' tests against their
 * references (test_direct_bf16_products.c, test_direct_fp16_products.c)
 * and their operands, made alike for both formats. After
 * direct_half_testing.h. */
#ifndef LB_TESTS_DIRECT_HALF_CASES_H
#define LB_TESTS_DIRECT_HALF_CASES_H

#include "tests/direct_half_testing.h"

/* How a format's tests fill operands (data: the kind of values, which
 * also seeds the generator) and spoil scratch as a product must not find
 * it (direct_bf16_testing.h's, direct_fp16_testing.h's) */
typedef void fill_fn(float *x, size_t n, rng *r, int data);
typedef void spoil_fn(void *scratch, size_t bytes);

/* A convolution (CHWN, stride 1, no padding) and its threads */
typedef struct conv_case {
    int B, C, H, W, K, kernel, threads;
} conv_case;

/* A convolution's sizes and operands: in, wb (weight_bias, [K][R + 1])
 * and d_out filled from a seed of the case and data; the format's scratch
 * (scratch_bytes, its header's), and its weights packed once (pack, in
 * weight_bytes), read by every pass as an engine's are. */
typedef struct conv_fixture {
    conv_case cc;
    int OH, OW, R;
    size_t n_in, n_out, n_wb;
    float *in, *wb, *d_out;
    void *scratch, *packed;
    size_t scratch_bytes;
} conv_fixture;

static inline conv_fixture
conv_fixture_of(conv_case cc, int data, fill_fn *fill, spoil_fn *spoil,
                size_t (*scratch_bytes)(int B, int C, int H, int W, int K, int kernel),
                size_t (*weight_bytes)(int C, int K, int kernel),
                void (*pack)(void *packed, const float *weight_bias, int C, int K, int kernel))
{
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kernel = cc.kernel;
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    const size_t n_in = (size_t)C * H * W * B, n_out = (size_t)K * OH * OW * B;
    const size_t n_wb = (size_t)K * (R + 1);
    conv_fixture f = {.cc = cc, .OH = OH, .OW = OW, .R = R, .n_in = n_in, .n_out = n_out,
                      .n_wb = n_wb};
    f.in = floats(n_in), f.wb = floats(n_wb), f.d_out = floats(n_out);
    rng r = {(uint64_t)(B * 7919 + C * 131 + K * 17 + kernel + data)};
    fill(f.in, n_in, &r, data);
    fill(f.wb, n_wb, &r, data);
    fill(f.d_out, n_out, &r, data);
    f.scratch_bytes = scratch_bytes(B, C, H, W, K, kernel);
    f.scratch = scratch_of(f.scratch_bytes);
    const size_t packed_bytes = weight_bytes(C, K, kernel);
    f.packed = scratch_of(packed_bytes);
    spoil(f.packed, packed_bytes);
    pack(f.packed, f.wb, C, K, kernel);
    return f;
}

/* A dense layer ([features][B]) and its threads */
typedef struct dense_case {
    int B, n_in, n_out, threads;
} dense_case;

/* A dense layer's sizes and operands, filled from a seed of the case and
 * data, and the format's scratch (scratch_bytes, its header's) */
typedef struct dense_fixture {
    dense_case dc;
    size_t n_in, n_out, n_w;
    float *in, *w, *bias, *d_out;
    void *scratch;
    size_t scratch_bytes;
} dense_fixture;

static inline dense_fixture dense_fixture_of(dense_case dc, int data, fill_fn *fill,
                                             size_t (*scratch_bytes)(int B, int n_in, int n_out))
{
    const int B = dc.B, I = dc.n_in, O = dc.n_out;
    const size_t n_in = (size_t)I * B, n_out = (size_t)O * B, n_w = (size_t)O * I;
    dense_fixture f = {.dc = dc, .n_in = n_in, .n_out = n_out, .n_w = n_w};
    f.in = floats(n_in), f.w = floats(n_w), f.bias = floats(O), f.d_out = floats(n_out);
    rng r = {(uint64_t)(B * 31 + I * 7 + O + data)};
    fill(f.in, n_in, &r, data);
    fill(f.w, n_w, &r, data);
    fill(f.bias, O, &r, data);
    fill(f.d_out, n_out, &r, data);
    f.scratch_bytes = scratch_bytes(B, I, O);
    f.scratch = scratch_of(f.scratch_bytes);
    return f;
}

#endif
