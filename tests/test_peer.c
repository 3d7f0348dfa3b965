/* The pytorch-cpu peer against the naive reference: from the same
 * parameters and batches, the same loss at each of the first 8 steps
 * within 2e-5 relative for sgd, nesterov and adam, then the same
 * parameters and evaluation; a short last batch; parameters round-trip
 * bitwise; a bad request is answered with an error and the peer goes on.
 * Skipped (visibly) where no python3 with torch is found.
 *
 * Why 2e-5: both compute in fp32 from the same floats and differ only in
 * the order of their sums (PyTorch's oneDNN/BLAS kernels against the naive
 * loops), about 1e-6 relative in a loss per step; over 8 steps the
 * momentum carries the parameter differences at most tenfold. The
 * synthetic images carry noise everywhere, so no pool window or ReLU sits
 * on a near tie that would send a gradient another way. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/engine.h"
#include "backends/registry.h"
#include "harness/run/config.h"
#include "harness/run/init.h"
#include "tests/testing.h"

enum { TRAIN = 300, TEST = 100, BATCH = 32, STEPS = 8, SHORT = 20 };

static const backend *naive, *peer;

static int find_backends(void **state)
{
    (void)state;
    naive = backend_find("naive");
    peer = backend_find("pytorch-cpu");
    return naive && peer ? 0 : -1;
}

/* Skips the test (cmocka prints SKIPPED) when the peer cannot run here. */
static void need_peer(void)
{
    char why[512];
    if (!backend_runnable(peer, PREC_FP32, why, sizeof why)) {
        print_message("pytorch-cpu cannot run here: %s\n", why);
        skip();
    }
}

static engine_config make_config(optimizer_kind kind)
{
    engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.batch_size = BATCH;
    cfg.opt = (optimizer_config){kind, kind == OPT_ADAM ? 0.001f : 0.01f, 0.9f, 5e-4f, 0.9f,
                                 0.999f, 1e-8f};
    cfg.threads = 1;
    cfg.precision = PREC_FP32;
    return cfg;
}

typedef struct pair {
    workload w;
    engine *ref, *peer;
    synth_set train, test;
    float *init;
} pair;

static void pair_open(pair *p, optimizer_kind kind)
{
    assert_int_equal(workload_get("lenet", &p->w), 0);
    engine_config cfg = make_config(kind);
    char err[512] = "";
    p->ref = backend_create(naive, &p->w, &cfg, err, sizeof err);
    if (!p->ref)
        fail_msg("naive: %s", err);
    p->peer = backend_create(peer, &p->w, &cfg, err, sizeof err);
    if (!p->peer)
        fail_msg("pytorch-cpu: %s", err);
    assert_int_equal(synth_make(&p->train, TRAIN, 28, 28, 10, 301), 0);
    assert_int_equal(synth_make(&p->test, TEST, 28, 28, 10, 302), 0);
    p->init = malloc(sizeof(float) * p->w.param_count);
    assert_non_null(p->init);
    init_params(&p->w, 303, p->init);
    assert_int_equal(naive->ops->set_params(p->ref, p->init), 0);
    assert_int_equal(naive->ops->bind_dataset(p->ref, &p->train.d, &p->test.d), 0);
    if (peer->ops->set_params(p->peer, p->init) != 0 ||
        peer->ops->bind_dataset(p->peer, &p->train.d, &p->test.d) != 0)
        fail_msg("setup: %s", peer->ops->error(p->peer));
}

static void pair_close(pair *p)
{
    naive->ops->destroy(p->ref);
    peer->ops->destroy(p->peer);
    synth_free(&p->train);
    synth_free(&p->test);
    free(p->init);
}

static long correct_of(const eval_counts *ev)
{
    long c = 0;
    for (int k = 0; k < ev->classes; k++)
        c += ev->confusion[k * ev->classes + k];
    return c;
}

static void check_same_training(optimizer_kind kind)
{
    pair p;
    pair_open(&p, kind);
    int32_t order[TRAIN];
    epoch_order(304, 0, TRAIN, 1, order);

    /* in two calls (3 + 5 steps), as the harness hands out chunks */
    float ref_loss[STEPS], peer_loss[STEPS];
    assert_int_equal(naive->ops->train_steps(p.ref, order, BATCH, STEPS, ref_loss), 0);
    if (peer->ops->train_steps(p.peer, order, BATCH, 3, peer_loss) != 0 ||
        peer->ops->train_steps(p.peer, order + 3 * BATCH, BATCH, STEPS - 3, peer_loss + 3) != 0)
        fail_msg("train: %s", peer->ops->error(p.peer));
    for (int s = 0; s < STEPS; s++) {
        double d = rel_diff(ref_loss[s], peer_loss[s], 1e-6);
        if (!(d <= 2e-5))
            fail_msg("%s step %d: naive loss %.9g, pytorch-cpu %.9g (%.2g relative)",
                     optimizer_name(kind), s + 1, ref_loss[s], peer_loss[s], d);
    }

    /* a short last batch, as at the end of an epoch */
    float ref_short, peer_short;
    const int32_t *tail = order + STEPS * BATCH;
    assert_int_equal(naive->ops->train_steps(p.ref, tail, SHORT, 1, &ref_short), 0);
    assert_int_equal(peer->ops->train_steps(p.peer, tail, SHORT, 1, &peer_short), 0);
    assert_true(rel_diff(ref_short, peer_short, 1e-6) <= 2e-5);

    float *a = malloc(sizeof(float) * p.w.param_count), *b = malloc(sizeof(float) * p.w.param_count);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(naive->ops->get_params(p.ref, a), 0);
    assert_int_equal(peer->ops->get_params(p.peer, b), 0);
    double num = 0, den = 0;
    for (size_t i = 0; i < p.w.param_count; i++)
        num += (double)(a[i] - b[i]) * (a[i] - b[i]), den += (double)a[i] * a[i];
    if (!(sqrt(num / den) <= 1e-5))
        fail_msg("parameters after %d steps differ by %.2g (L2, relative)", STEPS + 1,
                 sqrt(num / den));

    eval_counts ra, pa;
    assert_int_equal(naive->ops->evaluate(p.ref, 0, &ra), 0);
    assert_int_equal(peer->ops->evaluate(p.peer, 0, &pa), 0);
    assert_int_equal(pa.classes, 10);
    assert_int_equal(pa.count, TEST);
    assert_true(rel_diff(ra.loss_sum, pa.loss_sum, 1e-6) <= 1e-4);
    assert_true(labs(correct_of(&ra) - correct_of(&pa)) <= 1);
    /* a limit scores the first images only */
    assert_int_equal(peer->ops->evaluate(p.peer, 30, &pa), 0);
    assert_int_equal(pa.count, 30);
    free(a), free(b);
    pair_close(&p);
}

static const optimizer_kind sgd = OPT_SGD, nesterov = OPT_NESTEROV, adam = OPT_ADAM;

/* *state: the optimizer */
static void test_same_training(void **state)
{
    need_peer();
    check_same_training(*(const optimizer_kind *)*state);
}

/* Parameters come back bitwise; a bad batch index is answered with an
 * error naming it, and the peer still trains afterwards. */
static void test_round_trip_and_errors(void **state)
{
    (void)state;
    need_peer();
    pair p;
    pair_open(&p, OPT_SGD);
    float *back = malloc(sizeof(float) * p.w.param_count);
    assert_non_null(back);
    assert_int_equal(peer->ops->get_params(p.peer, back), 0);
    assert_memory_equal(back, p.init, sizeof(float) * p.w.param_count);

    int32_t bad[BATCH] = {0};
    bad[5] = TRAIN; /* one past the end */
    float loss;
    assert_int_not_equal(peer->ops->train_steps(p.peer, bad, BATCH, 1, &loss), 0);
    if (!strstr(peer->ops->error(p.peer), "index"))
        fail_msg("error message: %s", peer->ops->error(p.peer));
    bad[5] = 1;
    if (peer->ops->train_steps(p.peer, bad, BATCH, 1, &loss) != 0)
        fail_msg("after an error: %s", peer->ops->error(p.peer));
    assert_true(isfinite(loss));
    free(back);
    pair_close(&p);
}

/* The bf16 peer (CPU autocast) against the fp32 peer from the same
 * parameters and batches: every loss finite, each within BF16_LOSS_BOUND
 * relative of the fp32 peer's, and not all equal to it (autocast did
 * something).
 *
 * Why 3e-2: autocast rounds the inputs and weights of each convolution and
 * dense layer to bf16 (8 significant bits, unit roundoff 2^-9 = 2e-3) and
 * sums in fp32; a product of two rounded operands is off by at most 2^-8
 * relative, and five such layers in a row compound to about 5 x 2^-8 = 2e-2
 * in the logits at worst (the errors of a sum have both signs, so less in
 * practice). The loss of a batch moves by no more than the logits' error
 * times the largest logit, which at these scales (losses near ln 10) keeps
 * it within that relative order; 8 steps at lr 0.01 let the parameters
 * drift apart by a small part of that. Measured here (PyTorch 1.13, Zen 4):
 * at most 1e-4. */
#define BF16_LOSS_BOUND 3e-2

static void test_bf16_autocast(void **state)
{
    (void)state;
    need_peer();
    char why[512];
    if (!backend_runnable(peer, PREC_BF16, why, sizeof why)) {
        print_message("pytorch-cpu cannot run bf16 here: %s\n", why);
        skip();
    }
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    engine_config cfg = make_config(OPT_NESTEROV);
    char err[512] = "";
    engine *fp32 = backend_create(peer, &w, &cfg, err, sizeof err);
    if (!fp32)
        fail_msg("pytorch-cpu fp32: %s", err);
    cfg.precision = PREC_BF16;
    engine *bf16 = backend_create(peer, &w, &cfg, err, sizeof err);
    if (!bf16)
        fail_msg("pytorch-cpu bf16: %s", err);
    char details[256];
    peer->ops->describe(bf16, details, sizeof details);
    if (!strstr(details, "autocast bf16"))
        fail_msg("bf16 peer's details: %s", details);
    synth_set train, test;
    assert_int_equal(synth_make(&train, TRAIN, 28, 28, 10, 301), 0);
    assert_int_equal(synth_make(&test, TEST, 28, 28, 10, 302), 0);
    float *init = malloc(sizeof(float) * w.param_count);
    assert_non_null(init);
    init_params(&w, 303, init);
    engine *both[2] = {fp32, bf16};
    for (int k = 0; k < 2; k++)
        if (peer->ops->set_params(both[k], init) != 0 ||
            peer->ops->bind_dataset(both[k], &train.d, &test.d) != 0)
            fail_msg("setup: %s", peer->ops->error(both[k]));
    int32_t order[TRAIN];
    epoch_order(304, 0, TRAIN, 1, order);
    float loss32[STEPS], loss16[STEPS];
    if (peer->ops->train_steps(fp32, order, BATCH, STEPS, loss32) != 0)
        fail_msg("fp32 train: %s", peer->ops->error(fp32));
    if (peer->ops->train_steps(bf16, order, BATCH, STEPS, loss16) != 0)
        fail_msg("bf16 train: %s", peer->ops->error(bf16));
    double largest = 0;
    for (int s = 0; s < STEPS; s++) {
        if (!isfinite(loss16[s]))
            fail_msg("bf16 step %d: loss %g", s + 1, loss16[s]);
        double d = rel_diff(loss32[s], loss16[s], 1e-6);
        print_message("step %d: fp32 %.6f bf16 %.6f (%.2g relative)\n", s + 1, loss32[s],
                      loss16[s], d);
        if (!(d <= BF16_LOSS_BOUND))
            fail_msg("bf16 step %d: loss %.6f against fp32's %.6f (%.2g relative, bound %.0e)",
                     s + 1, loss16[s], loss32[s], d, BF16_LOSS_BOUND);
        if (d > largest)
            largest = d;
    }
    /* fp32 against fp32 agrees to about 1e-6: bf16 rounding shows above that */
    if (!(largest > 1e-5))
        fail_msg("bf16 losses within %.2g of fp32's: autocast seems not to have run", largest);
    eval_counts ev;
    assert_int_equal(peer->ops->evaluate(bf16, 0, &ev), 0);
    assert_int_equal(ev.count, TEST);
    assert_true(isfinite(ev.loss_sum));
    peer->ops->destroy(fp32);
    peer->ops->destroy(bf16);
    synth_free(&train);
    synth_free(&test);
    free(init);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE_TEST("test_sgd", test_same_training, &sgd),
        CASE_TEST("test_nesterov", test_same_training, &nesterov),
        CASE_TEST("test_adam", test_same_training, &adam),
        cmocka_unit_test(test_round_trip_and_errors),
        cmocka_unit_test(test_bf16_autocast),
    };
    return cmocka_run_group_tests(tests, find_backends, NULL);
}
