/* The naive backend: each layer's backward pass against central
 * differences, the whole network's gradients against central differences,
 * the optimiser against hand-computed steps, and the engine's bookkeeping
 * (training lowers the loss, determinism, partial batches, evaluation,
 * errors). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/host_engine.h"
#include "backends/engine.h"
#include "backends/naive/layers.h"
#include "backends/registry.h"
#include "harness/run/init.h"
#include "tests/testing.h"
#include "workloads/workload.h"

extern const backend naive_backend;
static const backend *const nb = &naive_backend;

/* ---------------------------------------------------------------------- */
/* Finite differences for single layers                                    */

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

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
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

/* ---------------------------------------------------------------------- */
/* Engines                                                                  */

static engine_config make_config(int batch, optimizer_kind kind)
{
    engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.batch_size = batch;
    cfg.opt = (optimizer_config){kind, 0.01f, 0.9f, 5e-4f, 0.9f, 0.999f, 1e-8f};
    cfg.threads = 1;
    cfg.precision = PREC_FP32;
    return cfg;
}

static engine *make_engine(const char *wname, workload *w, const engine_config *cfg)
{
    assert_int_equal(workload_get(wname, w), 0);
    char err[256] = "";
    engine *e = backend_create(nb, w, cfg, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    return e;
}

static float *initial_params(const workload *w, uint64_t seed)
{
    float *p = floats(w->param_count);
    init_params(w, seed, p);
    return p;
}

static void test_param_counts(void **state)
{
    (void)state;
    const char *names[2] = {"lenet", "mlp"};
    const size_t want[2] = {431080, 79510};
    for (int i = 0; i < 2; i++) {
        workload w;
        engine_config cfg = make_config(4, OPT_ADAM);
        engine *e = make_engine(names[i], &w, &cfg);
        assert_int_equal(w.param_count, want[i]);
        size_t n = 0;
        assert_non_null(nb->buffer(e, BUF_PARAMS, &n));
        assert_int_equal(n, want[i]);
        assert_non_null(nb->buffer(e, BUF_GRADS, &n));
        assert_int_equal(n, want[i]);
        assert_non_null(nb->buffer(e, BUF_OPT_STATE, &n));
        assert_int_equal(n, 2 * want[i]); /* adam: m and s */
        assert_int_equal(nb->buffer_space, MEM_HOST);
        nb->destroy(e);
    }
    /* nesterov keeps one float per parameter, sgd none */
    workload w;
    engine_config cfg = make_config(4, OPT_NESTEROV);
    engine *e = make_engine("mlp", &w, &cfg);
    size_t n = 0;
    nb->buffer(e, BUF_OPT_STATE, &n);
    assert_int_equal(n, w.param_count);
    nb->destroy(e);
    cfg = make_config(4, OPT_SGD);
    e = make_engine("mlp", &w, &cfg);
    nb->buffer(e, BUF_OPT_STATE, &n);
    assert_int_equal(n, 0);
    nb->destroy(e);
}

/* The engine's own parameters and gradients, float or double (the naive
 * engine is a host engine), read and written at its precision. */
static double param_at(engine *e, size_t i)
{
    const host_engine *h = host_of(e);
    return h->real_size == sizeof(double) ? h->params_f64[i] : h->params[i];
}

static void set_param_at(engine *e, size_t i, double v)
{
    host_engine *h = host_of(e);
    if (h->real_size == sizeof(double))
        h->params_f64[i] = v;
    else
        h->params[i] = (float)v;
}

static double grad_at(engine *e, size_t i)
{
    const host_engine *h = host_of(e);
    return h->real_size == sizeof(double) ? h->grads_f64[i] : h->grads[i];
}

/* The mean loss of the batch at the parameters the engine holds. */
static double loss_at(engine *e, const int32_t *idx, int batch)
{
    float loss;
    assert_int_equal(nb->compute_gradients(e, idx, batch, &loss), 0);
    return nb->last_loss(e);
}

/* Central differences of the mean loss over a tiny batch, through the
 * engine, for a sample of every parameter tensor, at precision prec.
 *
 * The bounds. A central difference with step h is off from the derivative
 * by its truncation error, about h^2 |L'''| / 6, plus the rounding of the
 * two losses, about u |L| / h with u the unit roundoff of the engine's
 * sums (the mean loss is about 2.3).
 *   fp32 (u = 6e-8): h = 3e-3 balances the two at about 5e-5 absolute, but
 *   the loss itself is a float sum over the network, whose error is many u;
 *   the check allows 2% of the tensor's largest gradient plus 5% of the
 *   difference.
 *   fp64 (u = 1.1e-16): h = 1e-5 gives a truncation error of about
 *   1.7e-11 |L'''| and a rounding error of about 2.5e-11 (with the loss's
 *   sums off by up to 10 u); measured, the worst sample is off by 7e-10
 *   (lenet) and 1.2e-10 (mlp) of its tensor's largest gradient. The check
 *   allows 1e-8 of that, plus 1e-8 of the difference: a million times
 *   tighter than fp32. A gradient made 3e-8 too large fails it.
 * A step can carry an input of a ReLU or a max-pool across its kink, where
 * the loss is not differentiable; there the one-sided differences differ
 * by a jump of the order of one image's gradient, while elsewhere they
 * differ by only about h |L''|. Such samples are replaced by others (fp64
 * tells them apart at 1e-3 of the largest gradient, fp32 at its check's
 * bound); every tensor must still get `want` clean samples. */
static void check_network(const char *wname, precision prec)
{
    workload w;
    const int batch = 2;
    const int fp64 = prec == PREC_FP64;
    const double h = fp64 ? 1e-5 : 3e-3;
    const double tol_of_largest = fp64 ? 1e-8 : 0.02, tol_of_fd = fp64 ? 1e-8 : 0.05;
    const double kink_of_largest = fp64 ? 1e-3 : tol_of_largest;
    const double kink_of_fd = fp64 ? 0 : tol_of_fd;
    engine_config cfg = make_config(batch, OPT_SGD);
    cfg.precision = prec;
    engine *e = make_engine(wname, &w, &cfg);
    synth_set data;
    assert_int_equal(synth_make(&data, 8, 28, 28, 10, 61), 0);
    assert_int_equal(nb->bind_dataset(e, &data.d, &data.d), 0);

    rng r = {62};
    float *params = initial_params(&w, 63);
    for (int i = 0; i < w.n_layers; i++) /* biases away from zero too */
        for (size_t k = 0; k < w.layers[i].bias_count; k++)
            params[w.layers[i].bias_offset + k] = (float)(0.1 * rng_normal(&r));
    assert_int_equal(nb->set_params(e, params), 0);
    const int32_t idx[2] = {3, 6};
    const double l0 = loss_at(e, idx, batch);
    double *grads = malloc(sizeof(double) * w.param_count);
    assert_non_null(grads);
    for (size_t i = 0; i < w.param_count; i++)
        grads[i] = grad_at(e, i);

    const int want = 5, tries = 40;
    double worst = 0;
    const int tensors = workload_tensor_count(&w);
    for (int t = 0; t < tensors; t++) {
        char name[64];
        size_t off, count;
        int dims[4], nd;
        workload_tensor_info(&w, t, name, sizeof name, &off, &count, dims, &nd);
        double scale = 0.0;
        for (size_t i = 0; i < count; i++)
            scale = fmax(scale, fabs(grads[off + i]));
        assert_true(scale > 0.0);
        int checked = 0;
        for (int s = 0; s < tries && checked < want; s++) {
            /* first, last, then random elements */
            size_t i = s == 0 ? 0 : s == 1 ? count - 1 : rng_next(&r) % count;
            const size_t at = off + i;
            const double v = param_at(e, at);
            set_param_at(e, at, v + h);
            const double xp = param_at(e, at), lp = loss_at(e, idx, batch);
            set_param_at(e, at, v - h);
            const double xm = param_at(e, at), lm = loss_at(e, idx, batch);
            set_param_at(e, at, v);
            const double fd = (lp - lm) / (xp - xm), an = grads[at];
            const double right = (lp - l0) / (xp - v), left = (l0 - lm) / (v - xm);
            if (fabs(right - left) > kink_of_largest * scale + kink_of_fd * fabs(fd))
                continue; /* a kink */
            checked++;
            const double tol = tol_of_largest * scale + tol_of_fd * fabs(fd);
            if (fabs(fd - an) / scale > worst)
                worst = fabs(fd - an) / scale;
            if (!(fabs(fd - an) <= tol))
                fail_msg("%s %s[%zu]: analytic %.12g, central difference %.12g (largest %.3g)",
                         wname, name, i, an, fd, scale);
        }
        if (checked < want)
            fail_msg("%s %s: only %d of %d samples away from kinks", wname, name, checked,
                     tries);
    }
    print_message("%s %s: worst sample off by %.3g of its tensor's largest gradient\n", wname,
                  precision_name(prec), worst);
    free(params), free(grads);
    synth_free(&data);
    nb->destroy(e);
}

typedef struct network_case {
    const char *workload;
    precision prec;
} network_case;

static const network_case lenet_fp32 = {"lenet", PREC_FP32}, mlp_fp32 = {"mlp", PREC_FP32},
                          lenet_fp64 = {"lenet", PREC_FP64}, mlp_fp64 = {"mlp", PREC_FP64};

static void test_network_gradients(void **state)
{
    const network_case *c = *state;
    check_network(c->workload, c->prec);
}

static double mean(const float *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s / n;
}

static void check_training_lowers_loss(const char *wname, optimizer_kind kind, float lr)
{
    workload w;
    const int batch = 16, steps = 40;
    engine_config cfg = make_config(batch, kind);
    cfg.opt.lr = lr;
    engine *e = make_engine(wname, &w, &cfg);
    synth_set data;
    assert_int_equal(synth_make(&data, 256, 28, 28, 10, 71), 0);
    assert_int_equal(nb->bind_dataset(e, &data.d, &data.d), 0);
    float *params = initial_params(&w, 72);
    assert_int_equal(nb->set_params(e, params), 0);
    int32_t *idx = malloc(sizeof(int32_t) * batch * steps);
    assert_non_null(idx);
    for (int s = 0; s < batch * steps; s++)
        idx[s] = s % 256;
    float losses[40];
    assert_int_equal(nb->train_steps(e, idx, batch, steps, losses), 0);
    const double first = mean(losses, 8), last = mean(losses + steps - 8, 8);
    if (!(last < 0.5 * first))
        fail_msg("%s: mean loss of the first 8 steps %.4f, of the last 8 %.4f", wname, first,
                 last);
    free(idx), free(params);
    synth_free(&data);
    nb->destroy(e);
}

static void test_training_lowers_loss(void **state)
{
    (void)state;
    check_training_lowers_loss("lenet", OPT_NESTEROV, 0.01f);
    check_training_lowers_loss("mlp", OPT_NESTEROV, 0.05f);
    check_training_lowers_loss("mlp", OPT_ADAM, 0.003f);
}

/* Two engines given the same parameters and batches end bitwise equal; and
 * train_steps is compute_gradients followed by apply_update(1). */
static void test_determinism(void **state)
{
    (void)state;
    workload w;
    const int batch = 8, steps = 4;
    engine_config cfg = make_config(batch, OPT_NESTEROV);
    engine *a = make_engine("lenet", &w, &cfg), *b = make_engine("lenet", &w, &cfg),
           *c = make_engine("lenet", &w, &cfg);
    synth_set data;
    assert_int_equal(synth_make(&data, 64, 28, 28, 10, 81), 0);
    float *params = initial_params(&w, 82);
    engine *all[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nb->bind_dataset(all[i], &data.d, &data.d), 0);
        assert_int_equal(nb->set_params(all[i], params), 0);
    }
    int32_t idx[32];
    epoch_order(83, 0, 32, 1, idx);
    float la[4], lb[4], lc[4];
    assert_int_equal(nb->train_steps(a, idx, batch, steps, la), 0);
    assert_int_equal(nb->train_steps(b, idx, batch, steps, lb), 0);
    for (int s = 0; s < steps; s++) {
        assert_int_equal(nb->compute_gradients(c, idx + s * batch, batch, &lc[s]), 0);
        assert_int_equal(nb->apply_update(c, 1.0f), 0);
    }
    assert_memory_equal(la, lb, sizeof la);
    assert_memory_equal(la, lc, sizeof la);
    float *pa = floats(w.param_count), *pb = floats(w.param_count), *pc = floats(w.param_count);
    nb->get_params(a, pa);
    nb->get_params(b, pb);
    nb->get_params(c, pc);
    assert_memory_equal(pa, pb, sizeof(float) * w.param_count);
    assert_memory_equal(pa, pc, sizeof(float) * w.param_count);
    assert_memory_not_equal(pa, params, sizeof(float) * w.param_count); /* it trained */
    free(pa), free(pb), free(pc), free(params);
    synth_free(&data);
    for (int i = 0; i < 3; i++)
        nb->destroy(all[i]);
}

/* A batch smaller than the configured one gives the same numbers as an
 * engine made for exactly that batch. */
static void test_partial_batch(void **state)
{
    (void)state;
    workload w;
    engine_config big = make_config(16, OPT_NESTEROV), small = make_config(5, OPT_NESTEROV);
    engine *a = make_engine("lenet", &w, &big), *b = make_engine("lenet", &w, &small);
    synth_set data;
    assert_int_equal(synth_make(&data, 32, 28, 28, 10, 91), 0);
    float *params = initial_params(&w, 92);
    nb->bind_dataset(a, &data.d, NULL);
    nb->bind_dataset(b, &data.d, NULL);
    nb->set_params(a, params);
    nb->set_params(b, params);
    const int32_t idx[10] = {1, 4, 9, 16, 25, 2, 3, 5, 7, 11};
    float la[2], lb[2];
    assert_int_equal(nb->train_steps(a, idx, 5, 2, la), 0);
    assert_int_equal(nb->train_steps(b, idx, 5, 2, lb), 0);
    assert_memory_equal(la, lb, sizeof la);
    size_t n;
    assert_memory_equal(nb->buffer(a, BUF_PARAMS, &n), nb->buffer(b, BUF_PARAMS, &n),
                        sizeof(float) * w.param_count);
    free(params);
    synth_free(&data);
    nb->destroy(a);
    nb->destroy(b);
}

/* One optimiser step on known numbers, by the formulas of engine.h in double. */
typedef struct opt_probe {
    size_t weight, bias; /* one element of fc1.weight and one of fc1.bias */
} opt_probe;

static void check_optimizer(optimizer_kind kind)
{
    workload w;
    engine_config cfg = make_config(4, kind);
    cfg.opt.lr = 0.1f;
    cfg.opt.momentum = 0.9f;
    cfg.opt.weight_decay = 0.01f;
    engine *e = make_engine("mlp", &w, &cfg);
    const opt_probe at = {w.layers[0].weight_offset + 123, w.layers[0].bias_offset + 7};
    size_t n;
    float *p = nb->buffer(e, BUF_PARAMS, &n), *g = nb->buffer(e, BUF_GRADS, &n);
    const double w0 = 0.5, g0 = 0.2, scale = 0.5;
    const double lr = cfg.opt.lr, mu = cfg.opt.momentum, wd = cfg.opt.weight_decay;
    const double b1 = cfg.opt.beta1, b2 = cfg.opt.beta2, eps = cfg.opt.eps;
    double v[2] = {0, 0}, m[2] = {0, 0}, s[2] = {0, 0}, x[2] = {w0, w0};
    p[at.weight] = p[at.bias] = (float)w0;
    for (int t = 1; t <= 2; t++) {
        g[at.weight] = g[at.bias] = (float)g0;
        assert_int_equal(nb->apply_update(e, (float)scale), 0);
        for (int k = 0; k < 2; k++) {
            /* weight (k = 0) decays, bias (k = 1) does not */
            const double grad = g0 * scale + (k == 0 ? wd * x[k] : 0.0);
            switch (kind) {
            case OPT_SGD:
                x[k] -= lr * grad;
                break;
            case OPT_NESTEROV:
                v[k] = mu * v[k] + grad;
                x[k] -= lr * (grad + mu * v[k]);
                break;
            case OPT_ADAM:
                m[k] = b1 * m[k] + (1 - b1) * grad;
                s[k] = b2 * s[k] + (1 - b2) * grad * grad;
                x[k] -= lr * (m[k] / (1 - pow(b1, t))) / (sqrt(s[k] / (1 - pow(b2, t))) + eps);
                break;
            }
        }
        if (rel_diff(p[at.weight], x[0], 1e-6) > 1e-5 || rel_diff(p[at.bias], x[1], 1e-6) > 1e-5)
            fail_msg("optimizer %d step %d: weight %.8f want %.8f, bias %.8f want %.8f",
                     (int)kind, t, p[at.weight], x[0], p[at.bias], x[1]);
    }
    /* decay made the weight and the bias part */
    assert_true(fabs(x[0] - x[1]) > 1e-5);
    assert_true(fabs((double)p[at.weight] - p[at.bias]) > 1e-5);
    nb->destroy(e);
}

static void test_optimizer_steps(void **state)
{
    (void)state;
    check_optimizer(OPT_SGD);
    check_optimizer(OPT_NESTEROV);
    check_optimizer(OPT_ADAM);
}

static void test_evaluate(void **state)
{
    (void)state;
    workload w;
    engine_config cfg = make_config(16, OPT_SGD), odd = make_config(7, OPT_SGD);
    engine *e = make_engine("lenet", &w, &cfg), *e7 = make_engine("lenet", &w, &odd);
    synth_set train, test;
    assert_int_equal(synth_make(&train, 40, 28, 28, 10, 101), 0);
    assert_int_equal(synth_make(&test, 100, 28, 28, 10, 102), 0);
    float *params = initial_params(&w, 103);
    engine *both[2] = {e, e7};
    for (int i = 0; i < 2; i++) {
        nb->set_params(both[i], params);
        assert_int_equal(nb->bind_dataset(both[i], &train.d, &test.d), 0);
    }
    eval_counts c, c7;
    /* a limit that leaves a partial chunk */
    assert_int_equal(nb->evaluate(e, 37, &c), 0);
    assert_int_equal(c.classes, 10);
    assert_int_equal(c.count, 37);
    long sum = 0, per_class[10] = {0};
    for (int t = 0; t < 10; t++)
        for (int p = 0; p < 10; p++) {
            sum += c.confusion[t * 10 + p];
            per_class[t] += c.confusion[t * 10 + p];
        }
    assert_int_equal(sum, 37);
    for (int i = 0; i < 37; i++)
        per_class[test.labels[i]]--;
    for (int t = 0; t < 10; t++)
        assert_int_equal(per_class[t], 0); /* rows are the true labels */
    assert_true(isfinite(c.loss_sum) && c.loss_sum > 0);
    /* the chunk size does not change the answer */
    assert_int_equal(nb->evaluate(e7, 37, &c7), 0);
    assert_memory_equal(c.confusion, c7.confusion, sizeof c.confusion);
    assert_true(rel_diff(c.loss_sum, c7.loss_sum, 1) < 1e-6);
    /* all images when limit <= 0 or past the end */
    assert_int_equal(nb->evaluate(e, 0, &c), 0);
    assert_int_equal(c.count, 100);
    assert_int_equal(nb->evaluate(e, 1000, &c), 0);
    assert_int_equal(c.count, 100);
    sum = 0;
    for (int i = 0; i < 100; i++)
        sum += c.confusion[i];
    assert_int_equal(sum, 100);
    /* loss agrees with training's loss on the same images */
    assert_int_equal(nb->bind_dataset(e7, &test.d, &test.d), 0);
    const int32_t idx[7] = {0, 1, 2, 3, 4, 5, 6};
    float loss;
    assert_int_equal(nb->compute_gradients(e7, idx, 7, &loss), 0);
    assert_int_equal(nb->evaluate(e7, 7, &c7), 0);
    assert_true(rel_diff(c7.loss_sum / 7, loss, 1e-3) < 1e-5);
    free(params);
    synth_free(&train);
    synth_free(&test);
    nb->destroy(e);
    nb->destroy(e7);
}

static void test_errors(void **state)
{
    (void)state;
    char why[64] = "x";
    assert_int_equal(backend_runnable(nb, PREC_FP32, why, sizeof why), 1);
    assert_string_equal(nb->name, "naive");
    assert_true(nb->built);

    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    char err[256] = "";
    engine_config cfg = make_config(0, OPT_SGD);
    assert_null(backend_create(nb, &w, &cfg, err, sizeof err));
    assert_true(strlen(err) > 0 && !strchr(err, '\n'));
    cfg = make_config(4, OPT_SGD);
    cfg.precision = PREC_BF16;
    err[0] = '\0';
    assert_null(backend_create(nb, &w, &cfg, err, sizeof err));
    assert_true(strlen(err) > 0);

    cfg = make_config(4, OPT_SGD);
    engine *e = make_engine("lenet", &w, &cfg);
    const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float loss;
    /* no data bound yet */
    assert_int_not_equal(nb->compute_gradients(e, idx, 4, &loss), 0);
    eval_counts c;
    assert_int_not_equal(nb->evaluate(e, 0, &c), 0);
    synth_set data;
    assert_int_equal(synth_make(&data, 8, 28, 28, 10, 111), 0);
    dataset wrong = data.d;
    wrong.cols = 27;
    assert_int_not_equal(nb->bind_dataset(e, &wrong, NULL), 0);
    assert_true(strlen(nb->error(e)) > 0);
    assert_int_equal(nb->bind_dataset(e, &data.d, &data.d), 0);
    /* a batch past the configured size */
    assert_int_not_equal(nb->train_steps(e, idx, 8, 1, &loss), 0);
    assert_non_null(strstr(nb->error(e), "batch"));
    /* an index past the data */
    const int32_t bad[4] = {0, 1, 8, 2};
    assert_int_not_equal(nb->compute_gradients(e, bad, 4, &loss), 0);
    assert_non_null(strstr(nb->error(e), "index"));
    assert_int_equal(nb->compute_gradients(e, idx, 4, &loss), 0);
    assert_true(isfinite(loss));
    synth_free(&data);
    nb->destroy(e);
}

static void test_profile_and_describe(void **state)
{
    (void)state;
    workload w;
    engine_config cfg = make_config(8, OPT_ADAM);
    engine *e = make_engine("lenet", &w, &cfg);
    synth_set data;
    assert_int_equal(synth_make(&data, 16, 28, 28, 10, 121), 0);
    nb->bind_dataset(e, &data.d, &data.d);
    float *params = initial_params(&w, 122);
    nb->set_params(e, params);
    const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    layer_times t;
    assert_int_equal(nb->profile_layers(e, idx, 8, 2, &t), 0);
    assert_int_equal(t.n_layers, w.n_layers);
    double total = 0;
    for (int i = 0; i < w.n_layers; i++) {
        assert_true(t.forward_ms[i] >= 0 && t.backward_ms[i] >= 0);
        total += t.forward_ms[i] + t.backward_ms[i];
    }
    assert_true(total > 0);
    /* profiling leaves the model as it was: the next step matches a fresh
     * engine's */
    float *after = floats(w.param_count);
    nb->get_params(e, after);
    assert_memory_equal(after, params, sizeof(float) * w.param_count);
    engine *f = make_engine("lenet", &w, &cfg);
    nb->bind_dataset(f, &data.d, &data.d);
    nb->set_params(f, params);
    float le, lf;
    nb->train_steps(e, idx, 8, 1, &le);
    nb->train_steps(f, idx, 8, 1, &lf);
    assert_true(le == lf);
    size_t n;
    assert_memory_equal(nb->buffer(e, BUF_PARAMS, &n), nb->buffer(f, BUF_PARAMS, &n),
                        sizeof(float) * w.param_count);
    char buf[64];
    nb->describe(e, buf, sizeof buf);
    assert_string_equal(buf, "fp32, 1 thread");
    free(after), free(params);
    synth_free(&data);
    nb->destroy(e);
    nb->destroy(f);
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
        cmocka_unit_test(test_param_counts),
        CASE_TEST("test_network_gradients_lenet", test_network_gradients, &lenet_fp32),
        CASE_TEST("test_network_gradients_mlp", test_network_gradients, &mlp_fp32),
        CASE_TEST("test_network_gradients_lenet_fp64", test_network_gradients, &lenet_fp64),
        CASE_TEST("test_network_gradients_mlp_fp64", test_network_gradients, &mlp_fp64),
        cmocka_unit_test(test_training_lowers_loss),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_partial_batch),
        cmocka_unit_test(test_optimizer_steps),
        cmocka_unit_test(test_evaluate),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_profile_and_describe),
    };
    return cmocka_run_group_tests_name("naive", tests, NULL, NULL);
}
