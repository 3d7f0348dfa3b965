/* The blas backend from the inside (and, built with LB_LAYERS_DIRECT by
 * tests/test_direct.c, the direct backend, the same engine with the direct
 * kernels, once per build of them this CPU runs): 1 and 2 threads and both
 * ways of splitting the GEMMs; a product set of the test's own over the
 * engine (the same floats, a call per product); the optional contract
 * (compute_gradients, apply_update, buffers, profile); errors; bf16; the
 * sgemm peak probe; for direct, forcing a build of its kernels. Its layers against the naive
 * layers are tests/test_blas_layers.c's, its model-parallel stages
 * tests/test_blas_stages.c's (fixtures: tests/chwn_engine.h). Training
 * against the naive reference, step by step, with each optimiser and
 * workload, and its evaluation, are in tests/test_equivalence.c, which
 * holds every registered backend to it; the tolerances used here are
 * argued there. */
#include "tests/chwn_engine.h"

#include <stdatomic.h>

#include "backends/blas/bf16.h"
#include "backends/common/bf16_round.h"
#include "backends/blas/sgemm_peak.h"
#ifdef LB_LAYERS_DIRECT
#include "backends/direct/bf16/bf16_fma.h"
#endif

static void run_blas(const char *workload_name, int threads, chwn_split split, int steps,
                     float *losses, float **params, size_t *count)
{
    workload w;
    assert_int_equal(workload_get(workload_name, &w), 0);
    engine_config c = config(OPT_NESTEROV, threads);
    engine *e = start(bb, &w, &c);
    chwn_set_split(e, split);
    int threads_used = 0, devices = -1, replicas = 0;
    bb->ops->placement(e, &threads_used, &devices, &replicas);
    assert_int_equal(threads_used, threads);
    assert_int_equal(devices, 0);
    assert_int_equal(replicas, 1);
    int32_t *order = batch_order(steps, BATCH);
    assert_int_equal(bb->ops->train_steps(e, order, BATCH, steps, losses), 0);
    *params = floats(w.param_count);
    *count = w.param_count;
    bb->ops->get_params(e, *params);
    free(order);
    bb->ops->destroy(e);
}

/* The engine cuts every product into tiles chosen by shape alone, so one
 * thread and two compute the very same floats: with 2 threads held to
 * naive for 50 steps (test_equivalence.c), 1 thread is too. */
static void threads_agree_bitwise(void **state)
{
    (void)state;
    const char *names[] = {"lenet", "mlp"};
    for (int k = 0; k < 2; k++) {
        /* as many steps as test_equivalence.c holds 2 threads to naive */
        float l1[50], l2[50], *p1, *p2;
        size_t n1, n2;
        run_blas(names[k], 1, CHWN_SPLIT_OWN, 50, l1, &p1, &n1);
        run_blas(names[k], 2, CHWN_SPLIT_OWN, 50, l2, &p2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(l1, l2, sizeof l1);
        assert_memory_equal(p1, p2, sizeof(float) * n1);
        free(p1);
        free(p2);
    }
}

/* A product set defined outside the engine (here, one that counts its
 * calls and hands each to the backend's own fp32 set) needs no build of
 * the engine: it trains the very same floats, and is called once per
 * product, a group's convolution or a whole dense layer, never per
 * element. */
static const chwn_products *counted_set;
static atomic_int product_calls[5];

static void count_forward_conv(const chwn_products *set, float *out, const float *in,
                               const float *weight_bias, float *scratch, int B, int C, int H,
                               int W, int K, int kernel, int stride, int threads)
{
    (void)set;
    atomic_fetch_add(&product_calls[0], 1);
    counted_set->forward_conv(counted_set, out, in, weight_bias, scratch, B, C, H, W, K, kernel,
                              stride, threads);
}

static void count_backward_conv_params(const chwn_products *set, float *d_weight_bias,
                                       const float *d_out, const float *in, float *scratch, int B,
                                       int C, int H, int W, int K, int kernel, int stride,
                                       int threads)
{
    (void)set;
    atomic_fetch_add(&product_calls[1], 1);
    counted_set->backward_conv_params(counted_set, d_weight_bias, d_out, in, scratch, B, C, H, W,
                                      K, kernel, stride, threads);
}

static void count_backward_conv_data(const chwn_products *set, float *d_in, const float *d_out,
                                     const float *weight_bias, float *scratch, int B, int C,
                                     int H, int W, int K, int kernel, int stride, int threads)
{
    (void)set;
    atomic_fetch_add(&product_calls[2], 1);
    counted_set->backward_conv_data(counted_set, d_in, d_out, weight_bias, scratch, B, C, H, W, K,
                                    kernel, stride, threads);
}

static void count_forward_dense(const chwn_products *set, float *out, const float *in,
                                const float *weight, const float *bias, float *scratch, int B,
                                int n_in, int n_out, const chwn_team *team)
{
    (void)set;
    atomic_fetch_add(&product_calls[3], 1);
    counted_set->forward_dense(counted_set, out, in, weight, bias, scratch, B, n_in, n_out, team);
}

static void count_backward_dense(const chwn_products *set, float *d_weight, float *d_bias,
                                 float *d_in, const float *d_out, const float *in,
                                 const float *weight, float *scratch, int B, int n_in, int n_out,
                                 const chwn_team *team)
{
    (void)set;
    atomic_fetch_add(&product_calls[4], 1);
    counted_set->backward_dense(counted_set, d_weight, d_bias, d_in, d_out, in, weight, scratch, B,
                                n_in, n_out, team);
}

static void a_product_set_of_its_own_trains_the_same(void **state)
{
    (void)state;
    enum { STEPS = 3 };
    workload w = workload_named("lenet");
    const engine_config c = config(OPT_NESTEROV, 2);
    chwn_products counting = *products;
    counting.forward_conv = count_forward_conv;
    counting.backward_conv_params = count_backward_conv_params;
    counting.backward_conv_data = count_backward_conv_data;
    counting.forward_dense = count_forward_dense;
    counting.backward_dense = count_backward_dense;
    counted_set = products;
    for (int k = 0; k < 5; k++)
        atomic_store(&product_calls[k], 0);
    char err[256] = "";
    engine *plain = start(bb, &w, &c);
    engine *own = chwn_create_f32(bb, &counting, &w, &c, err, sizeof err);
    if (!own)
        fail_msg("chwn_create_f32: %s", err);
    float *p = floats(w.param_count);
    init_params(&w, 123, p);
    assert_int_equal(bb->ops->set_params(own, p), 0);
    assert_int_equal(bb->ops->bind_dataset(own, &train_set.d, &test_set.d), 0);
    int32_t *order = batch_order(STEPS, BATCH);
    float l_plain[STEPS], l_own[STEPS], *q = floats(w.param_count);
    assert_int_equal(bb->ops->train_steps(plain, order, BATCH, STEPS, l_plain), 0);
    assert_int_equal(bb->ops->train_steps(own, order, BATCH, STEPS, l_own), 0);
    assert_memory_equal(l_plain, l_own, sizeof l_plain);
    bb->ops->get_params(plain, p);
    bb->ops->get_params(own, q);
    assert_memory_equal(p, q, sizeof(float) * w.param_count);
    /* per step: each convolution once a group forward and for its weight
     * gradient, and for its input gradient but the first layer's; each
     * dense layer once each way */
    const int groups = (BATCH + products->group_images - 1) / products->group_images;
    int convs = 0, inner_convs = 0, denses = 0;
    for (int i = 0; i < w.n_layers; i++) {
        convs += w.layers[i].kind == LAYER_CONV;
        inner_convs += w.layers[i].kind == LAYER_CONV && i > 0;
        denses += w.layers[i].kind == LAYER_DENSE;
    }
    const int expected[5] = {STEPS * groups * convs, STEPS * groups * convs,
                             STEPS * groups * inner_convs, STEPS * denses, STEPS * denses};
    for (int k = 0; k < 5; k++)
        if (atomic_load(&product_calls[k]) != expected[k])
            fail_msg("product %d of the set called %d times, not %d", k,
                     atomic_load(&product_calls[k]), expected[k]);
    free(order), free(p), free(q);
    bb->ops->destroy(plain);
    bb->ops->destroy(own);
}

/* Letting OpenBLAS split each GEMM computes the same model, with sums in
 * another order: the tolerances against naive (test_equivalence.c) apply. */
static void library_split_agrees(void **state)
{
    (void)state;
    float lo[10], ll[10], *po, *pl;
    size_t n, m;
    run_blas("lenet", 2, CHWN_SPLIT_OWN, 10, lo, &po, &n);
    run_blas("lenet", 2, CHWN_SPLIT_LIBRARY, 10, ll, &pl, &m);
    for (int s = 0; s < 10; s++)
        assert_true(rel_diff(lo[s], ll[s], 1e-6) < 1e-4);
    assert_true(max_rel_diff(po, pl, n, 1e-2) < 1e-4);
    free(po);
    free(pl);
}

/* The parameters (`params` floats) and optimiser state (`state` floats)
 * of engine a, of backend a_of, and of b: the same bits. */
static void expect_same_model(const backend *a_of, engine *a, const backend *b_of, engine *b,
                              size_t params, size_t state)
{
    const engine_buffer which[2] = {BUF_PARAMS, BUF_OPT_STATE};
    const size_t count[2] = {params, state};
    for (int k = 0; k < 2; k++) {
        size_t n, m;
        const float *pa = a_of->dp->buffer(a, which[k], &n),
                    *pb = b_of->dp->buffer(b, which[k], &m);
        assert_int_equal(n, count[k]);
        assert_int_equal(m, count[k]);
        assert_memory_equal(pa, pb, sizeof(float) * count[k]);
    }
}

/* train_steps is compute_gradients then apply_update(1): same floats. */
static void train_steps_is_gradients_then_update(void **state)
{
    (void)state;
    workload w = workload_named("lenet");
    engine_config c = config(OPT_ADAM, 2);
    engine *a = start(bb, &w, &c), *b = start(bb, &w, &c);
    int32_t *order = batch_order(4, BATCH);
    float la[4], lb[4];
    assert_int_equal(bb->ops->train_steps(a, order, BATCH, 4, la), 0);
    for (int s = 0; s < 4; s++) {
        assert_int_equal(bb->dp->compute_gradients(b, order + s * BATCH, BATCH, &lb[s]), 0);
        assert_int_equal(bb->dp->apply_update(b, 1.0f), 0);
    }
    assert_memory_equal(la, lb, sizeof la);
    expect_same_model(bb, a, bb, b, w.param_count, 2 * w.param_count); /* adam: m and s */
    free(order);
    bb->ops->destroy(a);
    bb->ops->destroy(b);
}

/* apply_update(scale) through the threads' ranges is the shared update:
 * given the same gradients (as a coordinator would write them), the
 * parameters and momentum match naive's bit for bit. */
static void apply_update_matches_shared_update(void **state)
{
    (void)state;
    workload w = workload_named("lenet");
    engine_config c = config(OPT_NESTEROV, 2);
    engine *a = start(nb, &w, &c), *b = start(bb, &w, &c);
    size_t n, m;
    float *ga = nb->dp->buffer(a, BUF_GRADS, &n), *gb = bb->dp->buffer(b, BUF_GRADS, &m);
    assert_int_equal(n, m);
    rng r = {5};
    for (size_t i = 0; i < n; i++)
        ga[i] = gb[i] = (float)(rng_uniform(&r) - 0.5);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(nb->dp->apply_update(a, 0.5f), 0);
        assert_int_equal(bb->dp->apply_update(b, 0.5f), 0);
    }
    expect_same_model(nb, a, bb, b, w.param_count, w.param_count); /* nesterov: momentum */
    nb->ops->destroy(a);
    bb->ops->destroy(b);
}

/* ---------------------------------------------------------------------- */
/* Bookkeeping and errors                                                   */

static void profile_leaves_the_model_alone(void **state)
{
    (void)state;
    workload w = workload_named("lenet");
    engine_config c = config(OPT_NESTEROV, 2);
    engine *e = start(bb, &w, &c);
    int32_t *order = batch_order(2, BATCH);
    assert_int_equal(bb->ops->train_steps(e, order, BATCH, 1, NULL), 0);
    float *before = floats(w.param_count), *after = floats(w.param_count);
    bb->ops->get_params(e, before);
    expect_profile(bb, e, order, BATCH, 2, &w);
    bb->ops->get_params(e, after);
    assert_memory_equal(before, after, sizeof(float) * w.param_count);
    /* and training goes on as if no profile had run */
    engine *f = start(bb, &w, &c);
    assert_int_equal(bb->ops->train_steps(f, order, BATCH, 2, NULL), 0);
    assert_int_equal(bb->ops->train_steps(e, order + BATCH, BATCH, 1, NULL), 0);
    bb->ops->get_params(e, before);
    bb->ops->get_params(f, after);
    assert_memory_equal(before, after, sizeof(float) * w.param_count);
    layer_times t;
    assert_int_equal(bb->ops->profile_layers(e, order, BATCH, 0, &t), -1);
    free(before);
    free(after);
    free(order);
    bb->ops->destroy(e);
    bb->ops->destroy(f);
}

static void describes_itself(void **state)
{
    (void)state;
    char info[256] = "", text[256] = "", why[64] = "x";
    bb->library_info(bb->ctx, info, sizeof info);
#ifdef LB_LAYERS_DIRECT
    char expected[128];
    snprintf(expected, sizeof expected, "direct kernels %s (", direct_active()->isa);
    assert_int_equal(strncmp(info, expected, strlen(expected)), 0);
#else
    assert_int_equal(strncmp(info, "OpenBLAS ", 9), 0);
    assert_non_null(strchr(info, '('));
#endif
    assert_int_equal(backend_runnable(bb, PREC_FP32, why, sizeof why), 1);
    assert_string_equal(why, "");
    workload w = workload_named("mlp");
    engine_config c = config(OPT_SGD, 3);
    engine *e = start(bb, &w, &c);
    bb->ops->describe(e, text, sizeof text);
#ifdef LB_LAYERS_DIRECT
    snprintf(expected, sizeof expected, "fp32 (direct register tiles: %s), 3 threads, ISA %s",
             direct_active()->description, direct_active()->isa);
    if (!strstr(text, expected))
        fail_msg("describe: \"%s\", not \"%s...\"", text, expected);
#else
    assert_non_null(strstr(text, "fp32 (sgemm), 3 threads, OpenBLAS"));
#endif
    size_t n = 1;
    assert_non_null(bb->dp->buffer(e, BUF_OPT_STATE, &n));
    assert_int_equal(n, 0); /* sgd keeps no state */
    assert_int_equal(bb->dp->buffer_space, MEM_HOST);
    bb->ops->destroy(e);
    /* 0 threads means every core */
    c.threads = 0;
    e = start(bb, &w, &c);
    int threads = 0, devices, replicas;
    bb->ops->placement(e, &threads, &devices, &replicas);
    assert_true(threads >= 1);
    bb->ops->destroy(e);
}

static void bad_requests_fail_cleanly(void **state)
{
    (void)state;
    workload w = workload_named("lenet");
    char err[256] = "";
    engine_config c = config(OPT_NESTEROV, 2);
    c.precision = PREC_TF32; /* neither blas nor direct computes in it */
    assert_null(backend_create(bb, &w, &c, err, sizeof err));
    assert_non_null(strstr(err, "does not compute in tf32"));
    c = config(OPT_NESTEROV, 2);
    c.batch_size = 0;
    assert_null(backend_create(bb, &w, &c, err, sizeof err));
    assert_non_null(strstr(err, "batch"));

    c = config(OPT_NESTEROV, 2);
    engine *e = backend_create(bb, &w, &c, err, sizeof err);
    assert_non_null(e);
    int32_t idx[BATCH] = {0};
    eval_counts ev;
    assert_int_equal(bb->ops->train_steps(e, idx, BATCH, 1, NULL), -1);
    assert_non_null(strstr(bb->ops->error(e), "no training set"));
    assert_int_equal(bb->ops->evaluate(e, 0, &ev), -1);
    assert_non_null(strstr(bb->ops->error(e), "no test set"));
    assert_int_equal(bb->ops->bind_dataset(e, &train_set.d, &test_set.d), 0);
    assert_int_equal(bb->ops->train_steps(e, idx, BATCH + 1, 1, NULL), -1);
    assert_non_null(strstr(bb->ops->error(e), "batch of 33"));
    idx[3] = TRAIN_IMAGES;
    assert_int_equal(bb->ops->train_steps(e, idx, BATCH, 1, NULL), -1);
    assert_non_null(strstr(bb->ops->error(e), "outside"));
    dataset small = train_set.d;
    small.rows = 14;
    assert_int_equal(bb->ops->bind_dataset(e, &small, NULL), -1);
    assert_non_null(strstr(bb->ops->error(e), "14x28"));
    bb->ops->destroy(e);
    bb->ops->destroy(NULL);
}

/* An engine for bf16: mlp, sgd, 2 threads. */
static engine_config bf16_config(workload *w)
{
    assert_int_equal(workload_get("mlp", w), 0);
    engine_config c = config(OPT_SGD, 2);
    c.precision = PREC_BF16;
    return c;
}

/* Where bf16 runs: an engine that says `text` of itself. */
static void expect_bf16_described(const char *text)
{
    workload w;
    const engine_config c = bf16_config(&w);
    engine *e = start(bb, &w, &c);
    char said[256] = "";
    bb->ops->describe(e, said, sizeof said);
    if (!strstr(said, text))
        fail_msg("describe: \"%s\"", said);
    bb->ops->destroy(e);
}

#ifndef LB_LAYERS_DIRECT /* OpenBLAS's bf16 GEMM (direct runs bf16 wherever fp32 runs) */
/* Elsewhere: backend_runnable and create refuse it with the reason why. */
static void expect_bf16_refused(const char *why)
{
    print_message("bf16 not available here: %s\n", why);
    char runnable_why[512] = "", err[512] = "";
    workload w;
    const engine_config c = bf16_config(&w);
    assert_int_equal(backend_runnable(bb, PREC_BF16, runnable_why, sizeof runnable_why), 0);
    assert_string_equal(runnable_why, why);
    assert_null(backend_create(bb, &w, &c, err, sizeof err));
    assert_non_null(strstr(err, why));
}

/* bf16 operands are rounded to nearest, ties to even (the one rounding,
 * backends/common/bf16_round.h); --precision bf16 runs
 * where the CPU and OpenBLAS can, and is refused with the reason
 * elsewhere (here, on a CPU without AVX512_BF16). */
static void bf16_rounds_and_is_refused_with_its_reason(void **state)
{
    (void)state;
    assert_int_equal(lb_bf16_bits(1.0f), 0x3f80);
    assert_int_equal(lb_bf16_bits(-2.0f), 0xc000);
    assert_int_equal(lb_bf16_bits(1.0f + 0x1p-8f), 0x3f80);        /* tie: to even */
    assert_int_equal(lb_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);    /* tie: to even */
    assert_int_equal(lb_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above the tie */
    assert_int_equal(lb_bf16_bits(INFINITY), 0x7f80);
    const unsigned short nan_bits = lb_bf16_bits(NAN);
    assert_true((nan_bits & 0x7f80) == 0x7f80 && (nan_bits & 0x7f) != 0);
    /* subnormals to a zero of their sign, as the bf16 instructions read them */
    assert_int_equal(lb_bf16_bits(0x1p-130f), 0x0000);
    assert_int_equal(lb_bf16_bits(-0x1p-130f), 0x8000);
    assert_int_equal(lb_bf16_bits(0x1p-126f), 0x0080); /* the least normal stays */

    char why[512] = "";
    if (blas_bf16_available(why, sizeof why)) {
        expect_bf16_described("bf16 (sbgemm");
        return;
    }
    assert_true(strstr(why, "AVX512_BF16") || strstr(why, "cblas_sbgemm"));
    expect_bf16_refused(why);
}

/* bf16 runs against this backend's own fp32 */
static const backend *const bf16_reference = &blas_backend;
#else
/* The direct backend's bf16 runs wherever its fp32 does: on the bf16
 * products (backends/direct/bf16/bf16.h) where the CPU has AVX512_BF16 and they
 * measure faster than its FMAs, else on fp32 FMAs over bf16-rounded
 * operands (bf16_fma.h); the details say which. */
static void bf16_is_described_or_refused_with_its_reason(void **state)
{
    (void)state;
    char why[512] = "";
    assert_true(backend_precisions(bb) & (1u << PREC_BF16));
    assert_int_equal(backend_runnable(bb, PREC_BF16, why, sizeof why), 1);
    if (direct_bf16_supported(why, sizeof why) && direct_bf16_dot_over_fma() > 1)
        expect_bf16_described("bf16 (bf16 products (vdpbf16ps): measured");
    else
        expect_bf16_described("bf16 (fp32 FMAs on bf16-rounded operands: ");
}

#ifdef LB_LAYERS_DIRECT
/* fp16's loss scaling skips a step whose gradients hold an Inf or NaN
 * (backends/chwn/chwn_engine.c, update_unless_overflow): mlp with its
 * first layer's weights at 1e4, whose fp16 chains pass 65504, leaves the
 * parameters as they were, bit for bit; the same engine from the seed's
 * parameters moves them. Emulated where the CPU has no AVX512_FP16. */
static void fp16_overflow_skips_the_step(void **state)
{
    (void)state;
    char why[512] = "", saved[64] = "";
    const char *was = getenv("LENET_BENCH_DIRECT_FP16");
    if (was)
        snprintf(saved, sizeof saved, "%s", was);
    if (!backend_runnable(bb, PREC_FP16, why, sizeof why)) {
        setenv("LENET_BENCH_DIRECT_FP16", "emulated", 1);
        if (!backend_runnable(bb, PREC_FP16, why, sizeof why)) {
            print_message("skipped: fp16 does not run here: %s\n", why);
            skip();
        }
    }
    workload w = workload_named("mlp");
    engine_config c = config(OPT_SGD, 2);
    c.precision = PREC_FP16;
    engine *e = start(bb, &w, &c);
    int32_t *order = batch_order(2, BATCH);
    float *before = floats(w.param_count), *after = floats(w.param_count);
    for (int overflow = 1; overflow >= 0; overflow--) {
        init_params(&w, 123, before);
        if (overflow)
            for (size_t i = 0; i < (size_t)w.layers[0].weight_count; i++)
                before[i] = 1e4f;
        assert_int_equal(bb->ops->set_params(e, before), 0);
        assert_int_equal(bb->ops->train_steps(e, order, BATCH, 1, NULL), 0);
        bb->ops->get_params(e, after);
        const int same = memcmp(before, after, sizeof(float) * w.param_count) == 0;
        if (same != overflow)
            fail_msg("%s step: the parameters %s", overflow ? "an overflowing" : "a clean",
                     same ? "did not move" : "moved");
    }
    free(before), free(after), free(order);
    bb->ops->destroy(e);
    if (saved[0])
        setenv("LENET_BENCH_DIRECT_FP16", saved, 1);
    else
        unsetenv("LENET_BENCH_DIRECT_FP16");
}
#endif

/* bf16 runs against the naive reference's fp32 */
static const backend *const bf16_reference = &naive_backend;
#endif

/* Each step's loss of `steps` steps of lenet on b at precision p. */
static void losses_at(const backend *b, precision p, optimizer_kind kind, int steps,
                      float *losses)
{
    workload w = workload_named("lenet");
    engine_config c = config(kind, 2);
    c.precision = p;
    engine *e = start(b, &w, &c);
    int32_t *order = batch_order(steps, BATCH);
    if (b->ops->train_steps(e, order, BATCH, steps, losses))
        fail_msg("%s %s: %s", b->name, precision_name(p), b->ops->error(e));
    for (int s = 0; s < steps; s++)
        if (!isfinite(losses[s]))
            fail_msg("%s %s: loss of step %d is %g", b->name, precision_name(p), s, losses[s]);
    free(order);
    b->ops->destroy(e);
}

/* bf16 GEMMs against fp32, 20 steps of lenet: each step's loss within
 * 6e-2 relative (floor 5e-2), the bound argued for bf16 from its unit
 * roundoff (u = 2^-8) in tests/test_cuda.c. Measured on the Zen 1 machine
 * with the bf16 numerics emulated (operands rounded to bf16 as here, then
 * multiplied by sgemm: the same exact products and fp32 sums as sbgemm, in
 * another order): worst step 4.1e-4 relative with nesterov, 2.0e-2 with
 * adam, whose per-element normalisation gives a gradient element that is
 * bf16 rounding noise a full lr-sized step (over 51 steps against naive:
 * 1.4e-2 and 4.1e-2). A wrong product puts the losses off by their own
 * size. Skipped, visibly, where bf16 cannot run. */
static void bf16_tracks_fp32(void **state)
{
    (void)state;
    skip_unless_bf16(bb);
    enum { STEPS = 20 };
    const optimizer_kind kinds[2] = {OPT_NESTEROV, OPT_ADAM};
    for (int k = 0; k < 2; k++) {
        float ref[STEPS], got[STEPS];
        losses_at(bf16_reference, PREC_FP32, kinds[k], STEPS, ref);
        losses_at(bb, PREC_BF16, kinds[k], STEPS, got);
        double worst = 0;
        int at = 0;
        for (int s = 0; s < STEPS; s++)
            if (rel_diff(ref[s], got[s], 5e-2) > worst)
                worst = rel_diff(ref[s], got[s], 5e-2), at = s;
        print_message("bf16 against %s fp32 (%s): worst step %d, %.6f against %.6f, %.3g\n",
                      bf16_reference->name, kinds[k] == OPT_ADAM ? "adam" : "nesterov", at,
                      got[at], ref[at], worst);
        if (!(worst <= 6e-2))
            fail_msg("bf16: loss of step %d is %.6f, fp32's %.6f (relative %.3g > 6e-2)", at,
                     got[at], ref[at], worst);
    }
}

#ifndef LB_LAYERS_DIRECT /* the sgemm probe: OpenBLAS */
static void sgemm_peak_probe_measures(void **state)
{
    (void)state;
    const double g = blas_sgemm_peak_gflops_sized(1, 256, 2);
    assert_true(g > 0.1 && g < 1e5);
    assert_true(blas_sgemm_peak_gflops_sized(1, 0, 1) < 0);
    assert_true(blas_sgemm_peak_gflops_sized(-1, 256, 1) < 0);
}

#endif

#ifdef LB_LAYERS_DIRECT
/* LENET_BENCH_DIRECT_ISA picks a build; an unknown one, or one the CPU
 * lacks, is refused with the reason by create and by backend_runnable. */
static void forced_isa_is_checked(void **state)
{
    (void)state;
    workload w = workload_named("mlp");
    engine_config c = config(OPT_SGD, 1);
    char err[256] = "";
    const char *was = getenv("LENET_BENCH_DIRECT_ISA");
    char saved[32] = "";
    snprintf(saved, sizeof saved, "%s", was ? was : "");
    setenv("LENET_BENCH_DIRECT_ISA", "avx1024", 1);
    assert_null(backend_create(bb, &w, &c, err, sizeof err));
    if (!strstr(err, "LENET_BENCH_DIRECT_ISA=avx1024: not one of "))
        fail_msg("unknown set: \"%s\"", err);
    assert_int_equal(backend_runnable(bb, PREC_FP32, err, sizeof err), 0);
    for (int i = 0; i < direct_kernels_count(); i++) {
        const direct_kernels *k = direct_kernels_at(i);
        setenv("LENET_BENCH_DIRECT_ISA", k->isa, 1);
        engine *e = backend_create(bb, &w, &c, err, sizeof err);
        if (k->cpu_runs()) {
            if (!e)
                fail_msg("%s: %s", k->isa, err);
            assert_ptr_equal(direct_active(), k);
            bb->ops->destroy(e);
            continue;
        }
        assert_null(e);
        if (!strstr(err, "this CPU cannot run it"))
            fail_msg("%s on a CPU without it: \"%s\"", k->isa, err);
    }
    /* unset: the first build the CPU runs and whose tiles fit its cores
     * (a build for two 512-bit FMA ports only on such a core), best first */
    unsetenv("LENET_BENCH_DIRECT_ISA");
    engine *e = backend_create(bb, &w, &c, err, sizeof err);
    assert_non_null(e);
    const int ports = direct_fma_ports_here(NULL, 0);
    for (int i = 0; i < direct_kernels_count(); i++)
        if (direct_kernels_at(i)->cpu_runs() &&
            (direct_kernels_at(i)->fma_ports < 2 || ports >= 2)) {
            assert_ptr_equal(direct_active(), direct_kernels_at(i));
            break;
        }
    bb->ops->destroy(e);
    if (saved[0])
        setenv("LENET_BENCH_DIRECT_ISA", saved, 1);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_agree_bitwise),
        cmocka_unit_test(library_split_agrees),
        cmocka_unit_test(a_product_set_of_its_own_trains_the_same),
        cmocka_unit_test(train_steps_is_gradients_then_update),
        cmocka_unit_test(apply_update_matches_shared_update),
        cmocka_unit_test(profile_leaves_the_model_alone),
        cmocka_unit_test(describes_itself),
        cmocka_unit_test(bad_requests_fail_cleanly),
#ifndef LB_LAYERS_DIRECT
        cmocka_unit_test(bf16_rounds_and_is_refused_with_its_reason),
#else
        cmocka_unit_test(bf16_is_described_or_refused_with_its_reason),
#endif
        cmocka_unit_test(bf16_tracks_fp32),
#ifdef LB_LAYERS_DIRECT
        cmocka_unit_test(fp16_overflow_skips_the_step),
#endif
#ifndef LB_LAYERS_DIRECT
        cmocka_unit_test(sgemm_peak_probe_measures),
#endif
    };
    int failed = 0;
#ifdef LB_LAYERS_DIRECT
    const struct CMUnitTest forcing[] = {cmocka_unit_test(forced_isa_is_checked)};
    failed += cmocka_run_group_tests_name("direct: forcing a build", forcing, NULL, NULL);
#endif
    return failed + run_chwn_tests(tests, sizeof tests / sizeof tests[0]);
}
