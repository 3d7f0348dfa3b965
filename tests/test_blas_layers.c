/* The CHWN engine's layers against the naive ones, with shapes the
 * workloads lack (strides, overlapping pools), at 1 and 2 threads: blas's
 * GEMMs, or, built with LB_LAYERS_DIRECT by tests/test_direct_layers.c,
 * the direct kernels, once per build of them this CPU runs (fixtures:
 * tests/chwn_engine.h). */
#include "tests/chwn_engine.h"

#include "backends/common/elementwise.h"
#include "backends/naive/layers.h"
#include "tests/layouts.h"

static void assert_close(const float *expected, const float *got, size_t n, const char *what)
{
    const double d = max_rel_diff(expected, got, n, 1.0);
    if (!(d < 1e-5))
        fail_msg("%s differs from naive by %.3g relative", what, d);
}

/* Each of n results, naive's and blas's, against its sum taken in double:
 * within 1e-5 of the sum of its terms' sizes (the two add their terms in
 * different orders; one term left out or counted twice is far more). */
static void hold_to_sums(const char *what, size_t n, const double *sum, const double *size,
                         const float *naive, const float *blas)
{
    for (size_t i = 0; i < n; i++) {
        const double tol = 1e-5 * size[i] + 1e-6;
        if (!(fabs(naive[i] - sum[i]) <= tol) || !(fabs(blas[i] - sum[i]) <= tol))
            fail_msg("%s [%zu]: double %.8g, naive %.8g, blas %.8g (terms' sizes sum to %.4g)",
                     what, i, sum[i], naive[i], blas[i], size[i]);
    }
}

static void check_conv(int B, int C, int H, int W, int K, int kernel, int stride, int threads)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const size_t n_in = (size_t)B * C * H * W, n_out = (size_t)B * K * OH * OW;
    const size_t n_w = (size_t)K * C * kernel * kernel;
    rng r = {(uint64_t)(B * 131 + kernel * 7 + stride)};
    /* (declarators are sequenced: filled in this order) */
    float *in = filled(n_in, &r), *w = filled(n_w, &r), *bias = filled(K, &r),
          *dout = filled(n_out, &r);
    /* naive, NCHW */
    float *scratch = floats(conv_scratch_count(C, H, W, kernel, stride));
    float *out_n = floats(n_out), *din_n = floats(n_in), *dw_n = floats(n_w),
          *db_n = floats(K);
    conv_forward(out_n, in, w, bias, B, C, H, W, K, kernel, stride, scratch);
    conv_backward_data(din_n, dout, w, B, C, H, W, K, kernel, stride, scratch);
    conv_backward_weights(dw_n, dout, in, B, C, H, W, K, kernel, stride, scratch);
    conv_backward_bias(db_n, dout, B, K, OH, OW);
    /* blas, CHWN */
    const chwn_team team = {threads, CHWN_SPLIT_LIBRARY};
    products->enter(&team);
    float *in_c = floats(n_in), *dout_c = floats(n_out), *out_c = floats(n_out);
    float *din_c = floats(n_in), *dw_c = floats(n_w), *db_c = floats(K);
    const int R = C * kernel * kernel;
    float *wb = floats(n_w + K), *dwb = floats(n_w + K);
    float *dcol = floats(products->conv_scratch_floats(products, B, C, H, W, K, kernel, stride));
    to_chwn(in_c, in, B, C, H * W);
    to_chwn(dout_c, dout, B, K, OH * OW);
    chwn_join_weight_bias(wb, w, bias, K, R);
    for (size_t i = 0; i < n_out; i++) /* whatever was there must go */
        out_c[i] = 12345.0f;
    products->forward_conv(products, out_c, in_c, wb, dcol, B, C, H, W, K, kernel, stride, threads);
    products->backward_conv_params(products, dwb, dout_c, in_c, dcol, B, C, H, W, K, kernel,
                                   stride, threads);
    for (size_t i = 0; i < n_in; i++) /* whatever was there must go */
        din_c[i] = 12345.0f;
    products->backward_conv_data(products, din_c, dout_c, wb, dcol, B, C, H, W, K, kernel, stride,
                                 threads);
    for (int k = 0; k < K; k++) {
        memcpy(dw_c + (size_t)k * R, dwb + (size_t)k * (R + 1), sizeof(float) * R);
        db_c[k] = dwb[(size_t)k * (R + 1) + R];
    }
    /* The outputs and input gradients are sums of up to C x k x k (or
     * K x k x k) terms, which naive and blas add in different orders; both
     * are held to the sums in double, within 1e-5 of the terms' sizes. */
    float *got_out = floats(n_out), *got_din = floats(n_in);
    to_nchw(got_out, out_c, B, K, OH * OW);
    to_nchw(got_din, din_c, B, C, H * W);
    double *sum_out = calloc(n_out, sizeof(double)), *size_out = calloc(n_out, sizeof(double));
    double *sum_din = calloc(n_in, sizeof(double)), *size_din = calloc(n_in, sizeof(double));
    assert_non_null(sum_out), assert_non_null(size_out);
    assert_non_null(sum_din), assert_non_null(size_din);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++)
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    const size_t o = (((size_t)b * K + k) * OH + oy) * OW + ox;
                    sum_out[o] = bias[k], size_out[o] = fabs(bias[k]);
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < kernel; ki++)
                            for (int kj = 0; kj < kernel; kj++) {
                                const size_t at = (((size_t)b * C + c) * H + oy * stride + ki) * W +
                                                  ox * stride + kj;
                                const double x = in[at],
                                             wt = w[(((size_t)k * C + c) * kernel + ki) * kernel + kj];
                                sum_out[o] += wt * x, size_out[o] += fabs(wt * x);
                                sum_din[at] += wt * dout[o], size_din[at] += fabs(wt * dout[o]);
                            }
                }
    hold_to_sums("conv output", n_out, sum_out, size_out, out_n, got_out);
    hold_to_sums("conv input gradient", n_in, sum_din, size_din, din_n, got_din);
    free(sum_out), free(size_out), free(sum_din), free(size_din);
    /* The weight and bias gradients sum B x OH x OW terms each (9,216 for
     * conv1), which naive adds in one long chain, off by up to 7e-5 of the
     * result; so both are held to sums in double, within 1e-5 of the sum
     * of the terms' sizes (one term left out or counted twice is about
     * 1e-4 of it). */
    for (int k = 0; k < K; k++)
        for (int r = 0; r <= R; r++) {
            const int c = r / (kernel * kernel), ki = r / kernel % kernel, kj = r % kernel;
            double sum = 0, size = 0;
            for (int b = 0; b < B; b++)
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        const double g = dout[(((size_t)b * K + k) * OH + oy) * OW + ox];
                        const double x = r == R ? 1.0
                                                : in[(((size_t)b * C + c) * H + oy * stride +
                                                      ki) * W + ox * stride + kj];
                        sum += g * x;
                        size += fabs(g * x);
                    }
            const float got_n = r == R ? db_n[k] : dw_n[(size_t)k * R + r];
            const float got_c = r == R ? db_c[k] : dw_c[(size_t)k * R + r];
            if (!(fabs(got_c - sum) <= 1e-5 * size + 1e-6) ||
                !(fabs(got_n - sum) <= 1e-5 * size + 1e-6))
                fail_msg("conv %s gradient [%d][%d]: double %.8g, naive %.8g, blas %.8g "
                         "(terms' sizes sum to %.4g)",
                         r == R ? "bias" : "weight", k, r, sum, got_n, got_c, size);
        }
    float *all[] = {in,   w,    bias, dout,       scratch,    out_n, din_n,
                    dw_n, db_n, in_c, dout_c,     out_c,      din_c, dw_c,
                    db_c, dcol, got_out, got_din, wb,    dwb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void conv_layer_matches_naive(void **state)
{
    (void)state;
#ifndef LB_LAYERS_DIRECT /* the direct engine refuses strided convolutions */
    check_conv(3, 2, 9, 11, 4, 3, 2, 1); /* stride 2, not square */
    check_conv(3, 2, 9, 11, 4, 3, 2, 2);
    check_conv(3, 20, 9, 9, 7, 5, 2, 2);  /* a deep product (R + 1 = 501) */
    check_conv(8, 20, 21, 21, 7, 5, 2, 1); /* strided, unfolded an output row at a time */
    check_conv(2, 6, 9, 9, 5, 5, 2, 1);   /* and with stride 2 */
#endif
    check_conv(5, 3, 12, 12, 6, 5, 1, 2); /* conv2's kind */
    check_conv(17, 1, 8, 8, 3, 1, 1, 1);  /* 1x1 kernel, odd batch */
    check_conv(16, 1, 28, 28, 20, 5, 1, 2); /* conv1: direct, whole tiles */
    check_conv(16, 20, 12, 12, 50, 5, 1, 1); /* conv2 on a group of 16 images */
    check_conv(16, 20, 12, 12, 50, 5, 1, 2); /* its input gradient split by channels */
    check_conv(5, 2, 10, 9, 3, 3, 1, 1);    /* direct, odd sizes, one channel left */
    check_conv(3, 20, 8, 7, 13, 5, 1, 2);   /* partial row blocks, odd columns */
    check_conv(2, 1, 12, 12, 3, 9, 1, 1);   /* direct, a kernel above 8 wide */
    check_conv(2, 2, 6, 6, 260, 3, 1, 1);   /* many output channels, few rows */
    check_conv(7, 3, 14, 13, 37, 3, 1, 2);  /* odd channels and columns at every tile size */
}

/* A dense layer of B images, I inputs and O outputs: blas (at `threads`,
 * and at 1 for the same floats) against sums in double and naive. */
static void check_dense(int B, int I, int O, int threads)
{
    const size_t n_in = (size_t)B * I, n_out = (size_t)B * O, n_w = (size_t)O * I;
    rng r = {(uint64_t)(B * 7919 + I * 31 + O)};
    float *in = filled(n_in, &r), *w = filled(n_w, &r), *bias = filled(O, &r),
          *dout = filled(n_out, &r);
    /* naive, [B][features] */
    float *scratch = floats(dense_scratch_count(B, I, O));
    float *out_n = floats(n_out), *din_n = floats(n_in), *dw_n = floats(n_w), *db_n = floats(O);
    dense_forward(out_n, in, w, bias, B, I, O, scratch);
    dense_backward_data(din_n, dout, w, B, I, O);
    dense_backward_weights(dw_n, dout, in, B, I, O);
    dense_backward_bias(db_n, dout, B, O);
    /* blas, [features][B]; twice: at `threads` and at 1 */
    float *in_c = floats(n_in), *dout_c = floats(n_out), *dense_scratch;
    dense_scratch = floats(products->dense_scratch_floats(B, I, O));
    to_chwn(in_c, in, B, I, 1);
    to_chwn(dout_c, dout, B, O, 1);
    float *out_c[2], *din_c[2], *dw_c[2], *db_c[2];
    for (int run = 0; run < 2; run++) {
        const chwn_team team = {run ? 1 : threads, CHWN_SPLIT_OWN};
        products->enter(&team); /* OpenBLAS on one thread inside the tiles, as in the engine */
        out_c[run] = floats(n_out), din_c[run] = floats(n_in);
        dw_c[run] = floats(n_w), db_c[run] = floats(O);
        float *every[] = {out_c[run], din_c[run], dw_c[run], db_c[run]};
        const size_t count[] = {n_out, n_in, n_w, (size_t)O};
        for (int k = 0; k < 4; k++) /* whatever was there must go */
            for (size_t i = 0; i < count[k]; i++)
                every[k][i] = 12345.0f;
        products->forward_dense(products, out_c[run], in_c, w, bias, dense_scratch, B, I, O, &team);
        products->backward_dense(products, dw_c[run], db_c[run], din_c[run], dout_c, in_c, w,
                                 dense_scratch, B, I, O, &team);
    }
    assert_memory_equal(out_c[0], out_c[1], sizeof(float) * n_out);
    assert_memory_equal(din_c[0], din_c[1], sizeof(float) * n_in);
    assert_memory_equal(dw_c[0], dw_c[1], sizeof(float) * n_w);
    assert_memory_equal(db_c[0], db_c[1], sizeof(float) * O);
    /* without the input gradient, the same parameter gradients */
    const chwn_team team = {threads, CHWN_SPLIT_OWN};
    products->backward_dense(products, dw_c[1], db_c[1], NULL, dout_c, in_c, w, dense_scratch,
                             B, I, O, &team);
    assert_memory_equal(dw_c[0], dw_c[1], sizeof(float) * n_w);
    assert_memory_equal(db_c[0], db_c[1], sizeof(float) * O);
    float *got_out = floats(n_out), *got_din = floats(n_in);
    to_nchw(got_out, out_c[0], B, O, 1);
    to_nchw(got_din, din_c[0], B, I, 1);
    double *sum_out = calloc(n_out, sizeof(double)), *size_out = calloc(n_out, sizeof(double));
    double *sum_din = calloc(n_in, sizeof(double)), *size_din = calloc(n_in, sizeof(double));
    double *sum_dw = calloc(n_w, sizeof(double)), *size_dw = calloc(n_w, sizeof(double));
    double *sum_db = calloc(O, sizeof(double)), *size_db = calloc(O, sizeof(double));
    assert_true(sum_out && size_out && sum_din && size_din && sum_dw && size_dw && sum_db &&
                size_db);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) {
            const size_t at = (size_t)b * O + o;
            const double g = dout[at];
            sum_out[at] = bias[o], size_out[at] = fabs(bias[o]);
            sum_db[o] += g, size_db[o] += fabs(g);
            for (int i = 0; i < I; i++) {
                const double x = in[(size_t)b * I + i], wt = w[(size_t)o * I + i];
                sum_out[at] += wt * x, size_out[at] += fabs(wt * x);
                sum_din[(size_t)b * I + i] += wt * g, size_din[(size_t)b * I + i] += fabs(wt * g);
                sum_dw[(size_t)o * I + i] += g * x, size_dw[(size_t)o * I + i] += fabs(g * x);
            }
        }
    hold_to_sums("dense output", n_out, sum_out, size_out, out_n, got_out);
    hold_to_sums("dense input gradient", n_in, sum_din, size_din, din_n, got_din);
    hold_to_sums("dense weight gradient", n_w, sum_dw, size_dw, dw_n, dw_c[0]);
    hold_to_sums("dense bias gradient", O, sum_db, size_db, db_n, db_c[0]);
    free(sum_out), free(size_out), free(sum_din), free(size_din);
    free(sum_dw), free(size_dw), free(sum_db), free(size_db);
    float *all[] = {in,      w,        bias,     dout,     scratch,  out_n,    din_n,
                    dw_n,    db_n,     in_c,     dout_c,   dense_scratch, got_out, got_din,
                    out_c[0], out_c[1], din_c[0], din_c[1], dw_c[0],  dw_c[1],  db_c[0],
                    db_c[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void dense_layer_matches_naive(void **state)
{
    (void)state;
    check_dense(128, 800, 500, 2); /* fc1 at batch 128 */
    check_dense(128, 500, 10, 2);  /* fc2: two row blocks of 5 */
    check_dense(33, 300, 11, 2);   /* two chunks of inputs; columns past the vectors */
    check_dense(5, 7, 3, 1);       /* less than a vector anywhere */
    check_dense(16, 40, 600, 2);   /* more outputs than inputs */
}

static void check_pool(int B, int C, int H, int W, int kernel, int stride, int with_ties)
{
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const size_t n_in = (size_t)B * C * H * W, n_out = (size_t)B * C * OH * OW;
    float *in = floats(n_in), *dout = floats(n_out), *out_n = floats(n_out);
    float *din_n = floats(n_in), *in_c = floats(n_in), *dout_c = floats(n_out);
    float *out_c = floats(n_out), *din_c = floats(n_in), *expect = floats(n_in);
    rng r = {77};
    fill(in, n_in, &r);
    fill(dout, n_out, &r);
    if (with_ties) /* few distinct values: the first largest must win */
        for (size_t i = 0; i < n_in; i++)
            in[i] = (float)((int)(in[i] * 2.0f));
    maxpool_forward(out_n, in, B, C, H, W, kernel, stride);
    maxpool_backward(din_n, dout, in, B, C, H, W, kernel, stride);
    to_chwn(in_c, in, B, C, H * W);
    to_chwn(dout_c, dout, B, C, OH * OW);
    float *expect_out = floats(n_out);
    to_chwn(expect_out, out_n, B, C, OH * OW);
    to_chwn(expect, din_n, B, C, H * W);
    /* the winners found again from the input and output, and (where the
     * pool records them) read back from argmax alone: in and out NULL */
    const int records = chwn_maxpool_records_argmax(kernel, stride);
    unsigned char *argmax = malloc(n_out);
    assert_non_null(argmax);
    for (int recorded = 0; recorded <= records; recorded++) {
        memset(argmax, 0xff, n_out);
        chwn_maxpool_forward(out_c, recorded ? argmax : NULL, in_c, B, C, H, W, kernel, stride,
                             2);
        assert_memory_equal(expect_out, out_c, sizeof(float) * n_out);
        for (size_t i = 0; i < n_in; i++) /* whatever was there must go */
            din_c[i] = 12345.0f;
        chwn_maxpool_backward(din_c, dout_c, recorded ? argmax : NULL, recorded ? NULL : in_c,
                              recorded ? NULL : out_c, B, C, H, W, kernel, stride, 2);
        assert_close(expect, din_c, n_in,
                     recorded ? "max-pool backward from argmax" : "max-pool backward");
    }
    free(argmax);
    float *all[] = {in, dout, out_n, din_n, in_c, dout_c, out_c, din_c, expect, expect_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void pool_layer_matches_naive(void **state)
{
    (void)state;
    check_pool(4, 3, 8, 8, 2, 2, 0);
    check_pool(4, 3, 8, 8, 2, 2, 1);
    check_pool(3, 2, 9, 7, 3, 2, 1); /* overlapping windows add up */
    check_pool(5, 2, 9, 7, 2, 2, 1); /* a row and a column no window covers */
    check_pool(16, 3, 8, 8, 2, 2, 1); /* the 2x2 path over whole vectors, ties */
    check_pool(7, 2, 4, 6, 3, 3, 1); /* tiles of another size */
    check_pool(3, 2, 9, 9, 2, 3, 0); /* gaps between the windows */
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_layer_matches_naive),
        cmocka_unit_test(dense_layer_matches_naive),
        cmocka_unit_test(pool_layer_matches_naive),
    };
    return run_chwn_tests(tests, sizeof tests / sizeof tests[0]);
}
