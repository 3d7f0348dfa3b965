/* Model parallelism: stages of a workload (workload_stage) hold exactly
 * the parameters of the whole; the by-layers cut of LeNet is the
 * convolution stack, then the dense layers; N workers by layers or within
 * layers, with M micro-batches, and G data-parallel groups of them, train
 * like one engine with the same batch, step by step; a 2-worker split
 * holds the memory per worker that the split predicts; failures come back
 * as errors. Every backend that offers stages and runs here is checked
 * (naive always; blas and cuda when built and runnable, skipped visibly
 * otherwise). */
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
#include "harness/run/init.h"
#include "parallel/data_parallel.h"
#include "parallel/model_parallel.h"
#include "tests/testing.h"
#include "tests/training.h"

/* ---------------------------------------------------------------------- */
/* Stages of a workload                                                     */

static void test_stages_hold_the_whole_vector(void **state)
{
    (void)state;
    const char *names[] = {"lenet", "mlp"};
    for (int k = 0; k < 2; k++) {
        workload w;
        assert_int_equal(workload_get(names[k], &w), 0);
        float *whole = malloc(sizeof(float) * w.param_count);
        float *back = calloc(w.param_count, sizeof(float));
        assert_non_null(whole);
        assert_non_null(back);
        for (size_t i = 0; i < w.param_count; i++)
            whole[i] = (float)i;
        /* within layers, 3 parts of every single-parameter-layer segment */
        size_t total = 0;
        int first = 0;
        for (int i = 1; i <= w.n_layers; i++) {
            if (i < w.n_layers && !w.layers[i].weight_count)
                continue;
            for (int p = 0; p < 3; p++) {
                workload s;
                assert_null(workload_stage(&w, first, i, p, 3, &s));
                assert_true(s.is_stage);
                float *sp = malloc(sizeof(float) * (s.param_count ? s.param_count : 1));
                assert_non_null(sp);
                workload_stage_params_from(&s, sp, whole);
                workload_stage_params_to(&s, sp, back);
                total += s.param_count;
                free(sp);
            }
            first = i;
        }
        assert_int_equal(total, w.param_count);
        assert_memory_equal(back, whole, sizeof(float) * w.param_count);
        free(whole);
        free(back);
    }
}

static void test_stage_shapes_and_refusals(void **state)
{
    (void)state;
    workload w, s;
    assert_int_equal(workload_get("lenet", &w), 0);
    /* conv2 alone, half its filters: 20 input channels, 25 outputs */
    assert_null(workload_stage(&w, 2, 4, 1, 2, &s));
    assert_int_equal(s.input.c, 20);
    assert_int_equal(s.layers[0].units, 25);
    assert_int_equal(s.layers[1].out.c, 25);
    assert_int_equal(s.layers[0].parent_weight_offset,
                     w.layers[2].weight_offset + 25 * w.layers[2].weight_count / 50);
    /* the dense layers whole are a stage whose output is the logits */
    assert_null(workload_stage(&w, 4, 7, 0, 1, &s));
    assert_int_equal(s.classes, 10);
    assert_int_equal(s.param_count, w.layers[4].weight_count + w.layers[4].bias_count +
                                        w.layers[6].weight_count + w.layers[6].bias_count);
    /* two layers with parameters in one share, more parts than units */
    assert_non_null(workload_stage(&w, 0, 3, 0, 2, &s));
    assert_non_null(workload_stage(&w, 6, 7, 0, 11, &s));
    assert_non_null(workload_stage(&w, 3, 3, 0, 1, &s));
    /* a stage is refused where a whole network is asked for */
    assert_null(workload_stage(&w, 0, 4, 0, 1, &s));
    engine_config c = test_config(8, OPT_SGD, 1);
    char err[256] = "";
    const backend *naive = backend_find("naive");
    assert_null(backend_create(naive, &s, &c, err, sizeof err));
    assert_non_null(strstr(err, "model-parallel stage"));
}

static void test_layer_cuts(void **state)
{
    (void)state;
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    int cut[8];
    assert_int_equal(mp_layer_cuts(&w, 2, cut), 0);
    /* the convolution stack, then the dense layers */
    assert_int_equal(cut[0], 0);
    assert_int_equal(cut[1], 4);
    assert_int_equal(cut[2], 7);
    assert_int_equal(mp_layer_cuts(&w, 7, cut), 0);
    for (int k = 0; k <= 7; k++)
        assert_int_equal(cut[k], k);
    assert_int_equal(mp_layer_cuts(&w, 8, cut), -1);
}

/* ---------------------------------------------------------------------- */
/* Training                                                                 */

enum { STEPS = 20, BATCH = 24 };

static void train(const backend *b, engine *e, const setup *s, float *losses)
{
    /* in calls of 1, 2, 3, ... steps, as the harness cuts them */
    for (int done = 0, chunk = 1; done < STEPS; done += chunk, chunk++) {
        const int k = chunk < STEPS - done ? chunk : STEPS - done;
        if (b->ops->train_steps(e, s->order + (size_t)done * BATCH, BATCH, k, losses + done))
            fail_msg("%s: train_steps: %s", b->name, b->ops->error(e));
    }
}

/* The backend, or NULL after a visible skip when it cannot run here. */
static const backend *runnable(const char *name)
{
    const backend *b = backend_find(name);
    char why[256] = "";
    if (!b || !backend_runnable(b, PREC_FP32, why, sizeof why)) {
        print_message("%s cannot run here: %s\n", name, why);
        return NULL;
    }
    return b;
}

/* Parameters after 20 steps. The gradients differ from the single
 * engine's by summation order only (input gradients summed over workers,
 * micro-batches added by engines that do not add image by image), about
 * 1e-7 relative per step, and the whole vector stays within 1e-5 of the
 * single engine's (relative, L2: param_l2). Single weights can move more:
 * once a forward value differs in its last bit, a max-pool window whose
 * two largest inputs were nearly tied can send its gradient to the other
 * input, which moves the weights that see that input by up to lr x their
 * gradient, ~2e-5 (measured 1.3e-3 relative at the 1e-2 floor); Adam's
 * division by the root of the second moment does the same to weights
 * whose gradient is near zero. */
static const double param_rel = 5e-3, param_l2 = 1e-5;

/* A near-tie in a pool or ReLU that goes the other way (the argument in
 * tests/test_equivalence.c) shows as a jump in the losses, not a drift:
 * rounding-level agreement up to it, then up to 1e-4 relative as the
 * momentum carries the changed step on (measured: blas by layers x3, 3
 * micro-batches, built -O1 for the sanitisers: 1e-7 for 16 steps, then
 * 1.4e-5 and 4.3e-5). So the losses are held to 1e-5 over the first
 * TIE_FREE_STEPS steps and up to the first step beyond them that exceeds
 * it; from there on to 1e-2 (a peer's bound), and the parameters to
 * test_equivalence's bounds after a tie: 1e-3 absolute each, 1e-3 L2. */
enum { TIE_FREE_STEPS = 10 };
static const double loss_rel = 1e-5, tie_loss_rel = 1e-2, tie_param_abs = 1e-3,
                    tie_param_l2 = 1e-3;

/* The first step past TIE_FREE_STEPS whose loss differs by more than
 * loss_rel, or -1; a difference before it fails the test. */
static int tie_step(const char *what, const float *got, const float *ref)
{
    for (int t = 0; t < STEPS; t++) {
        const double d = rel_diff(got[t], ref[t], 0.0);
        if (d <= loss_rel)
            continue;
        if (t < TIE_FREE_STEPS || isnan(d))
            fail_msg("%s: step %d's loss differs by %.3g (relative), more than %.3g", what, t,
                     d, loss_rel);
        return t;
    }
    return -1;
}

/* ||a - b|| / ||b|| */
static double l2_rel(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(d / r);
}

/* `many` (a coordinator over inner) against inner alone, same batch, every
 * step's loss within 1e-5 relative and the parameters after STEPS steps
 * within param_rel (or the bounds after a tie, above); evaluation gives the
 * same predictions. */
static void check_same_training(const backend *inner, const backend *many, const char *wname,
                                optimizer_kind kind)
{
    setup s;
    make_setup(&s, wname, STEPS * BATCH);
    engine_config c = test_config(BATCH, kind, 1);
    engine *one = start(inner, &s, &c), *split = start(many, &s, &c);
    float ref[STEPS], got[STEPS];
    train(inner, one, &s, ref);
    train(many, split, &s, got);
    char what[160];
    snprintf(what, sizeof what, "%s on %s, %s: losses", many->name, wname,
             kind == OPT_ADAM ? "adam" : kind == OPT_NESTEROV ? "nesterov" : "sgd");
    for (int t = 0; t < STEPS; t++)
        assert_true(isfinite(got[t]));
    const int tie = tie_step(what, got, ref);
    if (tie < 0)
        expect_close(what, got, ref, STEPS, loss_rel, 0.0);
    else {
        print_message("%s: a tie at step %d\n", what, tie);
        expect_close(what, got + tie, ref + tie, STEPS - tie, tie_loss_rel, 0.0);
    }
    assert_true(got[STEPS - 1] < got[0]); /* it learnt: not two idle runs */
    float *p1 = params_of(inner, one, s.w.param_count);
    float *pn = params_of(many, split, s.w.param_count);
    snprintf(what, sizeof what, "%s on %s: parameters after %d steps", many->name, wname, STEPS);
    if (tie < 0)
        expect_close(what, pn, p1, s.w.param_count, param_rel, 1e-2);
    else /* relative to 1: absolute below 1, where every LeNet weight is */
        expect_close(what, pn, p1, s.w.param_count, tie_param_abs, 1.0);
    const double l2 = l2_rel(pn, p1, s.w.param_count);
    print_message("%s: relative L2 difference %.3g\n", what, l2);
    assert_true(l2 <= (tie < 0 ? param_l2 : tie_param_l2));
    eval_counts a, b;
    assert_int_equal(inner->ops->evaluate(one, 0, &a), 0);
    if (many->ops->evaluate(split, 0, &b))
        fail_msg("%s: evaluate: %s", many->name, many->ops->error(split));
    assert_int_equal(b.count, a.count);
    assert_true(rel_diff(b.loss_sum, a.loss_sum, 1e-6) < 1e-4);
    long agree = 0;
    for (int k = 0; k < a.classes * a.classes; k++)
        agree += a.confusion[k] == b.confusion[k];
    assert_int_equal(agree, a.classes * a.classes);
    free(p1);
    free(pn);
    inner->ops->destroy(one);
    many->ops->destroy(split);
    free_setup(&s);
}

static void model_runs(const char *inner_name)
{
    const backend *inner = runnable(inner_name);
    if (!inner) {
        skip();
        return;
    }
    const mp_split splits[2] = {MP_SPLIT_LAYERS, MP_SPLIT_FILTERS};
    for (int k = 0; k < 2; k++) {
        const int configs[][2] = {{2, 1}, {2, 4}, {3, 3}, {1, 2}};
        for (int c = 0; c < 4; c++) {
            mp_options o = {.split = splits[k], .workers = configs[c][0],
                            .micro_batches = configs[c][1]};
            char name[64];
            snprintf(name, sizeof name, "%s by %s x%d, %d micro-batches", inner->name,
                     mp_split_name(o.split), o.workers, o.micro_batches);
            const backend *mp = mp_wrap(inner, &o, name);
            assert_non_null(mp);
            check_same_training(inner, mp, "lenet", c == 1 ? OPT_ADAM : OPT_NESTEROV);
        }
    }
    mp_options o = {.split = MP_SPLIT_LAYERS, .workers = 2, .micro_batches = 2};
    check_same_training(inner, mp_wrap(inner, &o, NULL), "mlp", OPT_SGD);
}

static void test_naive_model_parallel_equals_one(void **state)
{
    (void)state;
    model_runs("naive");
}

static void test_blas_model_parallel_equals_one(void **state)
{
    (void)state;
    model_runs("blas");
}

static void test_cuda_model_parallel_equals_one(void **state)
{
    (void)state;
    model_runs("cuda");
}

/* Hybrid: 2 data-parallel groups of 2 model-parallel workers. */
static void test_hybrid_equals_one(void **state)
{
    (void)state;
    const backend *naive = backend_find("naive");
    const mp_split splits[2] = {MP_SPLIT_LAYERS, MP_SPLIT_FILTERS};
    for (int k = 0; k < 4; k++) {
        /* and groups of one worker each, both splits */
        mp_options o = {.split = splits[k % 2], .workers = k < 2 ? 2 : 1, .micro_batches = 2};
        dp_options d = {.replicas = 2};
        char name[64];
        snprintf(name, sizeof name, "naive, 2 groups of %d by %s", o.workers,
                 mp_split_name(o.split));
        const backend *hybrid = dp_wrap(mp_wrap(naive, &o, NULL), &d, name);
        assert_non_null(hybrid);
        check_same_training(naive, hybrid, "lenet", OPT_NESTEROV);
    }
}

/* The input pipeline changes where the pixels are converted, not what is
 * trained: bitwise the same losses and parameters as without it. */
static void test_prefetch_trains_the_same(void **state)
{
    (void)state;
    const backend *naive = backend_find("naive");
    setup s;
    make_setup(&s, "lenet", STEPS * BATCH);
    engine_config c = test_config(BATCH, OPT_NESTEROV, 1);
    const mp_split splits[2] = {MP_SPLIT_LAYERS, MP_SPLIT_FILTERS};
    for (int k = 0; k < 2; k++) {
        float losses[2][STEPS], *params[2];
        for (int depth = 0; depth < 2; depth++) {
            mp_options o = {.split = splits[k], .workers = 2, .micro_batches = 3,
                            .prefetch = depth * 2};
            const backend *mp = mp_wrap(naive, &o, NULL);
            engine *e = start(mp, &s, &c);
            train(mp, e, &s, losses[depth]);
            params[depth] = params_of(mp, e, s.w.param_count);
            mp->ops->destroy(e);
        }
        assert_memory_equal(losses[0], losses[1], sizeof losses[0]);
        assert_memory_equal(params[0], params[1], sizeof(float) * s.w.param_count);
        free(params[0]);
        free(params[1]);
    }
    free_setup(&s);
}

/* ---------------------------------------------------------------------- */
/* Memory per worker                                                        */

/* What worker `worker` of b's engine holds (-1: the engine's own). */
static memory_use memory_of(const backend *b, const workload *w, int batch, int worker)
{
    engine_config c = test_config(batch, OPT_NESTEROV, 1);
    char err[256] = "";
    engine *e = backend_create(b, w, &c, err, sizeof err);
    if (!e)
        fail_msg("%s: %s", b->name, err);
    memory_use m;
    if (worker < 0)
        assert_int_equal(backend_memory_use(b, e, &m), 1);
    else
        assert_int_equal(mp_worker_memory(e, worker, &m), 0);
    b->ops->destroy(e);
    return m;
}

static size_t layer_params(const workload *w, int first, int last)
{
    size_t n = 0;
    for (int i = first; i < last; i++)
        n += w->layers[i].weight_count + w->layers[i].bias_count;
    return n;
}

static void test_memory_per_worker(void **state)
{
    (void)state;
    const backend *naive = backend_find("naive");
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    const memory_use one = memory_of(naive, &w, 64, -1);
    assert_int_equal(one.params, w.param_count * sizeof(float));
    assert_int_equal(one.opt_state, w.param_count * sizeof(float)); /* nesterov: velocity */

    /* within layers: each worker holds half of every layer's parameters,
     * gradients and optimiser state (LeNet's 20, 50, 500 and 10 split
     * evenly), and less memory in all */
    mp_options o = {.split = MP_SPLIT_FILTERS, .workers = 2, .micro_batches = 1};
    const backend *filters = mp_wrap(naive, &o, NULL);
    for (int i = 0; i < 2; i++) {
        const memory_use half = memory_of(filters, &w, 64, i);
        assert_int_equal(half.params, one.params / 2);
        assert_int_equal(half.grads, one.grads / 2);
        assert_int_equal(half.opt_state, one.opt_state / 2);
        assert_true(memory_use_total(&half) < memory_use_total(&one));
    }

    /* by layers: the convolution stack's parameters on worker 0, the dense
     * layers' on worker 1; each holds its layers' activations, and both
     * the one crossing between them (pool2's output, the dense input) */
    o.split = MP_SPLIT_LAYERS;
    const backend *layers = mp_wrap(naive, &o, NULL);
    const memory_use conv = memory_of(layers, &w, 64, 0), dense = memory_of(layers, &w, 64, 1);
    assert_int_equal(conv.params, layer_params(&w, 0, 4) * sizeof(float));
    assert_int_equal(dense.params, layer_params(&w, 4, 7) * sizeof(float));
    assert_int_equal(conv.activations + dense.activations,
                     one.activations + 64 * sizeof(float) * shape3_size(w.layers[3].out));
    assert_true(memory_use_total(&conv) < memory_use_total(&one));
    assert_true(memory_use_total(&dense) < memory_use_total(&one));
    memory_use largest;
    engine_config c = test_config(64, OPT_NESTEROV, 1);
    char err[256];
    engine *e = backend_create(layers, &w, &c, err, sizeof err);
    assert_non_null(e);
    assert_int_equal(backend_memory_use(layers, e, &largest), 1);
    assert_int_equal(memory_use_total(&largest), memory_use_total(&conv) > memory_use_total(&dense)
                                                     ? memory_use_total(&conv)
                                                     : memory_use_total(&dense));
    layers->ops->destroy(e);

    /* micro-batches: 4 slots of a quarter batch hold what one batch held */
    o.micro_batches = 4;
    const memory_use piped = memory_of(mp_wrap(naive, &o, NULL), &w, 64, 0);
    assert_int_equal(piped.activations, conv.activations);
}

/* ---------------------------------------------------------------------- */
/* Failures                                                                 */

static void test_refusals_and_failures(void **state)
{
    (void)state;
    const backend *naive = backend_find("naive");
    setup s;
    make_setup(&s, "lenet", STEPS * BATCH);
    char err[256] = "";
    engine_config c = test_config(BATCH, OPT_SGD, 1);
    mp_options o = {.split = MP_SPLIT_LAYERS, .workers = 8, .micro_batches = 1};
    assert_null(backend_create(mp_wrap(naive, &o, NULL), &s.w, &c, err, sizeof err));
    assert_non_null(strstr(err, "more workers than the network has layers"));
    o = (mp_options){.split = MP_SPLIT_FILTERS, .workers = 11, .micro_batches = 1};
    assert_null(backend_create(mp_wrap(naive, &o, NULL), &s.w, &c, err, sizeof err));
    assert_non_null(strstr(err, "fewer channels or units than there are workers"));
    o = (mp_options){.split = MP_SPLIT_LAYERS, .workers = 2, .micro_batches = 65};
    assert_null(backend_create(mp_wrap(naive, &o, NULL), &s.w, &c, err, sizeof err));
    assert_non_null(strstr(err, "micro-batches"));
    o.micro_batches = 2;
    const backend *mp = mp_wrap(naive, &o, NULL);
    char why[128];
    assert_int_equal(backend_runnable(mp, PREC_FP64, why, sizeof why), 0);
    c.precision = PREC_FP64;
    assert_null(backend_create(mp, &s.w, &c, err, sizeof err));
    assert_non_null(strstr(err, "fp64"));

    /* a bad batch or image comes back as an error, and the engine goes on */
    const mp_split splits[2] = {MP_SPLIT_LAYERS, MP_SPLIT_FILTERS};
    for (int k = 0; k < 2; k++) {
        o.split = splits[k];
        mp = mp_wrap(naive, &o, NULL);
        c.precision = PREC_FP32;
        engine *e = start(mp, &s, &c);
        float loss;
        assert_int_not_equal(mp->ops->train_steps(e, s.order, BATCH + 1, 1, &loss), 0);
        assert_non_null(strstr(mp->ops->error(e), "batch of 25 images"));
        int32_t bad[BATCH];
        memcpy(bad, s.order, sizeof bad);
        bad[5] = STEPS * BATCH;
        assert_int_not_equal(mp->ops->train_steps(e, bad, BATCH, 1, &loss), 0);
        assert_non_null(strstr(mp->ops->error(e), "out of range"));
        assert_int_equal(mp->ops->train_steps(e, s.order, BATCH, 1, &loss), 0);
        assert_true(isfinite(loss));
        mp->ops->destroy(e);
    }
    free_setup(&s);
}

/* A wrapper's precisions and libraries are asked of its inner backend, so
 * they are right before it is probed and probing it changes nothing that
 * its readers see. The blas module may not have loaded yet: its
 * precisions come with it. */
static void test_wrappers_follow_their_inner_backend(void **state)
{
    (void)state;
    const char *const names[] = {"naive", "blas"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const backend *inner = backend_find(names[i]);
        const mp_options m = {.split = MP_SPLIT_LAYERS, .workers = 2, .micro_batches = 2};
        const dp_options d = {.replicas = 2};
        const backend *mp = mp_wrap(inner, &m, "follows-mp");
        const backend *dp = dp_wrap(inner, &d, "follows-dp");
        assert_non_null(mp);
        assert_non_null(dp);
        const backend mp_before = *mp, dp_before = *dp;
        char why[512];
        const int runs = backend_runnable(inner, PREC_FP32, why, sizeof why);
        assert_int_equal(backend_runnable(dp, PREC_FP32, why, sizeof why), runs);
        assert_int_equal(backend_runnable(mp, PREC_FP32, why, sizeof why), runs);
        assert_memory_equal(&mp_before, mp, sizeof *mp);
        assert_memory_equal(&dp_before, dp, sizeof *dp);
        /* data parallelism keeps what it refuses (fp64) so as to say why;
         * the stages leave out what cannot cross between them */
        const unsigned all = backend_precisions(inner);
        assert_int_equal(backend_precisions(dp), all);
        assert_int_equal(backend_precisions(mp), all & ~(1u << PREC_FP64 | 1u << PREC_FP16));
        char a[512], b[512];
        backend_library_info(inner, a, sizeof a);
        backend_library_info(dp, b, sizeof b);
        assert_string_equal(a, b);
        backend_library_info(mp, b, sizeof b);
        assert_string_equal(a, b);
    }
}

/* Each engine names the arithmetic its products run on (the peak its row
 * is held to), and the coordinators name their inner engines'. A backend
 * that does not run here is skipped, and says so. */
static void test_engines_name_their_arithmetic(void **state)
{
    (void)state;
    setup s;
    make_setup(&s, "lenet", STEPS * BATCH);
    const struct {
        const char *name;
        precision p;
        const char *want;
    } cases[] = {
        {"naive", PREC_FP32, ARITHMETIC_FP32}, {"naive", PREC_FP64, ARITHMETIC_FP64},
        {"blas", PREC_FP32, ARITHMETIC_FP32},  {"blas", PREC_FP64, ARITHMETIC_FP64},
        {"blas", PREC_BF16, ARITHMETIC_BF16_DOT}, {"direct", PREC_FP32, ARITHMETIC_FP32},
    }; /* onednn's: test_onednn */
    int checked = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const backend *b = backend_find(cases[i].name);
        char why[512];
        if (!b || !backend_runnable(b, cases[i].p, why, sizeof why)) {
            printf("      skipped: %s %s (%s)\n", cases[i].name, precision_name(cases[i].p),
                   b ? why : "not built");
            continue;
        }
        engine_config c = test_config(BATCH, OPT_SGD, 1);
        c.precision = cases[i].p;
        engine *e = start(b, &s, &c);
        assert_string_equal(backend_arithmetic(b, e, cases[i].p), cases[i].want);
        b->ops->destroy(e);
        if (cases[i].p != PREC_FP64) { /* data parallelism refuses fp64 */
            const dp_options d = {.replicas = 2};
            const backend *dp = dp_wrap(b, &d, NULL);
            e = start(dp, &s, &c);
            assert_string_equal(backend_arithmetic(dp, e, cases[i].p), cases[i].want);
            dp->ops->destroy(e);
        }
        checked++;
    }
    /* naive runs everywhere: at least its two cases were checked */
    assert_true(checked >= 2);
    free_setup(&s);
}

/* The precision table: each row in its member's place, names distinct,
 * and the rules read from it (crossing_refusal, the arithmetic a row is
 * held to) as they were written before the table. */
static void test_precision_table(void **state)
{
    (void)state;
    for (int p = 0; p < PRECISION_COUNT; p++) {
        const precision_info *row = precision_of((precision)p);
        assert_int_equal(row->precision, p);
        assert_true(row->storage_bytes > 0);
        assert_true(row->loss_rel > 0 && row->loss_floor > 0);
        for (int q = 0; q < p; q++)
            assert_string_not_equal(row->name, precision_name((precision)q));
    }
    assert_string_equal(precision_name(PRECISION_COUNT), "unknown");
    assert_string_equal(precision_name((precision)-1), "unknown");
    assert_non_null(crossing_refusal(CROSS_REDUCE, PREC_FP64));
    assert_non_null(crossing_refusal(CROSS_STAGE, PREC_FP64));
    assert_non_null(crossing_refusal(CROSS_STAGE, PREC_FP16));
    assert_null(crossing_refusal(CROSS_REDUCE, PREC_FP16));
    assert_null(crossing_refusal(CROSS_STAGE, PREC_BF16));
    assert_null(crossing_refusal(CROSS_STAGE, PREC_FP32));
    assert_string_equal(precision_of(PREC_BF16)->arithmetic, ARITHMETIC_BF16_DOT);
    assert_string_equal(precision_of(PREC_FP64)->arithmetic, ARITHMETIC_FP64);
    assert_true(precision_of(PREC_FP16)->loss_scaled && !precision_of(PREC_BF16)->loss_scaled);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_hold_the_whole_vector),
        cmocka_unit_test(test_stage_shapes_and_refusals),
        cmocka_unit_test(test_layer_cuts),
        cmocka_unit_test(test_naive_model_parallel_equals_one),
        cmocka_unit_test(test_blas_model_parallel_equals_one),
        cmocka_unit_test(test_cuda_model_parallel_equals_one),
        cmocka_unit_test(test_hybrid_equals_one),
        cmocka_unit_test(test_prefetch_trains_the_same),
        cmocka_unit_test(test_memory_per_worker),
        cmocka_unit_test(test_refusals_and_failures),
        cmocka_unit_test(test_wrappers_follow_their_inner_backend),
        cmocka_unit_test(test_engines_name_their_arithmetic),
        cmocka_unit_test(test_precision_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
