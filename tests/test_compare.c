/* bench compare: the speed verdict under noise (the U test itself is
 * tests/test_mann_whitney.c), the CSV reader, and whole comparisons of
 * synthetic runs (identical, slower, noisy, less accurate, failed,
 * numerically different, broken) checked for their exit status and for
 * naming the row and metric. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/formats/csv.h"
#include "harness/tools/compare.h"
#include "harness/common/stats.h"
#include "tests/scratch.h"

/* ---- the speed verdict ----------------------------------------------------- */

static uint64_t rng_state;

static double uniform(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void jittered(double *out, int n, double centre, double jitter)
{
    for (int i = 0; i < n; i++)
        out[i] = centre * (1 + jitter * (2 * uniform() - 1));
}

static double median_of(const double *v, int n) { return stats_of(v, n).median; }

static void test_speed_real_slowdown(void **state)
{
    (void)state;
    rng_state = 7;
    double base[9], next[9];
    jittered(base, 9, 1000, 0.05);
    jittered(next, 9, 1000 / 1.3, 0.05);
    speed_verdict v = judge_speed(median_of(base, 9), median_of(next, 9), base, 9, next, 9, 10,
                                  0.05);
    assert_true(v.u_test_used);
    assert_true(v.p < 0.001);
    assert_true(v.slowdown_pct > 20 && v.slowdown_pct < 40);
    assert_true(v.regression);
    /* faster is never a regression, however significant */
    v = judge_speed(median_of(next, 9), median_of(base, 9), next, 9, base, 9, 10, 0.05);
    assert_true(v.slowdown_pct < 0);
    assert_false(v.regression);
}

/* Samples from one distribution with +-5% jitter, against a 2% limit: the
 * medians alone would cry wolf often; with the U test the false alarms
 * stay near alpha/2 (one direction of a two-sided test). */
static void test_speed_noise_does_not_flap(void **state)
{
    (void)state;
    rng_state = 12345;
    int trials = 400, median_alarms = 0, verdict_alarms = 0;
    for (int t = 0; t < trials; t++) {
        double base[9], next[9];
        jittered(base, 9, 1000, 0.05);
        jittered(next, 9, 1000, 0.05);
        double mb = median_of(base, 9), mn = median_of(next, 9);
        median_alarms += (mb / mn - 1) * 100 > 2;
        verdict_alarms += judge_speed(mb, mn, base, 9, next, 9, 2, 0.05).regression;
    }
    /* the premise: a threshold alone would flap (about one run in five) */
    assert_true(median_alarms > trials / 10);
    assert_true(verdict_alarms <= trials * 0.05);
    /* and with the default 10% limit, never */
    rng_state = 99;
    for (int t = 0; t < trials; t++) {
        double base[9], next[9];
        jittered(base, 9, 1000, 0.05);
        jittered(next, 9, 1000, 0.05);
        assert_false(judge_speed(median_of(base, 9), median_of(next, 9), base, 9, next, 9, 10, 0.05)
                         .regression);
    }
}

static void test_speed_few_samples_threshold_alone(void **state)
{
    (void)state;
    const double base[] = {1000, 1010}, next[] = {760, 770};
    speed_verdict v = judge_speed(1005, 765, base, 2, next, 2, 10, 0.05);
    assert_false(v.u_test_used);
    assert_true(v.regression);
    v = judge_speed(1005, 950, base, 2, next, 2, 10, 0.05);
    assert_false(v.regression);
    /* no samples at all: the figures decide */
    v = judge_speed(1000, 800, NULL, 0, NULL, 0, 10, 0.05);
    assert_false(v.u_test_used);
    assert_true(v.regression);
}

/* Medians 15% apart, but the samples overlap so much that the difference
 * is not significant: no regression. */
static void test_speed_beyond_limit_but_not_significant(void **state)
{
    (void)state;
    const double base[] = {600, 1000, 1000, 1400, 1500, 500, 1450, 520};
    const double next[] = {560, 870, 870, 1400, 1450, 520, 1500, 600};
    speed_verdict v = judge_speed(1000, 870, base, 8, next, 8, 10, 0.05);
    assert_true(v.u_test_used);
    assert_true(v.slowdown_pct > 10);
    assert_true(v.p > 0.05);
    assert_false(v.regression);
}

/* ---- files ---------------------------------------------------------------- */

typedef struct fixture {
    char dir[SCRATCH_DIR_LEN];
} fixture;

SCRATCH_SETUP_TEARDOWN(fixture, "test_compare")

static void write_text(const char *path, const char *text)
{
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    assert_int_equal(fclose(out), 0);
}

static void test_csv_reader(void **state)
{
    fixture *f = *state;
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/t.csv", f->dir);
    write_text(path, "a,b,c\r\n1,\"x, \"\"y\"\"\",3\r\n\n4,,6");
    csv_table t;
    assert_int_equal(csv_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.n_cols, 3);
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(t.rows[0][1], "x, \"y\"");
    assert_string_equal(t.rows[0][2], "3");
    assert_string_equal(t.rows[1][1], "");
    assert_string_equal(t.rows[1][2], "6");
    assert_int_equal(t.lines[1], 4);
    assert_int_equal(csv_column(&t, "c"), 2);
    assert_int_equal(csv_column(&t, "d"), -1);
    csv_free(&t);

    static const struct {
        const char *text, *message;
    } bad[] = {
        {"a,b\n1,2\n3\n", "t.csv:3: 1 fields where the header has 2"},
        {"a,b\n1,\"2\n", "t.csv:2: a quoted field is never closed"},
        {"a,b\n1,2\"x\n", "t.csv:2: a double quote inside an unquoted field"},
        {"a,b\n\"1\"x,2\n", "t.csv:2: text after a closing quote"},
        {"", "t.csv: empty file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i].text);
        err[0] = 0;
        assert_int_equal(csv_read(path, &t, err, sizeof err), -1);
        assert_non_null(strstr(err, bad[i].message));
        csv_free(&t);
    }
    snprintf(path, sizeof path, "%s/none.csv", f->dir);
    assert_int_equal(csv_read(path, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "none.csv"));
    csv_free(&t);
}

/* A synthetic run: the harness's columns, by name. */
typedef struct fake_row {
    const char *backend;
    int threads;
    double images_per_second; /* centre of the per-epoch samples */
    double accuracy, loss;
    const char *status, *message;
} fake_row;

typedef struct fake_run {
    const fake_row *rows;
    int n_rows;
    int epochs, repeats;
    double jitter;          /* relative, uniform */
    const char *extra_args; /* appended to system.json's command line */
    int reorder_columns;    /* columns in another order, plus one more */
    const char *kernels;    /* appended to the details column */
} fake_run;

#define IMAGES 6000

static void write_run(const char *dir, const fake_run *run)
{
    assert_int_equal(mkdir(dir, 0777), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/epochs.csv", dir);
    FILE *e = fopen(path, "w");
    assert_non_null(e);
    fprintf(e, "backend,workload,precision,threads,devices,replicas,ranks,batch_size,optimizer,"
               "repeat,epoch,images,epoch_seconds,images_per_second,gflops_per_second,"
               "train_loss,test_loss,test_accuracy,status,message\n");
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    FILE *s = fopen(path, "w");
    assert_non_null(s);
    if (run->reorder_columns)
        fprintf(s, "status,images_per_second,backend,threads,workload,devices,precision,"
                   "batch_size,optimizer,epochs,images_per_epoch,epoch_seconds_median,"
                   "final_test_accuracy,final_train_loss,details,cpu_model,message,new_column\n");
    else
        fprintf(s, "backend,workload,precision,threads,devices,replicas,ranks,batch_size,optimizer,"
                   "epochs,repeats,images_per_epoch,epoch_seconds_median,images_per_second,"
                   "final_train_loss,final_test_accuracy,details,status,message,cpu_model\n");
    for (int i = 0; i < run->n_rows; i++) {
        const fake_row *r = &run->rows[i];
        int ok = !strcmp(r->status, "ok");
        double timed[256];
        int n_timed = 0;
        for (int rep = 1; ok && rep <= run->repeats; rep++)
            for (int ep = 1; ep <= run->epochs; ep++) {
                double ips = r->images_per_second * (1 + run->jitter * (2 * uniform() - 1));
                double sec = IMAGES / ips;
                if (ep > warmup_epochs(run->epochs))
                    timed[n_timed++] = sec;
                fprintf(e, "%s,lenet,fp32,%d,0,1,1,128,nesterov,%d,%d,%d,%.6f,%.1f,1.0,%.6f,"
                           "0.5,%.6f,ok,\n",
                        r->backend, r->threads, rep, ep, IMAGES, sec, ips, r->loss, r->accuracy);
            }
        double median = ok ? stats_of(timed, n_timed).median : 0;
        double ips = ok ? IMAGES / median : 0;
        if (run->reorder_columns)
            fprintf(s, "%s,%.1f,%s,%d,lenet,0,fp32,128,nesterov,%d,%d,%.6f,%.6f,%.6f,"
                       "\"fp32, %d threads%s\",Test CPU,%s,42\n",
                    r->status, ips, r->backend, r->threads, run->epochs, IMAGES, median,
                    r->accuracy, r->loss, r->threads, run->kernels ? run->kernels : "", r->message);
        else
            fprintf(s, "%s,lenet,fp32,%d,0,1,1,128,nesterov,%d,%d,%d,%.6f,%.1f,%.6f,%.6f,"
                       "\"fp32, %d threads%s\",%s,%s,Test CPU\n",
                    r->backend, r->threads, run->epochs, run->repeats, IMAGES, median, ips,
                    r->loss, r->accuracy, r->threads, run->kernels ? run->kernels : "", r->status,
                    r->message);
    }
    assert_int_equal(fclose(e), 0);
    assert_int_equal(fclose(s), 0);
    snprintf(path, sizeof path, "%s/system.json", dir);
    FILE *j = fopen(path, "w");
    assert_non_null(j);
    fprintf(j, "{\n  \"cpu_model\": \"Test CPU\",\n  \"command_line\": [\"./bench\", \"--backend\", "
               "\"naive,blas\", \"--epochs\", \"%d\", \"--limit\", \"6000\", \"--repeat\", \"%d\", "
               "\"--out\", \"%s\"%s]\n}\n",
            run->epochs, run->repeats, dir, run->extra_args ? run->extra_args : "");
    assert_int_equal(fclose(j), 0);
}

/* Runs `./bench compare ARGS... BASE NEW` in this process, keeping what it
 * printed (stdout and stderr together) in out. Returns the exit status. */
static int run_compare(const char *out_path, char *out, size_t out_len, const char *base,
                       const char *next, const char *opt1, const char *opt2)
{
    char *argv[8];
    int argc = 0;
    argv[argc++] = "compare";
    if (opt1)
        argv[argc++] = (char *)opt1;
    if (opt2)
        argv[argc++] = (char *)opt2;
    argv[argc++] = (char *)base;
    argv[argc++] = (char *)next;
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    assert_true(fd >= 0);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    int rc = compare_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    FILE *in = fopen(out_path, "r");
    assert_non_null(in);
    size_t n = fread(out, 1, out_len - 1, in);
    out[n] = 0;
    fclose(in);
    return rc;
}

typedef struct pair {
    char base[512], next[512], log[512];
    char out[65536];
} pair;

static pair *new_pair(const fixture *f, const char *name)
{
    pair *p = calloc(1, sizeof *p);
    assert_non_null(p);
    snprintf(p->base, sizeof p->base, "%s/%s-base", f->dir, name);
    snprintf(p->next, sizeof p->next, "%s/%s-new", f->dir, name);
    snprintf(p->log, sizeof p->log, "%s/%s.log", f->dir, name);
    return p;
}

static int compare_pair(pair *p, const char *opt1, const char *opt2)
{
    int rc = run_compare(p->log, p->out, sizeof p->out, p->base, p->next, opt1, opt2);
    if (getenv("TEST_COMPARE_VERBOSE")) /* to see what a failing check read */
        fprintf(stderr, "--- compare exit %d\n%s", rc, p->out);
    return rc;
}

/* A line of the output holding every one of the given words. */
static int line_has(const char *text, const char *a, const char *b, const char *c)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (strstr(buf, a) && (!b || strstr(buf, b)) && (!c || strstr(buf, c)))
            return 1;
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* BASE written as `run`, NEW as `run` with its rows replaced by next_rows. */
static pair *write_pair(const fixture *f, const char *name, fake_run run,
                        const fake_row *next_rows)
{
    pair *p = new_pair(f, name);
    write_run(p->base, &run);
    run.rows = next_rows;
    write_run(p->next, &run);
    return p;
}

static const fake_row two_backends[] = {
    {"naive", 1, 2400, 0.7810, 0.612345, "ok", ""},
    {"blas", 2, 12000, 0.7820, 0.612400, "ok", ""},
};

/* How NEW differs from two_backends: in row `row` (0 naive, 1 blas, -1
 * both), images/s divided by `slower` (0: the same), accuracy and loss
 * moved by the amounts given; and, when set, NEW's own extra_args and
 * kernels (fake_run's). */
typedef struct change {
    int row;
    double slower, accuracy, loss;
    const char *extra_args, *kernels;
} change;

/* BASE written as `run` of two_backends, NEW as `run` with `c` made. */
static pair *write_changed_pair(const fixture *f, const char *name, fake_run run, change c)
{
    pair *p = new_pair(f, name);
    run.rows = two_backends;
    write_run(p->base, &run);
    fake_row next[2] = {two_backends[0], two_backends[1]};
    for (int r = 0; r < 2; r++) {
        if (c.row >= 0 && c.row != r)
            continue;
        if (c.slower)
            next[r].images_per_second /= c.slower;
        next[r].accuracy += c.accuracy;
        next[r].loss += c.loss;
    }
    run.rows = next;
    if (c.extra_args)
        run.extra_args = c.extra_args;
    if (c.kernels)
        run.kernels = c.kernels;
    write_run(p->next, &run);
    return p;
}

static void test_identical_runs_pass(void **state)
{
    pair *p = new_pair(*state, "same");
    fake_run run = {two_backends, 2, 4, 3, 0.03, NULL, 0, NULL};
    rng_state = 1;
    write_run(p->base, &run);
    rng_state = 1;
    run.reorder_columns = 1; /* by name, not position; a new column is ignored */
    write_run(p->next, &run);
    assert_int_equal(compare_pair(p, NULL, NULL), 0);
    assert_true(line_has(p->out, "train loss", "identical", NULL));
    assert_true(line_has(p->out, "0 regressions", "exit 0", NULL));
    free(p);
}

static void test_injected_slowdown_fails_naming_row_and_metric(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.03, NULL, 0, NULL};
    rng_state = 2;
    pair *p = write_changed_pair(*state, "slow", run, (change){.row = 1, .slower = 1.3});
    assert_int_equal(compare_pair(p, NULL, NULL), 1);
    assert_true(line_has(p->out, "REGRESSION", "blas lenet fp32 batch=128 threads=2", "images/s"));
    assert_false(line_has(p->out, "REGRESSION", "naive", NULL));
    free(p);
}

static void test_noisy_equal_runs_pass(void **state)
{
    /* 20 pairs of runs, each epoch +-5% at random around the same speed */
    fake_run run = {two_backends, 2, 4, 3, 0.05, NULL, 0, NULL};
    rng_state = 3;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "noisy%d", i);
        pair *p = new_pair(*state, name);
        write_run(p->base, &run);
        write_run(p->next, &run); /* fresh jitter, same distribution */
        assert_int_equal(compare_pair(p, NULL, NULL), 0);
        assert_int_equal(compare_pair(p, "--relative-to", "naive"), 0);
        free(p);
    }
}

static void test_accuracy_drop_fails(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.0, NULL, 0, NULL};
    rng_state = 4;
    pair *p = write_changed_pair(*state, "acc", run, (change){.row = 0, .accuracy = -0.02});
    assert_int_equal(compare_pair(p, NULL, NULL), 1);
    assert_true(line_has(p->out, "REGRESSION", "naive lenet", "test accuracy"));
    assert_true(line_has(p->out, "2.00 points lower", NULL, NULL));
    /* within a wider limit it passes */
    assert_int_equal(compare_pair(p, "--max-accuracy-drop", "2.5"), 0);
    free(p);
}

static void test_failed_row_fails_skipped_row_is_noted(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.0, NULL, 0, NULL};
    rng_state = 5;
    /* a row that never started has threads 0: joined on the backend */
    fake_row failed[2] = {two_backends[0], {"blas", 0, 0, 0, 0, "diverged", "loss became NaN"}};
    pair *p = write_pair(*state, "status", run, failed);
    assert_int_equal(compare_pair(p, NULL, NULL), 1);
    assert_true(line_has(p->out, "REGRESSION", "blas", "diverged in NEW"));

    fake_row skipped[2] = {two_backends[0], {"blas", 0, 0, 0, 0, "skipped", "not built"}};
    pair *q = write_pair(*state, "skipped", run, skipped);
    assert_int_equal(compare_pair(q, NULL, NULL), 0);
    assert_true(line_has(q->out, "NOTE", "blas", "skipped in NEW"));
    free(p);
    free(q);
}

/* A machine 30% slower for every backend: absolute images/s regress, the
 * same-run ratio to naive does not. */
static void test_relative_to_cancels_machine_speed(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.02, NULL, 0, NULL};
    rng_state = 6;
    pair *p = write_changed_pair(*state, "machine", run, (change){.row = -1, .slower = 1.3});
    assert_int_equal(compare_pair(p, NULL, NULL), 1);
    assert_int_equal(compare_pair(p, "--relative-to", "naive"), 0);
    assert_true(line_has(p->out, "images/s / naive", NULL, NULL));
    assert_true(line_has(p->out, "reference (not judged)", NULL, NULL));

    /* blas alone slower: the ratio catches it */
    pair *q = write_changed_pair(*state, "blas-slower", run, (change){.row = 1, .slower = 1.3});
    assert_int_equal(compare_pair(q, "--relative-to", "naive"), 1);
    assert_true(line_has(q->out, "REGRESSION", "blas", "images/s / naive"));
    assert_int_equal(compare_pair(q, "--relative-to", "cuda"), 2);
    assert_true(line_has(q->out, "--relative-to cuda", "has no cuda row", NULL));
    free(p);
    free(q);
}

/* system.json of a run built by `compiler`, with the same command line as
 * write_run's. */
static void write_system_json(const char *dir, const char *compiler)
{
    char path[600], text[1024];
    snprintf(path, sizeof path, "%s/system.json", dir);
    snprintf(text, sizeof text, "{\"compiler\": \"%s\", \"command_line\": [\"./bench\", "
                                "\"--epochs\", \"4\", \"--limit\", \"6000\"]}\n", compiler);
    write_text(path, text);
}

static void test_changed_numerics(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.0, NULL, 0, NULL};
    rng_state = 8;
    const change loss_up = {.row = 0, .loss = 2e-5};
    pair *p = write_changed_pair(*state, "numerics", run, loss_up);
    assert_int_equal(compare_pair(p, NULL, NULL), 1);
    assert_true(line_has(p->out, "NUMERICS", "naive", "train loss"));
    assert_int_equal(compare_pair(p, "--numerics", "report"), 0);
    assert_true(line_has(p->out, "NOTE", "naive", "train loss"));

    /* a change at the CSV's rounding is the same numerics */
    pair *q = write_changed_pair(*state, "rounding", run, (change){.row = 0, .loss = 1e-6});
    assert_int_equal(compare_pair(q, NULL, NULL), 0);

    /* options that cannot change the numbers leave them judged */
    change c = loss_up;
    c.extra_args = ", \"--no-peak\", \"--step-losses\", \"steps.csv\", \"--format\", \"json\"";
    pair *o = write_changed_pair(*state, "no-peak", run, c);
    assert_int_equal(compare_pair(o, NULL, NULL), 1);
    assert_true(line_has(o->out, "NUMERICS", "naive", "train loss"));

    /* another seed: trained differently, not compared */
    c.extra_args = ", \"--seed\", \"7\"";
    pair *r = write_changed_pair(*state, "seed", run, c);
    assert_int_equal(compare_pair(r, NULL, NULL), 0);
    assert_true(line_has(r->out, "not compared", "training options differ", "--seed"));

    /* one option with two values names both (it said "--epochs=4 only in BASE") */
    c.extra_args = ", \"--epochs\", \"5\"";
    pair *e = write_changed_pair(*state, "epochs", run, c);
    assert_int_equal(compare_pair(e, NULL, NULL), 0);
    assert_true(line_has(e->out, "training options differ", "--epochs is 4 in BASE and 5 in NEW",
                         NULL));

    /* other library kernels: not judged either */
    c.extra_args = NULL;
    c.kernels = ", OpenBLAS Haswell";
    pair *k = write_changed_pair(*state, "kernels", run, c);
    assert_int_equal(compare_pair(k, NULL, NULL), 0);
    assert_true(line_has(k->out, "not judged", "engine details differ", "Haswell"));

    /* another compiler: not judged */
    pair *cc = write_changed_pair(*state, "compiler", run, loss_up);
    write_system_json(cc->next, "gcc 14.2.0");
    write_system_json(cc->base, "gcc 12.2.0");
    assert_int_equal(compare_pair(cc, NULL, NULL), 0);
    assert_true(line_has(cc->out, "not judged", "compilers differ", "gcc 14.2.0"));
    free(p), free(q), free(o), free(r), free(e), free(k), free(cc);
}

/* Rows trained with other --epochs or --limit are not compared on any
 * metric: a 30% slower NEW 3 points less accurate, trained longer, is no
 * regression (it was 12 REGRESSION verdicts and exit 1 while the loss said
 * "not judged"). */
static void test_rows_trained_differently_not_compared(void **state)
{
    fake_run run = {two_backends, 2, 4, 3, 0.0, NULL, 0, NULL};
    rng_state = 9;
    const change worse = {.row = -1, .slower = 1.3, .accuracy = -0.03, .loss = 0.1,
                          .extra_args = ", \"--epochs\", \"5\""};
    pair *e = write_changed_pair(*state, "epochs-apart", run, worse);
    assert_int_equal(compare_pair(e, NULL, NULL), 0);
    assert_false(line_has(e->out, "REGRESSION", NULL, NULL));
    assert_true(line_has(e->out, "naive", "images/s", "not compared"));
    assert_true(line_has(e->out, "blas", "images/s", "--epochs is 4 in BASE and 5 in NEW"));
    assert_true(line_has(e->out, "test accuracy", "not compared", NULL));
    assert_true(line_has(e->out, "NOTE", "blas", "not compared: training options differ"));

    change limit = worse;
    limit.extra_args = ", \"--limit\", \"3000\"";
    pair *l = write_changed_pair(*state, "limit-apart", run, limit);
    assert_int_equal(compare_pair(l, NULL, NULL), 0);
    assert_false(line_has(l->out, "REGRESSION", NULL, NULL));
    assert_true(line_has(l->out, "images/s", "not compared", "--limit is 6000 in BASE and 3000"));

    /* the same training, the same change: judged as before */
    change same = worse;
    same.extra_args = NULL;
    pair *j = write_changed_pair(*state, "judged", run, same);
    assert_int_equal(compare_pair(j, NULL, NULL), 1);
    assert_true(line_has(j->out, "REGRESSION", "blas", "images/s"));
    free(e), free(l), free(j);
}

/* Data-parallel rows of one backend differ only by replicas: each joins
 * its own kind, and the slower one is named with its replicas. */
static void test_replicas_join_apart(void **state)
{
    pair *p = new_pair(*state, "replicas");
    static const char header[] = "backend,workload,precision,threads,devices,replicas,ranks,"
                                 "batch_size,status,images_per_second,epoch_seconds_median,"
                                 "final_test_accuracy,final_train_loss\n";
    char path[600], text[1024];
    assert_int_equal(mkdir(p->base, 0777), 0);
    assert_int_equal(mkdir(p->next, 0777), 0);
    snprintf(path, sizeof path, "%s/summary.csv", p->base);
    snprintf(text, sizeof text, "%snaive,lenet,fp32,1,0,1,1,128,ok,2400,2.5,0.78,0.6\n"
                                "naive,lenet,fp32,2,0,2,1,128,ok,4400,1.36,0.78,0.6\n", header);
    write_text(path, text);
    snprintf(path, sizeof path, "%s/summary.csv", p->next);
    snprintf(text, sizeof text, "%snaive,lenet,fp32,2,0,2,1,128,ok,3000,2.0,0.78,0.6\n"
                                "naive,lenet,fp32,1,0,1,1,128,ok,2400,2.5,0.78,0.6\n", header);
    write_text(path, text);
    assert_int_equal(compare_pair(p, "--relative-to", "naive"), 1);
    assert_true(line_has(p->out, "REGRESSION", "threads=2 devices=0 replicas=2", "images/s / naive"));
    assert_true(line_has(p->out, "threads=1 devices=0 |", "reference (not judged)", NULL));
    free(p);
}

static void test_unusable_input_exits_2(void **state)
{
    fixture *f = *state;
    pair *p = new_pair(f, "broken");
    fake_run run = {two_backends, 2, 4, 3, 0.0, NULL, 0, NULL};
    write_run(p->base, &run);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nowhere", f->dir);
    assert_int_equal(run_compare(p->log, p->out, sizeof p->out, p->base, missing, NULL, NULL), 2);
    assert_true(line_has(p->out, "NEW", "nowhere", NULL));

    /* no common rows */
    static const fake_row other[] = {{"cuda", 1, 50000, 0.78, 0.6, "ok", ""}};
    fake_run run2 = {other, 1, 4, 3, 0.0, NULL, 0, NULL};
    write_run(p->next, &run2);
    assert_int_equal(compare_pair(p, NULL, NULL), 2);
    assert_true(line_has(p->out, "no common rows", NULL, NULL));

    /* a bad line in epochs.csv, named by file and line */
    char path[600];
    snprintf(path, sizeof path, "%s/epochs.csv", p->next);
    FILE *e = fopen(path, "a");
    assert_non_null(e);
    fputs("cuda,lenet,fp32,1,0\n", e);
    fclose(e);
    assert_int_equal(compare_pair(p, NULL, NULL), 2);
    assert_true(line_has(p->out, "epochs.csv:14:", "5 fields where the header has 20", NULL));

    /* a missing column in summary.csv */
    snprintf(path, sizeof path, "%s/summary.csv", p->next);
    write_text(path, "backend,workload,precision,batch_size,threads,devices,status\n"
                     "naive,lenet,fp32,128,1,0,ok\n");
    assert_int_equal(compare_pair(p, NULL, NULL), 2);
    assert_true(line_has(p->out, "summary.csv", "no column 'images_per_second'", NULL));

    /* a number that is not one */
    write_text(path, "backend,workload,precision,batch_size,threads,devices,status,"
                     "images_per_second,epoch_seconds_median,final_test_accuracy,final_train_loss\n"
                     "naive,lenet,fp32,128,1,0,ok,fast,1,0.5,0.5\n");
    assert_int_equal(compare_pair(p, NULL, NULL), 2);
    assert_true(line_has(p->out, "summary.csv:2:", "'images_per_second'", "'fast'"));

    /* a status that is none of the known ones */
    write_text(path, "backend,workload,precision,batch_size,threads,devices,status,"
                     "images_per_second,epoch_seconds_median,final_test_accuracy,final_train_loss\n"
                     "naive,lenet,fp32,128,1,0,fine,100,1,0.5,0.5\n");
    assert_int_equal(compare_pair(p, NULL, NULL), 2);
    assert_true(line_has(p->out, "summary.csv:2:", "'fine' is not a status", NULL));

    /* usage errors */
    assert_int_equal(compare_pair(p, "--max-slowdown", "ten"), 2);
    assert_int_equal(compare_pair(p, "--numerics", "maybe"), 2);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_speed_real_slowdown),
        cmocka_unit_test(test_speed_noise_does_not_flap),
        cmocka_unit_test(test_speed_few_samples_threshold_alone),
        cmocka_unit_test(test_speed_beyond_limit_but_not_significant),
        cmocka_unit_test_setup_teardown(test_csv_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_identical_runs_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_injected_slowdown_fails_naming_row_and_metric, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_noisy_equal_runs_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_accuracy_drop_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_row_fails_skipped_row_is_noted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_to_cancels_machine_speed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_trained_differently_not_compared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_numerics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replicas_join_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_input_exits_2, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
