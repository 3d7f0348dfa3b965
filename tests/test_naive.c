/* The naive backend: the whole network's gradients against central
 * differences, the optimiser against hand-computed steps, and the engine's
 * bookkeeping (parameter counts, training lowers the loss, determinism,
 * partial batches, evaluation, errors, profile). Its layers are
 * tests/test_naive_layers.c's. */
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
#include "tests/checks.h"
#include "tests/testing.h"
#include "workloads/workload.h"

extern const backend naive_backend;
static const backend *const nb = &naive_backend;

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
        assert_non_null(nb->dp->buffer(e, BUF_PARAMS, &n));
        assert_int_equal(n, want[i]);
        assert_non_null(nb->dp->buffer(e, BUF_GRADS, &n));
        assert_int_equal(n, want[i]);
        assert_non_null(nb->dp->buffer(e, BUF_OPT_STATE, &n));
        assert_int_equal(n, 2 * want[i]); /* adam: m and s */
        assert_int_equal(nb->dp->buffer_space, MEM_HOST);
        nb->ops->destroy(e);
    }
    /* nesterov keeps one float per parameter, sgd none */
    workload w;
    engine_config cfg = make_config(4, OPT_NESTEROV);
    engine *e = make_engine("mlp", &w, &cfg);
    size_t n = 0;
    nb->dp->buffer(e, BUF_OPT_STATE, &n);
    assert_int_equal(n, w.param_count);
    nb->ops->destroy(e);
    cfg = make_config(4, OPT_SGD);
    e = make_engine("mlp", &w, &cfg);
    nb->dp->buffer(e, BUF_OPT_STATE, &n);
    assert_int_equal(n, 0);
    nb->ops->destroy(e);
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
    assert_int_equal(nb->dp->compute_gradients(e, idx, batch, &loss), 0);
    return nb->ops->last_loss(e);
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
    assert_int_equal(nb->ops->bind_dataset(e, &data.d, &data.d), 0);

    rng r = {62};
    float *params = initial_params(&w, 63);
    for (int i = 0; i < w.n_layers; i++) /* biases away from zero too */
        for (size_t k = 0; k < w.layers[i].bias_count; k++)
            params[w.layers[i].bias_offset + k] = (float)(0.1 * rng_normal(&r));
    assert_int_equal(nb->ops->set_params(e, params), 0);
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
    nb->ops->destroy(e);
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
    assert_int_equal(nb->ops->bind_dataset(e, &data.d, &data.d), 0);
    float *params = initial_params(&w, 72);
    assert_int_equal(nb->ops->set_params(e, params), 0);
    int32_t *idx = malloc(sizeof(int32_t) * batch * steps);
    assert_non_null(idx);
    for (int s = 0; s < batch * steps; s++)
        idx[s] = s % 256;
    float losses[40];
    assert_int_equal(nb->ops->train_steps(e, idx, batch, steps, losses), 0);
    const double first = mean(losses, 8), last = mean(losses + steps - 8, 8);
    if (!(last < 0.5 * first))
        fail_msg("%s: mean loss of the first 8 steps %.4f, of the last 8 %.4f", wname, first,
                 last);
    free(idx), free(params);
    synth_free(&data);
    nb->ops->destroy(e);
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
        assert_int_equal(nb->ops->bind_dataset(all[i], &data.d, &data.d), 0);
        assert_int_equal(nb->ops->set_params(all[i], params), 0);
    }
    int32_t idx[32];
    epoch_order(83, 0, 32, 1, idx);
    float la[4], lb[4], lc[4];
    assert_int_equal(nb->ops->train_steps(a, idx, batch, steps, la), 0);
    assert_int_equal(nb->ops->train_steps(b, idx, batch, steps, lb), 0);
    for (int s = 0; s < steps; s++) {
        assert_int_equal(nb->dp->compute_gradients(c, idx + s * batch, batch, &lc[s]), 0);
        assert_int_equal(nb->dp->apply_update(c, 1.0f), 0);
    }
    assert_memory_equal(la, lb, sizeof la);
    assert_memory_equal(la, lc, sizeof la);
    float *pa = floats(w.param_count), *pb = floats(w.param_count), *pc = floats(w.param_count);
    nb->ops->get_params(a, pa);
    nb->ops->get_params(b, pb);
    nb->ops->get_params(c, pc);
    assert_memory_equal(pa, pb, sizeof(float) * w.param_count);
    assert_memory_equal(pa, pc, sizeof(float) * w.param_count);
    assert_memory_not_equal(pa, params, sizeof(float) * w.param_count); /* it trained */
    free(pa), free(pb), free(pc), free(params);
    synth_free(&data);
    for (int i = 0; i < 3; i++)
        nb->ops->destroy(all[i]);
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
    nb->ops->bind_dataset(a, &data.d, NULL);
    nb->ops->bind_dataset(b, &data.d, NULL);
    nb->ops->set_params(a, params);
    nb->ops->set_params(b, params);
    const int32_t idx[10] = {1, 4, 9, 16, 25, 2, 3, 5, 7, 11};
    float la[2], lb[2];
    assert_int_equal(nb->ops->train_steps(a, idx, 5, 2, la), 0);
    assert_int_equal(nb->ops->train_steps(b, idx, 5, 2, lb), 0);
    assert_memory_equal(la, lb, sizeof la);
    size_t n;
    assert_memory_equal(nb->dp->buffer(a, BUF_PARAMS, &n), nb->dp->buffer(b, BUF_PARAMS, &n),
                        sizeof(float) * w.param_count);
    free(params);
    synth_free(&data);
    nb->ops->destroy(a);
    nb->ops->destroy(b);
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
    float *p = nb->dp->buffer(e, BUF_PARAMS, &n), *g = nb->dp->buffer(e, BUF_GRADS, &n);
    const double w0 = 0.5, g0 = 0.2, scale = 0.5;
    const double lr = cfg.opt.lr, mu = cfg.opt.momentum, wd = cfg.opt.weight_decay;
    const double b1 = cfg.opt.beta1, b2 = cfg.opt.beta2, eps = cfg.opt.eps;
    double v[2] = {0, 0}, m[2] = {0, 0}, s[2] = {0, 0}, x[2] = {w0, w0};
    p[at.weight] = p[at.bias] = (float)w0;
    for (int t = 1; t <= 2; t++) {
        g[at.weight] = g[at.bias] = (float)g0;
        assert_int_equal(nb->dp->apply_update(e, (float)scale), 0);
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
    nb->ops->destroy(e);
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
        nb->ops->set_params(both[i], params);
        assert_int_equal(nb->ops->bind_dataset(both[i], &train.d, &test.d), 0);
    }
    eval_counts c, c7;
    /* a limit that leaves a partial chunk */
    assert_int_equal(nb->ops->evaluate(e, 37, &c), 0);
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
    assert_int_equal(nb->ops->evaluate(e7, 37, &c7), 0);
    assert_memory_equal(c.confusion, c7.confusion, sizeof c.confusion);
    assert_true(rel_diff(c.loss_sum, c7.loss_sum, 1) < 1e-6);
    /* all images when limit <= 0 or past the end */
    assert_int_equal(nb->ops->evaluate(e, 0, &c), 0);
    assert_int_equal(c.count, 100);
    assert_int_equal(nb->ops->evaluate(e, 1000, &c), 0);
    assert_int_equal(c.count, 100);
    sum = 0;
    for (int i = 0; i < 100; i++)
        sum += c.confusion[i];
    assert_int_equal(sum, 100);
    /* loss agrees with training's loss on the same images */
    assert_int_equal(nb->ops->bind_dataset(e7, &test.d, &test.d), 0);
    const int32_t idx[7] = {0, 1, 2, 3, 4, 5, 6};
    float loss;
    assert_int_equal(nb->dp->compute_gradients(e7, idx, 7, &loss), 0);
    assert_int_equal(nb->ops->evaluate(e7, 7, &c7), 0);
    assert_true(rel_diff(c7.loss_sum / 7, loss, 1e-3) < 1e-5);
    free(params);
    synth_free(&train);
    synth_free(&test);
    nb->ops->destroy(e);
    nb->ops->destroy(e7);
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
    assert_int_not_equal(nb->dp->compute_gradients(e, idx, 4, &loss), 0);
    eval_counts c;
    assert_int_not_equal(nb->ops->evaluate(e, 0, &c), 0);
    synth_set data;
    assert_int_equal(synth_make(&data, 8, 28, 28, 10, 111), 0);
    dataset wrong = data.d;
    wrong.cols = 27;
    assert_int_not_equal(nb->ops->bind_dataset(e, &wrong, NULL), 0);
    assert_true(strlen(nb->ops->error(e)) > 0);
    assert_int_equal(nb->ops->bind_dataset(e, &data.d, &data.d), 0);
    /* a batch past the configured size */
    assert_int_not_equal(nb->ops->train_steps(e, idx, 8, 1, &loss), 0);
    assert_non_null(strstr(nb->ops->error(e), "batch"));
    /* an index past the data */
    const int32_t bad[4] = {0, 1, 8, 2};
    assert_int_not_equal(nb->dp->compute_gradients(e, bad, 4, &loss), 0);
    assert_non_null(strstr(nb->ops->error(e), "index"));
    assert_int_equal(nb->dp->compute_gradients(e, idx, 4, &loss), 0);
    assert_true(isfinite(loss));
    synth_free(&data);
    nb->ops->destroy(e);
}

static void test_profile_and_describe(void **state)
{
    (void)state;
    workload w;
    engine_config cfg = make_config(8, OPT_ADAM);
    engine *e = make_engine("lenet", &w, &cfg);
    synth_set data;
    assert_int_equal(synth_make(&data, 16, 28, 28, 10, 121), 0);
    nb->ops->bind_dataset(e, &data.d, &data.d);
    float *params = initial_params(&w, 122);
    nb->ops->set_params(e, params);
    const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    expect_profile(nb, e, idx, 8, 2, &w);
    /* profiling leaves the model as it was: the next step matches a fresh
     * engine's */
    float *after = floats(w.param_count);
    nb->ops->get_params(e, after);
    assert_memory_equal(after, params, sizeof(float) * w.param_count);
    engine *f = make_engine("lenet", &w, &cfg);
    nb->ops->bind_dataset(f, &data.d, &data.d);
    nb->ops->set_params(f, params);
    float le, lf;
    nb->ops->train_steps(e, idx, 8, 1, &le);
    nb->ops->train_steps(f, idx, 8, 1, &lf);
    assert_true(le == lf);
    size_t n;
    assert_memory_equal(nb->dp->buffer(e, BUF_PARAMS, &n), nb->dp->buffer(f, BUF_PARAMS, &n),
                        sizeof(float) * w.param_count);
    char buf[64];
    nb->ops->describe(e, buf, sizeof buf);
    assert_string_equal(buf, "fp32, 1 thread");
    free(after), free(params);
    synth_free(&data);
    nb->ops->destroy(e);
    nb->ops->destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
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

