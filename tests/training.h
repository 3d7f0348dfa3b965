/* The training fixture of the coordinator tests (cmocka programs only): a
 * synthetic data set with its initial parameters and shuffled order, an
 * engine started from them, its parameters read back, and a comparison of
 * two runs that prints its margin. */
#ifndef LB_TRAINING_H
#define LB_TRAINING_H

#include <stdio.h>
#include <stdlib.h>

#include "backends/registry.h"
#include "harness/run/init.h"
#include "tests/testing.h"

typedef struct setup {
    workload w;
    synth_set train, test;
    float *init;
    int32_t order[4096];
} setup;

static inline void make_setup(setup *s, const char *wname, int images)
{
    assert_int_equal(workload_get(wname, &s->w), 0);
    assert_true(images <= 4096);
    assert_int_equal(synth_make(&s->train, images, 28, 28, s->w.classes, 7), 0);
    assert_int_equal(synth_make(&s->test, 200, 28, 28, s->w.classes, 8), 0);
    s->init = malloc(sizeof(float) * s->w.param_count);
    assert_non_null(s->init);
    init_params(&s->w, 123, s->init);
    epoch_order(123, 0, images, 1, s->order);
}

static inline void free_setup(setup *s)
{
    synth_free(&s->train);
    synth_free(&s->test);
    free(s->init);
}

static inline engine *start(const backend *b, const setup *s, const engine_config *c)
{
    char err[512] = "";
    engine *e = backend_create(b, &s->w, c, err, sizeof err);
    if (!e)
        fail_msg("%s: create: %s", b->name, err);
    assert_int_equal(b->ops->set_params(e, s->init), 0);
    assert_int_equal(b->ops->bind_dataset(e, &s->train.d, &s->test.d), 0);
    return e;
}

static inline float *params_of(const backend *b, engine *e, size_t n)
{
    float *p = malloc(sizeof(float) * n);
    assert_non_null(p);
    if (b->ops->get_params(e, p) != 0)
        fail_msg("%s: get_params: %s", b->name, b->ops->error(e));
    return p;
}

static inline void expect_close(const char *what, const float *got, const float *want, size_t n,
                         double rel, double floor_)
{
    double d = max_rel_diff(got, want, n, floor_);
    print_message("%s: largest relative difference %.3g\n", what, d);
    if (!(d <= rel))
        fail_msg("%s differ by %.3g (relative), more than %.3g", what, d, rel);
}

#endif
