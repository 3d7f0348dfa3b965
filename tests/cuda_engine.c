/* Part of test_cuda (included by tests/test_cuda.c): one GPU engine on its
 * own: its errors, the data-parallel hooks against naive, profiling,
 * describe and memory, evaluate after a direct write of the parameters,
 * short batches that keep the graph. */
#include "tests/cuda_testing.h"

static void test_errors(void **state)
{
    (void)state;
    need_gpu();
    workload w;
    assert_int_equal(workload_get("lenet", &w), 0);
    char err[512] = "";
    engine_config cfg = make_config(8, OPT_SGD, PREC_FP32);
    cfg.device = 1000;
    assert_null(backend_create(cuda(), &w, &cfg, err, sizeof err));
    assert_non_null(strstr(err, "device"));

    cfg = make_config(8, OPT_SGD, PREC_FP32);
    rig g;
    rig_up(&g, "lenet", &cfg);
    const backend *b = cuda();
    const int32_t idx[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    float loss;
    assert_int_not_equal(b->ops->train_steps(g.e, idx, 16, 1, &loss), 0);
    assert_non_null(strstr(b->ops->error(g.e), "batch"));
    const int32_t bad[8] = {0, 1, 2, 3, 64, 5, 6, 7};
    assert_int_not_equal(b->ops->train_steps(g.e, bad, 8, 1, &loss), 0);
    assert_non_null(strstr(b->ops->error(g.e), "index"));
    dataset wrong = g.data.d;
    wrong.rows = 27;
    assert_int_not_equal(b->ops->bind_dataset(g.e, &wrong, NULL), 0);
    assert_true(strlen(b->ops->error(g.e)) > 0 && !strchr(b->ops->error(g.e), '\n'));
    /* still usable afterwards */
    assert_int_equal(b->ops->train_steps(g.e, idx, 8, 1, &loss), 0);
    assert_true(isfinite(loss));
    rig_down(&g);
}

/* train_steps equals compute_gradients + apply_update(1) bitwise, and the
 * gradients match the naive engine's. */
static void test_data_parallel_hooks(void **state)
{
    (void)state;
    need_gpu();
    const backend *b = cuda(), *nb = naive();
    engine_config cfg = make_config(16, OPT_NESTEROV, PREC_FP32);
    rig a, c;
    rig_up(&a, "lenet", &cfg);
    rig_up(&c, "lenet", &cfg);
    char err[256] = "";
    engine *ne = backend_create(nb, &a.w, &cfg, err, sizeof err);
    assert_non_null(ne);
    nb->ops->set_params(ne, a.init);
    nb->ops->bind_dataset(ne, &a.data.d, &a.data.d);
    int32_t idx[48];
    epoch_order(803, 0, 48, 1, idx);
    const size_t n = a.w.param_count;
    float *gpu_grads = floats(n), *pa = floats(n), *pc = floats(n);
    assert_true(b->dp->buffer_space == MEM_DEVICE);
    for (int s = 0; s < 3; s++) {
        float la, lc, ln;
        assert_int_equal(b->ops->train_steps(a.e, idx + s * 16, 16, 1, &la), 0);
        assert_int_equal(b->dp->compute_gradients(c.e, idx + s * 16, 16, &lc), 0);
        assert_int_equal(nb->dp->compute_gradients(ne, idx + s * 16, 16, &ln), 0);
        size_t count = 0;
        const float *g = b->dp->buffer(c.e, BUF_GRADS, &count);
        assert_int_equal(count, n);
        assert_int_equal(cudaMemcpy(gpu_grads, g, sizeof(float) * n, cudaMemcpyDeviceToHost),
                         cudaSuccess);
        size_t nn;
        const float *ng = nb->dp->buffer(ne, BUF_GRADS, &nn);
        const double gd = max_rel_diff(gpu_grads, ng, n, 1e-3);
        if (gd > 1e-3)
            fail_msg("step %d: gradients differ from naive by %.3g", s, gd);
        assert_int_equal(b->dp->apply_update(c.e, 1.0f), 0);
        assert_int_equal(nb->dp->apply_update(ne, 1.0f), 0);
        assert_true(la == lc);
        assert_true(rel_diff(lc, ln, 1e-3) < 1e-4);
    }
    b->ops->get_params(a.e, pa);
    b->ops->get_params(c.e, pc);
    assert_memory_equal(pa, pc, sizeof(float) * n);
    free(gpu_grads), free(pa), free(pc);
    nb->ops->destroy(ne);
    rig_down(&a);
    rig_down(&c);
}

static void test_profile_describe_memory(void **state)
{
    (void)state;
    need_gpu();
    const backend *b = cuda();
    engine_config cfg = make_config(16, OPT_ADAM, PREC_FP32);
    rig g, fresh;
    rig_up(&g, "lenet", &cfg);
    rig_up(&fresh, "lenet", &cfg);
    const int32_t idx[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
    layer_times t;
    memset(&t, 0xff, sizeof t);
    assert_int_equal(b->ops->profile_layers(g.e, idx, 16, 3, &t), 0);
    assert_int_equal(t.n_layers, g.w.n_layers);
    double total = 0;
    for (int i = 0; i < g.w.n_layers; i++) {
        assert_true(t.forward_ms[i] >= 0 && t.backward_ms[i] >= 0);
        total += t.forward_ms[i] + t.backward_ms[i];
    }
    assert_true(total > 0 && t.loss_ms >= 0 && t.update_ms > 0);
    /* the model is as it was: the next step matches a fresh engine's */
    float le, lf;
    assert_int_equal(b->ops->train_steps(g.e, idx, 16, 1, &le), 0);
    assert_int_equal(b->ops->train_steps(fresh.e, idx, 16, 1, &lf), 0);
    assert_true(le == lf);
    float *pg = floats(g.w.param_count), *pf = floats(g.w.param_count);
    b->ops->get_params(g.e, pg);
    b->ops->get_params(fresh.e, pf);
    assert_memory_equal(pg, pf, sizeof(float) * g.w.param_count);

    char text[256];
    b->ops->describe(g.e, text, sizeof text);
    print_message("describe: %s\n", text);
    assert_non_null(strstr(text, "fp32"));
    assert_non_null(strstr(text, "conv2 fwd"));
    assert_true(b->ops->peak_memory(g.e) > 0);
    int threads = 0, devices = 0, replicas = 0;
    b->ops->placement(g.e, &threads, &devices, &replicas);
    assert_int_equal(devices, 1);
    assert_int_equal(replicas, 1);
    const double peak = b->ops->peak_gflops(g.e);
    print_message("peak fp32 GEMM: %.0f GFLOP/s\n", peak);
    assert_true(peak > 100);
    free(pg), free(pf);
    rig_down(&g);
    rig_down(&fresh);
}

/* Parameter averaging writes BUF_PARAMS directly and then scores the model:
 * evaluate must use those parameters in bf16 and fp16 too (their layers read
 * a 16-bit copy), exactly as an engine given them by set_params does. */
static void check_evaluate_after_direct_write(precision prec)
{
    engine_config cfg = make_config(16, OPT_NESTEROV, PREC_FP32);
    cfg.precision = prec;
    rig written, given;
    rig_up(&written, "lenet", &cfg);
    rig_up(&given, "lenet", &cfg);
    const size_t n = written.w.param_count;
    float *other = floats(n);
    init_params(&written.w, 901, other);
    size_t count = 0;
    float *dev = cuda()->dp->buffer(written.e, BUF_PARAMS, &count);
    assert_int_equal(count, n);
    assert_int_equal(cudaMemcpy(dev, other, sizeof(float) * n, cudaMemcpyHostToDevice),
                     cudaSuccess);
    assert_int_equal(cuda()->ops->set_params(given.e, other), 0);
    eval_counts a, b;
    memset(&a, 0xff, sizeof a);
    memset(&b, 0, sizeof b);
    assert_int_equal(cuda()->ops->evaluate(written.e, 0, &a), 0);
    assert_int_equal(cuda()->ops->evaluate(given.e, 0, &b), 0);
    if (a.loss_sum != b.loss_sum)
        fail_msg("%s: evaluate after a direct write scores loss %.9g, the same parameters "
                 "given by set_params %.9g",
                 precision_name(prec), a.loss_sum, b.loss_sum);
    assert_memory_equal(a.confusion, b.confusion, sizeof a.confusion);
    free(other);
    rig_down(&written);
    rig_down(&given);
}

static void test_evaluate_reads_written_params(void **state)
{
    (void)state;
    need_gpu();
    check_evaluate_after_direct_write(PREC_BF16);
    check_evaluate_after_direct_write(PREC_FP16);
    check_evaluate_after_direct_write(PREC_FP32);
}

/* A short batch (an epoch's last, 60000 mod 128 = 96) and the test set's
 * short batches keep the captured graph: the workspace was sized for every
 * batch size when the engine was made. */
static void test_short_batch_keeps_graph(void **state)
{
    (void)state;
    need_gpu();
    const backend *b = cuda();
    for (int prec = PREC_FP32; prec <= PREC_FP16; prec++) {
        engine_config cfg = make_config(48, OPT_NESTEROV, (precision)prec);
        rig g;
        rig_up(&g, "lenet", &cfg); /* 64 images: one full batch and 16 over */
        int32_t idx[48];
        epoch_order(904, 0, 48, 1, idx);
        float loss[2];
        char text[512];
        assert_int_equal(b->ops->train_steps(g.e, idx, 48, 2, loss), 0);
        for (int short_batch = 1; short_batch < 48; short_batch += 7) {
            assert_int_equal(b->ops->train_steps(g.e, idx, short_batch, 1, loss), 0);
            eval_counts c;
            assert_int_equal(b->ops->evaluate(g.e, 0, &c), 0);
            b->ops->describe(g.e, text, sizeof text);
            if (!strstr(text, "; CUDA graph;"))
                fail_msg("%s: after a batch of %d: %s", precision_name((precision)prec),
                         short_batch, text);
        }
        rig_down(&g);
    }
}

/* This part's tests, in the order test_cuda runs them. */
#define CUDA_ENGINE_TESTS                                                                          \
    cmocka_unit_test(test_errors),                                                                 \
    cmocka_unit_test(test_evaluate_reads_written_params),                                          \
    cmocka_unit_test(test_short_batch_keeps_graph),                                                \
    cmocka_unit_test(test_data_parallel_hooks),                                                    \
    cmocka_unit_test(test_profile_describe_memory)
