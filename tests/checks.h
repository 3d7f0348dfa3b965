/* What the cmocka programs of several engines' tests do alike, with
 * cmocka's asserts (include cmocka.h first): a zeroed buffer of floats
 * that must be had, the check of an engine's layer profile. */
#ifndef LB_TESTS_CHECKS_H
#define LB_TESTS_CHECKS_H

#include <stdlib.h>

#include "backends/engine.h"

/* n zeroed floats (one at least); freed with free(). */
static inline float *floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* A profile of `reps` steps on the batch `indices`: a time for each of w's
 * layers, none negative, and some time spent. */
static inline void expect_profile(const backend *b, engine *e, const int32_t *indices, int batch,
                                  int reps, const workload *w)
{
    layer_times t;
    assert_int_equal(b->ops->profile_layers(e, indices, batch, reps, &t), 0);
    assert_int_equal(t.n_layers, w->n_layers);
    double total = 0;
    for (int i = 0; i < w->n_layers; i++) {
        assert_true(t.forward_ms[i] >= 0 && t.backward_ms[i] >= 0);
        total += t.forward_ms[i] + t.backward_ms[i];
    }
    assert_true(total > 0);
}

#endif
