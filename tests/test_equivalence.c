/* Every backend of the registry against the naive reference, the way
 * ggml's test-backend-ops runs every operation on every device: a backend
 * is tested here just by being registered.
 *
 * For each backend other than naive, each precision it computes in, both
 * workloads and each optimiser: train it and naive from the same initial
 * parameters (harness/init.h) on the same batches, STEPS full batches and
 * then one smaller one (the end of an epoch), one step per call; compare
 * every step's loss and the parameters after the steps, within the
 * tolerance of the backend's precision; no loss or parameter may be NaN or
 * Inf. Then both score the test set from the same parameters (naive's) and
 * must agree. And for each backend that can train data-parallel: its
 * dp_wrap with 2 replicas against the backend itself, the same way. A
 * backend or precision that cannot run here is a visible skip, with the
 * reason backend_runnable gives.
 *
 * Why the fp32 tolerances are what they are. Both backends compute in
 * fp32 from the same floats; they differ only in the order of the sums (a
 * GEMM's blocked inner products against the naive loops; for the
 * data-parallel wrapper, two half-batch sums added). A sum of n fp32 terms
 * is off by about sqrt(n) * 6e-8 relative, so with the longest sums here
 * (conv1's weight gradient: 32 images x 576 positions, about 18,000 terms)
 * one step's gradients agree to about 1e-5 relative, and a loss, a mean of
 * softmax values, to about 1e-6. Over 50 steps these differences are
 * carried by the momentum (a factor of at most 1 / (1 - 0.9) = 10), and
 * now and then a ReLU whose input is within rounding of zero, or a pool
 * window whose two largest inputs are within rounding of each other, sends
 * one image's gradient another way; that changes a parameter by at most
 * about lr x |one image's gradient| / batch x 10, about 0.01 x 0.1 / 32 x
 * 10 = 3e-4. Hence, after 50 steps: each parameter within 1e-3 absolute
 * and the whole vector within 1e-4 relative (L2), while each step's loss
 * stays within 1e-4 relative. Such a tie is a jump, not a drift: the
 * losses agree at rounding level (1e-7) up to it and differ by 1e-5 to
 * 1e-3 relative after it, since the momentum carries the changed step on
 * while the loss of the nearly learnt set is down to 1e-2 (measured: blas
 * with 2 replicas against blas, Nesterov, a tie at step 24, then losses
 * up to 1.4e-3 relative, 1.4e-5 absolute; parameters 5e-4 absolute,
 * 2.7e-4 L2). So the bounds above hold over the first TIE_FREE_STEPS steps
 * and up to the first step that exceeds them; from that step on the losses
 * are held as a framework peer's (1e-2 relative, 1e-4 absolute below a
 * loss of 1e-2) and the parameter vector to 1e-3 L2; each parameter stays
 * within 1e-3. A wrong gradient shows from the first steps on. Adam
 * divides by the root of the squared gradients, so a gradient element
 * that is rounding noise around zero moves its weight by up to lr per
 * step whatever its size: an element may differ by up to steps x lr (the
 * L2 bound still holds the vector to what the others allow). The
 * synthetic images carry noise everywhere; on Fashion-MNIST, whose flat
 * black backgrounds make many pool windows near ties, two correct fp32
 * implementations agree for about 15 steps and then drift apart at the
 * 1e-2 level, which is why the images here are synthetic.
 *
 * Reduced precisions (tf32, fp16, bf16) use the bounds argued in
 * tests/test_cuda.c (check_low_precision) from each format's unit roundoff:
 * per-step loss within 1e-2, 2e-2 and 6e-2 relative, the parameters within
 * 10 times that (relative to max(|p|, 1e-2)); with Adam, which gives an
 * element whose gradient is rounding noise a full lr-sized step whatever
 * its size, the parameter vector as a whole (relative L2) instead. Measured
 * for blas bf16 with its numerics emulated on a CPU without bf16 (operands
 * rounded to bf16, products by sgemm), over these 51 steps: loss 2.3e-4
 * (sgd), 1.4e-2 (nesterov), 4.1e-2 (adam); parameters 0.039 and 0.43
 * relative (sgd, nesterov), L2 0.05 (adam). Measured for direct bf16
 * (vdpbf16ps on a Zen 4 core, every product's operands rounded to bf16,
 * fp32 sums, fp32 master weights), over the same 51 steps: lenet loss
 * 1.7e-4, 8.7e-3, 3.6e-2 (sgd, nesterov, adam), parameters 0.024 and 0.36
 * relative, L2 0.049 (adam); mlp loss 3.4e-4, 3.7e-3, 2.0e-2, parameters
 * 0.021 and 0.14, L2 0.008. Its products round the same operands as blas
 * bf16's (each product's two inputs, whatever their role) and sum in
 * fp32 in another order, so the same bounds hold it; a product with wrong
 * operands puts the first steps' losses off by their own size. direct bf16
 * on fp32 FMAs (LENET_BENCH_DIRECT_BF16=fma, the products of a CPU whose
 * vdpbf16ps is slow or missing: the same rounded operands, fp32 sums in
 * the fp32 tiles' order) is held to the same bounds; measured on a Zen 5
 * core: lenet loss 1.2e-4, 9.1e-3, 4.0e-2 (sgd, nesterov, adam),
 * parameters 0.042 and 0.38 relative, L2 0.044 (adam); mlp as vdpbf16ps's.
 *
 * direct fp16 (fp16 operands, 11-bit significands, but sums in fp16 chains
 * of 32 FMAs, each chain's value added in fp32; dynamic loss scaling,
 * fp32 master weights) is not held to the cuda row's fp16 bound (2e-2),
 * which counts on fp32 accumulation: its operands round to 2^-11 (0.1% of
 * a product at most, against bf16's 0.78%), but each chain's sum rounds
 * to 2^-11 of its running value at every step, g16(32) = 1.6% of the sum
 * of the terms' sizes at worst (notes/direct-fp16.md), so a result's worst
 * error is about twice bf16's; the typical error is 0.3% of it
 * (tests/test_direct_fp16_products.c). Hence bf16's loss bounds (6e-2
 * relative, 5e-2 floor, the Adam L2 0.6), and twice bf16's per-parameter
 * bound (1.2 relative to max(|p|, 1e-2)), which one small weight whose
 * gradient is mostly cancellation sets. Measured with the products
 * emulated (the same bits as vfmadd231ph), no step skipped by the loss
 * scale: lenet loss 8.8e-5, 5.4e-3, 3.4e-2 (sgd, nesterov, adam),
 * parameters 0.025 and 0.65 relative, L2 0.038 (adam); mlp loss 2.1e-4,
 * 5.0e-4, 2.0e-2, parameters 0.019 and 0.055, L2 0.0077: the losses as
 * bf16's, one Nesterov weight past bf16's 0.6.
 *
 * fp64. A backend's fp64 runs are compared with naive's fp64 runs, on the
 * losses the engines computed before rounding them to float (last_loss).
 * The argument above with u = 1.1e-16 instead of 6e-8: one step's losses
 * agree to about sqrt(18,000) x 1.1e-16 = 1.5e-14, and a ReLU or pool tie
 * within rounding of a double is some 1e-9 times as likely as in fp32, so
 * none happens over these 50 steps; the differences grow only through the
 * training dynamics. Hence each step's loss within 1e-12 relative for a
 * CPU backend (measured: blas, about 1e-14). A GPU backend's cuDNN
 * algorithms sum in other orders and its exp and log are not correctly
 * rounded (CUDA's double exp and log are within 1 or 2 ulp), hence 1e-10
 * for it. The parameters, rounded to float by get_params from doubles that
 * agree to 1e-12, are at most one float ulp apart: within 1e-6 relative.
 * From the same parameters both must score the test set identically up to
 * 1e-10 of the loss.
 *
 * fp64 against fp32, on the same backend (naive too): fp32 is off from
 * the exact result by what the fp32 argument above allows against another
 * fp32 order of sums, so the fp32 tolerances hold: each step's loss within
 * 1e-4 relative, with one difference. An image the network classifies
 * with confidence has a loss log(sum exp(z - max)) + max - z_label that is
 * a difference of logits of size ~10 cancelling to nearly nothing, which
 * fp32 gets right to about 10 u = 6e-7 absolute, not relatively; two fp32
 * backends share that error, fp64 does not. Once Adam has trained lenet to
 * a loss of 1e-4 (step 40 on), the fp32 loss is off from fp64's by 2e-7,
 * 2e-3 relative. So below a loss of 1e-2 the bound is absolute, 1e-6
 * (loss_floor 1e-2), and the same for the test set's summed loss: 1e-4
 * relative, 1e-6 per image below a mean of 1e-2 (against 1e-5 between two
 * fp32 backends, which share that error). */
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
#include "backends/module.h"
#include "backends/registry.h"
#include "harness/run/init.h"
#include "parallel/data_parallel.h"
#include "tests/testing.h"
#include "workloads/workload.h"

enum {
    TRAIN_IMAGES = 512,
    TEST_IMAGES = 256,
    BATCH = 32,
    STEPS = 50,
    TIE_FREE_STEPS = 10, /* fp32 steps held to rounding level whatever happens */
    LAST_BATCH = BATCH / 2 + 1, /* the smaller batch after the full ones */
    THREADS = 2,                /* CPU engines: both cores of a small machine */
    SEED = 123,
};

static const char *const trained_workloads[] = {"lenet", "mlp"};
static const optimizer_kind optimizers[] = {OPT_SGD, OPT_NESTEROV, OPT_ADAM};

static const char *optimizer_name(optimizer_kind k)
{
    return k == OPT_SGD ? "sgd" : k == OPT_NESTEROV ? "nesterov" : "adam";
}

static synth_set train_set, test_set;
static int32_t order[(STEPS * BATCH + LAST_BATCH) / TRAIN_IMAGES * TRAIN_IMAGES + TRAIN_IMAGES];

/* ---------------------------------------------------------------------- */
/* Tolerances                                                               */

typedef struct tolerance {
    int exact_losses;  /* compare the double losses (last_loss), not the floats */
    double loss_rel;   /* each step's loss, relative (floor loss_floor) */
    double loss_floor;
    double param_abs;  /* each parameter after the steps, absolute */
    double param_l2;   /* the parameter vector, relative L2 */
    double param_rel;  /* each parameter, relative to max(|p|, 1e-2) */
    long eval_moved;   /* confusion counts that may move (two per image) */
    double eval_loss_rel;   /* the test set's summed loss, relative */
    double eval_loss_floor; /* (floor eval_loss_floor) */
    /* after a tie (fp32, see the top of the file; 0: no allowance) */
    double tie_loss_rel, tie_loss_floor, tie_param_l2;
} tolerance;

/* The argument at the top of this file: b in precision p against ref in
 * ref_prec. */
static tolerance tolerance_for(const backend *b, precision p, precision ref_prec,
                               const optimizer_config *opt, int own_arithmetic)
{
    const precision_info *row = precision_of(p);
    if (p == PREC_FP32 && backend_is_peer(b))
        /* A framework peer (PyTorch) computes with its own kernels
         * (oneDNN, cuDNN) and its own log-softmax: it agrees with naive to
         * about 1e-7 per step until a near-tie in a pool or ReLU goes the
         * other way (step 24 of LeNet with Nesterov here), after which the
         * losses of the nearly memorised set, down to 1e-3, differ by a few
         * 1e-3 relative and the parameters by about 3e-4 (L2); and the
         * test loss of a confident model is a sum of tiny logs. So losses
         * are compared absolutely below 1e-2 and within 1e-2 above; see
         * tests/test_peer.c for the tight check of the first steps. */
        return (tolerance){.loss_rel = 1e-2,
                           .loss_floor = 1e-2,
                           .param_abs = opt->kind == OPT_ADAM ? (STEPS + 1) * opt->lr : 1e-2,
                           .param_l2 = 2e-3,
                           .param_rel = INFINITY,
                           .eval_moved = 2 * TEST_IMAGES / 100,
                           .eval_loss_rel = 1e-2,
                           .eval_loss_floor = 1e-6};
    if (p == PREC_FP64 && ref_prec == PREC_FP64)
        return (tolerance){.exact_losses = 1,
                           .loss_rel = b->dp->buffer_space == MEM_DEVICE ? 1e-10 : 1e-12,
                           .loss_floor = 1e-6,
                           .param_abs = INFINITY,
                           .param_l2 = 1e-6,
                           .param_rel = 1e-6,
                           .eval_moved = 0,
                           .eval_loss_rel = 1e-10,
                           .eval_loss_floor = 1e-6};
    if (p == PREC_FP32 || p == PREC_FP64)
        return (tolerance){.loss_rel = row->loss_rel,
                           .loss_floor = row->loss_floor,
                           .tie_loss_rel = 1e-2,
                           .tie_loss_floor = 1e-2,
                           .tie_param_l2 = 1e-3,
                           .param_abs = opt->kind == OPT_ADAM ? (STEPS + 1) * opt->lr : 1e-3,
                           .param_l2 = 1e-4,
                           .param_rel = INFINITY,
                           .eval_moved = 2,
                           .eval_loss_rel = p == PREC_FP64 ? 1e-4 : 1e-5,
                           .eval_loss_floor = p == PREC_FP64 ? 1e-2 * TEST_IMAGES : 1e-6};
    /* products on the precision's own arithmetic, where it sums in the
     * precision too (direct's fp16 chains, see the top of the file) */
    const int fp16_chains = own_arithmetic && row->chain_loss_rel > 0;
    const double rel = fp16_chains ? row->chain_loss_rel : row->loss_rel;
    const double floor_ = fp16_chains ? row->chain_loss_floor : row->loss_floor;
    const int adam = opt->kind == OPT_ADAM;
    return (tolerance){.loss_rel = rel,
                       .loss_floor = floor_,
                       .param_abs = INFINITY,
                       .param_l2 = adam ? 10 * rel : INFINITY,
                       .param_rel = adam ? INFINITY : (fp16_chains ? 20 : 10) * rel,
                       .eval_moved = 2 * TEST_IMAGES * 3 / 100,
                       .eval_loss_rel = rel,
                       .eval_loss_floor = 1e-6};
}

/* ---------------------------------------------------------------------- */
/* Runs                                                                     */

static engine_config config(optimizer_kind kind, precision p)
{
    engine_config c = test_config(BATCH, kind, THREADS);
    c.precision = p;
    c.cuda_graph = 1; /* the harness's defaults */
    c.data_on_device = 1;
    return c;
}

/* How a direct trial runs beside the plain one: its fp16 products
 * emulated (direct_fp16_emulate), or its bf16 on fp32 FMAs
 * (LENET_BENCH_DIRECT_BF16=fma, backends/direct/bf16/bf16_fma.h) */
enum { VARIANT_NONE, VARIANT_FP16_EMULATED, VARIANT_BF16_FMA };

/* What one backend did: each step's loss and the parameters after the
 * last step. */
typedef struct run {
    const backend *b;
    const char *workload;
    optimizer_kind kind;
    precision prec;
    int variant; /* VARIANT_*: direct fp16 emulated, direct bf16 on fp32 FMAs */
    float losses[STEPS + 1];
    double exact[STEPS + 1]; /* last_loss after each step: NAN when not offered */
    float *params;
    /* the engine's own arithmetic entry names its precision's arithmetic */
    int own_arithmetic;
} run;

static void fail_on(const backend *b, engine *e, const char *what)
{
    fail_msg("%s: %s: %s", b->name, what, b->ops->error(e));
}

/* An engine of b for w with both sets bound, holding params. */
static engine *start(const backend *b, const workload *w, optimizer_kind kind, precision prec,
                     const float *params)
{
    const engine_config c = config(kind, prec);
    char err[512] = "";
    engine *e = backend_create(b, w, &c, err, sizeof err);
    if (!e)
        fail_msg("%s: create: %s", b->name, err);
    if (b->ops->set_params(e, params))
        fail_on(b, e, "set_params");
    if (b->ops->bind_dataset(e, &train_set.d, &test_set.d))
        fail_on(b, e, "bind_dataset");
    return e;
}

/* Trains r->b as r says, one step per call. */
static void train(run *r)
{
    const backend *b = r->b;
    workload w;
    assert_int_equal(workload_get(r->workload, &w), 0);
    r->params = malloc(sizeof(float) * w.param_count);
    assert_non_null(r->params);
    init_params(&w, SEED, r->params);
    engine *e = start(b, &w, r->kind, r->prec, r->params);
    const char *own = b->ops->arithmetic ? b->ops->arithmetic(e) : NULL;
    r->own_arithmetic = own && strcmp(own, precision_of(r->prec)->arithmetic) == 0;
    char details[512] = "";
    if (r->variant == VARIANT_BF16_FMA && b->ops->describe) /* the products forced */
        b->ops->describe(e, details, sizeof details);
    if (r->variant == VARIANT_BF16_FMA && !strstr(details, "fp32 FMAs on bf16-rounded"))
        fail_msg("%s bf16 with LENET_BENCH_DIRECT_BF16=fma runs other products: %s", b->name,
                 details);
    for (int s = 0; s <= STEPS; s++) {
        const int n = s < STEPS ? BATCH : LAST_BATCH;
        r->losses[s] = NAN; /* must be written */
        if (b->ops->train_steps(e, order + (size_t)s * BATCH, n, 1, &r->losses[s]))
            fail_on(b, e, "train_steps");
        if (!isfinite(r->losses[s]))
            fail_msg("%s %s %s: loss of step %d is %g", b->name, r->workload,
                     optimizer_name(r->kind), s, r->losses[s]);
        r->exact[s] = backend_last_loss(b, e);
    }
    for (size_t i = 0; i < w.param_count; i++)
        r->params[i] = NAN;
    if (b->ops->get_params(e, r->params))
        fail_on(b, e, "get_params");
    for (size_t i = 0; i < w.param_count; i++)
        if (!isfinite(r->params[i]))
            fail_msg("%s %s %s: parameter %zu is %g after %d steps", b->name, r->workload,
                     optimizer_name(r->kind), i, r->params[i], STEPS + 1);
    b->ops->destroy(e);
}

/* The test set scored by b from params. */
static eval_counts score(const backend *b, const run *r, const float *params)
{
    workload w;
    assert_int_equal(workload_get(r->workload, &w), 0);
    engine *e = start(b, &w, r->kind, r->prec, params);
    eval_counts out;
    if (b->ops->evaluate(e, 0, &out))
        fail_on(b, e, "evaluate");
    b->ops->destroy(e);
    return out;
}

/* Each run once: naive's serves every backend, a backend's own its
 * data-parallel wrapper (room for every backend, precision, workload and
 * optimiser the registry holds, with some to spare). */
static run runs[128];
static int run_count;

static const run *run_of(const backend *b, const char *workload_name, optimizer_kind kind,
                         precision prec, int variant)
{
    for (int i = 0; i < run_count; i++) {
        const run *r = &runs[i];
        if (r->b == b && strcmp(r->workload, workload_name) == 0 && r->kind == kind &&
            r->prec == prec && r->variant == variant)
            return r;
    }
    assert_true(run_count < (int)(sizeof runs / sizeof runs[0]));
    run *r = &runs[run_count];
    *r = (run){.b = b, .workload = workload_name, .kind = kind, .prec = prec,
               .variant = variant};
    train(r);
    run_count++;
    return r;
}

/* ---------------------------------------------------------------------- */
/* Comparison                                                               */

/* Step s's losses, relative (floor `floor`): the double losses the engines
 * computed (exact) or the floats they returned. */
static double loss_diff(const run *ref, const run *got, int s, double floor, int exact)
{
    return exact ? rel_diff(ref->exact[s], got->exact[s], floor)
                 : rel_diff(ref->losses[s], got->losses[s], floor);
}

static void compare(const char *what, const run *ref, const run *got, const tolerance *tol)
{
    workload w;
    assert_int_equal(workload_get(got->workload, &w), 0);

    /* each step's loss within loss_rel, or after a tie within tie_loss_rel:
     * `excess` is the worst difference as a multiple of its bound */
    double worst_loss = 0, excess = 0;
    int worst_step = 0, tie_step = -1;
    for (int s = 0; s <= STEPS; s++) {
        const double strict = loss_diff(ref, got, s, tol->loss_floor, tol->exact_losses);
        if (tie_step < 0 && tol->tie_loss_rel > 0 && s > TIE_FREE_STEPS &&
            !(strict <= tol->loss_rel) && !isnan(strict))
            tie_step = s;
        const double d = tie_step < 0
                             ? strict
                             : loss_diff(ref, got, s, tol->tie_loss_floor, tol->exact_losses);
        const double bound = tie_step < 0 ? tol->loss_rel : tol->tie_loss_rel;
        if (!(d / bound <= excess)) /* NaN too: a backend without last_loss fails */
            excess = d / bound, worst_loss = d, worst_step = s;
        if (isnan(d))
            break;
    }
    const double param_l2 = tie_step < 0 ? tol->param_l2 : tol->tie_param_l2;
    double worst_abs = 0, diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < w.param_count; i++) {
        const double d = fabs((double)ref->params[i] - got->params[i]);
        worst_abs = d > worst_abs ? d : worst_abs;
        diff2 += d * d;
        norm2 += (double)ref->params[i] * ref->params[i];
    }
    const double l2 = sqrt(diff2 / norm2);
    const double param_rel = max_rel_diff(ref->params, got->params, w.param_count, 1e-2);
    /* both score the test set from the same parameters */
    const eval_counts e_ref = score(ref->b, ref, ref->params);
    const eval_counts e_got = score(got->b, got, ref->params);
    long moved = 0;
    for (int i = 0; i < w.classes * w.classes; i++)
        moved += labs(e_ref.confusion[i] - e_got.confusion[i]);
    const double eval_loss = rel_diff(e_ref.loss_sum, e_got.loss_sum, tol->eval_loss_floor);
    char tie[64] = "";
    if (tie_step >= 0)
        snprintf(tie, sizeof tie, ", a tie at step %d", tie_step);
    print_message("%s: loss %.3g (step %d%s), parameters %.3g absolute, %.3g L2, %.3g "
                  "relative; test set: %ld counts moved, loss %.3g\n",
                  what, worst_loss, worst_step, tie, worst_abs, l2, param_rel, moved, eval_loss);

    if (!(excess <= 1))
        fail_msg("%s: loss of step %d is %.15g, %s's %.15g (relative %.3g > %.3g%s)", what,
                 worst_step, tol->exact_losses ? got->exact[worst_step] : got->losses[worst_step],
                 ref->b->name,
                 tol->exact_losses ? ref->exact[worst_step] : ref->losses[worst_step],
                 worst_loss, worst_loss / excess, tie);
    if (!(worst_abs <= tol->param_abs) || !(l2 <= param_l2) ||
        !(param_rel <= tol->param_rel))
        fail_msg("%s: after %d steps the parameters differ by %.3g at most (allowed %.3g), "
                 "%.3g relative L2 (allowed %.3g), %.3g relative (allowed %.3g)",
                 what, STEPS + 1, worst_abs, tol->param_abs, l2, param_l2, param_rel,
                 tol->param_rel);
    if (e_got.count != TEST_IMAGES || e_got.classes != w.classes)
        fail_msg("%s: scored %ld images in %d classes, expected %d in %d", what, e_got.count,
                 e_got.classes, TEST_IMAGES, w.classes);
    if (moved > tol->eval_moved || !(eval_loss <= tol->eval_loss_rel))
        fail_msg("%s: from the same parameters, %ld confusion counts moved (allowed %ld), "
                 "test loss %.3g relative (allowed %.3g)",
                 what, moved, tol->eval_moved, eval_loss, tol->eval_loss_rel);
}

/* ---------------------------------------------------------------------- */
/* The trials: one per backend, precision, workload and optimiser           */

typedef struct trial {
    const backend *b;   /* under test */
    const backend *ref; /* naive, the backend a data-parallel wrapper wraps, or b itself */
    const char *workload;
    optimizer_kind kind;
    precision prec;
    precision ref_prec; /* fp32, or fp64 for an fp64 trial against naive */
    int variant;        /* VARIANT_* */
    char name[128];
} trial;

/* The direct module's direct_fp16_emulate (backends/direct/direct_backend.h):
 * set for the trials of the emulated fp16 products, clear for the others;
 * NULL when the module has no fp16 products. */
static int *direct_fp16_emulate;

/* LENET_BENCH_DIRECT_BF16 as the program was started with, for the trials
 * that do not force the FMAs */
static char bf16_way_given[16];

static void bf16_way(int fma)
{
    if (fma)
        setenv("LENET_BENCH_DIRECT_BF16", "fma", 1);
    else if (bf16_way_given[0])
        setenv("LENET_BENCH_DIRECT_BF16", bf16_way_given, 1);
    else
        unsetenv("LENET_BENCH_DIRECT_BF16");
}

static void train_against_reference(void **state)
{
    const trial *t = *state;
    char why[512] = "";
    if (direct_fp16_emulate)
        *direct_fp16_emulate = t->variant == VARIANT_FP16_EMULATED;
    bf16_way(t->variant == VARIANT_BF16_FMA);
    if (!backend_runnable(t->b, t->prec, why, sizeof why)) {
        print_message("%s: cannot run here: %s\n", t->name, why);
        skip();
    }
    if (t->variant == VARIANT_FP16_EMULATED)
        print_message("%s: the fp16 products run emulated in portable C (the same bits as "
                      "vfmadd231ph's), not AVX512_FP16\n",
                      t->name);
    const run *ref = run_of(t->ref, t->workload, t->kind, t->ref_prec, 0);
    if (t->variant == VARIANT_BF16_FMA)
        print_message("%s: bf16 on fp32 FMAs over bf16-rounded operands "
                      "(LENET_BENCH_DIRECT_BF16=fma), whatever vdpbf16ps does here\n",
                      t->name);
    const run *got = run_of(t->b, t->workload, t->kind, t->prec, t->variant);
    const optimizer_config opt = test_optimizer(t->kind);
    const tolerance tol = tolerance_for(t->b, t->prec, t->ref_prec, &opt, got->own_arithmetic);
    char what[192];
    snprintf(what, sizeof what, "%s against %s %s", t->name, t->ref->name,
             precision_name(t->ref_prec));
    if (t->ref == t->b)
        snprintf(what, sizeof what, "%s", t->name);
    compare(what, ref, got, &tol);
}

enum { MAX_TRIALS = 512 };
static trial trials[MAX_TRIALS];
static struct CMUnitTest tests[MAX_TRIALS];
static int trial_count;

/* b in each of `precisions` against ref: in fp64 when both are fp64 and
 * same_precision is set, else in fp32; with direct fp16's products
 * emulated or its bf16 on fp32 FMAs as `variant` says. */
static void add_trials(const backend *b, const backend *ref, const char *label,
                       unsigned precisions, int same_precision, int variant)
{
    for (int p = 0; p < PRECISION_COUNT; p++) {
        if (!(precisions & (1u << p)))
            continue;
        const precision ref_prec =
            same_precision && p == PREC_FP64 && (backend_precisions(ref) & (1u << PREC_FP64))
                ? PREC_FP64
                : PREC_FP32;
        for (size_t wi = 0; wi < sizeof trained_workloads / sizeof trained_workloads[0]; wi++)
            for (size_t k = 0; k < sizeof optimizers / sizeof optimizers[0]; k++) {
                if (trial_count == MAX_TRIALS) {
                    fprintf(stderr, "test_equivalence: more than %d trials\n", MAX_TRIALS);
                    exit(1);
                }
                trial *t = &trials[trial_count];
                *t = (trial){.b = b,
                             .ref = ref,
                             .workload = trained_workloads[wi],
                             .kind = optimizers[k],
                             .prec = (precision)p,
                             .ref_prec = ref_prec,
                             .variant = variant};
                snprintf(t->name, sizeof t->name, "%s %s %s %s%s", label, precision_name(t->prec),
                         t->workload, optimizer_name(t->kind),
                         ref == b ? " against fp32" : "");
                tests[trial_count] = (struct CMUnitTest){.name = t->name,
                                                         .test_func = train_against_reference,
                                                         .initial_state = t};
                trial_count++;
            }
    }
}

static int setup(void **state)
{
    (void)state;
    if (synth_make(&train_set, TRAIN_IMAGES, 28, 28, 10, 11) ||
        synth_make(&test_set, TEST_IMAGES, 28, 28, 10, 12))
        return -1;
    /* the harness's order, epoch after epoch */
    for (int ep = 0; (size_t)ep * TRAIN_IMAGES < sizeof order / sizeof order[0]; ep++)
        epoch_order(SEED, ep, TRAIN_IMAGES, 1, order + (size_t)ep * TRAIN_IMAGES);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < run_count; i++)
        free(runs[i].params);
    synth_free(&train_set);
    synth_free(&test_set);
    return 0;
}

int main(void)
{
    const backend *naive = backend_find("naive");
    if (!naive) {
        fprintf(stderr, "test_equivalence: no naive backend in the registry\n");
        return 1;
    }
    /* against naive: every registered backend, in each precision it
     * computes in (known once it is loaded; fp32 when it cannot load) */
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (b == naive)
            continue;
        backend_runnable(b, PREC_FP32, NULL, 0);
        add_trials(b, naive, b->name, backend_precisions(b), 1, 0);
    }
    /* direct fp16 once more with its products emulated, so that the
     * engine's fp16 (loss scaling, the products' numerics) is held to
     * naive on a CPU without AVX512_FP16 too (the trials above run
     * AVX512_FP16, or skip) */
    const backend *direct = backend_find("direct");
    if (direct && backend_runnable(direct, PREC_FP32, NULL, 0))
        direct_fp16_emulate = (int *)module_table("direct", "direct_fp16_emulate", NULL, 0);
    if (direct_fp16_emulate)
        add_trials(direct, naive, "direct (emulated products)", 1u << PREC_FP16, 1,
                   VARIANT_FP16_EMULATED);
    else
        fprintf(stderr, "test_equivalence: direct fp16 with emulated products not run: the "
                        "direct module has none (not built, or built without fp16)\n");
    /* direct bf16 once more on fp32 FMAs, the products a CPU whose
     * vdpbf16ps is slower (or missing) runs: the same operands and fp32
     * sums in another order, so bf16's bounds */
    if (getenv("LENET_BENCH_DIRECT_BF16"))
        snprintf(bf16_way_given, sizeof bf16_way_given, "%s", getenv("LENET_BENCH_DIRECT_BF16"));
    if (direct)
        add_trials(direct, naive, "direct (bf16 on FMAs)", 1u << PREC_BF16, 1, VARIANT_BF16_FMA);
    /* fp64 against fp32 on the same backend, naive included */
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (dp_base_name(b) || !(backend_precisions(b) & (1u << PREC_FP64)))
            continue;
        add_trials(b, b, b->name, 1u << PREC_FP64, 0, 0);
    }
    /* data-parallel: each backend that is not already a data-parallel
     * wrapper, two replicas against one */
    const dp_options two = {.replicas = 2};
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (dp_base_name(b))
            continue;
        const backend *dp = dp_wrap(b, &two, NULL);
        if (!dp) {
            fprintf(stderr, "test_equivalence: out of memory\n");
            return 1;
        }
        char label[64];
        snprintf(label, sizeof label, "%s x2", b->name);
        add_trials(dp, b, label, 1u << PREC_FP32, 0, 0);
    }
    /* EQUIVALENCE_ONLY='direct*fp16*': the trials whose names match, to
     * check one backend without training them all */
    if (getenv("EQUIVALENCE_ONLY") && *getenv("EQUIVALENCE_ONLY"))
        cmocka_set_test_filter(getenv("EQUIVALENCE_ONLY"));
    return _cmocka_run_group_tests("equivalence", tests, (size_t)trial_count, setup, teardown);
}
