/* The input pipeline (parallel/prefetch.h): for depths 0, 1, 2 and 8 the
 * batches come out in order with bitwise the floats and labels of a plain
 * loop over lb_pixel; a batch stays intact while it is held and the
 * threads run ahead; no more than depth + 2 buffers and depth prepared
 * batches; stopping early returns (a watchdog ends the program otherwise);
 * a bad index is an error at its batch, not a crash; bad arguments are
 * refused; the stall is accounted.
 *
 * `test_prefetch --bench [compute_us] [sleep|spin]` instead measures depths
 * 0, 1, 2 and 4 on a synthetic compute stage (not a test): the compute
 * stage's stall, and the share of depth 0's stall each depth hides. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/common/elementwise.h"
#include "base/clock.h"
#include "harness/run/init.h"
#include "parallel/prefetch.h"
#include "tests/testing.h"

#define ROWS 28
#define COLS 28
#define PIXELS (ROWS * COLS)

static const int depths[] = {0, 1, 2, 8};
#define DEPTHS (int)(sizeof depths / sizeof depths[0])

/* A data set of random bytes (every value 0..255 occurs) and labels. */
typedef struct bytes_set {
    dataset d;
    uint8_t *images, *labels;
} bytes_set;

static void set_make(bytes_set *s, int count, uint64_t seed)
{
    s->images = malloc((size_t)count * PIXELS);
    s->labels = malloc((size_t)count);
    assert_non_null(s->images);
    assert_non_null(s->labels);
    rng r = {seed};
    for (size_t k = 0; k < (size_t)count * PIXELS; k++)
        s->images[k] = (uint8_t)(rng_next(&r) >> 56);
    for (int n = 0; n < count; n++)
        s->labels[n] = (uint8_t)(rng_next(&r) % 10);
    s->d = (dataset){count, ROWS, COLS, s->images, s->labels};
}

static void set_free(bytes_set *s)
{
    free(s->images);
    free(s->labels);
}

/* steps * batch indices drawn with repeats, the first and last image among
 * them. */
static int32_t *random_indices(int count, int batch, long steps, uint64_t seed)
{
    const size_t n = (size_t)batch * (size_t)steps;
    int32_t *idx = malloc(n * sizeof *idx);
    assert_non_null(idx);
    rng r = {seed};
    for (size_t k = 0; k < n; k++)
        idx[k] = (int32_t)(rng_next(&r) % (uint64_t)count);
    idx[0] = count - 1;
    idx[n - 1] = 0;
    return idx;
}

/* What a test runs the pipeline over: a data set of `count` images and
 * `steps` batches of `batch` indices into it (random_indices). */
typedef struct fixture {
    bytes_set s;
    int batch;
    long steps;
    int32_t *idx;
} fixture;

static void fixture_make(fixture *f, int count, int batch, long steps, uint64_t seed)
{
    set_make(&f->s, count, seed);
    f->batch = batch;
    f->steps = steps;
    f->idx = random_indices(count, batch, steps, seed + 1);
}

static void fixture_free(fixture *f)
{
    free(f->idx);
    set_free(&f->s);
}

/* The plain loop the pipeline must equal, bit for bit. */
static void check_batch(const prefetch_batch *b, const bytes_set *s, const int32_t *indices,
                        int batch, long step)
{
    assert_non_null(b);
    assert_int_equal(b->step, step);
    assert_int_equal(b->count, batch);
    assert_int_equal(b->pixels_per_image, PIXELS);
    assert_ptr_equal(b->indices, indices + (size_t)step * batch);
    for (int i = 0; i < batch; i++) {
        const int32_t n = indices[(size_t)step * batch + i];
        assert_int_equal(b->labels[i], s->labels[n]);
        float want[PIXELS];
        for (int p = 0; p < PIXELS; p++)
            want[p] = lb_pixel(s->images[(size_t)n * PIXELS + p]);
        if (memcmp(want, b->pixels + (size_t)i * PIXELS, sizeof want) != 0)
            fail_msg("step %ld, image %d (index %d): floats differ from lb_pixel of the bytes",
                     step, i, n);
    }
}

/* A pipeline over s's images in the order idx, or the test fails saying
 * why it would not start. */
static prefetch *start(const bytes_set *s, const int32_t *idx, int batch, long steps, int depth)
{
    char err[256] = "";
    prefetch *p = prefetch_start(&s->d, idx, batch, steps, depth, err, sizeof err);
    if (!p)
        fail_msg("%ld batches of %d, depth %d: %s", steps, batch, depth, err);
    return p;
}

/* Ends the program when a call does not return in time: a hang fails. */
static const char *watched;
static void watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = "test_prefetch: hung in ";
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, watched, strlen(watched)) < 0 ||
        write(2, "\n", 1) < 0)
        _exit(1);
    _exit(1);
}

static void watch(unsigned seconds, const char *what)
{
    watched = what;
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
}

/* start, under a watchdog of `seconds` until watched_stop. */
static prefetch *watched_start(const fixture *f, long steps, int depth, unsigned seconds,
                               const char *what)
{
    watch(seconds, what);
    return start(&f->s, f->idx, f->batch, steps, depth);
}

static int watched_stop(prefetch *p)
{
    const int rc = prefetch_stop(p);
    alarm(0);
    return rc;
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* ---------------------------------------------------------------------- */

/* Most tests run one check at every depth over a fixture of their own. */
typedef struct depth_test {
    int count, batch;
    long steps;
    uint64_t seed;
    void (*at_depth)(const fixture *f, int depth);
} depth_test;

static void test_every_depth(void **state)
{
    const depth_test *t = *state;
    fixture f;
    fixture_make(&f, t->count, t->batch, t->steps, t->seed);
    for (int k = 0; k < DEPTHS; k++)
        t->at_depth(&f, depths[k]);
    fixture_free(&f);
}

static void batches_in_order_bitwise(const fixture *f, int depth)
{
    prefetch *p = watched_start(f, f->steps, depth, 60, "taking every batch");
    for (long t = 0; t < f->steps; t++)
        check_batch(prefetch_take(p), &f->s, f->idx, f->batch, t);
    assert_null(prefetch_take(p));
    assert_null(prefetch_take(p));
    assert_null(prefetch_error(p));
    prefetch_stats st;
    prefetch_get_stats(p, &st);
    assert_int_equal(st.taken, f->steps);
    assert_int_equal(watched_stop(p), 0);
}

/* The caller holds one batch while the threads fill the queue: it stays
 * intact, the queue reaches depth and no more, and no more than depth + 2
 * buffers ever come out. */
static void memory_bounded_and_held_batch_intact(const fixture *f, int depth)
{
    prefetch *p = watched_start(f, f->steps, depth, 60, "taking with a slow consumer");
    const float *seen[64];
    int distinct = 0;
    for (long t = 0; t < f->steps; t++) {
        const prefetch_batch *b = prefetch_take(p);
        assert_non_null(b);
        prefetch_stats st;
        if (t == 0) { /* wait for the queue to fill, then a while longer */
            for (int waited = 0; waited < 10000; waited++) {
                prefetch_get_stats(p, &st);
                if (st.peak_ready >= depth)
                    break;
                sleep_ms(1);
            }
            sleep_ms(20);
            prefetch_get_stats(p, &st);
            if (st.peak_ready != depth)
                fail_msg("depth %d: %d batches prepared at most while one was held", depth,
                         st.peak_ready);
        } else if (t % 8 == 0) {
            sleep_ms(2);
        }
        check_batch(b, &f->s, f->idx, f->batch, t); /* after the threads ran ahead */
        int known = 0;
        for (int i = 0; i < distinct; i++)
            known |= seen[i] == b->pixels;
        if (!known && distinct < 64)
            seen[distinct++] = b->pixels;
    }
    prefetch_stats st;
    prefetch_get_stats(p, &st);
    const int bound = depth == 0 ? 1 : depth + 2;
    if (st.buffers > bound || distinct > bound || st.peak_ready > depth)
        fail_msg("depth %d: %d buffers allocated, %d seen, %d batches ready at most; "
                 "bound %d buffers",
                 depth, st.buffers, distinct, st.peak_ready, bound);
    assert_int_equal(watched_stop(p), 0);
}

static void early_stop_returns(const fixture *f, int depth)
{
    for (int taken = 0; taken <= 1; taken++) {
        prefetch *p =
            watched_start(f, f->steps, depth, 20, "prefetch_stop after one of 100 batches");
        if (taken)
            check_batch(prefetch_take(p), &f->s, f->idx, f->batch, 0);
        assert_int_equal(watched_stop(p), 0);
    }
}

/* A depth above the number of batches: no more buffers than batches. */
static void test_depth_over_the_steps(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 400, 64, 100, 31);
    prefetch *p = watched_start(&f, 3, 50, 20, "prefetch_stop with a depth over the steps");
    prefetch_stats st;
    prefetch_get_stats(p, &st);
    assert_true(st.buffers <= 3);
    check_batch(prefetch_take(p), &f.s, f.idx, f.batch, 0);
    assert_int_equal(watched_stop(p), 0);
    fixture_free(&f);
}

/* An index outside the data set fails its batch: the batches before it
 * come out right, then NULL, the error names it, stop says -1. */
static void bad_index_is_an_error(const fixture *f, int depth)
{
    const struct {
        long step;
        int32_t value;
        const char *says;
    } cases[] = {{3, 100, "batch 3, image 2: index 100 outside the data set's 0..99"},
                 {0, -1, "batch 0, image 2: index -1 outside the data set's 0..99"}};
    for (int c = 0; c < 2; c++) {
        int32_t *bad = &f->idx[cases[c].step * f->batch + 2];
        const int32_t good = *bad;
        *bad = cases[c].value;
        prefetch *p = watched_start(f, f->steps, depth, 20, "taking up to a bad index");
        for (long t = 0; t < cases[c].step; t++)
            check_batch(prefetch_take(p), &f->s, f->idx, f->batch, t);
        assert_null(prefetch_take(p));
        assert_null(prefetch_take(p));
        const char *why = prefetch_error(p);
        assert_non_null(why);
        assert_string_equal(why, cases[c].says);
        prefetch_stats st;
        prefetch_get_stats(p, &st);
        assert_int_equal(st.taken, cases[c].step);
        assert_int_equal(watched_stop(p), -1);
        *bad = good;
    }
}

static void test_bad_arguments_refused(void **state)
{
    (void)state;
    bytes_set s;
    set_make(&s, 10, 51);
    int32_t idx[4] = {0, 1, 2, 3};
    dataset empty_rows = s.d;
    empty_rows.rows = 0;
    dataset no_images = s.d;
    no_images.images = NULL;
    const struct {
        const dataset *d;
        const int32_t *idx;
        int batch;
        long steps;
        int depth;
    } bad[] = {
        {NULL, idx, 2, 2, 1},        {&empty_rows, idx, 2, 2, 1}, {&no_images, idx, 2, 2, 1},
        {&s.d, idx, 0, 2, 1},        {&s.d, idx, 2, -1, 1},       {&s.d, idx, 2, 2, -1},
        {&s.d, NULL, 2, 2, 1},       {&s.d, idx, 2, 2, PREFETCH_MAX_DEPTH + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        prefetch *p = prefetch_start(bad[i].d, bad[i].idx, bad[i].batch, bad[i].steps,
                                     bad[i].depth, err, sizeof err);
        if (p)
            fail_msg("case %zu accepted", i);
        assert_true(strncmp(err, "prefetch: ", 10) == 0);
        assert_null(strchr(err, '\n'));
    }
    /* no batches: nothing to take, no error */
    for (int k = 0; k < DEPTHS; k++) {
        prefetch *p = start(&s, idx, 2, 0, depths[k]);
        assert_null(prefetch_take(p));
        assert_null(prefetch_error(p));
        assert_int_equal(prefetch_stop(p), 0);
    }
    assert_int_equal(prefetch_stop(NULL), 0);
    set_free(&s);
}

/* Depth 0 stalls for all of the input work; with threads the stall is
 * what the taker waited, within the time it spent taking. */
static void stall_accounted(const fixture *f, int depth)
{
    prefetch *p = watched_start(f, f->steps, depth, 60, "taking every batch");
    double in_take = 0;
    for (long t = 0; t < f->steps; t++) {
        const double t0 = now_seconds();
        const prefetch_batch *b = prefetch_take(p);
        in_take += now_seconds() - t0;
        assert_non_null(b);
    }
    prefetch_stats st;
    prefetch_get_stats(p, &st);
    assert_int_equal(watched_stop(p), 0);
    if (!(st.read_seconds > 0 && st.convert_seconds > 0 && st.wait_seconds > 0 &&
          st.wait_seconds <= in_take))
        fail_msg("depth %d: read %g s, convert %g s, waited %g s of %g s in take", depth,
                 st.read_seconds, st.convert_seconds, st.wait_seconds, in_take);
    if (depth == 0 && st.wait_seconds < st.read_seconds + st.convert_seconds)
        fail_msg("depth 0: waited %g s, less than the input work %g s", st.wait_seconds,
                 st.read_seconds + st.convert_seconds);
}

/* ---------------------------------------------------------------------- */
/* --bench: depth 0 against 1, 2 and 4 on a synthetic compute stage        */

static void compute_stage(double seconds, int spin)
{
    if (!spin) {
        const long ns = (long)(seconds * 1e9);
        nanosleep(&(struct timespec){ns / 1000000000L, ns % 1000000000L}, NULL);
        return;
    }
    const double end = now_seconds() + seconds;
    while (now_seconds() < end) {
    }
}

/* Wall time of one epoch; the pipeline's stats into st. */
static double bench_epoch(const dataset *d, const int32_t *idx, int batch, long steps, int depth,
                          double compute, int spin, prefetch_stats *st)
{
    char err[256];
    const double t0 = now_seconds();
    prefetch *p = prefetch_start(d, idx, batch, steps, depth, err, sizeof err);
    if (!p) {
        fprintf(stderr, "test_prefetch: %s\n", err);
        exit(1);
    }
    const prefetch_batch *b;
    while ((b = prefetch_take(p)))
        compute_stage(compute, spin);
    prefetch_get_stats(p, st);
    if (prefetch_stop(p)) {
        fprintf(stderr, "test_prefetch: the pipeline failed\n");
        exit(1);
    }
    return now_seconds() - t0;
}

/* The fastest of `reps` epochs (the others were slowed by the machine). */
static double bench_best(const dataset *d, const int32_t *idx, int batch, long steps, int depth,
                         double compute, int spin, int reps, prefetch_stats *best)
{
    double best_wall = -1;
    *best = (prefetch_stats){0};
    for (int r = 0; r < reps; r++) {
        prefetch_stats st;
        const double wall = bench_epoch(d, idx, batch, steps, depth, compute, spin, &st);
        if (best_wall < 0 || wall < best_wall) {
            best_wall = wall;
            *best = st;
        }
    }
    return best_wall;
}

static int bench(int argc, char **argv)
{
    const int count = 60000, batch = 256, reps = 5;
    const long steps = 200;
    double compute = argc > 2 ? atof(argv[2]) * 1e-6 : -1;
    const int spin = argc > 3 && strcmp(argv[3], "spin") == 0;
    if ((argc > 2 && compute < 0) || argc > 4 || (argc > 3 && !spin && strcmp(argv[3], "sleep"))) {
        fprintf(stderr, "usage: test_prefetch --bench [compute_us] [sleep|spin]\n");
        return 2;
    }
    bytes_set s;
    set_make(&s, count, 71);
    int32_t *idx = random_indices(count, batch, steps, 72);
    prefetch_stats st = {0};
    bench_best(&s.d, idx, batch, steps, 0, 0, 0, reps, &st);
    const double input = (st.read_seconds + st.convert_seconds) / (double)steps;
    if (compute < 0)
        compute = input; /* as long as the input work: all of it can hide */
    printf("%d images of %dx%d, %ld batches of %d in random order, fastest of %d epochs\n"
           "input work %.1f us a batch (read + convert at depth 0); compute stage %s %.1f us "
           "a batch\n",
           count, ROWS, COLS, steps, batch, reps, input * 1e6, spin ? "spins" : "sleeps",
           compute * 1e6);
    printf("%5s %9s %9s %7s %9s %8s\n", "depth", "epoch_s", "stall_s", "stall", "input_s",
           "hidden");
    const int bench_depths[] = {0, 1, 2, 4};
    double stall0 = 0;
    for (int k = 0; k < 4; k++) {
        const double wall =
            bench_best(&s.d, idx, batch, steps, bench_depths[k], compute, spin, reps, &st);
        if (k == 0)
            stall0 = st.wait_seconds;
        /* hidden: the share of depth 0's stall that this depth removes */
        printf("%5d %9.4f %9.4f %6.1f%% %9.4f %7.1f%%\n", bench_depths[k], wall,
               st.wait_seconds, 100 * st.wait_seconds / wall,
               st.read_seconds + st.convert_seconds, 100 * (1 - st.wait_seconds / stall0));
    }
    free(idx);
    set_free(&s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench(argc, argv);
    /* the fixture of each: images, batch, batches, seed */
    static const depth_test in_order = {300, 7, 23, 11, batches_in_order_bitwise},
                            bounded = {200, 5, 40, 21, memory_bounded_and_held_batch_intact},
                            early_stop = {400, 64, 100, 31, early_stop_returns},
                            bad_index = {100, 4, 6, 41, bad_index_is_an_error},
                            stall = {300, 32, 30, 61, stall_accounted};
    const struct CMUnitTest tests[] = {
        CASE_TEST("test_batches_in_order_bitwise", test_every_depth, &in_order),
        CASE_TEST("test_memory_bounded_and_held_batch_intact", test_every_depth, &bounded),
        CASE_TEST("test_early_stop_returns", test_every_depth, &early_stop),
        cmocka_unit_test(test_depth_over_the_steps),
        CASE_TEST("test_bad_index_is_an_error", test_every_depth, &bad_index),
        cmocka_unit_test(test_bad_arguments_refused),
        CASE_TEST("test_stall_accounted", test_every_depth, &stall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
