/* The fixtures of the CHWN engine's tests (test_blas.c, test_blas_layers.c,
 * test_blas_stages.c; built with LB_LAYERS_DIRECT by test_direct*.c, over
 * the direct backend): the backend under test (bb), its fp32 product set
 * (products) and the naive reference
 * (nb), two synthetic sets, engines started from the seed-123
 * parameters, the harness's batch order, and the runner that takes a
 * program's tests once (blas) or once per build of the direct kernels this
 * CPU runs (direct). For cmocka programs. */
#ifndef LB_TESTS_CHWN_ENGINE_H
#define LB_TESTS_CHWN_ENGINE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/chwn/chwn.h"
#include "backends/chwn/chwn_layers.h"
#include "backends/chwn/chwn_products.h"
#include "backends/engine.h"
#include "backends/registry.h"
#include "harness/run/init.h"
#include "tests/checks.h"
#include "tests/testing.h"
#include "workloads/workload.h"

extern const backend naive_backend;
static const backend *const nb = &naive_backend;
/* The backend under test and the fp32 product set its engine computes
 * with, whose products test_blas_layers.c holds to naive's. */
#ifdef LB_LAYERS_DIRECT /* tests/test_direct.c */
#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/isa.h"
#include "backends/direct/direct_backend.h"
#include "base/cpu.h"
static const backend *const bb = &direct_backend;
static const chwn_products *const products = &direct_fp32_products;
#else
#include "backends/blas/blas.h"
static const backend *const bb = &blas_backend;
static const chwn_products *const products = &blas_sgemm_products;
#endif

enum { TRAIN_IMAGES = 512, TEST_IMAGES = 256, BATCH = 32 };

static synth_set train_set, test_set;

static int setup(void **state)
{
    (void)state;
    if (synth_make(&train_set, TRAIN_IMAGES, 28, 28, 10, 11) ||
        synth_make(&test_set, TEST_IMAGES, 28, 28, 10, 12))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    synth_free(&train_set);
    synth_free(&test_set);
    return 0;
}

static inline engine_config config(optimizer_kind kind, int threads)
{
    return test_config(BATCH, kind, threads);
}

/* The workload of that name, which the tests expect to exist. */
static inline workload workload_named(const char *name)
{
    workload w;
    assert_int_equal(workload_get(name, &w), 0);
    return w;
}

/* Skips the calling test, visibly and with the reason, where b cannot run
 * bf16. */
static inline void skip_unless_bf16(const backend *b)
{
    char why[512] = "";
    if (!backend_runnable(b, PREC_BF16, why, sizeof why)) {
        print_message("bf16 cannot run here: %s\n", why);
        skip();
    }
}

/* An engine of backend b, holding the seed-123 parameters of w and both
 * synthetic sets. */
static inline engine *start(const backend *b, const workload *w, const engine_config *c)
{
    char err[256] = "";
    engine *e = backend_create(b, w, c, err, sizeof err);
    if (!e)
        fail_msg("%s: create failed: %s", b->name, err);
    float *p = floats(w->param_count);
    init_params(w, 123, p);
    assert_int_equal(b->ops->set_params(e, p), 0);
    free(p);
    assert_int_equal(b->ops->bind_dataset(e, &train_set.d, &test_set.d), 0);
    return e;
}

/* The training order of the harness, epoch after epoch, for `steps` steps. */
static inline int32_t *batch_order(int steps, int batch)
{
    const int per_epoch = TRAIN_IMAGES / batch;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(steps / per_epoch + 2) * TRAIN_IMAGES);
    assert_non_null(order);
    for (int ep = 0; ep * per_epoch < steps; ep++)
        epoch_order(123, ep, TRAIN_IMAGES, 1, order + (size_t)ep * per_epoch * batch);
    return order;
}

/* Trains `steps` steps and returns losses and parameters. */

/* Uniform in [-1, 1). */
static inline void fill(float *x, size_t n, rng *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rng_uniform(r) * 2 - 1);
}

/* n new floats, filled */
static inline float *filled(size_t n, rng *r)
{
    float *x = floats(n);
    fill(x, n, r);
    return x;
}

/* Runs the program's tests over the synthetic sets: once for blas; for
 * direct once per build of the kernels this CPU runs, each forced (the
 * engines read LENET_BENCH_DIRECT_ISA at create, the layer checks the
 * kernels it chose); a build it cannot run is a visible skip. The number
 * of failures. */
static inline int run_chwn_tests(const struct CMUnitTest *tests, size_t count)
{
#ifndef LB_LAYERS_DIRECT
    return _cmocka_run_group_tests("tests", tests, count, setup, teardown);
#else
    int failed = 0;
    for (int i = 0; i < direct_kernels_count(); i++) {
        const direct_kernels *k = direct_kernels_at(i);
        char name[160];
        snprintf(name, sizeof name, "direct %s (%s)", k->isa, k->description);
        if (!k->cpu_runs()) {
            printf("[  SKIPPED ] %s: this CPU cannot run it\n", name);
            continue;
        }
        setenv("LENET_BENCH_DIRECT_ISA", k->isa, 1);
        char err[256];
        if (direct_choose(err, sizeof err) != k) {
            fprintf(stderr, "%s: not chosen: %s\n", name, err);
            return 1;
        }
        failed += _cmocka_run_group_tests(name, tests, count, setup, teardown);
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
    return failed;
#endif
}

#endif
