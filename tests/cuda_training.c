/* Part of test_cuda (included by tests/test_cuda.c): the engine trained
 * against the naive reference from the same parameters and batches (fp32
 * within 1e-4 per step; tf32, bf16 and fp16 within the tolerances argued
 * at check_low_precision; fp64 within 1e-10), bitwise repeatability, graph
 * on == graph off and data on device == staged, poisoned outputs fully
 * overwritten. */
#include "tests/cuda_testing.h"

/* A training run: which engine, what it is given, what comes out. */
typedef struct run {
    const char *workload;
    engine_config cfg;
    int steps;
    uint64_t seed;
    /* outputs */
    float *losses, *params;
    eval_counts eval;
    char details[256];
} run;

#define TRAIN_IMAGES 1024
#define TEST_IMAGES 300

/* Trains b as r says on a synthetic set: epochs of a shuffled order, then
 * one smaller batch, then scores the test set. */
static void train(const backend *b, run *r)
{
    workload w;
    assert_int_equal(workload_get(r->workload, &w), 0);
    synth_set tr, te;
    assert_int_equal(synth_make(&tr, TRAIN_IMAGES, 28, 28, 10, r->seed), 0);
    assert_int_equal(synth_make(&te, TEST_IMAGES, 28, 28, 10, r->seed + 1), 0);
    char err[512] = "";
    engine *e = backend_create(b, &w, &r->cfg, err, sizeof err);
    if (!e)
        fail_msg("%s: create: %s", b->name, err);
    float *init = floats(w.param_count);
    init_params(&w, r->seed + 2, init);
    if (b->ops->set_params(e, init) || b->ops->bind_dataset(e, &tr.d, &te.d))
        fail_msg("%s: setup: %s", b->name, b->ops->error(e));
    const int B = r->cfg.batch_size, per_epoch = TRAIN_IMAGES / B;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(r->steps + per_epoch) * B);
    int32_t *order = malloc(sizeof(int32_t) * TRAIN_IMAGES);
    assert_non_null(idx);
    assert_non_null(order);
    for (int s = 0, epoch = -1; s < r->steps; s++) {
        if (s % per_epoch == 0)
            epoch_order(r->seed + 3, ++epoch, TRAIN_IMAGES, 1, order);
        memcpy(idx + (size_t)s * B, order + (size_t)(s % per_epoch) * B, sizeof(int32_t) * B);
    }
    r->losses = floats((size_t)r->steps + 1);
    for (int s = 0; s <= r->steps; s++)
        r->losses[s] = NAN; /* poisoned: every one must be written */
    /* in two calls, as the harness chunks an epoch */
    const int first = r->steps / 3;
    if (b->ops->train_steps(e, idx, B, first, r->losses) ||
        b->ops->train_steps(e, idx + (size_t)first * B, B, r->steps - first, r->losses + first))
        fail_msg("%s: train: %s", b->name, b->ops->error(e));
    const int rest = B / 2 + 1; /* a smaller last batch */
    if (b->ops->train_steps(e, order, rest, 1, r->losses + r->steps))
        fail_msg("%s: partial batch: %s", b->name, b->ops->error(e));
    r->params = floats(w.param_count);
    for (size_t i = 0; i < w.param_count; i++)
        r->params[i] = NAN;
    if (b->ops->get_params(e, r->params))
        fail_msg("%s: get_params: %s", b->name, b->ops->error(e));
    memset(&r->eval, 0xff, sizeof r->eval); /* poisoned */
    if (b->ops->evaluate(e, 0, &r->eval))
        fail_msg("%s: evaluate: %s", b->name, b->ops->error(e));
    r->details[0] = '\0';
    if (b->ops->describe)
        b->ops->describe(e, r->details, sizeof r->details);
    for (int s = 0; s <= r->steps; s++)
        if (!isfinite(r->losses[s]))
            fail_msg("%s: loss of step %d is %g", b->name, s, r->losses[s]);
    for (size_t i = 0; i < w.param_count; i++)
        if (!isfinite(r->params[i]))
            fail_msg("%s: parameter %zu is %g", b->name, i, r->params[i]);
    long counted = 0;
    assert_int_equal(r->eval.classes, 10);
    assert_int_equal(r->eval.count, TEST_IMAGES);
    for (int i = 0; i < 100; i++) {
        assert_true(r->eval.confusion[i] >= 0);
        counted += r->eval.confusion[i];
    }
    assert_int_equal(counted, TEST_IMAGES);
    assert_true(isfinite(r->eval.loss_sum) && r->eval.loss_sum > 0);
    free(idx), free(order), free(init);
    synth_free(&tr);
    synth_free(&te);
    b->ops->destroy(e);
}

static void run_free(run *r)
{
    free(r->losses);
    free(r->params);
    r->losses = r->params = NULL;
}

static size_t param_count(const char *wname)
{
    workload w;
    assert_int_equal(workload_get(wname, &w), 0);
    return w.param_count;
}

static long correct(const eval_counts *c)
{
    long n = 0;
    for (int k = 0; k < c->classes; k++)
        n += c->confusion[k * c->classes + k];
    return n;
}

/* Per-step losses within rel of the reference (floor abs_floor), final
 * parameters within param_rel (relative to max(|p|, 1e-2)), accuracy within
 * a few images. */
static void compare_to_reference(const run *ref, const run *got, double rel, double abs_floor,
                                 double param_rel, long accuracy_slack)
{
    double worst = 0;
    int worst_step = 0;
    for (int s = 0; s <= got->steps; s++) {
        const double d =
            fabs(got->losses[s] - ref->losses[s]) / fmax(fabs(ref->losses[s]), abs_floor);
        if (d > worst)
            worst = d, worst_step = s;
    }
    const double pd = max_rel_diff(got->params, ref->params, param_count(got->workload), 1e-2);
    print_message("%s: worst loss difference %.3g (step %d: %.6f vs %.6f), parameters %.3g, "
                  "correct %ld vs %ld; %s\n",
                  got->workload, worst, worst_step, got->losses[worst_step],
                  ref->losses[worst_step], pd, correct(&got->eval), correct(&ref->eval),
                  got->details);
    if (worst > rel)
        fail_msg("loss of step %d: %.7f, reference %.7f (relative %.3g > %.3g)", worst_step,
                 got->losses[worst_step], ref->losses[worst_step], worst, rel);
    if (pd > param_rel)
        fail_msg("final parameters differ by %.3g > %.3g", pd, param_rel);
    if (labs(correct(&got->eval) - correct(&ref->eval)) > accuracy_slack)
        fail_msg("%ld test images right, reference %ld", correct(&got->eval), correct(&ref->eval));
}

/* fp32 with deterministic cuDNN algorithms and no TF32 differs from the
 * naive loops only by summation order: 1e-4 relative per step over 50
 * steps, the parameters within 1e-3. */
static void check_fp32(const char *wname, optimizer_kind kind, int batch, int steps)
{
    run ref = {.workload = wname,
               .cfg = make_config(batch, kind, PREC_FP32),
               .steps = steps,
               .seed = 500 + (uint64_t)kind};
    run got = ref;
    train(naive(), &ref);
    train(cuda(), &got);
    compare_to_reference(&ref, &got, 1e-4, 1e-3, 1e-3, 2);
    /* bit-for-bit the same on a second run */
    run again = ref;
    train(cuda(), &again);
    assert_memory_equal(again.losses, got.losses, sizeof(float) * (size_t)(steps + 1));
    assert_memory_equal(again.params, got.params, sizeof(float) * param_count(wname));
    assert_memory_equal(again.eval.confusion, got.eval.confusion, sizeof got.eval.confusion);
    run_free(&ref), run_free(&got), run_free(&again);
}

typedef struct fp32_case {
    const char *workload;
    optimizer_kind kind;
    int batch, steps;
} fp32_case;

static const fp32_case fp32_lenet_nesterov = {"lenet", OPT_NESTEROV, 64, 50},
                       fp32_mlp_adam = {"mlp", OPT_ADAM, 32, 50},
                       fp32_lenet_sgd = {"lenet", OPT_SGD, 16, 20};

static void test_fp32(void **state)
{
    const fp32_case *c = *state;
    need_gpu();
    check_fp32(c->workload, c->kind, c->batch, c->steps);
}

/* Graph replay and eager steps, resident and staged data: the same kernels
 * on the same numbers, so bitwise equal. */
static void test_graph_and_staging_are_bitwise_equal(void **state)
{
    (void)state;
    need_gpu();
    const size_t n = param_count("lenet");
    run base = {.workload = "lenet",
                .cfg = make_config(64, OPT_NESTEROV, PREC_FP32),
                .steps = 30,
                .seed = 600};
    run variants[3] = {base, base, base};
    variants[0].cfg.cuda_graph = 0;
    variants[1].cfg.data_on_device = 0;
    variants[2].cfg.cuda_graph = 0;
    variants[2].cfg.data_on_device = 0;
    train(cuda(), &base);
    print_message("graph on, resident: %s\n", base.details);
    assert_non_null(strstr(base.details, "CUDA graph"));
    for (int v = 0; v < 3; v++) {
        train(cuda(), &variants[v]);
        print_message("variant %d: %s\n", v, variants[v].details);
        assert_memory_equal(variants[v].losses, base.losses, sizeof(float) * 31);
        assert_memory_equal(variants[v].params, base.params, sizeof(float) * n);
        assert_memory_equal(variants[v].eval.confusion, base.eval.confusion,
                            sizeof base.eval.confusion);
        assert_true(variants[v].eval.loss_sum == base.eval.loss_sum);
        run_free(&variants[v]);
    }
    run_free(&base);
}

/* Mixed and reduced precisions against fp32 naive, tolerances by the
 * precision's unit roundoff u and what 50 steps can compound:
 *  - tf32 (10-bit mantissa in the products, fp32 sums, u = 2^-11): per-step
 *    loss within 1e-2 relative.
 *  - fp16 (activations, gradients and weight copy in 10-bit mantissa,
 *    fp32 accumulation and master weights, loss scaled by 1024): each layer
 *    output rounds at 2^-11 ~ 5e-4 relative; through four layers and 50
 *    steps of a trajectory that drifts apart, 2e-2 relative (floor 2e-2).
 *  - bf16 (7-bit mantissa, u = 2^-8 ~ 4e-3, eight times fp16's): 6e-2
 *    relative (floor 5e-2).
 * The parameters must stay within 10x those bounds (they drift further than
 * the loss, which averages over the batch), and the test accuracy within 3%
 * of the test images. None of these bounds has been calibrated on a GPU yet;
 * a failure that is a few times over them on an otherwise sane run means the
 * bound, not the code, needs another look. */
static void check_low_precision(precision prec, double rel, double floor_)
{
    const int steps = 50;
    run ref = {.workload = "lenet",
               .cfg = make_config(64, OPT_NESTEROV, PREC_FP32),
               .steps = steps,
               .seed = 700};
    train(naive(), &ref);
    run got = ref;
    got.cfg.precision = prec;
    train(cuda(), &got);
    compare_to_reference(&ref, &got, rel, floor_, 10 * rel, TEST_IMAGES * 3 / 100);
    /* the model learned something */
    assert_true(got.losses[steps - 1] < 0.8 * got.losses[0]);
    /* and repeats bitwise */
    run again = ref;
    again.cfg.precision = prec;
    train(cuda(), &again);
    assert_memory_equal(again.losses, got.losses, sizeof(float) * (steps + 1));
    run_free(&ref), run_free(&got), run_free(&again);
}

typedef struct low_precision_case {
    precision prec;
    double rel, floor;
} low_precision_case;

static const low_precision_case tf32_bounds = {PREC_TF32, 1e-2, 1e-2},
                                fp16_bounds = {PREC_FP16, 2e-2, 2e-2},
                                bf16_bounds = {PREC_BF16, 6e-2, 5e-2};

static void test_low_precision(void **state)
{
    const low_precision_case *c = *state;
    need_gpu();
    check_low_precision(c->prec, c->rel, c->floor);
}

/* fp64: cuDNN (CUDNN_DATA_DOUBLE) and cuBLAS (CUBLAS_COMPUTE_64F) against
 * the naive reference in double, one step per call, on the losses before
 * they are rounded to float (last_loss): within 1e-10 relative, the bound
 * argued in tests/test_equivalence.c (other summation orders, and CUDA's
 * double exp and log within 2 ulp). All the steps in one call must give
 * the same doubles bit for bit as one step per call, and an fp64 engine hands out no
 * float buffers, so data parallelism refuses it. */
static void fp64_losses(const backend *b, const char *wname, optimizer_kind kind, int steps,
                        int per_call, double *out)
{
    workload w;
    assert_int_equal(workload_get(wname, &w), 0);
    synth_set tr, te;
    assert_int_equal(synth_make(&tr, TRAIN_IMAGES, 28, 28, 10, 901), 0);
    assert_int_equal(synth_make(&te, TEST_IMAGES, 28, 28, 10, 902), 0);
    const engine_config cfg = make_config(32, kind, PREC_FP64);
    char err[512] = "";
    engine *e = backend_create(b, &w, &cfg, err, sizeof err);
    if (!e)
        fail_msg("%s fp64: create: %s", b->name, err);
    float *init = floats(w.param_count);
    init_params(&w, 903, init);
    if (b->ops->set_params(e, init) || b->ops->bind_dataset(e, &tr.d, &te.d))
        fail_msg("%s fp64: setup: %s", b->name, b->ops->error(e));
    size_t n = 1;
    assert_null(b->dp->buffer(e, BUF_GRADS, &n));
    assert_int_equal(n, 0);
    int32_t *order = malloc(sizeof(int32_t) * TRAIN_IMAGES);
    assert_non_null(order);
    epoch_order(904, 0, TRAIN_IMAGES, 1, order);
    for (int s = 0; s < steps; s += per_call) {
        float losses[64];
        if (b->ops->train_steps(e, order + (size_t)s * 32, 32, per_call, losses))
            fail_msg("%s fp64: train: %s", b->name, b->ops->error(e));
        out[s + per_call - 1] = backend_last_loss(b, e);
        if (per_call == 1 && !isfinite(out[s]))
            fail_msg("%s fp64: loss of step %d is %g", b->name, s, out[s]);
    }
    free(order), free(init);
    synth_free(&tr);
    synth_free(&te);
    b->ops->destroy(e);
}

static void test_fp64(void **state)
{
    (void)state;
    need_gpu();
    enum { STEPS = 30 };
    const char *wnames[2] = {"lenet", "mlp"};
    const optimizer_kind kinds[2] = {OPT_NESTEROV, OPT_ADAM};
    for (int t = 0; t < 2; t++) {
        double ref[STEPS], got[STEPS], graphed[STEPS];
        fp64_losses(naive(), wnames[t], kinds[t], STEPS, 1, ref);
        fp64_losses(cuda(), wnames[t], kinds[t], STEPS, 1, got);
        fp64_losses(cuda(), wnames[t], kinds[t], STEPS, STEPS, graphed);
        int at;
        const double worst = worst_rel_diff(ref, got, STEPS, 1e-6, &at);
        print_message("%s fp64: worst loss difference from naive %.3g (step %d: %.15g vs %.15g)\n",
                      wnames[t], worst, at, got[at], ref[at]);
        if (!(worst <= 1e-10))
            fail_msg("%s fp64: loss of step %d is %.15g, naive's %.15g (relative %.3g > 1e-10)",
                     wnames[t], at, got[at], ref[at], worst);
        assert_memory_equal(&graphed[STEPS - 1], &got[STEPS - 1], sizeof(double));
    }
}

/* This part's tests, in the order test_cuda runs them. */
#define CUDA_TRAINING_TESTS                                                                        \
    CASE_TEST("test_fp32_lenet_nesterov", test_fp32, &fp32_lenet_nesterov),                        \
    CASE_TEST("test_fp32_mlp_adam", test_fp32, &fp32_mlp_adam),                                    \
    CASE_TEST("test_fp32_lenet_sgd", test_fp32, &fp32_lenet_sgd),                                  \
    cmocka_unit_test(test_graph_and_staging_are_bitwise_equal),                                    \
    CASE_TEST("test_tf32", test_low_precision, &tf32_bounds),                                      \
    CASE_TEST("test_fp16", test_low_precision, &fp16_bounds),                                      \
    CASE_TEST("test_bf16", test_low_precision, &bf16_bounds),                                      \
    cmocka_unit_test(test_fp64)
