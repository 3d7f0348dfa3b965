/* The onednn backend from the inside: after one compute_gradients, each
 * layer's output, each layer's input gradient and every parameter
 * gradient against the naive layers (backends/naive/layers.h) run here on
 * the same images and parameters, for LeNet, the MLP and two shapes the
 * workloads lack (stride 2, an overlapping pool, a ReLU on a 4-d tensor,
 * non-square images, 5 classes), at the engine's batch and a smaller one
 * (padded to the engine's batch inside); in fp32 and, on a CPU where
 * oneDNN computes in bf16, in bf16. Then the errors a caller can provoke.
 * Training step by step against naive, evaluation and data parallelism are
 * in tests/test_equivalence.c, which holds every registered backend to it.
 *
 * Bounds, as max |onednn - naive| over the tensor's largest |naive|:
 * fp32: the two sum in different orders (oneDNN's blocked kernels, naive's
 * chains); the longest sums are the weight gradients, B x OH x OW terms
 * (32 x 576 = 18,432 for conv1), whose rounding differs by about
 * sqrt(n) x 6e-8 = 8e-6 of the sum of the terms' sizes, which for a
 * gradient with cancelling terms is several times its own largest
 * element: hence 1e-4 for gradients, 1e-5 for the forward outputs (sums
 * of at most 800 terms); measured: at most 4e-6. bf16: each layer's
 * output is rounded to bf16 (unit roundoff 2^-9 = 2e-3) and its products
 * take bf16 operands, so a forward output is off by a few 2e-3 per layer
 * crossed (4 in LeNet): 3e-2 of the largest element (measured: at most
 * 6e-3). The gradients cannot be held element by element: a max-pool
 * window whose two largest inputs round to the same bf16, or a ReLU input
 * within rounding of zero, sends an element's gradient elsewhere (or
 * nowhere) in bf16, so that element differs by its whole size, and
 * everything upstream of it by that element's share. Such near-ties are
 * a few in a hundred windows here (synthetic images, conv outputs a few
 * bf16 steps apart), so the gradients are held as vectors: within 0.3
 * relative L2 (measured: at most 0.13, pool1's input gradient in LeNet;
 * the gradients of a layer with no routing below it, such as fc2's, to
 * 5e-3). A dropped term, a wrong sign or a factor of 2 is 1 or more. The
 * loss is held to 3e-2 (measured: 4e-5). Training in bf16 step by step is
 * held to naive by tests/test_equivalence.c with the bf16 bounds there.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/common/library_arithmetic.h"
#include "backends/engine.h"
#include "backends/naive/layers.h"
#include "backends/onednn/onednn.h"
#include "harness/run/init.h"
#include "tests/testing.h"
#include "workloads/workload.h"

static const backend *const ob = &onednn_backend;

enum { SEED = 123, THREADS = 2 };

static float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------------------------- */
/* Workloads the registry lacks, laid out as workload_get lays out its own */

typedef struct spec {
    enum layer_kind kind;
    int kernel, stride, units;
} spec;

static void make_workload(workload *w, int rows, int cols, int classes, const spec *s, int n)
{
    static const char *const names[] = {"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"};
    memset(w, 0, sizeof *w);
    w->name = "odd";
    w->description = "a shape the workloads lack";
    w->input = (shape3){1, rows, cols};
    w->classes = classes;
    w->n_layers = n;
    shape3 cur = w->input;
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        layer *l = &w->layers[i];
        l->kind = s[i].kind, l->name = names[i];
        l->kernel = s[i].kernel, l->stride = s[i].stride, l->units = s[i].units;
        l->in = cur;
        switch (l->kind) {
        case LAYER_CONV:
        case LAYER_MAXPOOL:
            l->out = (shape3){l->kind == LAYER_CONV ? l->units : cur.c,
                              (cur.h - l->kernel) / l->stride + 1,
                              (cur.w - l->kernel) / l->stride + 1};
            if (l->kind == LAYER_CONV)
                l->weight_count = (size_t)l->units * cur.c * l->kernel * l->kernel;
            break;
        case LAYER_DENSE:
            l->out = (shape3){l->units, 1, 1};
            l->weight_count = (size_t)l->units * shape3_size(cur);
            break;
        case LAYER_RELU:
            l->out = cur;
            break;
        }
        if (l->weight_count) {
            l->bias_count = (size_t)l->units;
            l->weight_offset = l->parent_weight_offset = offset;
            offset += l->weight_count;
            l->bias_offset = l->parent_bias_offset = offset;
            offset += l->bias_count;
        }
        cur = l->out;
    }
    w->param_count = w->parent_param_count = offset;
    assert_null(workload_check(w));
}

/* ---------------------------------------------------------------------- */
/* The reference: the naive layers over the same images and parameters     */

typedef struct reference {
    float *act[WORKLOAD_MAX_LAYERS + 1];   /* act[i + 1]: layer i's output */
    float *d_act[WORKLOAD_MAX_LAYERS + 1]; /* d_act[i]: gradient of layer i's input */
    float *grads;
    double loss;
} reference;

static void reference_step(const workload *w, const float *params, const float *images,
                           const int *labels, int B, reference *r)
{
    const int L = w->n_layers;
    size_t scratch_n = 1;
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        const size_t s = l->kind == LAYER_CONV
                             ? conv_scratch_count(l->in.c, l->in.h, l->in.w, l->kernel, l->stride)
                         : l->kind == LAYER_DENSE ? dense_scratch_count(B, shape3_size(l->in), l->units)
                                                  : 0;
        scratch_n = s > scratch_n ? s : scratch_n;
    }
    float *scratch = floats(scratch_n);
    for (int i = 0; i <= L; i++) {
        const size_t n = (size_t)B * shape3_size(i ? w->layers[i - 1].out : w->input);
        r->act[i] = floats(n);
        r->d_act[i] = floats(n);
    }
    memcpy(r->act[0], images, sizeof(float) * B * shape3_size(w->input));
    r->grads = floats(w->param_count);
    for (int i = 0; i < L; i++) {
        const layer *l = &w->layers[i];
        const float *in = r->act[i], *W = params + l->weight_offset, *b = params + l->bias_offset;
        float *out = r->act[i + 1];
        switch (l->kind) {
        case LAYER_CONV:
            conv_forward(out, in, W, b, B, l->in.c, l->in.h, l->in.w, l->units, l->kernel,
                         l->stride, scratch);
            break;
        case LAYER_MAXPOOL:
            maxpool_forward(out, in, B, l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
            break;
        case LAYER_DENSE:
            dense_forward(out, in, W, b, B, shape3_size(l->in), l->units, scratch);
            break;
        case LAYER_RELU:
            relu_forward(out, in, (size_t)B * shape3_size(l->in));
            break;
        }
    }
    r->loss = softmax_xent(r->d_act[L], NULL, r->act[L], labels, B, w->classes, 1.0f / B) / B;
    for (int i = L - 1; i >= 0; i--) {
        const layer *l = &w->layers[i];
        const float *in = r->act[i], *d = r->d_act[i + 1], *W = params + l->weight_offset;
        float *d_in = r->d_act[i], *dW = r->grads + l->weight_offset,
              *db = r->grads + l->bias_offset;
        switch (l->kind) {
        case LAYER_CONV:
            conv_backward_weights(dW, d, in, B, l->in.c, l->in.h, l->in.w, l->units, l->kernel,
                                  l->stride, scratch);
            conv_backward_bias(db, d, B, l->units, l->out.h, l->out.w);
            conv_backward_data(d_in, d, W, B, l->in.c, l->in.h, l->in.w, l->units, l->kernel,
                               l->stride, scratch);
            break;
        case LAYER_MAXPOOL:
            maxpool_backward(d_in, d, in, B, l->in.c, l->in.h, l->in.w, l->kernel, l->stride);
            break;
        case LAYER_DENSE:
            dense_backward_weights(dW, d, in, B, shape3_size(l->in), l->units);
            dense_backward_bias(db, d, B, l->units);
            dense_backward_data(d_in, d, W, B, shape3_size(l->in), l->units);
            break;
        case LAYER_RELU:
            relu_backward(d_in, d, r->act[i + 1], (size_t)B * shape3_size(l->in));
            break;
        }
    }
    free(scratch);
}

static void reference_free(const workload *w, reference *r)
{
    for (int i = 0; i <= w->n_layers; i++) {
        free(r->act[i]);
        free(r->d_act[i]);
    }
    free(r->grads);
}

/* ---------------------------------------------------------------------- */
/* One step of onednn against the reference                                 */

typedef struct layer_case {
    const char *name;
    const char *workload; /* a registered one, or NULL for the odd shape */
    int odd;              /* which odd shape */
    int engine_batch, batch;
    precision prec;
} layer_case;

/* How a tensor is compared: each element against the tensor's largest
 * (scaled_diff), or the whole as a vector (relative L2, for bf16's routed
 * gradients; see the top of the file). */
typedef enum measure { SCALED, L2 } measure;

static double worst_seen; /* of the case being checked, for its summary line */

/* ||got - ref|| / ||ref|| */
static double l2_diff(const float *ref, const float *got, size_t n)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        diff += d * d;
        norm += (double)ref[i] * ref[i];
    }
    return isnan(diff) ? INFINITY : norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static void check(const char *what, const float *ref, const float *got, size_t n, measure m,
                  double bound)
{
    const double d = m == SCALED ? scaled_diff(ref, got, n) : l2_diff(ref, got, n);
    if (d > worst_seen)
        worst_seen = d;
    if (!(d <= bound))
        fail_msg("%s differs from naive by %.3g %s (allowed %.3g)", what, d,
                 m == SCALED ? "of its largest element" : "relative L2", bound);
}

static void odd_workload(int which, workload *w)
{
    if (which == 1) {
        /* stride 2, an overlapping pool, a ReLU on a 4-d tensor, non-square */
        const spec s[] = {{LAYER_CONV, 3, 2, 6},  {LAYER_MAXPOOL, 3, 1, 0}, {LAYER_RELU, 0, 0, 0},
                          {LAYER_DENSE, 0, 0, 7}, {LAYER_RELU, 0, 0, 0},    {LAYER_DENSE, 0, 0, 5}};
        make_workload(w, 13, 11, 5, s, 6);
    } else {
        /* two convolutions back to back, one of a single output channel,
         * a pool of stride 3 that leaves a column out, dense straight after */
        const spec s[] = {{LAYER_CONV, 5, 1, 1}, {LAYER_CONV, 2, 1, 9},
                          {LAYER_MAXPOOL, 2, 3, 0}, {LAYER_DENSE, 0, 0, 10}};
        make_workload(w, 16, 17, 10, s, 4);
    }
}

static void layers_match_naive(void **state)
{
    const layer_case *c = *state;
    char why[256] = "";
    if (ob->probe_precision && !ob->probe_precision(NULL, c->prec, why, sizeof why)) {
        print_message("%s: skipped here: %s\n", c->name, why);
        skip();
    }
    workload w;
    if (c->workload)
        assert_int_equal(workload_get(c->workload, &w), 0);
    else
        odd_workload(c->odd, &w);
    const int B = c->batch, L = w.n_layers;
    synth_set set;
    assert_int_equal(synth_make(&set, 64, w.input.h, w.input.w, w.classes, 7), 0);
    engine_config cfg = test_config(c->engine_batch, OPT_SGD, THREADS);
    cfg.precision = c->prec;
    char err[512] = "";
    engine *e = ob->create(NULL, &w, &cfg, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    float *params = floats(w.param_count);
    init_params(&w, SEED, params);
    assert_int_equal(ob->ops->set_params(e, params), 0);
    assert_int_equal(ob->ops->bind_dataset(e, &set.d, &set.d), 0);
    int32_t idx[64];
    int labels[64];
    const size_t F = (size_t)shape3_size(w.input);
    float *images = floats((size_t)B * F);
    for (int b = 0; b < B; b++) {
        idx[b] = (b * 37 + 5) % 64; /* not in order */
        labels[b] = set.labels[idx[b]];
        for (size_t p = 0; p < F; p++)
            images[b * F + p] = lb_pixel(set.images[idx[b] * F + p]);
    }
    float loss = NAN;
    if (ob->dp->compute_gradients(e, idx, B, &loss))
        fail_msg("compute_gradients: %s", ob->ops->error(e));
    reference r;
    reference_step(&w, params, images, labels, B, &r);

    const int bf16 = c->prec == PREC_BF16;
    const double fwd_bound = bf16 ? 3e-2 : 1e-5, grad_bound = bf16 ? 0.3 : 1e-4;
    const measure grad_measure = bf16 ? L2 : SCALED;
    worst_seen = 0;
    if (!(rel_diff(loss, r.loss, 1e-6) <= fwd_bound))
        fail_msg("loss %.9g, naive %.9g", loss, r.loss);
    /* the engine's tensors hold engine_batch images; the first B count */
    size_t biggest = 0;
    for (int i = 0; i <= L; i++) {
        const size_t n = (size_t)shape3_size(i ? w.layers[i - 1].out : w.input);
        biggest = n > biggest ? n : biggest;
    }
    float *got = floats((size_t)c->engine_batch * biggest);
    char what[128];
    for (int i = 0; i < L; i++) {
        const layer *l = &w.layers[i];
        if (onednn_engine_activation(e, i, got))
            fail_msg("activation %d: %s", i, ob->ops->error(e));
        snprintf(what, sizeof what, "%s output", l->name);
        check(what, r.act[i + 1], got, (size_t)B * shape3_size(l->out), SCALED, fwd_bound);
        if (i > 0) {
            if (onednn_engine_input_gradient(e, i, got))
                fail_msg("input gradient %d: %s", i, ob->ops->error(e));
            snprintf(what, sizeof what, "%s input gradient", l->name);
            check(what, r.d_act[i], got, (size_t)B * shape3_size(l->in), grad_measure,
                  grad_bound);
        }
    }
    size_t n;
    const float *grads = ob->dp->buffer(e, BUF_GRADS, &n);
    assert_int_equal(n, w.param_count);
    for (int i = 0; i < L; i++) {
        const layer *l = &w.layers[i];
        if (!l->weight_count)
            continue;
        snprintf(what, sizeof what, "%s weight gradient", l->name);
        check(what, r.grads + l->weight_offset, grads + l->weight_offset, l->weight_count,
              grad_measure, grad_bound);
        snprintf(what, sizeof what, "%s bias gradient", l->name);
        check(what, r.grads + l->bias_offset, grads + l->bias_offset, l->bias_count,
              grad_measure, grad_bound);
    }
    print_message("%s: loss %.3g relative, worst tensor %.3g (%s)\n", c->name,
                  rel_diff(loss, r.loss, 1e-6), worst_seen,
                  bf16 ? "gradients relative L2" : "of its largest element");
    free(got);
    free(images);
    free(params);
    reference_free(&w, &r);
    ob->ops->destroy(e);
    synth_free(&set);
}

/* ---------------------------------------------------------------------- */
/* Errors and reports                                                       */

static void bad_requests_say_why(void **state)
{
    (void)state;
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    engine_config cfg = test_config(8, OPT_SGD, 1);
    char err[512] = "";
    cfg.stage_slots = 2;
    assert_null(ob->create(NULL, &w, &cfg, err, sizeof err));
    assert_non_null(strstr(err, "onednn: "));
    assert_non_null(strstr(err, "model-parallel"));
    cfg.stage_slots = 0;
    cfg.precision = PREC_FP64;
    assert_null(ob->create(NULL, &w, &cfg, err, sizeof err));
    assert_non_null(strstr(err, "fp64"));
    cfg.precision = PREC_FP32;
    cfg.threads = -1;
    assert_null(ob->create(NULL, &w, &cfg, err, sizeof err));
    assert_non_null(strstr(err, "thread"));
    cfg.threads = 1;
    engine *e = ob->create(NULL, &w, &cfg, err, sizeof err);
    assert_non_null(e);
    synth_set set;
    assert_int_equal(synth_make(&set, 16, 28, 28, 10, 3), 0);
    int32_t idx[16] = {0};
    assert_int_not_equal(ob->dp->compute_gradients(e, idx, 8, NULL), 0); /* no data bound */
    assert_non_null(strstr(ob->ops->error(e), "no training set"));
    assert_int_equal(ob->ops->bind_dataset(e, &set.d, &set.d), 0);
    assert_int_not_equal(ob->dp->compute_gradients(e, idx, 9, NULL), 0); /* past the batch */
    assert_non_null(strstr(ob->ops->error(e), "batch of 9"));
    idx[3] = 16;
    assert_int_not_equal(ob->dp->compute_gradients(e, idx, 8, NULL), 0);
    assert_non_null(strstr(ob->ops->error(e), "index 16"));
    float out[1];
    assert_int_not_equal(onednn_engine_input_gradient(e, 0, out), 0);
    assert_non_null(strstr(ob->ops->error(e), "outside"));
    ob->ops->destroy(e);
    synth_free(&set);
}

/* The version and the ISA oneDNN runs go in the row's details and in
 * system.json. */
static void reports_version_and_isa(void **state)
{
    (void)state;
    char info[256];
    ob->library_info(ob->ctx, info, sizeof info);
    print_message("library: %s\n", info);
    assert_non_null(strstr(info, "oneDNN 2."));
    assert_non_null(strstr(info, "avx"));
    workload w;
    assert_int_equal(workload_get("mlp", &w), 0);
    engine_config cfg = test_config(4, OPT_SGD, 2);
    char err[256];
    engine *e = ob->create(NULL, &w, &cfg, err, sizeof err);
    assert_non_null(e);
    char details[1024];
    ob->ops->describe(e, details, sizeof details);
    print_message("details: %s\n", details);
    assert_non_null(strstr(details, "fp32"));
    assert_non_null(strstr(details, "2 threads"));
    assert_non_null(strstr(details, info));
    assert_non_null(strstr(details, "fc1 "));
    int threads, devices, replicas;
    ob->ops->placement(e, &threads, &devices, &replicas);
    assert_int_equal(threads, 2);
    /* the peak its row is held to: fp32 FMA; in bf16, AMX tiles where the
     * process is granted them, else the bf16 dot product */
    assert_string_equal(ob->ops->arithmetic(e), ARITHMETIC_FP32);
    ob->ops->destroy(e);
    char why[256];
    if (ob->probe_precision(NULL, PREC_BF16, why, sizeof why)) {
        cfg.precision = PREC_BF16;
        e = ob->create(NULL, &w, &cfg, err, sizeof err);
        assert_non_null(e);
        assert_string_equal(ob->ops->arithmetic(e), library_bf16_arithmetic());
        ob->ops->destroy(e);
    } else
        print_message("bf16 arithmetic not checked: %s\n", why);
}

static const layer_case cases[] = {
    {"lenet fp32, batch 32", "lenet", 0, 32, 32, PREC_FP32},
    {"lenet fp32, 7 of a batch of 32", "lenet", 0, 32, 7, PREC_FP32},
    {"mlp fp32, 5 of a batch of 9", "mlp", 0, 9, 5, PREC_FP32},
    {"odd shape 1 fp32, batch 6", NULL, 1, 6, 6, PREC_FP32},
    {"odd shape 2 fp32, 3 of a batch of 4", NULL, 2, 4, 3, PREC_FP32},
    {"lenet bf16, batch 32", "lenet", 0, 32, 32, PREC_BF16},
    {"lenet bf16, 7 of a batch of 32", "lenet", 0, 32, 7, PREC_BF16},
    {"mlp bf16, 5 of a batch of 9", "mlp", 0, 9, 5, PREC_BF16},
    {"odd shape 1 bf16, batch 6", NULL, 1, 6, 6, PREC_BF16},
    {"odd shape 2 bf16, 3 of a batch of 4", NULL, 2, 4, 3, PREC_BF16},
};

int main(void)
{
    struct CMUnitTest tests[sizeof cases / sizeof cases[0] + 2];
    size_t n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tests[n++] = (struct CMUnitTest)CASE_TEST(cases[i].name, layers_match_naive, &cases[i]);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(bad_requests_say_why);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(reports_version_and_isa);
    return _cmocka_run_group_tests("onednn", tests, n, NULL, NULL);
}
