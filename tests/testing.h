/* Small helpers shared by the tests: a synthetic labelled image set that a
 * network can learn, and error measures. Header-only (static inline) so each
 * test binary takes what it uses. */
#ifndef LB_TESTING_H
#define LB_TESTING_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/engine.h"
#include "harness/run/init.h"

/* count images of rows x cols: faint noise (0..63) plus a bright 5x5 square
 * whose place depends on the label, so the classes can be told apart. */
typedef struct synth_set {
    dataset d;
    uint8_t *images, *labels;
} synth_set;

static inline int synth_make(synth_set *s, int count, int rows, int cols, int classes,
                             uint64_t seed)
{
    s->images = malloc((size_t)count * rows * cols);
    s->labels = malloc(count > 0 ? (size_t)count : 1);
    if (!s->images || !s->labels) {
        free(s->images);
        free(s->labels);
        return -1;
    }
    rng r = {seed};
    for (int n = 0; n < count; n++) {
        uint8_t *img = s->images + (size_t)n * rows * cols;
        const int label = (int)(rng_next(&r) % (uint64_t)classes);
        s->labels[n] = (uint8_t)label;
        for (int p = 0; p < rows * cols; p++)
            img[p] = (uint8_t)(rng_next(&r) & 63);
        /* squares on a 4-wide grid of cells, wrapping inside the image */
        const int cell_r = rows / 4 > 5 ? rows / 4 : 5, cell_c = cols / 4 > 5 ? cols / 4 : 5;
        const int top = ((label / 4) * cell_r + 1) % (rows - 4);
        const int left = ((label % 4) * cell_c + 1) % (cols - 4);
        for (int y = top; y < top + 5; y++)
            for (int x = left; x < left + 5; x++)
                img[y * cols + x] = (uint8_t)(192 + (rng_next(&r) & 63));
    }
    s->d = (dataset){count, rows, cols, s->images, s->labels};
    return 0;
}

static inline void synth_free(synth_set *s)
{
    free(s->images);
    free(s->labels);
    s->images = s->labels = NULL;
}

/* A cmocka test (struct CMUnitTest) of one test function over several
 * cases: the function finds its case in *state; `name` tells the cases
 * apart in the report. */
#define CASE_TEST(name, fn, case_state) {name, fn, NULL, NULL, (void *)(case_state)}

/* |a - b| relative to the larger magnitude, or to `floor` when both are
 * smaller than it (so values near zero compare absolutely). */
static inline double rel_diff(double a, double b, double floor)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    if (m < floor)
        m = floor;
    return fabs(a - b) / m;
}

/* The largest rel_diff(ref[i], got[i], floor) over n values; its index in
 * *at (0 when they all agree). */
static inline double worst_rel_diff(const double *ref, const double *got, int n, double floor,
                                    int *at)
{
    double worst = 0;
    *at = 0;
    for (int i = 0; i < n; i++)
        if (rel_diff(ref[i], got[i], floor) > worst)
            worst = rel_diff(ref[i], got[i], floor), *at = i;
    return worst;
}

/* max |got - ref| over the largest |ref|: an error relative to the
 * tensor's scale, so that elements near zero do not need the impossible;
 * INFINITY for a NaN. */
static inline double scaled_diff(const float *ref, const float *got, size_t n)
{
    double err = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]);
        if (isnan(d))
            return INFINITY;
        err = d > err ? d : err;
        scale = fabs((double)ref[i]) > scale ? fabs((double)ref[i]) : scale;
    }
    return scale > 0 ? err / scale : err;
}

/* Largest rel_diff over n pairs. */
static inline double max_rel_diff(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = rel_diff(a[i], b[i], floor);
        if (isnan(d))
            return INFINITY;
        if (d > worst)
            worst = d;
    }
    return worst;
}

/* The hyper-parameters the training tests use: lr 0.01 (Adam 0.001),
 * momentum 0.9, weight decay 5e-4, Adam's betas 0.9 and 0.999, eps 1e-8. */
static inline optimizer_config test_optimizer(optimizer_kind kind)
{
    return (optimizer_config){kind,   kind == OPT_ADAM ? 0.001f : 0.01f, 0.9f, 5e-4f, 0.9f,
                              0.999f, 1e-8f};
}

/* An fp32 configuration with those, everything else zero. */
static inline engine_config test_config(int batch, optimizer_kind kind, int threads)
{
    engine_config c = {0};
    c.batch_size = batch;
    c.opt = test_optimizer(kind);
    c.threads = threads;
    c.precision = PREC_FP32;
    return c;
}

#endif
