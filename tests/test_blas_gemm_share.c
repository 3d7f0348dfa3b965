/* The blas row measures OpenBLAS: at least 90% of the multiply-adds of its
 * training steps and of its evaluation go through OpenBLAS's GEMMs.
 * tests/gemm_count.c, preloaded (this program runs itself again with
 * LD_PRELOAD when it finds no counter), interposes the GEMM entry points
 * and adds up M x N x K of every call; the workload says how many
 * multiply-adds a step and an evaluation take (workload.h: FLOPs per
 * image, a multiply-add counting two). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/registry.h"
#include "harness/run/init.h"
#include "tests/testing.h"
#include "workloads/workload.h"

enum { TRAIN_IMAGES = 1024, TEST_IMAGES = 512, BATCH = 64, STEPS = 8 };

static uint64_t (*counted_macs)(void);

static synth_set train_set, test_set;

static int setup(void **state)
{
    (void)state;
    return synth_make(&train_set, TRAIN_IMAGES, 28, 28, 10, 21) ||
           synth_make(&test_set, TEST_IMAGES, 28, 28, 10, 22);
}

static int teardown(void **state)
{
    (void)state;
    synth_free(&train_set);
    synth_free(&test_set);
    return 0;
}

/* The share of one workload's multiply-adds, at one precision, that
 * reached the GEMMs in STEPS training steps and one evaluation. */
static double gemm_share(const char *workload_name, precision p)
{
    const backend *b = backend_find("blas");
    assert_non_null(b);
    char why[512] = "";
    if (!backend_runnable(b, p, why, sizeof why))
        fail_msg("blas %s: not runnable here: %s", precision_name(p), why);
    workload w;
    assert_int_equal(workload_get(workload_name, &w), 0);
    engine_config c = test_config(BATCH, OPT_NESTEROV, 2);
    c.precision = p;
    engine *e = backend_create(b, &w, &c, why, sizeof why);
    if (!e)
        fail_msg("blas %s: %s", precision_name(p), why);
    float *params = malloc(sizeof(float) * w.param_count);
    assert_non_null(params);
    init_params(&w, 7, params);
    assert_int_equal(b->ops->set_params(e, params), 0);
    assert_int_equal(b->ops->bind_dataset(e, &train_set.d, &test_set.d), 0);
    int32_t order[STEPS * BATCH];
    for (int i = 0; i < STEPS * BATCH; i++)
        order[i] = (i * 37) % TRAIN_IMAGES;
    const uint64_t before = counted_macs();
    assert_int_equal(b->ops->train_steps(e, order, BATCH, STEPS, NULL), 0);
    eval_counts ev;
    assert_int_equal(b->ops->evaluate(e, 0, &ev), 0);
    const double counted = (double)(counted_macs() - before);
    b->ops->destroy(e);
    free(params);
    const double expected = (STEPS * BATCH * w.train_flops_per_image +
                             TEST_IMAGES * w.forward_flops_per_image) /
                            2;
    const double share = counted / expected;
    printf("blas %s %s: %.4g of %.4g multiply-adds through OpenBLAS's GEMMs (%.1f%%)\n",
           precision_name(p), workload_name, counted, expected, 100 * share);
    return share;
}

/* The bias rows the GEMMs carry (a convolution's weights times a row of
 * ones) add a few percent; more than a fifth over would be products
 * counted twice. */
static void check(const char *workload_name, precision p)
{
    const double share = gemm_share(workload_name, p);
    if (!(share >= 0.9 && share <= 1.2))
        fail_msg("blas %s %s: %.1f%% of the multiply-adds went through OpenBLAS's GEMMs "
                 "(at least 90%% expected)",
                 precision_name(p), workload_name, 100 * share);
}

static void fp32_products_are_openblas_gemms(void **state)
{
    (void)state;
    check("lenet", PREC_FP32);
    check("mlp", PREC_FP32);
}

static void fp64_products_are_openblas_gemms(void **state)
{
    (void)state;
    check("lenet", PREC_FP64);
}

#ifdef __SANITIZE_ADDRESS__
/* ASan must be the first library loaded, so the counter cannot be
 * preloaded in the sanitiser build (tests/sanitizers.sh) */
static void not_under_address_sanitizer(void **state)
{
    (void)state;
    printf("the GEMM counter cannot be preloaded under AddressSanitizer\n");
    skip();
}
#endif

int main(int argc, char **argv)
{
    (void)argc;
#ifdef __SANITIZE_ADDRESS__
    (void)argv;
    const struct CMUnitTest skipped[] = {cmocka_unit_test(not_under_address_sanitizer)};
    return cmocka_run_group_tests(skipped, NULL, NULL);
#else
    counted_macs = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "lb_gemm_count_macs");
    if (!counted_macs) {
        if (getenv("LB_GEMM_COUNT_PRELOADED")) {
            fprintf(stderr, "test_blas_gemm_share: %s preloaded, but no counter found\n",
                    LB_GEMM_COUNT_SO);
            return 1;
        }
        const char *had = getenv("LD_PRELOAD");
        char preload[4096];
        snprintf(preload, sizeof preload, "%s%s%s", LB_GEMM_COUNT_SO, had && *had ? ":" : "",
                 had ? had : "");
        setenv("LD_PRELOAD", preload, 1);
        setenv("LB_GEMM_COUNT_PRELOADED", "1", 1);
        execv("/proc/self/exe", argv);
        perror("test_blas_gemm_share: running itself again with the GEMM counter");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp32_products_are_openblas_gemms),
        cmocka_unit_test(fp64_products_are_openblas_gemms),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#endif
}
