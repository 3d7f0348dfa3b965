/* The data-parallel coordinator and its in-process communicator: R replicas
 * in synchronous mode train like one replica with the whole batch (even
 * split, uneven split, a batch smaller than R); parameter averaging with k =
 * 1 and plain SGD equals synchronous training; averaging with k > 1 and the
 * optimiser state matches a hand-made reference; the result does not depend
 * on how the harness cuts the steps into calls; failures come back as
 * errors. blas and multi-gpu are checked when built and runnable, and
 * skipped visibly otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/engine.h"
#include "backends/registry.h"
#include "harness/run/init.h"
#include "harness/run/options.h"
#include "harness/run/plan.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/workers.h"
#include "tests/testing.h"
#include "tests/training.h"

extern const backend naive_backend;

/* ---------------------------------------------------------------------- */
/* The in-process communicator and the worker team                         */

#define MEMBERS 3
#define LEN 1001

typedef struct member_args {
    communicator *c;
    float buf[LEN];
    float weight;
    size_t n;
    int rc_sum, rc_bcast;
    char error[256]; /* comm_error after a failed sum, kept past the group */
} member_args;

/* Sums alone, 3 members: sum_m w_m (m + 1)(i + 1) = (0.5 + 0.5 + 6)(i + 1). */
static void *sum_only(void *p)
{
    member_args *a = p;
    for (size_t i = 0; i < LEN; i++)
        a->buf[i] = (float)((a->c->rank + 1) * (int)(i + 1));
    a->rc_sum = comm_allreduce_sum(a->c, a->buf, a->n, a->weight);
    return a;
}

/* The sum, then a broadcast from member 2. */
static void *member_main(void *p)
{
    member_args *a = sum_only(p);
    if (a->rc_sum)
        snprintf(a->error, sizeof a->error, "%s", comm_error(a->c));
    comm_barrier(a->c);
    if (a->rc_sum == 0) {
        for (size_t i = 0; i < LEN; i++)
            a->buf[i] = a->c->rank == 2 ? (float)i * 0.5f : -1.0f;
        a->rc_bcast = comm_broadcast(a->c, a->buf, LEN, 2);
    }
    return NULL;
}

/* MEMBERS threads of one in-process group, member m running body on
 * args[m] with weight 0.5, 0.25, 2 and lens[m] floats. */
static void run_members(void *(*body)(void *), member_args *args, const size_t *lens)
{
    char err[256];
    inproc_group *g = inproc_group_create(MEMBERS, MEM_HOST, NULL, err, sizeof err);
    assert_non_null(g);
    pthread_t t[MEMBERS];
    const float weights[MEMBERS] = {0.5f, 0.25f, 2.0f};
    for (int m = 0; m < MEMBERS; m++) {
        args[m].c = inproc_group_member(g, m);
        args[m].weight = weights[m];
        args[m].n = lens[m];
        assert_int_equal(pthread_create(&t[m], NULL, body, &args[m]), 0);
    }
    for (int m = 0; m < MEMBERS; m++)
        pthread_join(t[m], NULL);
    inproc_group_destroy(g);
}

/* run_members with LEN floats on every member: each sum succeeds, and
 * every member's buf[i] is then exactly slope * i + intercept. */
static void run_full_length(void *(*body)(void *), member_args *args, float slope,
                            float intercept)
{
    const size_t lens[MEMBERS] = {LEN, LEN, LEN};
    run_members(body, args, lens);
    for (int m = 0; m < MEMBERS; m++) {
        assert_int_equal(args[m].rc_sum, 0);
        for (size_t i = 0; i < LEN; i++)
            assert_float_equal(args[m].buf[i], slope * (float)i + intercept, 0.0f);
    }
}

static void test_inproc_allreduce_and_broadcast(void **state)
{
    (void)state;
    static member_args args[MEMBERS];
    run_full_length(member_main, args, 0.5f, 0.0f);
    for (int m = 0; m < MEMBERS; m++)
        assert_int_equal(args[m].rc_bcast, 0);
    /* a group of one: the sum is its own buffer, weighted */
    char err[256];
    inproc_group *g = inproc_group_create(1, MEM_HOST, NULL, err, sizeof err);
    assert_non_null(g);
    float one[4] = {1, 2, 3, 4};
    assert_int_equal(comm_allreduce_sum(inproc_group_member(g, 0), one, 4, 0.5f), 0);
    assert_float_equal(one[3], 2.0f, 0.0f);
    inproc_group_destroy(g);
}

static void test_inproc_weighted_sum_values(void **state)
{
    (void)state;
    static member_args args[MEMBERS];
    run_full_length(sum_only, args, 7.0f, 7.0f); /* 7 (i + 1) */
}

/* Members that disagree on the length all fail, none hangs. */
static void test_inproc_mismatch_fails_everywhere(void **state)
{
    (void)state;
    static member_args args[MEMBERS];
    const size_t lens[MEMBERS] = {LEN, LEN - 1, LEN};
    run_members(member_main, args, lens);
    for (int m = 0; m < MEMBERS; m++)
        assert_int_not_equal(args[m].rc_sum, 0);
    assert_non_null(strstr(args[0].error, "different length"));
}

typedef struct team_probe {
    pthread_t seen[4];
    int calls[4];
} team_probe;

static void note_thread(void *ctx, int i)
{
    team_probe *p = ctx;
    p->seen[i] = pthread_self();
    p->calls[i]++;
}

static void test_worker_team_runs_each_index_on_its_thread(void **state)
{
    (void)state;
    char err[128];
    worker_team *t = worker_team_create(4, err, sizeof err);
    assert_non_null(t);
    team_probe first = {0}, second = {0};
    worker_team_run(t, note_thread, &first);
    worker_team_run(t, note_thread, &second);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(first.calls[i], 1);
        assert_int_equal(second.calls[i], 1);
        /* the same thread each time, a different one per index */
        assert_true(pthread_equal(first.seen[i], second.seen[i]));
        assert_false(pthread_equal(first.seen[i], pthread_self()));
        for (int j = 0; j < i; j++)
            assert_false(pthread_equal(first.seen[i], first.seen[j]));
    }
    worker_team_destroy(t);
}

/* --replicas reads as every list of counts does (options.h): ascending,
 * and a repeat is refused as it is in --micro-batches. */
static void test_parse_replicas(void **state)
{
    (void)state;
    int out[4], n = 0;
    assert_int_equal(option_whole_list(NULL, "--replicas", "4,1,2", 1, DP_MAX_REPLICAS, out, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 4);
    assert_int_equal(option_whole_list(NULL, "--replicas", "2", 1, DP_MAX_REPLICAS, out, 4, &n), 0);
    assert_int_equal(n, 1);
    static const char *const bad[] = {"4,1,2,2", "0", "1,,2", "2x", "1,2,3,4,5", "65", "+2",
                                       " 2", "2,", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(
            option_whole_list(NULL, "--replicas", bad[i], 1, DP_MAX_REPLICAS, out, 4, &n), 2);
}

/* ---------------------------------------------------------------------- */
/* Training                                                                 */

static engine_config config(int batch, optimizer_kind kind)
{
    engine_config c;
    memset(&c, 0, sizeof c);
    c.batch_size = batch;
    c.threads = 1;
    c.opt.kind = kind;
    c.opt.lr = kind == OPT_ADAM ? 0.001f : 0.05f;
    c.opt.momentum = 0.9f;
    c.opt.weight_decay = 5e-4f;
    c.opt.beta1 = 0.9f;
    c.opt.beta2 = 0.999f;
    c.opt.eps = 1e-8f;
    return c;
}

/* Trains `steps` steps of `batch` from order[first...], in calls of 1, 2,
 * 3, ... steps (the harness cuts its calls by timing), then one partial
 * batch of `tail` images when tail > 0. */
static void train(const backend *b, engine *e, const int32_t *order, int batch, int steps,
                  int tail, float *losses)
{
    int done = 0, chunk = 1;
    while (done < steps) {
        int k = chunk < steps - done ? chunk : steps - done;
        if (b->ops->train_steps(e, order + (size_t)done * batch, batch, k, losses + done) != 0)
            fail_msg("%s: train_steps: %s", b->name, b->ops->error(e));
        done += k;
        chunk++;
    }
    if (tail > 0 &&
        b->ops->train_steps(e, order + (size_t)steps * batch, tail, 1, losses + steps) != 0)
        fail_msg("%s: train_steps (tail): %s", b->name, b->ops->error(e));
}

/* The parameters of engine a (of backend ba) held to those of b as
 * expect_close holds them. */
static void expect_params_close(const char *what, const backend *ba, engine *a,
                                const backend *bb, engine *b, size_t n, double rel,
                                double floor_)
{
    float *pa = params_of(ba, a, n), *pb = params_of(bb, b, n);
    expect_close(what, pa, pb, n, rel, floor_);
    free(pa);
    free(pb);
}

/* R replicas with batch B against one replica with batch B, step by step. */
static void check_sync(const backend *inner, const char *wname, optimizer_kind kind, int R,
                       int batch, int steps, int tail, double loss_rel, double param_rel)
{
    setup s;
    make_setup(&s, wname, batch * steps + tail);
    engine_config c = config(batch, kind);
    dp_options o = {.replicas = R};
    const backend *dp = dp_wrap(inner, &o, NULL);
    assert_non_null(dp);
    engine *one = start(inner, &s, &c), *many = start(dp, &s, &c);
    int threads = 0, devices = 0, replicas = 0;
    dp->ops->placement(many, &threads, &devices, &replicas);
    assert_int_equal(replicas, R);

    float ref[512], got[512];
    assert_true(steps + 1 <= 512);
    train(inner, one, s.order, batch, steps, tail, ref);
    train(dp, many, s.order, batch, steps, tail, got);
    const int n = steps + (tail > 0);
    for (int i = 0; i < n; i++)
        assert_true(isfinite(got[i]));
    char what[128];
    snprintf(what, sizeof what, "%s x%d %s losses over %d steps", inner->name, R, wname, n);
    expect_close(what, got, ref, (size_t)n, loss_rel, 0.0);
    snprintf(what, sizeof what, "%s x%d %s parameters", inner->name, R, wname);
    expect_params_close(what, dp, many, inner, one, s.w.param_count, param_rel, 1e-2);
    /* the model learnt something: not a comparison of two idle runs */
    assert_true(got[n - 1 - (tail > 0)] < got[0]);
    inner->ops->destroy(one);
    dp->ops->destroy(many);
    free_setup(&s);
}

static void test_two_naive_replicas_equal_one(void **state)
{
    (void)state;
    check_sync(&naive_backend, "lenet", OPT_NESTEROV, 2, 16, 12, 0, 1e-5, 1e-4);
}

/* 7 images over 3 replicas: 3, 2, 2, weighted by share; then a tail of 2
 * images, so one replica has nothing and must weigh nothing. */
static void test_uneven_split_equals_one(void **state)
{
    (void)state;
    check_sync(&naive_backend, "mlp", OPT_ADAM, 3, 7, 30, 2, 1e-5, 1e-4);
}

static void test_blas_replicas_equal_one(void **state)
{
    (void)state;
#ifdef HAVE_BLAS
    char why[256] = "";
    if (!backend_runnable(backend_find("blas"), PREC_FP32, why, sizeof why)) {
        print_message("blas cannot run here: %s\n", why);
        skip();
    }
    check_sync(backend_find("blas"), "lenet", OPT_NESTEROV, 2, 16, 12, 5, 1e-5, 1e-4);
#else
    print_message("blas backend not built: not checked\n");
    skip();
#endif
}

/* DL4J's ParallelWrapper with averaging every step and plain SGD: replica r
 * steps from w with its own batch and the mean of the R results is
 * w - lr mean_r(g_r): one step with all R batches together. */
static void test_averaging_every_step_sgd_equals_sync(void **state)
{
    (void)state;
    const int R = 2, B = 8, rounds = 10;
    setup s;
    make_setup(&s, "lenet", R * B * rounds);
    engine_config c_avg = config(B, OPT_SGD), c_sync = config(R * B, OPT_SGD);
    dp_options avg = {.replicas = R, .averaging_frequency = 1};
    dp_options sync = {.replicas = R};
    const backend *b_avg = dp_wrap(&naive_backend, &avg, NULL);
    const backend *b_sync = dp_wrap(&naive_backend, &sync, NULL);
    engine *e_avg = start(b_avg, &s, &c_avg), *e_sync = start(b_sync, &s, &c_sync);
    float l_avg[64], l_sync[64], mean[64];
    train(b_avg, e_avg, s.order, B, R * rounds, 0, l_avg);
    train(b_sync, e_sync, s.order, R * B, rounds, 0, l_sync);
    /* a round's reported losses are its replicas' own; their mean is the
     * synchronous step's loss */
    for (int r = 0; r < rounds; r++)
        mean[r] = 0.5f * (l_avg[2 * r] + l_avg[2 * r + 1]);
    expect_close("averaging k=1 vs synchronous, round losses", mean, l_sync, (size_t)rounds,
                 1e-5, 0.0);
    expect_params_close("averaging k=1 vs synchronous, parameters", b_avg, e_avg, b_sync,
                        e_sync, s.w.param_count, 1e-4, 1e-2);
    assert_true(mean[rounds - 1] < mean[0]);
    b_avg->ops->destroy(e_avg);
    b_sync->ops->destroy(e_sync);
    free_setup(&s);
}

/* Averaging every k = 2 steps of each replica, optimiser state included,
 * against two plain naive engines averaged by hand. */
static void test_averaging_with_state_matches_reference(void **state)
{
    (void)state;
    const int R = 2, B = 8, k = 2, rounds = 6;
    setup s;
    make_setup(&s, "mlp", R * B * rounds);
    engine_config c = config(B, OPT_NESTEROV);
    dp_options o = {.replicas = R, .averaging_frequency = k, .average_optimizer_state = 1};
    const backend *dp = dp_wrap(&naive_backend, &o, NULL);
    engine *e = start(dp, &s, &c);
    float losses[64];
    train(dp, e, s.order, B, R * rounds, 0, losses);
    float *got = params_of(dp, e, s.w.param_count);

    const backend *nb = &naive_backend;
    engine *rep[2] = {start(nb, &s, &c), start(nb, &s, &c)};
    float ref_losses[64];
    const size_t n = s.w.param_count;
    for (int round = 0; round < rounds; round++) {
        for (int r = 0; r < R; r++) {
            const int step = round * R + r; /* batch t goes to replica t mod R */
            assert_int_equal(nb->ops->train_steps(rep[r], s.order + (size_t)step * B, B, 1,
                                             &ref_losses[step]), 0);
        }
        if ((round + 1) % k)
            continue;
        const engine_buffer which[2] = {BUF_PARAMS, BUF_OPT_STATE};
        for (int w = 0; w < 2; w++) {
            size_t n0, n1;
            float *a = nb->dp->buffer(rep[0], which[w], &n0),
                  *b = nb->dp->buffer(rep[1], which[w], &n1);
            assert_int_equal(n0, n);
            for (size_t i = 0; i < n; i++)
                a[i] = b[i] = (float)(0.5 * ((double)a[i] + b[i]));
        }
    }
    float *want = params_of(nb, rep[0], n);
    expect_close("averaging k=2 with optimiser state, losses", losses, ref_losses,
                 (size_t)(R * rounds), 1e-5, 0.0);
    expect_close("averaging k=2 with optimiser state, parameters", got, want, n, 1e-5, 1e-3);
    free(got);
    free(want);
    nb->ops->destroy(rep[0]);
    nb->ops->destroy(rep[1]);
    dp->ops->destroy(e);
    free_setup(&s);
}

/* Which replica trains which batch and when the parameters are averaged
 * depend on the step count only, not on how the steps arrive. */
static void test_averaging_independent_of_call_sizes(void **state)
{
    (void)state;
    const int R = 3, B = 5, steps = 17;
    setup s;
    make_setup(&s, "mlp", B * steps);
    engine_config c = config(B, OPT_NESTEROV);
    dp_options o = {.replicas = R, .averaging_frequency = 2};
    const backend *dp = dp_wrap(&naive_backend, &o, NULL);
    engine *a = start(dp, &s, &c), *b = start(dp, &s, &c);
    float la[32], lb[32];
    train(dp, a, s.order, B, steps, 0, la); /* calls of 1, 2, 3, ... steps */
    assert_int_equal(dp->ops->train_steps(b, s.order, B, steps, lb), 0); /* one call */
    for (int i = 0; i < steps; i++)
        assert_memory_equal(&la[i], &lb[i], sizeof(float));
    float *pa = params_of(dp, a, s.w.param_count), *pb = params_of(dp, b, s.w.param_count);
    assert_memory_equal(pa, pb, sizeof(float) * s.w.param_count);
    free(pa);
    free(pb);
    dp->ops->destroy(a);
    dp->ops->destroy(b);
    free_setup(&s);
}

/* A replica's failure comes back as the step's error, naming the replica;
 * the other replicas are not left waiting. */
static void test_replica_failure_is_reported(void **state)
{
    (void)state;
    setup s;
    make_setup(&s, "mlp", 64);
    engine_config c = config(8, OPT_SGD);
    dp_options o = {.replicas = 2};
    const backend *dp = dp_wrap(&naive_backend, &o, NULL);
    engine *e = start(dp, &s, &c);
    int32_t bad[8] = {0, 1, 2, 3, 4, 5, 6, 99999}; /* replica 1's slice */
    float loss;
    assert_int_not_equal(dp->ops->train_steps(e, bad, 8, 1, &loss), 0);
    assert_non_null(strstr(dp->ops->error(e), "replica 1"));
    /* and it goes on working */
    assert_int_equal(dp->ops->train_steps(e, s.order, 8, 1, &loss), 0);
    assert_true(isfinite(loss));
    /* more images than the engine was created for */
    assert_int_not_equal(dp->ops->train_steps(e, s.order, 9, 1, &loss), 0);
    dp->ops->destroy(e);
    free_setup(&s);
}

/* multi-gpu: --gpus 2 (two replicas, on two GPUs or sharing one) against
 * the cuda backend with the whole batch. */
static void test_multi_gpu_equals_one_gpu(void **state)
{
    (void)state;
    char why[512] = "";
    if (!multi_gpu_backend.built) {
        print_message("multi-gpu not built: %s\n", multi_gpu_backend.not_built_reason);
        skip();
    }
    if (!backend_runnable(&multi_gpu_backend, PREC_FP32, why, sizeof why)) {
        print_message("multi-gpu cannot run here: %s\n", why);
        skip();
    }
#ifdef HAVE_CUDA
    /* fp32 on the GPU sums in other orders: a looser bound than the CPU's */
    check_sync(backend_find("cuda"), "lenet", OPT_NESTEROV, 2, 32, 10, 0, 1e-4, 1e-3);
    dp_options o = {.replicas = 2, .spread_over_gpus = 1};
    const backend *mg = dp_wrap(backend_find("cuda"), &o, "multi-gpu");
    setup s;
    make_setup(&s, "lenet", 32 * 10);
    engine_config c = config(32, OPT_NESTEROV);
    engine *one = start(backend_find("cuda"), &s, &c), *two = start(mg, &s, &c);
    float ref[16], got[16];
    train(backend_find("cuda"), one, s.order, 32, 10, 0, ref);
    train(mg, two, s.order, 32, 10, 0, got);
    expect_close("multi-gpu x2 losses", got, ref, 10, 1e-4, 0.0);
    char desc[256];
    mg->ops->describe(two, desc, sizeof desc);
    print_message("multi-gpu: %s\n", desc);
    backend_find("cuda")->ops->destroy(one);
    mg->ops->destroy(two);
    free_setup(&s);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_allreduce_and_broadcast),
        cmocka_unit_test(test_inproc_weighted_sum_values),
        cmocka_unit_test(test_inproc_mismatch_fails_everywhere),
        cmocka_unit_test(test_worker_team_runs_each_index_on_its_thread),
        cmocka_unit_test(test_parse_replicas),
        cmocka_unit_test(test_two_naive_replicas_equal_one),
        cmocka_unit_test(test_uneven_split_equals_one),
        cmocka_unit_test(test_blas_replicas_equal_one),
        cmocka_unit_test(test_averaging_every_step_sgd_equals_sync),
        cmocka_unit_test(test_averaging_with_state_matches_reference),
        cmocka_unit_test(test_averaging_independent_of_call_sizes),
        cmocka_unit_test(test_replica_failure_is_reported),
        cmocka_unit_test(test_multi_gpu_equals_one_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
