/* The naive layers: each layer's backward pass against central
 * differences of its forward pass (convolution, max-pool, dense, ReLU,
 * softmax cross-entropy), and known values. The engine over them is
 * tests/test_naive.c's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/naive/layers.h"
#include "harness/run/init.h"
#include "tests/checks.h"
#include "tests/testing.h"

/* Recomputes a layer's output from the inputs held in ctx. */
typedef void (*forward_fn)(void *ctx, float *out);

/* The scalar under test: sum of out[i] * coef[i], in double. */
static double objective(forward_fn fwd, void *ctx, float *out, const float *coef, size_t n_out)
{
    fwd(ctx, out);
    double f = 0.0;
    for (size_t i = 0; i < n_out; i++)
        f += (double)out[i] * coef[i];
    return f;
}

/* Central differences of the objective with respect to every x[i], against
 * analytic[i]; returns the worst |difference| relative to the largest
 * |analytic|. The step actually taken (after rounding to float) is used. */
static double fd_check(forward_fn fwd, void *ctx, float *out, const float *coef, size_t n_out,
                       float *x, size_t nx, const float *analytic, float h)
{
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < nx; i++)
        scale = fmax(scale, fabs(analytic[i]));
    assert_true(scale > 0.0); /* an all-zero gradient checks nothing */
    for (size_t i = 0; i < nx; i++) {
        const float v = x[i];
        x[i] = v + h;
        const double xp = x[i], fp = objective(fwd, ctx, out, coef, n_out);
        x[i] = v - h;
        const double xm = x[i], fm = objective(fwd, ctx, out, coef, n_out);
        x[i] = v;
        const double fd = (fp - fm) / (xp - xm);
        const double err = fabs(fd - analytic[i]) / scale;
        if (!(err <= worst)) {
            worst = err;
            if (isnan(err))
                return INFINITY;
        }
    }
    return worst;
}

static void fill_uniform(float *x, size_t n, rng *r, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * rng_uniform(r));
}

/* A layer with weights under test (convolution, dense): random input,
 * weight, bias and upstream coefficients, and room for the analytic
 * gradients its backward pass writes into d_in, d_w and d_b. */
typedef struct weighted {
    size_t n_in, n_w, n_b, n_out;
    float *in, *weight, *bias, *coef;
    float *d_in, *d_w, *d_b;
} weighted;

static weighted weighted_random(size_t n_in, size_t n_w, size_t n_b, size_t n_out, rng *r)
{
    weighted t = {.n_in = n_in, .n_w = n_w, .n_b = n_b, .n_out = n_out,
                  .in = floats(n_in), .weight = floats(n_w), .bias = floats(n_b),
                  .coef = floats(n_out), .d_in = floats(n_in), .d_w = floats(n_w),
                  .d_b = floats(n_b)};
    fill_uniform(t.in, n_in, r, -1, 1);
    fill_uniform(t.weight, n_w, r, -1, 1);
    fill_uniform(t.bias, n_b, r, -1, 1);
    fill_uniform(t.coef, n_out, r, -1, 1);
    return t;
}

/* The three analytic gradients against central differences of fwd(ctx),
 * which reads t's input, weight and bias. The layer is linear in each, so
 * a large step is exact up to rounding. */
static void weighted_check(const weighted *t, forward_fn fwd, void *ctx)
{
    float *out = floats(t->n_out);
    const double tol = 1e-4;
    assert_true(fd_check(fwd, ctx, out, t->coef, t->n_out, t->in, t->n_in, t->d_in, 0.25f) < tol);
    assert_true(fd_check(fwd, ctx, out, t->coef, t->n_out, t->weight, t->n_w, t->d_w, 0.25f) <
                tol);
    assert_true(fd_check(fwd, ctx, out, t->coef, t->n_out, t->bias, t->n_b, t->d_b, 0.25f) < tol);
    free(out);
}

static void weighted_free(weighted *t)
{
    free(t->in), free(t->weight), free(t->bias), free(t->coef);
    free(t->d_in), free(t->d_w), free(t->d_b);
}

/* ---- convolution ---- */

typedef struct conv_ctx {
    float *in, *weight, *bias, *scratch;
    int B, C, H, W, K, kernel, stride;
} conv_ctx;

static void conv_fwd(void *p, float *out)
{
    conv_ctx *c = p;
    conv_forward(out, c->in, c->weight, c->bias, c->B, c->C, c->H, c->W, c->K, c->kernel,
                 c->stride, c->scratch);
}

static void check_conv(int B, int C, int H, int W, int K, int kernel, int stride, uint64_t seed)
{
    rng r = {seed};
    const int OH = conv_out_size(H, kernel, stride), OW = conv_out_size(W, kernel, stride);
    const size_t n_in = (size_t)B * C * H * W, n_w = (size_t)K * C * kernel * kernel,
                 n_out = (size_t)B * K * OH * OW;
    weighted t = weighted_random(n_in, n_w, K, n_out, &r);
    conv_ctx c = {t.in, t.weight, t.bias, floats(conv_scratch_count(C, H, W, kernel, stride)),
                  B, C, H, W, K, kernel, stride};
    conv_backward_data(t.d_in, t.coef, c.weight, B, C, H, W, K, kernel, stride, c.scratch);
    conv_backward_weights(t.d_w, t.coef, c.in, B, C, H, W, K, kernel, stride, c.scratch);
    conv_backward_bias(t.d_b, t.coef, B, K, OH, OW);
    weighted_check(&t, conv_fwd, &c);

    /* parameter gradients add to what is there */
    float *again = floats(n_w);
    memcpy(again, t.d_w, sizeof(float) * n_w);
    conv_backward_weights(again, t.coef, c.in, B, C, H, W, K, kernel, stride, c.scratch);
    double largest = 0.0;
    for (size_t i = 0; i < n_w; i++)
        largest = fmax(largest, fabs(t.d_w[i]));
    for (size_t i = 0; i < n_w; i++)
        assert_true(fabs(again[i] - 2.0 * t.d_w[i]) < 1e-5 * largest);

    free(again), free(c.scratch);
    weighted_free(&t);
}

static void test_conv_gradients(void **state)
{
    (void)state;
    check_conv(2, 3, 9, 8, 5, 3, 1, 11);  /* odd channel counts: leftover rows */
    check_conv(2, 2, 9, 10, 6, 3, 2, 12); /* stride 2, a column left over */
    check_conv(3, 1, 12, 12, 4, 5, 1, 13); /* LeNet's first layer, smaller */
    check_conv(1, 7, 6, 6, 9, 2, 1, 14);
}

/* Known numbers: a 1x1x3x3 image, a 2x2 kernel of ones. */
static void test_conv_known_values(void **state)
{
    (void)state;
    const float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float weight[4] = {1, 10, 100, 1000}, bias[1] = {0.5f};
    float out[4], scratch[16];
    conv_forward(out, in, weight, bias, 1, 1, 3, 3, 1, 2, 1, scratch);
    /* out[y][x] = in[y][x] + 10 in[y][x+1] + 100 in[y+1][x] + 1000 in[y+1][x+1] */
    assert_true(out[0] == 1 + 20 + 400 + 5000 + 0.5f);
    assert_true(out[1] == 2 + 30 + 500 + 6000 + 0.5f);
    assert_true(out[2] == 4 + 50 + 700 + 8000 + 0.5f);
    assert_true(out[3] == 5 + 60 + 800 + 9000 + 0.5f);
    /* stride 2 on a 1x1x5x5 image with a 1x1 kernel picks every other pixel */
    float big[25], picked[9], s2[9];
    for (int i = 0; i < 25; i++)
        big[i] = (float)i;
    const float one = 1.0f, zero = 0.0f;
    conv_forward(picked, big, &one, &zero, 1, 1, 5, 5, 1, 1, 2, s2);
    const float want[9] = {0, 2, 4, 10, 12, 14, 20, 22, 24};
    assert_memory_equal(picked, want, sizeof want);
}

/* ---- max-pool ---- */

typedef struct pool_ctx {
    float *in;
    int B, C, H, W, kernel, stride;
} pool_ctx;

static void pool_fwd(void *p, float *out)
{
    pool_ctx *c = p;
    maxpool_forward(out, c->in, c->B, c->C, c->H, c->W, c->kernel, c->stride);
}

static void check_pool(int B, int C, int H, int W, int kernel, int stride, uint64_t seed)
{
    rng r = {seed};
    const int OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
    const size_t n_in = (size_t)B * C * H * W, n_out = (size_t)B * C * OH * OW;
    pool_ctx c = {floats(n_in), B, C, H, W, kernel, stride};
    /* distinct values 0.05 apart, shuffled, so a step of 0.01 never
     * changes which input is the largest */
    int32_t *perm = malloc(sizeof(int32_t) * n_in);
    assert_non_null(perm);
    epoch_order(seed, 0, (int)n_in, 1, perm);
    for (size_t i = 0; i < n_in; i++)
        c.in[i] = 0.05f * (float)perm[i] - 1.0f;
    float *out = floats(n_out), *coef = floats(n_out), *d_in = floats(n_in);
    fill_uniform(coef, n_out, &r, -1, 1);
    maxpool_backward(d_in, coef, c.in, B, C, H, W, kernel, stride);
    assert_true(fd_check(pool_fwd, &c, out, coef, n_out, c.in, n_in, d_in, 0.01f) < 1e-4);
    free(perm), free(c.in), free(out), free(coef), free(d_in);
}

static void test_pool_gradients(void **state)
{
    (void)state;
    check_pool(2, 3, 8, 8, 2, 2, 21); /* LeNet's pools */
    check_pool(2, 2, 7, 9, 2, 2, 22); /* odd sizes: last row and column unused */
    check_pool(1, 2, 9, 9, 3, 2, 23); /* overlapping windows add */
    check_pool(1, 1, 6, 6, 3, 3, 24);
}

static void test_pool_ties_go_to_first(void **state)
{
    (void)state;
    /* one 2x2 window of equal values, then a window with the max repeated
     * in its last two places */
    const float in[8] = {3, 3, 1, 7, 3, 3, 2, 7};
    /* as 1x1x2x4: rows {3,3,1,7} and {3,3,2,7}; windows cols 0-1 and 2-3 */
    float out[2], d_in[8];
    const float d_out[2] = {1.5f, -2.0f};
    maxpool_forward(out, in, 1, 1, 2, 4, 2, 2);
    assert_true(out[0] == 3.0f && out[1] == 7.0f);
    maxpool_backward(d_in, d_out, in, 1, 1, 2, 4, 2, 2);
    const float want[8] = {1.5f, 0, 0, -2.0f, 0, 0, 0, 0};
    assert_memory_equal(d_in, want, sizeof want);
}

/* ---- dense ---- */

typedef struct dense_ctx {
    float *in, *weight, *bias, *scratch;
    int B, I, O;
} dense_ctx;

static void dense_fwd(void *p, float *out)
{
    dense_ctx *c = p;
    dense_forward(out, c->in, c->weight, c->bias, c->B, c->I, c->O, c->scratch);
}

static void check_dense(int B, int I, int O, uint64_t seed)
{
    rng r = {seed};
    const size_t n_in = (size_t)B * I, n_w = (size_t)O * I, n_out = (size_t)B * O;
    weighted t = weighted_random(n_in, n_w, O, n_out, &r);
    dense_ctx c = {t.in, t.weight, t.bias, floats(dense_scratch_count(B, I, O)), B, I, O};
    dense_backward_data(t.d_in, t.coef, c.weight, B, I, O);
    dense_backward_weights(t.d_w, t.coef, c.in, B, I, O);
    dense_backward_bias(t.d_b, t.coef, B, O);
    weighted_check(&t, dense_fwd, &c);

    /* bias gradients add to what is there */
    float *again = floats(O);
    memcpy(again, t.d_b, sizeof(float) * O);
    dense_backward_bias(again, t.coef, B, O);
    for (int i = 0; i < O; i++)
        assert_true(rel_diff(again[i], 2.0 * t.d_b[i], 1e-3) < 1e-5);

    free(again), free(c.scratch);
    weighted_free(&t);
}

static void test_dense_gradients(void **state)
{
    (void)state;
    check_dense(3, 7, 6, 31);
    check_dense(5, 13, 9, 32);
    check_dense(1, 4, 1, 33);
    check_dense(8, 16, 12, 34); /* multiples of four throughout */
}

/* ---- ReLU ---- */

typedef struct relu_ctx {
    float *in;
    size_t n;
} relu_ctx;

static void relu_fwd(void *p, float *out)
{
    relu_ctx *c = p;
    relu_forward(out, c->in, c->n);
}

static void test_relu_gradients(void **state)
{
    (void)state;
    rng r = {41};
    const size_t n = 97;
    relu_ctx c = {floats(n), n};
    float *out = floats(n), *coef = floats(n), *d_in = floats(n);
    /* at least 0.05 away from the kink */
    for (size_t i = 0; i < n; i++)
        c.in[i] = (float)((rng_uniform(&r) < 0.5 ? -1 : 1) * (0.05 + rng_uniform(&r)));
    fill_uniform(coef, n, &r, -1, 1);
    relu_forward(out, c.in, n);
    relu_backward(d_in, coef, out, n);
    assert_true(fd_check(relu_fwd, &c, out, coef, n, c.in, n, d_in, 0.01f) < 1e-5);
    /* in place */
    memcpy(d_in, coef, sizeof(float) * n);
    relu_backward(d_in, d_in, out, n);
    for (size_t i = 0; i < n; i++)
        assert_true(d_in[i] == (c.in[i] > 0 ? coef[i] : 0.0f));
    free(c.in), free(out), free(coef), free(d_in);
}

/* ---- softmax cross-entropy ---- */

typedef struct loss_ctx {
    float *logits;
    int *labels;
    int B, classes;
} loss_ctx;

static void loss_fwd(void *p, float *out)
{
    loss_ctx *c = p;
    softmax_xent(NULL, out, c->logits, c->labels, c->B, c->classes, 1.0f);
}

static void test_loss_gradients(void **state)
{
    (void)state;
    rng r = {51};
    const int B = 4, classes = 10;
    const float scale = 0.25f;
    loss_ctx c = {floats((size_t)B * classes), malloc(sizeof(int) * B), B, classes};
    assert_non_null(c.labels);
    fill_uniform(c.logits, (size_t)B * classes, &r, -3, 3);
    for (int b = 0; b < B; b++)
        c.labels[b] = (int)(rng_next(&r) % classes);
    float losses[4], coef[4] = {scale, scale, scale, scale};
    float *d = floats((size_t)B * classes);
    double sum = softmax_xent(d, losses, c.logits, c.labels, B, classes, scale);
    /* the losses by hand, in double */
    for (int b = 0; b < B; b++) {
        const float *z = c.logits + b * classes;
        double s = 0.0;
        for (int k = 0; k < classes; k++)
            s += exp((double)z[k]);
        assert_true(rel_diff(losses[b], log(s) - z[c.labels[b]], 1e-3) < 1e-5);
    }
    assert_true(rel_diff(sum, losses[0] + losses[1] + losses[2] + (double)losses[3], 1) < 1e-6);
    assert_true(fd_check(loss_fwd, &c, losses, coef, B, c.logits, (size_t)B * classes, d,
                         0.01f) < 1e-3);
    free(c.logits), free(c.labels), free(d);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_gradients),
        cmocka_unit_test(test_conv_known_values),
        cmocka_unit_test(test_pool_gradients),
        cmocka_unit_test(test_pool_ties_go_to_first),
        cmocka_unit_test(test_dense_gradients),
        cmocka_unit_test(test_relu_gradients),
        cmocka_unit_test(test_loss_gradients),
    };
    return cmocka_run_group_tests_name("naive layers", tests, NULL, NULL);
}
