/* The cuda backend.
 *
 * Everywhere: the shared per-element maths the kernels are built on (the
 * properties the GPU code relies on and test_naive does not cover), the
 * dense layer's cuBLAS arguments run through a reference column-major GEMM
 * against the naive layers, the loss-scaling state machine, the probe and
 * what ./bench makes of it.
 *
 * With a GPU, in the parts included at the end: training against the
 * naive reference (tests/cuda_training.c), one engine's errors, hooks,
 * profiling and memory (tests/cuda_engine.c), model-parallel stages
 * (tests/cuda_stages.c). Without one every GPU test is reported as
 * SKIPPED. */
#include "tests/cuda_testing.h"

#include <float.h>
#include <sys/wait.h>

#include "backends/common/elementwise.h"
#include "backends/cuda/dense_gemm.h"
#include "backends/cuda/step_state.h"
#include "backends/naive/layers.h"
#include "harness/run/config.h"

/* ---------------------------------------------------------------------- */
/* CPU: the maths the kernels share                                         */

/* The softmax gradient sums to zero over the classes (so the bias of the
 * last layer gets no drift), is negative only at the label, stays within
 * [-scale, scale], and is exactly linear in scale (loss scaling relies on
 * it); huge logits give finite results. */
static void test_softmax_xent_properties(void **state)
{
    (void)state;
    rng r = {11};
    const int classes = 10;
    for (int trial = 0; trial < 200; trial++) {
        float z[10], d1[10], d1024[10];
        const double spread = trial < 100 ? 4.0 : 60.0;
        for (int k = 0; k < classes; k++)
            z[k] = (float)((rng_uniform(&r) * 2 - 1) * spread);
        const int label = (int)(rng_next(&r) % classes);
        const float scale = 1.0f / 128;
        const float loss = lb_softmax_xent(z, classes, label, scale, d1);
        const float loss2 = lb_softmax_xent(z, classes, label, scale * 1024, d1024);
        assert_true(isfinite(loss) && loss >= 0.0f);
        assert_true(loss == loss2);
        double sum = 0;
        for (int k = 0; k < classes; k++) {
            sum += d1[k];
            assert_true(d1[k] >= -scale && d1[k] <= scale);
            assert_true(k == label ? d1[k] <= 0.0f : d1[k] >= 0.0f);
            /* a power-of-two scale is exact in binary floating point
             * (away from the subnormals) */
            if (fabsf(d1[k]) >= FLT_MIN)
                assert_true(d1024[k] == d1[k] * 1024.0f);
        }
        if (fabs(sum) > 1e-6 * scale * classes)
            fail_msg("trial %d: the gradient sums to %g", trial, sum);
    }
    /* logits far beyond exp's range */
    float big[3] = {1e4f, -1e4f, 0.0f}, d[3];
    assert_true(lb_softmax_xent(big, 3, 0, 1.0f, d) == 0.0f);
    assert_true(fabs(lb_softmax_xent(big, 3, 1, 1.0f, d) - 2e4) < 1.0);
    assert_true(isfinite(d[0]) && isfinite(d[1]) && isfinite(d[2]));
    /* equal logits: log(classes) */
    float flat[10] = {0};
    assert_true(fabs(lb_softmax_xent(flat, 10, 3, 1.0f, NULL) - log(10.0)) < 1e-6);
}

/* The per-element update rules the update kernel calls, two steps against
 * the formulas of engine.h in double, with decay on and off. */
static void test_update_rules(void **state)
{
    (void)state;
    const float lr = 0.1f, mu = 0.9f, wd = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    for (int decayed = 0; decayed < 2; decayed++) {
        const float decay = decayed ? wd : 0.0f;
        float w_sgd = 0.5f, w_nes = 0.5f, w_adam = 0.5f, v = 0, m = 0, s = 0;
        double x_sgd = 0.5, x_nes = 0.5, x_adam = 0.5, vv = 0, mm = 0, ss = 0;
        for (int t = 1; t <= 2; t++) {
            const float g = 0.2f * t;
            w_sgd = lb_sgd_step(w_sgd, lb_decayed_grad(g, w_sgd, decay), lr);
            x_sgd -= lr * (g + decay * x_sgd);
            w_nes = lb_nesterov_step(w_nes, lb_decayed_grad(g, w_nes, decay), &v, lr, mu);
            const double gn = g + decay * x_nes;
            vv = mu * vv + gn;
            x_nes -= lr * (gn + mu * vv);
            const float c1 = 1.0f - powf(b1, (float)t), c2 = 1.0f - powf(b2, (float)t);
            w_adam = lb_adam_step(w_adam, lb_decayed_grad(g, w_adam, decay), &m, &s, lr, b1, b2,
                                  eps, c1, c2);
            const double ga = g + decay * x_adam;
            mm = b1 * mm + (1 - b1) * ga;
            ss = b2 * ss + (1 - b2) * ga * ga;
            x_adam -= lr * (mm / (1 - pow(b1, t))) / (sqrt(ss / (1 - pow(b2, t))) + eps);
            assert_true(rel_diff(w_sgd, x_sgd, 1e-6) < 1e-6);
            assert_true(rel_diff(w_nes, x_nes, 1e-6) < 1e-6);
            assert_true(rel_diff(w_adam, x_adam, 1e-6) < 1e-5);
        }
    }
    assert_true(lb_relu(-1.0f) == 0.0f && lb_relu(2.0f) == 2.0f);
    assert_true(lb_relu_backward(0.0f, 3.0f) == 0.0f && lb_relu_backward(1.0f, 3.0f) == 3.0f);
    assert_true(lb_pixel(0) == 0.0f && lb_pixel(255) == 1.0f);
}

/* Reference column-major GEMM: C = op(A) op(B), op(X) = X^T when asked. */
static void gemm_reference(const gemm_args *g, const float *A, const float *B, float *C)
{
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            double sum = 0;
            for (int l = 0; l < g->k; l++) {
                const float a =
                    g->transpose_a ? A[l + (size_t)i * g->lda] : A[i + (size_t)l * g->lda];
                const float b =
                    g->transpose_b ? B[j + (size_t)l * g->ldb] : B[l + (size_t)j * g->ldb];
                sum += (double)a * b;
            }
            C[i + (size_t)j * g->ldc] = (float)sum;
        }
}

/* The arguments the engine hands cuBLAS (dense_gemm.h) for the dense layer give what the
 * naive dense layer computes, for each of the three products. */
/* The reference GEMM over A and Bm with the arguments the engine hands cuBLAS
 * for product p gives want, the naive layer's n values (freed here):
 * errors relative to 1 (the values are about that size), a float sum
 * against a double one, against a wrong transpose's O(1). */
static void check_product(dense_product p, int B, int I, int O, const float *A, const float *Bm,
                          float *want, size_t n)
{
    float *got = floats(n);
    const gemm_args g = dense_gemm_args(p, B, I, O);
    gemm_reference(&g, A, Bm, got);
    assert_true(max_rel_diff(got, want, n, 1.0) < 1e-4);
    free(want), free(got);
}

static void check_dense_gemm(int B, int I, int O, uint64_t seed)
{
    rng r = {seed};
    float *x = floats((size_t)B * I), *W = floats((size_t)O * I), *dy = floats((size_t)B * O);
    float *bias = floats((size_t)O), *scratch = floats(dense_scratch_count(B, I, O));
    for (size_t i = 0; i < (size_t)B * I; i++)
        x[i] = (float)(rng_uniform(&r) * 2 - 1);
    for (size_t i = 0; i < (size_t)O * I; i++)
        W[i] = (float)(rng_uniform(&r) * 2 - 1);
    for (size_t i = 0; i < (size_t)B * O; i++)
        dy[i] = (float)(rng_uniform(&r) * 2 - 1);

    float *want = floats((size_t)B * O);
    dense_forward(want, x, W, bias, B, I, O, scratch);
    check_product(DENSE_FORWARD, B, I, O, W, x, want, (size_t)B * O);
    want = floats((size_t)B * I);
    dense_backward_data(want, dy, W, B, I, O);
    check_product(DENSE_BACKWARD_DATA, B, I, O, W, dy, want, (size_t)B * I);
    want = floats((size_t)O * I);
    dense_backward_weights(want, dy, x, B, I, O);
    check_product(DENSE_BACKWARD_WEIGHTS, B, I, O, x, dy, want, (size_t)O * I);
    free(x), free(W), free(dy), free(bias), free(scratch);
}

static void test_dense_gemm_arguments(void **state)
{
    (void)state;
    check_dense_gemm(3, 5, 4, 21);
    check_dense_gemm(7, 1, 9, 22);
    check_dense_gemm(1, 12, 2, 23);
    check_dense_gemm(16, 800, 10, 24); /* LeNet's fc2 shape, transposed roles */
}

/* cuBLAS is never allowed a 16-bit reduction (the mixed precisions promise
 * fp32 accumulation), and TF32 tensor ops only in tf32. */
static void test_cublas_math_mode(void **state)
{
    (void)state;
    const precision all[] = {PREC_FP32, PREC_TF32, PREC_BF16, PREC_FP16};
    for (int i = 0; i < 4; i++) {
        const int mode = (int)dense_math_mode(all[i]);
        if (!(mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
            fail_msg("%s: cuBLAS may reduce in 16 bits (math mode 0x%x)",
                     precision_name(all[i]), mode);
        const int base = mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
        assert_int_equal(base, all[i] == PREC_TF32 ? (int)CUBLAS_TF32_TENSOR_OP_MATH
                                                   : (int)CUBLAS_DEFAULT_MATH);
    }
}

/* fp16 loss scaling: an overflow skips the step and halves the scale, a
 * run of clean steps doubles it, both within bounds; the slot always moves
 * on; without dynamic scaling the scale never changes. */
static void test_loss_scaling(void **state)
{
    (void)state;
    const loss_scaling dyn = {1, 1024.0f, 2.0f, 0.5f, 1.0f, 4096.0f, 3};
    cuda_step_state s = {0, 0, dyn.initial, 0, 0, 0};
    lb_finish_step(&s, dyn);
    assert_int_equal(s.slot, 1);
    assert_int_equal(s.step, 1);
    assert_true(s.loss_scale == 1024.0f);
    s.overflow = 1;
    lb_finish_step(&s, dyn);
    assert_int_equal(s.slot, 2);
    assert_int_equal(s.step, 1); /* skipped: Adam's t does not move */
    assert_int_equal(s.overflow, 0);
    assert_true(s.loss_scale == 512.0f);
    for (int i = 0; i < 3; i++)
        lb_finish_step(&s, dyn);
    assert_true(s.loss_scale == 1024.0f);
    assert_int_equal(s.step, 4);
    for (int i = 0; i < 30; i++)
        lb_finish_step(&s, dyn);
    assert_true(s.loss_scale == 4096.0f); /* capped */
    for (int i = 0; i < 30; i++) {
        s.overflow = 1;
        lb_finish_step(&s, dyn);
    }
    assert_true(s.loss_scale == 1.0f); /* floored */
    assert_int_equal(s.slot, 65);

    const loss_scaling none = {0, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1 << 30};
    cuda_step_state t = {0, 0, 1.0f, 0, 0, 0};
    for (int i = 0; i < 10; i++) {
        t.overflow = i == 4;
        lb_finish_step(&t, none);
    }
    assert_true(t.loss_scale == 1.0f);
    assert_int_equal(t.step, 9);
    assert_int_equal(t.slot, 10);
}

/* ---------------------------------------------------------------------- */
/* CPU: probe, library versions, and what ./bench does with them           */

static void test_probe(void **state)
{
    (void)state;
    char why[512] = "unchanged";
    const int ok = gpu_present(why, sizeof why);
    char info[256] = "";
    cuda()->library_info(cuda()->ctx, info, sizeof info);
    print_message("probe: %s; %s\n", ok ? "a GPU is present" : why, info);
    assert_non_null(strstr(info, "CUDA runtime "));
    assert_non_null(strstr(info, "cuDNN "));
    assert_non_null(strstr(info, "cuBLAS "));
    if (ok) {
        assert_string_equal(why, "");
        return;
    }
    assert_true(strlen(why) > 0 && strcmp(why, "unchanged") != 0 && !strchr(why, '\n'));
    /* create fails cleanly with a message */
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.batch_size = 8;
    cfg.opt = (optimizer_config){OPT_NESTEROV, 0.01f, 0.9f, 5e-4f, 0.9f, 0.999f, 1e-8f};
    char err[512] = "";
    assert_null(backend_create(cuda(), &w, &cfg, err, sizeof err));
    assert_true(strlen(err) > 0);
    assert_non_null(strstr(err, "cuda"));
}

/* Runs cmd, returns its exit status and up to len bytes of its output. */
static int run_command(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, len - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_bench_lists_and_refuses(void **state)
{
    (void)state;
    const char *bench = getenv("BENCH");
    if (!bench || !*bench) {
        print_message("BENCH is not set (scripts/run-tests sets it): not checking ./bench\n");
        skip();
    }
    char why[512] = "", cmd[1024], out[8192];
    const int ok = gpu_present(why, sizeof why);
    snprintf(cmd, sizeof cmd, "%s --list 2>&1", bench);
    assert_int_equal(run_command(cmd, out, sizeof out), 0);
    const char *line = strstr(out, "cuda ");
    assert_non_null(line);
    char want[700];
    if (ok)
        snprintf(want, sizeof want, "built, runnable");
    else
        snprintf(want, sizeof want, "built, not runnable here: %s", why);
    line += strlen("cuda") + strspn(line + strlen("cuda"), " "); /* the name column's width */
    if (strncmp(line, want, strlen(want)) != 0)
        fail_msg("--list says \"%.*s\", expected \"%s\"", (int)strcspn(line, "\n"), line, want);
    if (ok)
        return;
    /* asked for alone and unable to run: exit status 3 with the reason,
     * before any data is read */
    snprintf(cmd, sizeof cmd, "%s --backend cuda --epochs 1 --data /nonexistent 2>&1", bench);
    assert_int_equal(run_command(cmd, out, sizeof out), 3);
    assert_non_null(strstr(out, why));
}


/* The parts that need a GPU to run (each test skips visibly without one):
 * one program, so that the GPU check builds and times it as one. */
#include "tests/cuda_training.c"
#include "tests/cuda_engine.c"
#include "tests/cuda_stages.c"

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_xent_properties),
        cmocka_unit_test(test_update_rules),
        cmocka_unit_test(test_dense_gemm_arguments),
        cmocka_unit_test(test_loss_scaling),
        cmocka_unit_test(test_cublas_math_mode),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_bench_lists_and_refuses),
        CUDA_TRAINING_TESTS,
        CUDA_ENGINE_TESTS,
        CUDA_STAGE_TESTS,
    };
    return cmocka_run_group_tests_name("cuda", tests, NULL, NULL);
}

