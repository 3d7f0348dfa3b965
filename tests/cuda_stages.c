/* Part of test_cuda (included by tests/test_cuda.c): model-parallel
 * stages: the refusals (everywhere), every cut and split against naive's
 * stages, bf16 stages, the stage entries' checks and memory. */
#include "tests/cuda_testing.h"

/* Refused before any device is touched, so checked everywhere: the reasons
 * are one line each and name what is wrong. */
static void test_stage_refusals(void **state)
{
    (void)state;
    workload w, part;
    assert_int_equal(workload_get("lenet", &w), 0);
    assert_null(workload_stage(&w, 2, 7, 0, 1, &part));
    struct {
        const workload *w;
        int slots;
        precision prec;
        const char *want;
    } cases[] = {
        {&w, 2, PREC_FP64, "fp64 is not offered"},
        {&w, 2, PREC_FP16, "fp16"},
        {&w, -1, PREC_FP32, "stage slots"},
        {&w, 1025, PREC_FP32, "stage slots"},
        {&part, 0, PREC_FP32, "only as a model-parallel stage"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        engine_config cfg = make_config(8, OPT_SGD, cases[i].prec);
        cfg.stage_slots = cases[i].slots;
        char err[512] = "";
        engine *e = backend_create(cuda(), cases[i].w, &cfg, err, sizeof err);
        if (e)
            fail_msg("case %zu: created, expected a refusal with \"%s\"", i, cases[i].want);
        if (!strstr(err, cases[i].want) || strncmp(err, "cuda: ", 6) != 0 || strchr(err, '\n'))
            fail_msg("case %zu: \"%s\", expected \"cuda: ...%s...\"", i, err, cases[i].want);
    }
}

static void uniform_fill(float *x, size_t n, rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rng_uniform(r) * 2 - 1);
}

/* What one engine gave for the stage sequence of run_stage. */
typedef struct stage_result {
    float *out[2], *d_in[2];
    float *g1, *g10, *g0; /* BUF_GRADS after each backward */
    float *params;        /* after apply_update(1) */
} stage_result;

#define STAGE_BATCH 4

/* Copies BUF_GRADS to the host, wherever the engine keeps it. */
static void read_grads(const backend *b, engine *e, float *to, size_t n)
{
    size_t count = 0;
    const float *g = b->dp->buffer(e, BUF_GRADS, &count);
    assert_non_null(g);
    assert_int_equal(count, n);
    if (b->dp->buffer_space == MEM_DEVICE)
        assert_int_equal(cudaMemcpy(to, g, sizeof(float) * n, cudaMemcpyDeviceToHost),
                         cudaSuccess);
    else
        memcpy(to, g, sizeof(float) * n);
}

/* Two micro-batches in flight on slots 0 and 1 (4 and 3 images): both
 * forwards, then slot 1's backward (gradients written), slot 0's
 * (gradients added), slot 0's again without accumulating and without
 * d_in, and one update. Every output poisoned first. */
static void run_stage(const backend *b, const workload *sw, precision prec, const float *params,
                      float *const in[2], float *const d_out[2], stage_result *r)
{
    engine_config cfg = make_config(STAGE_BATCH, OPT_NESTEROV, prec);
    cfg.stage_slots = 2;
    char err[512] = "";
    engine *e = backend_create(b, sw, &cfg, err, sizeof err);
    if (!e)
        fail_msg("%s: create stage: %s", b->name, err);
    const size_t n = sw->param_count;
    const size_t in_n = (size_t)shape3_size(sw->input);
    const size_t out_n = (size_t)shape3_size(sw->layers[sw->n_layers - 1].out);
    const int batch[2] = {STAGE_BATCH, STAGE_BATCH - 1};
    for (int k = 0; k < 2; k++) {
        r->out[k] = floats(batch[k] * out_n);
        r->d_in[k] = floats(batch[k] * in_n);
        for (size_t i = 0; i < batch[k] * out_n; i++)
            r->out[k][i] = NAN;
        for (size_t i = 0; i < batch[k] * in_n; i++)
            r->d_in[k][i] = NAN;
    }
    r->g1 = floats(n), r->g10 = floats(n), r->g0 = floats(n), r->params = floats(n);
#define STAGE_CALL(call)                                                                           \
    do {                                                                                           \
        if ((call) != 0)                                                                           \
            fail_msg("%s: %s: %s", b->name, #call, b->ops->error(e));                              \
    } while (0)
    STAGE_CALL(b->ops->set_params(e, params));
    STAGE_CALL(b->stage->stage_forward(e, 0, in[0], batch[0], r->out[0]));
    STAGE_CALL(b->stage->stage_forward(e, 1, in[1], batch[1], r->out[1]));
    STAGE_CALL(b->stage->stage_backward(e, 1, d_out[1], r->d_in[1], 0));
    read_grads(b, e, r->g1, n);
    STAGE_CALL(b->stage->stage_backward(e, 0, d_out[0], r->d_in[0], 1));
    read_grads(b, e, r->g10, n);
    STAGE_CALL(b->stage->stage_backward(e, 0, d_out[0], NULL, 0));
    read_grads(b, e, r->g0, n);
    STAGE_CALL(b->dp->apply_update(e, 1.0f));
    STAGE_CALL(b->ops->get_params(e, r->params));
#undef STAGE_CALL
    b->ops->destroy(e);
}

static void stage_result_free(stage_result *r)
{
    for (int k = 0; k < 2; k++)
        free(r->out[k]), free(r->d_in[k]);
    free(r->g1), free(r->g10), free(r->g0), free(r->params);
}

/* Fails with where, when err is over bound (or NaN). */
static void within(const char *label, const char *what, double err, double bound)
{
    if (!(err <= bound))
        fail_msg("%s: %s differ by %.3g of their scale > %.3g", label, what, err, bound);
}

/* scaled_diff of every parameter tensor of the stage on its own: the
 * worst. */
static double worst_tensor_error(const workload *sw, const float *got, const float *want)
{
    double worst = 0;
    for (int i = 0; i < sw->n_layers; i++) {
        const layer *l = &sw->layers[i];
        if (!l->weight_count)
            continue;
        worst = fmax(worst, scaled_diff(want + l->weight_offset, got + l->weight_offset,
                                         l->weight_count));
        worst = fmax(worst,
                     scaled_diff(want + l->bias_offset, got + l->bias_offset, l->bias_count));
    }
    return worst;
}

/* How far the added gradients g10 are from g1 + g0, per parameter tensor,
 * over the tensor's largest |g1| + |g0|: the worst. */
static double accumulation_error(const workload *sw, const float *g10, const float *g1,
                                 const float *g0)
{
    double worst = 0;
    for (int i = 0; i < sw->n_layers; i++) {
        const layer *l = &sw->layers[i];
        if (!l->weight_count)
            continue;
        const size_t at[2] = {l->weight_offset, l->bias_offset};
        const size_t count[2] = {l->weight_count, l->bias_count};
        for (int t = 0; t < 2; t++) {
            double err = 0, scale = 0;
            for (size_t j = at[t]; j < at[t] + count[t]; j++) {
                const double d = fabs(g10[j] - ((double)g1[j] + g0[j]));
                if (isnan(d))
                    return INFINITY;
                err = fmax(err, d);
                scale = fmax(scale, fabs((double)g1[j]) + fabs((double)g0[j]));
            }
            worst = fmax(worst, scale > 0 ? err / scale : err);
        }
    }
    return worst;
}

/* The smallest margin, over its tensor's largest magnitude, that a forward
 * decision of stage sw (layers [first, ...) of w, part of parts) rests on
 * for these inputs: between the two largest inputs of a max-pool window,
 * between a ReLU's input and 0. Only for the pools and ReLUs whose input
 * the stage computes (its own input both engines are handed as is); those
 * inputs come from naive running the stage's layers before them. */
static double decision_margin(const workload *w, const workload *sw, int first, int part,
                              int parts, const float *parent, const float *in, int batch)
{
    double margin = INFINITY;
    for (int j = 1; j < sw->n_layers; j++) {
        const layer *l = &sw->layers[j];
        if (l->kind != LAYER_MAXPOOL && l->kind != LAYER_RELU)
            continue;
        workload head;
        assert_null(workload_stage(w, first, first + j, part, parts, &head));
        float *params = floats(head.param_count);
        workload_stage_params_from(&head, params, parent);
        engine_config cfg = make_config(batch, OPT_SGD, PREC_FP32);
        cfg.stage_slots = 1;
        char err[512] = "";
        engine *e = backend_create(naive(), &head, &cfg, err, sizeof err);
        if (!e)
            fail_msg("naive: %s", err);
        const size_t n = (size_t)batch * shape3_size(l->in);
        float *x = floats(n);
        assert_int_equal(naive()->ops->set_params(e, params), 0);
        assert_int_equal(naive()->stage->stage_forward(e, 0, in, batch, x), 0);
        double scale = 0;
        for (size_t i = 0; i < n; i++)
            scale = fmax(scale, fabs((double)x[i]));
        if (l->kind == LAYER_RELU)
            for (size_t i = 0; i < n; i++)
                margin = fmin(margin, fabs((double)x[i]) / scale);
        else
            for (int plane = 0; plane < batch * l->in.c; plane++)
                for (int oy = 0; oy < l->out.h; oy++)
                    for (int ox = 0; ox < l->out.w; ox++) {
                        double top = -INFINITY, second = -INFINITY;
                        for (int dy = 0; dy < l->kernel; dy++)
                            for (int dx = 0; dx < l->kernel; dx++) {
                                const double v =
                                    x[((size_t)plane * l->in.h + oy * l->stride + dy) * l->in.w +
                                      ox * l->stride + dx];
                                second = v > top ? top : fmax(second, v);
                                top = fmax(top, v);
                            }
                        margin = fmin(margin, (top - second) / scale);
                    }
        naive()->ops->destroy(e);
        free(x);
        free(params);
    }
    return margin;
}

/* One stage of w, cuda against naive, in fp32 (cuDNN FMA maths and cuBLAS
 * without TF32: the only difference from the naive loops is the order of
 * the sums). A sum of K float products reordered differs by about
 * u sqrt(K) times its partial sums, u = 6e-8; here K <= 4 x 24 x 24 = 2304
 * (conv1's weight gradient), under 1e-5 of a tensor's largest element per
 * layer, and a stage chains at most 7 layers: 1e-4 of the scale. A wrong
 * layout, slot, accumulation or a missing first-layer gradient is off by
 * order 1. The one thing rounding could move further is a decision: a
 * max-pool window whose two largest inputs lie within rounding of each
 * other, or a ReLU input within rounding of 0, would route a gradient
 * differently on the two engines; so the inputs are drawn until every such
 * decision inside the stage stands 1e-5 of its tensor's scale clear (the
 * engines' forward values differ by about 1e-7 of it), which naive's own
 * stages tell before either engine is compared.
 * Then, on cuda alone: the added gradients are the written ones plus the
 * others to a few roundings of their sums (cuDNN and cuBLAS may order a
 * sum with beta = 1 differently from one without): 1e-5 of the scale,
 * against order 1 for gradients overwritten or added twice. */
static void check_stage(const workload *w, int first, int last, int part, int parts)
{
    workload sw;
    const char *why = workload_stage(w, first, last, part, parts, &sw);
    if (why)
        fail_msg("%s [%d, %d) part %d of %d: %s", w->name, first, last, part, parts, why);
    char label[96];
    snprintf(label, sizeof label, "%s layers [%d, %d) part %d/%d", w->name, first, last, part + 1,
             parts);
    float *parent = floats(w->param_count), *params = floats(sw.param_count);
    init_params(w, 1100 + (uint64_t)first, parent);
    workload_stage_params_from(&sw, params, parent);
    const size_t in_n = (size_t)shape3_size(sw.input);
    const size_t out_n = (size_t)shape3_size(sw.layers[sw.n_layers - 1].out);
    const int batch[2] = {STAGE_BATCH, STAGE_BATCH - 1};
    float *in[2], *d_out[2];
    for (int k = 0; k < 2; k++) {
        in[k] = floats(STAGE_BATCH * in_n);
        d_out[k] = floats(STAGE_BATCH * out_n);
    }
    /* inputs whose max-pool and ReLU decisions stand clear of rounding */
    const double need = 1e-5;
    double margin = 0;
    int tries = 0;
    for (; tries < 64 && margin < need; tries++) {
        rng r = {1200 + (uint64_t)(first * 16 + last * 4 + part) + 7919 * (uint64_t)tries};
        for (int k = 0; k < 2; k++) {
            uniform_fill(in[k], STAGE_BATCH * in_n, &r);
            uniform_fill(d_out[k], STAGE_BATCH * out_n, &r);
        }
        margin = fmin(decision_margin(w, &sw, first, part, parts, parent, in[0], batch[0]),
                      decision_margin(w, &sw, first, part, parts, parent, in[1], batch[1]));
    }
    if (margin < need)
        fail_msg("%s: no inputs in %d tries whose decisions stand %.0e clear (best %.3g)", label,
                 tries, need, margin);
    stage_result want, got;
    run_stage(naive(), &sw, PREC_FP32, params, in, d_out, &want);
    run_stage(cuda(), &sw, PREC_FP32, params, in, d_out, &got);

    double worst = 0;
    for (int k = 0; k < 2; k++) {
        const double eo = scaled_diff(want.out[k], got.out[k], batch[k] * out_n);
        const double ei = scaled_diff(want.d_in[k], got.d_in[k], batch[k] * in_n);
        within(label, k ? "slot 1's outputs" : "slot 0's outputs", eo, 1e-4);
        within(label, k ? "slot 1's input gradients" : "slot 0's input gradients", ei, 1e-4);
        worst = fmax(worst, fmax(eo, ei));
    }
    const double e1 = worst_tensor_error(&sw, got.g1, want.g1);
    const double e10 = worst_tensor_error(&sw, got.g10, want.g10);
    const double e0 = worst_tensor_error(&sw, got.g0, want.g0);
    const double ep = worst_tensor_error(&sw, got.params, want.params);
    within(label, "written gradients", e1, 1e-4);
    within(label, "accumulated gradients", e10, 1e-4);
    within(label, "gradients written again", e0, 1e-4);
    within(label, "updated parameters", ep, 1e-4);
    within(label, "accumulated gradients and the sum of the two",
           accumulation_error(&sw, got.g10, got.g1, got.g0), 1e-5);
    /* the accumulation did something: slot 1's gradients are not negligible */
    assert_true(scaled_diff(got.g0, got.g10, sw.param_count) > 1e-3);
    print_message("%s (inputs of try %d): activations and input gradients %.2g, gradients "
                  "%.2g / %.2g / %.2g, parameters %.2g\n",
                  label, tries, worst, e1, e10, e0, ep);
    stage_result_free(&want);
    stage_result_free(&got);
    for (int k = 0; k < 2; k++)
        free(in[k]), free(d_out[k]);
    free(parent), free(params);
}

/* Every cut into two stages by layers, and every split within a layer into
 * two parts (a layer with parameters and the layers without that follow
 * it), for both workloads. */
static void test_stages_match_naive(void **state)
{
    (void)state;
    need_gpu();
    const char *wnames[2] = {"lenet", "mlp"};
    for (int t = 0; t < 2; t++) {
        workload w;
        assert_int_equal(workload_get(wnames[t], &w), 0);
        for (int cut = 1; cut < w.n_layers; cut++) {
            check_stage(&w, 0, cut, 0, 1);
            check_stage(&w, cut, w.n_layers, 0, 1);
        }
        for (int first = 0; first < w.n_layers; first++) {
            if (!w.layers[first].weight_count)
                continue;
            int last = first + 1;
            while (last < w.n_layers && !w.layers[last].weight_count)
                last++;
            for (int part = 0; part < 2; part++)
                check_stage(&w, first, last, part, 2);
        }
    }
}

/* bf16 stages: the forward pass near fp32's (each of LeNet's four layers
 * with parameters rounds its operands and its output at 2^-9 ~ 2e-3, about
 * 4e-3 of an element together, adding up to about 1e-2 by the logits; the
 * worst of the logits over the largest: 5e-2), the gradients finite and
 * added in fp32 to one rounding. The
 * backward pass is not compared with fp32's element by element: a ReLU or
 * max-pool decision that bf16 rounding flips moves a gradient whole. */
static void test_bf16_stage(void **state)
{
    (void)state;
    need_gpu();
    workload w, sw;
    assert_int_equal(workload_get("lenet", &w), 0);
    /* the whole network as one stage: every layer kind */
    assert_null(workload_stage(&w, 0, w.n_layers, 0, 1, &sw));
    float *params = floats(sw.param_count);
    init_params(&w, 1300, params);
    rng r = {1301};
    const size_t in_n = (size_t)shape3_size(sw.input);
    const size_t out_n = (size_t)shape3_size(sw.layers[sw.n_layers - 1].out);
    float *in[2], *d_out[2];
    for (int k = 0; k < 2; k++) {
        in[k] = floats(STAGE_BATCH * in_n);
        d_out[k] = floats(STAGE_BATCH * out_n);
        for (size_t i = 0; i < STAGE_BATCH * in_n; i++)
            in[k][i] = (float)rng_uniform(&r);
        uniform_fill(d_out[k], STAGE_BATCH * out_n, &r);
    }
    stage_result f32, b16;
    run_stage(cuda(), &sw, PREC_FP32, params, in, d_out, &f32);
    run_stage(cuda(), &sw, PREC_BF16, params, in, d_out, &b16);
    const int batch[2] = {STAGE_BATCH, STAGE_BATCH - 1};
    for (int k = 0; k < 2; k++) {
        const double eo = scaled_diff(f32.out[k], b16.out[k], batch[k] * out_n);
        print_message("bf16 stage: slot %d's outputs within %.2g of fp32's\n", k, eo);
        within("bf16 lenet stage", "outputs", eo, 5e-2);
        for (size_t i = 0; i < batch[k] * in_n; i++)
            if (!isfinite(b16.d_in[k][i]))
                fail_msg("bf16 stage: slot %d's input gradient %zu is %g", k, i, b16.d_in[k][i]);
    }
    for (size_t i = 0; i < sw.param_count; i++)
        if (!isfinite(b16.g10[i]) || !isfinite(b16.params[i]))
            fail_msg("bf16 stage: gradient or parameter %zu is not finite", i);
    /* 16-bit gradients converted exactly, added in fp32: one rounding */
    within("bf16 lenet stage", "accumulated gradients and the sum of the two",
           accumulation_error(&sw, b16.g10, b16.g1, b16.g0), 1e-6);
    assert_true(scaled_diff(b16.g0, b16.g10, sw.param_count) > 1e-3);
    stage_result_free(&f32);
    stage_result_free(&b16);
    for (int k = 0; k < 2; k++)
        free(in[k]), free(d_out[k]);
    free(params);
}

/* The checks of the stage entries, the entries a stage refuses, and the
 * bytes memory_use itemises, for a stage and for a whole network. */
static void test_stage_errors_and_memory(void **state)
{
    (void)state;
    need_gpu();
    const backend *b = cuda();
    workload w, sw;
    assert_int_equal(workload_get("lenet", &w), 0);
    assert_null(workload_stage(&w, 2, w.n_layers, 0, 1, &sw));
    engine_config cfg = make_config(8, OPT_NESTEROV, PREC_FP32);
    cfg.stage_slots = 3;
    char err[512] = "";
    engine *e = backend_create(b, &sw, &cfg, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    const size_t in_n = (size_t)shape3_size(sw.input), out_n = 10;
    float *in = floats(9 * in_n), *out = floats(9 * out_n), *d_out = floats(9 * out_n);
    float *d_in = floats(9 * in_n);
#define EXPECT_REFUSED(call, text)                                                                 \
    do {                                                                                           \
        const int rc_ = (call);                                                                    \
        if (rc_ == 0 || !strstr(b->ops->error(e), text))                                           \
            fail_msg("%s: rc %d, \"%s\", expected \"%s\"", #call, rc_, b->ops->error(e), text);    \
    } while (0)
    EXPECT_REFUSED(b->stage->stage_backward(e, 0, d_out, d_in, 0), "before its stage_forward");
    EXPECT_REFUSED(b->stage->stage_forward(e, 3, in, 8, out), "stage slot 3");
    EXPECT_REFUSED(b->stage->stage_forward(e, -1, in, 8, out), "stage slot -1");
    EXPECT_REFUSED(b->stage->stage_forward(e, 0, in, 9, out), "micro-batch of 9");
    EXPECT_REFUSED(b->stage->stage_forward(e, 0, in, 0, out), "micro-batch of 0");
    EXPECT_REFUSED(b->stage->stage_forward(e, 0, NULL, 8, out), "input and output buffers");
    const int32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float loss;
    EXPECT_REFUSED(b->dp->compute_gradients(e, idx, 8, &loss), "stage_forward and stage_backward");
    EXPECT_REFUSED(b->ops->train_steps(e, idx, 8, 1, &loss), "stage_forward and stage_backward");
    eval_counts counts;
    EXPECT_REFUSED(b->ops->evaluate(e, 0, &counts), "evaluated through stage_forward");
    /* still usable afterwards */
    assert_int_equal(b->stage->stage_forward(e, 2, in, 8, out), 0);
    EXPECT_REFUSED(b->stage->stage_backward(e, 2, NULL, d_in, 0), "needs the output's gradient");
    assert_int_equal(b->stage->stage_backward(e, 2, d_out, d_in, 0), 0);
#undef EXPECT_REFUSED

    /* memory: the float parameters, gradients and momentum exactly; three
     * slots of every layer's input and output at 8 images */
    size_t act_floats = in_n;
    for (int i = 0; i < sw.n_layers; i++)
        act_floats += (size_t)shape3_size(sw.layers[i].out);
    memory_use m;
    memset(&m, 0xff, sizeof m);
    b->ops->memory_use(e, &m);
    assert_int_equal(m.params, sizeof(float) * sw.param_count);
    assert_int_equal(m.grads, sizeof(float) * sw.param_count);
    assert_int_equal(m.opt_state, sizeof(float) * sw.param_count);
    assert_int_equal(m.activations, sizeof(float) * 3 * 8 * act_floats);
    assert_true(m.workspace > 0 && m.workspace < ((size_t)4 << 30));
    /* what it itemises on the device was allocated, so the peak covers it */
    assert_true(m.params + m.grads + m.opt_state + m.activations <= b->ops->peak_memory(e));
    char text[512];
    b->ops->describe(e, text, sizeof text);
    print_message("stage: %s; workspace %zu bytes\n", text, m.workspace);
    assert_non_null(strstr(text, "model-parallel stage, 3 micro-batch slots"));
    b->ops->destroy(e);

    /* a whole network: one set of activations, Adam's two moments */
    cfg = make_config(8, OPT_ADAM, PREC_FP32);
    rig g;
    rig_up(&g, "lenet", &cfg);
    act_floats = (size_t)shape3_size(g.w.input);
    for (int i = 0; i < g.w.n_layers; i++)
        act_floats += (size_t)shape3_size(g.w.layers[i].out);
    b->ops->memory_use(g.e, &m);
    assert_int_equal(m.params, sizeof(float) * g.w.param_count);
    assert_int_equal(m.grads, sizeof(float) * g.w.param_count);
    assert_int_equal(m.opt_state, 2 * sizeof(float) * g.w.param_count);
    assert_int_equal(m.activations, sizeof(float) * 8 * act_floats);
    /* the resident data set (64 images of 784 bytes, bound as both sets)
     * is workspace */
    assert_true(m.workspace > 2 * 64 * 784);
    assert_int_not_equal(b->stage->stage_forward(g.e, 0, in, 8, out), 0);
    assert_non_null(strstr(b->ops->error(g.e), "not created as a model-parallel stage"));
    rig_down(&g);
    free(in), free(out), free(d_out), free(d_in);
}

/* This part's tests, in the order test_cuda runs them. */
#define CUDA_STAGE_TESTS                                                                           \
    cmocka_unit_test(test_stage_refusals),                                                         \
    cmocka_unit_test(test_stages_match_naive),                                                     \
    cmocka_unit_test(test_bf16_stage),                                                             \
    cmocka_unit_test(test_stage_errors_and_memory)
