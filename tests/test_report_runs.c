/* Short real runs of ./bench whose files are read back with this test's
 * own CSV reader and JSON checker (tests/report_checks.h): rows, the
 * warm-up rule, statistics recomputed from epochs.csv, time to target and
 * --format csv. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/common/stats.h"
#include "tests/report_checks.h"
#include "tests/scratch.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

typedef struct run_fixture {
    char dir[SCRATCH_DIR_LEN];
    char bench[512];
} run_fixture;

static int run_setup(void **state)
{
    run_fixture *f = scratch_fixture(sizeof *f, "test_report");
    if (!f)
        return -1;
    const char *bench = getenv("BENCH");
    snprintf(f->bench, sizeof f->bench, "%s", bench && *bench ? bench : "./bench");
    *state = f;
    return 0;
}

static int run_teardown(void **state)
{
    scratch_fixture_free(*state);
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Runs bench with args into dir/name; stdout to dir/name.out, stderr to
 * dir/name.err. Fails the test unless it exits 0; returns the wall time in
 * seconds. Skips when it cannot run. */
static double run_bench(run_fixture *f, const char *name, const char *args)
{
    int have_data = access(DATA_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 ||
                    access(DATA_DIR "/train-images-idx3-ubyte", R_OK) == 0;
    if (access(f->bench, X_OK) != 0 || !have_data) {
        print_message("skipping: no %s or no data in %s\n", f->bench, DATA_DIR);
        skip();
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' --backend naive --limit 512 --test-limit 256 --out '%s/%s' %s "
             "> '%s/%s.out' 2> '%s/%s.err'",
             f->bench, f->dir, name, args, f->dir, name, f->dir, name);
    double t0 = now();
    int status = system(cmd);
    double seconds = now() - t0;
    if (status == -1 || !WIFEXITED(status))
        fail_msg("could not run: %s", cmd);
    if (WEXITSTATUS(status) != 0) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.err", f->dir, name);
        char *err = slurp(path);
        print_message("%s\n", err ? err : "");
        free(err);
        fail_msg("%s exited with status %d", cmd, WEXITSTATUS(status));
    }
    return seconds;
}

static table *read_run_csv(run_fixture *f, const char *run, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", f->dir, run, file);
    table *t = read_csv(path);
    if (!t)
        fail_msg("%s is missing or has rows of the wrong width", path);
    return t;
}

/* The text of file `name` in the test's directory; fails the test when it
 * cannot be read. */
static char *slurp_in(const run_fixture *f, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    char *text = slurp(path);
    if (!text)
        fail_msg("cannot read %s", path);
    return text;
}

/* File `name` in the test's directory holds every one of the texts after
 * it (NULL ends them). */
static void expect_file_holds(const run_fixture *f, const char *name, ...)
{
    char *text = slurp_in(f, name);
    va_list ap;
    va_start(ap, name);
    for (const char *want; (want = va_arg(ap, const char *));)
        if (!strstr(text, want))
            fail_msg("%s lacks \"%s\": %s", name, want, text);
    va_end(ap);
    free(text);
}

/* Runs bench as run_bench does, into dir/name, and reads back its
 * epochs.csv and, when summary is not NULL, its summary.csv. Returns the
 * wall time. */
static double run_and_read(run_fixture *f, const char *name, const char *args, table **epochs,
                           table **summary)
{
    double seconds = run_bench(f, name, args);
    *epochs = read_run_csv(f, name, "epochs.csv");
    if (summary)
        *summary = read_run_csv(f, name, "summary.csv");
    return seconds;
}

static void check_columns(const table *t, const char *const *names, int n, const char *file)
{
    for (int i = 0; i < n; i++)
        if (col_of(t, names[i]) < 0)
            fail_msg("%s lacks column %s", file, names[i]);
}

/* 3 epochs x 2 repeats: rows, the warm-up rule, statistics recomputed from
 * epochs.csv, speedup, peak, evaluation, confusion matrix, profile, system
 * record and the JSON summary on stdout. */
static void real_run_files(void **state)
{
    run_fixture *f = *state;
    double wall = run_bench(f, "a", "--epochs 3 --repeat 2 --profile-layers --format json "
                                    "--target-accuracy 0.05");

    table *ep = read_run_csv(f, "a", "epochs.csv");
    static const char *const epoch_cols[] = {
        "backend", "workload", "precision", "threads", "devices", "replicas", "ranks",
        "batch_size", "optimizer", "repeat", "epoch", "images", "epoch_seconds",
        "images_per_second", "gflops_per_second", "train_loss", "test_loss", "test_accuracy",
        "status", "message",
    };
    check_columns(ep, epoch_cols, sizeof epoch_cols / sizeof *epoch_cols, "epochs.csv");
    assert_int_equal(ep->n_rows, 6);
    double timed[4];
    int n_timed = 0;
    for (int r = 1; r <= 6; r++) {
        assert_string_equal(cell(ep, r, "backend"), "naive");
        assert_string_equal(cell(ep, r, "status"), "ok");
        assert_int_equal((int)num(ep, r, "repeat"), (r - 1) / 3 + 1);
        assert_int_equal((int)num(ep, r, "epoch"), (r - 1) % 3 + 1);
        assert_int_equal((int)num(ep, r, "images"), 512);
        assert_true(num(ep, r, "epoch_seconds") > 0);
        double acc = num(ep, r, "test_accuracy");
        assert_true(acc >= 0 && acc <= 1);
        if ((int)num(ep, r, "epoch") >= 2)
            timed[n_timed++] = num(ep, r, "epoch_seconds");
    }

    table *sm = read_run_csv(f, "a", "summary.csv");
    static const char *const summary_cols[] = {
        "backend", "epochs", "repeats", "epoch_seconds_median", "epoch_seconds_mean",
        "epoch_seconds_stddev", "images_per_second", "gflops_per_second", "percent_of_peak",
        "speedup_vs_naive", "final_test_accuracy", "macro_precision", "macro_recall", "macro_f1",
        "time_to_target_seconds", "peak_memory_bytes", "status", "cpu_model", "host",
        "git_commit", "date", "timed_samples", "warmup_epochs", "peak_gflops", "peak_source",
        "gpu_model", "target_accuracy",
    };
    check_columns(sm, summary_cols, sizeof summary_cols / sizeof *summary_cols, "summary.csv");
    assert_int_equal(sm->n_rows, 1);
    assert_string_equal(cell(sm, 1, "status"), "ok");
    assert_int_equal((int)num(sm, 1, "repeats"), 2);
    /* epoch 1 of each run is warm-up: 2 x 2 timed epochs */
    assert_int_equal((int)num(sm, 1, "timed_samples"), 4);
    assert_int_equal((int)num(sm, 1, "warmup_epochs"), 1);
    sample_stats st = stats_of(timed, n_timed);
    assert_close(num(sm, 1, "epoch_seconds_median"), st.median, 2e-6);
    assert_close(num(sm, 1, "epoch_seconds_mean"), st.mean, 2e-6);
    assert_close(num(sm, 1, "epoch_seconds_stddev"), st.stddev, 2e-6);
    assert_close(num(sm, 1, "images_per_second"), 512 / st.median, 0.1 + 1e-3 * 512 / st.median);
    assert_close(num(sm, 1, "speedup_vs_naive"), 1, 1e-9);
    /* a busy machine may leave the peak uncertain: then both cells are
     * empty and the source says why, never a number */
    if (!strncmp(cell(sm, 1, "peak_source"), "peak uncertain", 14)) {
        assert_string_equal(cell(sm, 1, "peak_gflops"), "");
        assert_string_equal(cell(sm, 1, "percent_of_peak"), "");
    } else {
        double gflops = num(sm, 1, "gflops_per_second"), peak = num(sm, 1, "peak_gflops");
        assert_true(peak > 0);
        assert_true(peak >= gflops); /* held to the row's rate */
        assert_close(num(sm, 1, "percent_of_peak"), 100 * gflops / peak,
                     0.01 + 0.02 * 100 * gflops / peak);
    }
    assert_close(num(sm, 1, "final_test_accuracy"), num(ep, 6, "test_accuracy"), 1e-6);
    /* time to target: reached at the first evaluation (0.05 is below any
     * 10-class model's accuracy), so it spans at least that epoch's training
     * and at most the whole process */
    double ttt = num(sm, 1, "time_to_target_seconds");
    double first = fmin(num(ep, 1, "epoch_seconds"), num(ep, 4, "epoch_seconds"));
    assert_true(ttt >= first);
    assert_true(ttt <= wall);
    assert_close(num(sm, 1, "target_accuracy"), 0.05, 1e-9);

    /* the confusion matrix covers every test image once */
    table *cm = read_run_csv(f, "a", "confusion-naive.csv");
    assert_int_equal(cm->n_rows, 10);
    assert_int_equal(cm->n_cols, 11);
    long total = 0, diagonal = 0;
    for (int r = 1; r <= 10; r++)
        for (int c = 1; c <= 10; c++) {
            long v = atol(cm->cells[r][c]);
            assert_true(v >= 0);
            total += v;
            diagonal += r == c ? v : 0;
        }
    assert_int_equal(total, 256);
    assert_close((double)diagonal / total, num(sm, 1, "final_test_accuracy"), 1e-6);

    /* per-layer profile: the 7 LeNet layers, then loss and update */
    table *pr = read_run_csv(f, "a", "profile-naive.csv");
    assert_int_equal(pr->n_cols, 3);
    assert_string_equal(pr->cells[0][0], "layer");
    assert_int_equal(pr->n_rows, 9);
    assert_string_equal(cell(pr, 1, "layer"), "conv1");
    assert_string_equal(cell(pr, 8, "layer"), "loss");
    assert_string_equal(cell(pr, 9, "layer"), "update");
    assert_true(num(pr, 1, "forward_ms") > 0 && num(pr, 1, "backward_ms") > 0);
    for (int r = 1; r <= 9; r++)
        assert_true(num(pr, r, "forward_ms") >= 0 && num(pr, r, "backward_ms") >= 0);

    /* system.json: valid JSON with the system record's keys */
    char *sys = slurp_in(f, "a/system.json");
    char keys[64][64];
    int n_keys;
    assert_int_equal(json_valid(sys, keys, 64, &n_keys), 0);
    static const char *const sys_keys[] = {
        "date", "host", "cpu_model", "cores", "cpu_mhz", "caches", "memory_gib",
        "load_average", "gpu_model", "compiler", "git_commit", "git_dirty", "libraries",
        "command_line",
    };
    for (size_t k = 0; k < sizeof sys_keys / sizeof *sys_keys; k++) {
        int found = 0;
        for (int i = 0; i < n_keys; i++)
            found |= strcmp(keys[i], sys_keys[k]) == 0;
        if (!found)
            fail_msg("system.json lacks key %s", sys_keys[k]);
    }
    assert_non_null(strstr(sys, "\"--target-accuracy\", \"0.05\""));
    free(sys);

    /* --format json: stdout holds the summary as JSON and nothing else */
    char *out = slurp_in(f, "a.out");
    assert_int_equal(json_valid(out, keys, 64, &n_keys), 0);
    assert_non_null(strstr(out, "\"backend\": \"naive\""));
    free(out);
    /* the profile table and the evaluation line went to stderr */
    expect_file_holds(f, "a.err", "naive: time per layer", "naive      accuracy", NULL);

    table_free(ep);
    table_free(sm);
    table_free(cm);
    table_free(pr);
}

/* 2 epochs: no warm-up epoch is dropped; a target never reached says so. */
static void real_run_short_and_unreached_target(void **state)
{
    run_fixture *f = *state;
    table *ep, *sm;
    run_and_read(f, "b", "--epochs 2 --target-accuracy 0.999", &ep, &sm);
    assert_int_equal(ep->n_rows, 2);
    assert_int_equal(sm->n_rows, 1);
    assert_int_equal((int)num(sm, 1, "timed_samples"), 2);
    assert_int_equal((int)num(sm, 1, "warmup_epochs"), 0);
    double both[2] = {num(ep, 1, "epoch_seconds"), num(ep, 2, "epoch_seconds")};
    assert_close(num(sm, 1, "epoch_seconds_median"), stats_of(both, 2).median, 2e-6);
    assert_true(num(sm, 1, "time_to_target_seconds") < 0);
    expect_file_holds(f, "b.out", "| naive | fp32 | 1 | 0 |", "| not reached |",
                      "every epoch of 1 run", NULL);
    table_free(ep);
    table_free(sm);
}

/* --format csv prints summary.csv again: the same header and lines, byte
 * for byte, so a script may read either. */
static void real_run_csv_is_summary_csv(void **state)
{
    run_fixture *f = *state;
    run_bench(f, "d", "--epochs 1 --target-accuracy 0.05 --format csv");
    char *printed = slurp_in(f, "d.out");
    char *file = slurp_in(f, "d/summary.csv");
    assert_non_null(strstr(file, "\nnaive,lenet,fp32,1,0,1,1,128,nesterov,1,1,512,"));
    assert_string_equal(printed, file);
    free(printed);
    free(file);
}

/* A target first met after epoch 1: the time covers every epoch up to the
 * one whose evaluation met it. The target is chosen from run "c0"'s own
 * accuracies (the run is deterministic), so it is met at a known epoch. */
static void real_run_time_to_target_later_epoch(void **state)
{
    run_fixture *f = *state;
    table *ep, *sm;
    run_and_read(f, "c0", "--epochs 3", &ep, NULL);
    double a1 = num(ep, 1, "test_accuracy");
    int best = num(ep, 2, "test_accuracy") >= num(ep, 3, "test_accuracy") ? 2 : 3;
    double ab = num(ep, best, "test_accuracy");
    if (!(ab > a1)) {
        table_free(ep);
        print_message("skipping: accuracy did not rise after epoch 1 (%.4f, %.4f)\n", a1, ab);
        skip();
    }
    double target = (a1 + ab) / 2;
    table_free(ep);
    char args[128];
    snprintf(args, sizeof args, "--epochs 3 --target-accuracy %.6f", target);
    double wall = run_and_read(f, "c", args, &ep, &sm);
    int met = 0;
    for (int r = 1; r <= 3 && !met; r++)
        if (num(ep, r, "test_accuracy") >= target)
            met = r;
    if (met < 2)
        fail_msg("the target %.6f should be met at epoch 2 or 3, not %d", target, met);
    /* not before the evaluation that met it, not after the process ended */
    double trained = 0;
    for (int r = 1; r <= met; r++)
        trained += num(ep, r, "epoch_seconds");
    double ttt = num(sm, 1, "time_to_target_seconds");
    assert_true(ttt >= trained);
    assert_true(ttt <= wall);
    table_free(ep);
    table_free(sm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(real_run_files, run_setup, run_teardown),
        cmocka_unit_test_setup_teardown(real_run_short_and_unreached_target, run_setup,
                                        run_teardown),
        cmocka_unit_test_setup_teardown(real_run_csv_is_summary_csv, run_setup, run_teardown),
        cmocka_unit_test_setup_teardown(real_run_time_to_target_later_epoch, run_setup,
                                        run_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
