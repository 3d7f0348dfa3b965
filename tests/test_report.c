/* Reports: statistics and evaluation statistics on known inputs, the
 * summary table's formats, and short real runs of ./bench whose files are
 * read back with a CSV reader and a JSON checker of this test's own (so the
 * program's readers are not used to check the program's writers). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/run/peak.h"
#include "harness/run/report.h"
#include "harness/tools/stats.h"
#include "tests/scratch.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

/* cmocka 1.1's assert_float_equal compares floats; these are doubles. */
#define assert_close(a, b, tol)                                                                  \
    do {                                                                                         \
        double a_ = (a), b_ = (b);                                                               \
        if (!(fabs(a_ - b_) <= (tol)))                                                           \
            fail_msg("%s = %.12g, expected %.12g (within %g)", #a, a_, b_, (double)(tol));       \
    } while (0)

/* ---- statistics ------------------------------------------------------ */

static void stats_on_known_samples(void **state)
{
    (void)state;
    const double odd[] = {3, 100, 1, 4, 2};
    sample_stats s = stats_of(odd, 5);
    assert_int_equal(s.n, 5);
    assert_close(s.median, 3, 1e-12);
    assert_close(s.mean, 22, 1e-12);
    assert_close(s.stddev, 43.617656975128774, 1e-9); /* n - 1, as numpy ddof=1 */
    assert_close(s.min, 1, 0);
    assert_close(s.max, 100, 0);
    assert_close(s.cv, 43.617656975128774 / 22, 1e-9);
    assert_close(odd[0], 3, 0); /* the input keeps its order */
    assert_close(odd[1], 100, 0);

    const double even[] = {4, 1, 3, 2};
    s = stats_of(even, 4);
    assert_close(s.median, 2.5, 1e-12);
    assert_close(s.mean, 2.5, 1e-12);
    assert_close(s.stddev, sqrt(5.0 / 3.0), 1e-12);

    const double one[] = {7};
    s = stats_of(one, 1);
    assert_close(s.median, 7, 0);
    assert_close(s.stddev, 0, 0);

    s = stats_of(NULL, 0);
    assert_int_equal(s.n, 0);
    assert_close(s.median, 0, 0);
}

static void warmup_rule(void **state)
{
    (void)state;
    assert_int_equal(warmup_epochs(1), 0);
    assert_int_equal(warmup_epochs(2), 0);
    assert_int_equal(warmup_epochs(3), 1);
    assert_int_equal(warmup_epochs(10), 1);

    const double times[] = {9.0, 1.0, 1.2, 1.1};
    double out[4] = {0};
    /* 4 planned, 4 done: epoch 1 left out */
    assert_int_equal(timed_samples(times, 4, 4, out), 3);
    assert_close(out[0], 1.0, 0);
    assert_close(out[2], 1.1, 0);
    /* 2 planned: every epoch counts */
    assert_int_equal(timed_samples(times, 2, 2, out), 2);
    assert_close(out[0], 9.0, 0);
    /* 10 planned but stopped after the warm-up epoch: keep what there is */
    assert_int_equal(timed_samples(times, 1, 10, out), 1);
    assert_close(out[0], 9.0, 0);
    assert_int_equal(timed_samples(times, 0, 10, out), 0);
}

/* ---- evaluation statistics --------------------------------------------- */

/* m: rows are true classes, columns predictions; count: images scored. */
static eval_stats eval_stats_of_3x3(const long m[3][3], long count)
{
    eval_counts ev;
    memset(&ev, 0, sizeof ev);
    ev.classes = 3;
    ev.count = count;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            ev.confusion[i * 3 + j] = m[i][j];
    return eval_stats_of(&ev);
}

static void eval_stats_on_known_matrix(void **state)
{
    (void)state;
    /* rows: true class, columns: predicted */
    static const long m[3][3] = {{5, 1, 0}, {2, 3, 1}, {0, 0, 4}};
    eval_stats s = eval_stats_of_3x3(m, 16);
    assert_close(s.accuracy, 12.0 / 16.0, 1e-12);
    /* precision 5/7, 3/4, 4/5; recall 5/6, 3/6, 4/4 (scikit-learn's macro) */
    assert_close(s.macro_precision, 0.7547619047619047, 1e-12);
    assert_close(s.macro_recall, 0.7777777777777778, 1e-12);
    assert_close(s.macro_f1, 0.7527065527065527, 1e-12);
}

static void eval_stats_absent_and_unpredicted_classes(void **state)
{
    (void)state;
    /* class 1 never predicted (precision 0), class 2 never occurs (left
     * out of the macro averages) */
    static const long m[3][3] = {{4, 0, 0}, {2, 0, 0}, {0, 0, 0}};
    eval_stats s = eval_stats_of_3x3(m, 6);
    assert_close(s.accuracy, 4.0 / 6.0, 1e-12);
    assert_close(s.macro_precision, (4.0 / 6.0 + 0) / 2, 1e-12);
    assert_close(s.macro_recall, (1.0 + 0) / 2, 1e-12);
    assert_close(s.macro_f1, (0.8 + 0) / 2, 1e-12);

    s = eval_stats_of_3x3(m, 0); /* nothing scored */
    assert_close(s.accuracy, 0, 0);
}

static void peak_and_percent(void **state)
{
    (void)state;
    assert_close(percent_of_peak(50, 200), 25, 1e-12);
    assert_close(percent_of_peak(50, 0), 0, 0);
    assert_close(percent_of_peak(0, 200), 0, 0);
    peak_measure a = cpu_peak_gflops(1);
    assert_true((a.gflops > 0 && isfinite(a.gflops)) || (a.uncertain && isnan(a.gflops)));
    assert_non_null(a.source);
    peak_measure b = cpu_peak_gflops(1); /* cached: measured once per run */
    assert_true(a.gflops == b.gflops || (isnan(a.gflops) && isnan(b.gflops)));
}

/* ---- the summary table ------------------------------------------------- */

static void configuration_labels(void **state)
{
    (void)state;
    char label[64];
    config_label_of("naive", 1, 1, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "naive");
    config_label_of("naive", 2, 1, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "naive-x2");
    config_label_of("blas", 4, 2, "fp32", 64, 0, label, sizeof label);
    assert_string_equal(label, "blas-x4-2ranks");
    row_key k = {.backend = "cuda", .replicas = 1, .ranks = 1, .precision = "bf16",
                 .batch_size = 512};
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda");
    /* the axes the run varies name the row, so confusion files do not collide */
    k.label_axes = LABEL_PRECISION;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-bf16");
    k.label_axes = LABEL_BATCH;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-b512");
    k.label_axes = LABEL_PRECISION | LABEL_BATCH;
    k.replicas = 2;
    config_label(&k, label, sizeof label);
    assert_string_equal(label, "cuda-x2-bf16-b512");
    config_label_of("naive", 16, 1, "fp32", 64, LABEL_BATCH, label, 6); /* cut short */
    assert_string_equal(label, "naive");
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (text)
        text[n] = 0;
    fclose(f);
    return text;
}

/* The summary as printed in fmt; what goes to stderr (the notes, in csv
 * and json) is dropped. */
static char *print_to_string(output_format fmt, const summary_row *rows, int n)
{
    static results res; /* only its system record is read */
    memset(&res, 0, sizeof res);
    snprintf(res.sys.cpu_model, sizeof res.sys.cpu_model, "Test CPU");
    snprintf(res.sys.gpu_model, sizeof res.sys.gpu_model, "none");
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *null = fopen("/dev/null", "w");
    if (null && saved >= 0)
        dup2(fileno(null), STDERR_FILENO);
    print_summary(f, fmt, rows, n, &res);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    if (null)
        fclose(null);
    long len = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return text;
}

static int json_valid(const char *text, char keys[][64], int max_keys, int *n_keys);

static void summary_formats(void **state)
{
    (void)state;
    summary_row rows[2];
    memset(rows, 0, sizeof rows);
    rows[0].key = (row_key){.backend = "naive", .precision = "fp32", .threads = 1};
    rows[0].status = STATUS_OK;
    rows[0].epochs = 4;
    rows[0].repeats = 1;
    rows[0].epoch_seconds_median = 2.5;
    rows[0].epoch_seconds_stddev = 0.25;
    rows[0].timed_samples = 3;
    rows[0].warmup_epochs = 1;
    rows[0].images_per_second = 24000;
    rows[0].speedup_vs_naive = 1;
    rows[0].final_test_accuracy = 0.85;
    rows[0].target_accuracy = 0.9;
    rows[0].time_to_target_seconds = -1;
    rows[0].peak_gflops = 100;
    rows[0].peak_source = "test probe";
    rows[0].gflops_per_second = 25;
    rows[0].percent_of_peak = 25;
    rows[0].memory_bytes = 3 * 1048576.0;
    rows[0].memory_source = "host heap held by the engine";
    rows[1].key = (row_key){.backend = "cuda", .precision = "fp32"};
    rows[1].status = STATUS_SKIPPED;
    rows[1].message = "no \"GPU\" here";
    rows[1].time_to_target_seconds = -1;
    rows[1].final_test_accuracy = NAN;

    char *md = print_to_string(FORMAT_MD, rows, 2);
    assert_non_null(strstr(md, "| naive | fp32 | 1 | 0 | 2.500 ± 0.250 | 24000 | 25.00 | 25.0 |"
                               " 1.00x | 0.8500 | not reached | ok | 3.0 |"));
    assert_non_null(strstr(md, "| cuda | fp32 | 0 | 0 | - |"));
    assert_non_null(strstr(md, "epochs 2-4"));
    assert_non_null(strstr(md, "100.0 GFLOP/s (test probe)"));
    assert_non_null(strstr(md, "accuracy 0.8500"));
    free(md);

    char *json = print_to_string(FORMAT_JSON, rows, 2);
    char keys[8][64];
    int n_keys = 0;
    assert_int_equal(json_valid(json, keys, 8, &n_keys), 0);
    assert_non_null(strstr(json, "\"final_test_accuracy\": null")); /* NaN is not JSON */
    assert_non_null(strstr(json, "\"message\": \"no \\\"GPU\\\" here\""));
    free(json);

    /* --format csv: summary.csv's columns, in its order */
    char *csv = print_to_string(FORMAT_CSV, rows, 2);
    const char *header =
        "backend,workload,precision,threads,devices,replicas,ranks,batch_size,optimizer,epochs,"
        "repeats,images_per_epoch,epoch_seconds_median,epoch_seconds_mean,epoch_seconds_stddev,"
        "images_per_second,gflops_per_second,percent_of_peak,speedup_vs_naive,final_train_loss,"
        "final_test_accuracy,macro_precision,macro_recall,macro_f1,time_to_target_seconds,"
        "peak_memory_bytes,details,status,message,cpu_model,host,git_commit,date,timed_samples,"
        "warmup_epochs,epoch_seconds_min,epoch_seconds_max,peak_gflops,peak_source,gpu_model,"
        "target_accuracy,scaling_efficiency,memory_bytes,memory_source,parallel,split,workers,"
        "micro_batches,prefetch,worker_params_bytes,worker_grads_bytes,worker_opt_state_bytes,"
        "worker_activation_bytes,worker_workspace_bytes\n";
    assert_true(strncmp(csv, header, strlen(header)) == 0);
    assert_non_null(strstr(csv, "\nnaive,,fp32,1,0,0,0,0,,4,1,0,2.500000,0.000000,0.250000,"
                                "24000.0,25.000,25.00,1.000,0.000000,0.850000,"));
    assert_non_null(strstr(csv, ",ok,,Test CPU,,,,3,1,0.000000,0.000000,100.0,test probe,none,"
                                "0.9000,,3145728,host heap held by the engine,,,0,0,0,,,,,\n"));
    /* no scaling efficiency: empty */
    assert_non_null(strstr(csv, ",skipped,\"no \"\"GPU\"\" here\",Test CPU,"));
    free(csv);
}

/* ---- a small CSV reader (RFC 4180: quoted fields, "" inside quotes) ---- */

typedef struct table {
    int n_cols, n_rows;
    char *cells[512][64]; /* [row][col]; row 0 is the header */
} table;

static void table_free(table *t)
{
    for (int r = 0; r <= t->n_rows; r++)
        for (int c = 0; c < t->n_cols; c++)
            free(t->cells[r][c]);
    free(t);
}

/* NULL when the file is missing or a row's width differs from the header. */
static table *read_csv(const char *path)
{
    char *text = slurp(path);
    if (!text)
        return NULL;
    table *t = calloc(1, sizeof *t);
    const char *p = text;
    int row = 0, ok = 1;
    while (*p && ok && row < 512) {
        int col = 0;
        for (;;) {
            char field[1024];
            size_t n = 0;
            if (*p == '"') {
                for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
                    if (*p == '"')
                        p++;
                    if (n + 1 < sizeof field)
                        field[n++] = *p;
                }
                if (*p == '"')
                    p++;
            } else {
                while (*p && *p != ',' && *p != '\n')
                    if (n + 1 < sizeof field)
                        field[n++] = *p++;
                    else
                        p++;
            }
            field[n] = 0;
            if (col < 64)
                t->cells[row][col] = strdup(field);
            col++;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == '\n')
                p++;
            break;
        }
        if (row == 0)
            t->n_cols = col;
        else if (col != t->n_cols)
            ok = 0;
        row++;
    }
    free(text);
    t->n_rows = row - 1;
    if (!ok || t->n_cols > 64) {
        t->n_cols = t->n_cols > 64 ? 64 : t->n_cols;
        table_free(t);
        return NULL;
    }
    return t;
}

static int col_of(const table *t, const char *name)
{
    for (int c = 0; c < t->n_cols; c++)
        if (strcmp(t->cells[0][c], name) == 0)
            return c;
    return -1;
}

/* Data row r (1-based), column by name; fails the test when absent. */
static const char *cell(const table *t, int r, const char *name)
{
    int c = col_of(t, name);
    if (c < 0)
        fail_msg("no column %s", name);
    return t->cells[r][c];
}

static double num(const table *t, int r, const char *name) { return atof(cell(t, r, name)); }

/* ---- a small JSON checker: syntax, and the top-level object's keys ---- */

typedef struct json_cursor {
    const char *p;
    int depth;
} json_cursor;

static void ws(json_cursor *j)
{
    while (isspace((unsigned char)*j->p))
        j->p++;
}

static int json_value(json_cursor *j, char keys[][64], int max_keys, int *n_keys);

static int json_str(json_cursor *j, char *out, size_t len)
{
    size_t n = 0;
    if (*j->p != '"')
        return -1;
    for (j->p++; *j->p != '"'; j->p++) {
        if (!*j->p || (unsigned char)*j->p < 0x20)
            return -1;
        if (*j->p == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)j->p[i]))
                        return -1;
                j->p += 4;
            } else if (!strchr("\"\\/bfnrt", *j->p)) {
                return -1;
            }
        }
        if (out && n + 1 < len)
            out[n++] = *j->p;
    }
    if (out)
        out[n] = 0;
    j->p++;
    return 0;
}

static int json_value(json_cursor *j, char keys[][64], int max_keys, int *n_keys)
{
    ws(j);
    if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        int object = close == '}';
        j->p++;
        j->depth++;
        ws(j);
        if (*j->p == close) {
            j->p++;
            j->depth--;
            return 0;
        }
        for (;;) {
            ws(j);
            if (object) {
                char key[64];
                if (json_str(j, key, sizeof key))
                    return -1;
                if (j->depth == 1 && keys && *n_keys < max_keys)
                    snprintf(keys[(*n_keys)++], 64, "%s", key);
                ws(j);
                if (*j->p++ != ':')
                    return -1;
            }
            if (json_value(j, keys, max_keys, n_keys))
                return -1;
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            if (*j->p++ != close)
                return -1;
            j->depth--;
            return 0;
        }
    }
    if (*j->p == '"')
        return json_str(j, NULL, 0);
    for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
        if (strncmp(j->p, lit, strlen(lit)) == 0) {
            j->p += strlen(lit);
            return 0;
        }
    char *end;
    strtod(j->p, &end);
    if (end == j->p || !(isdigit((unsigned char)*j->p) || *j->p == '-'))
        return -1; /* also refuses nan and inf */
    j->p = end;
    return 0;
}

static int json_valid(const char *text, char keys[][64], int max_keys, int *n_keys)
{
    json_cursor j = {text, 0};
    *n_keys = 0;
    if (json_value(&j, keys, max_keys, n_keys))
        return -1;
    ws(&j);
    return *j.p ? -1 : 0;
}

/* ---- short real runs --------------------------------------------------- */

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
    run_bench(f, "b", "--epochs 2 --target-accuracy 0.999");
    table *ep = read_run_csv(f, "b", "epochs.csv");
    table *sm = read_run_csv(f, "b", "summary.csv");
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
    run_bench(f, "c0", "--epochs 3");
    table *ep = read_run_csv(f, "c0", "epochs.csv");
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
    double wall = run_bench(f, "c", args);
    ep = read_run_csv(f, "c", "epochs.csv");
    table *sm = read_run_csv(f, "c", "summary.csv");
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
        cmocka_unit_test(stats_on_known_samples),
        cmocka_unit_test(warmup_rule),
        cmocka_unit_test(eval_stats_on_known_matrix),
        cmocka_unit_test(eval_stats_absent_and_unpredicted_classes),
        cmocka_unit_test(peak_and_percent),
        cmocka_unit_test(configuration_labels),
        cmocka_unit_test(summary_formats),
        cmocka_unit_test_setup_teardown(real_run_files, run_setup, run_teardown),
        cmocka_unit_test_setup_teardown(real_run_short_and_unreached_target, run_setup,
                                        run_teardown),
        cmocka_unit_test_setup_teardown(real_run_csv_is_summary_csv, run_setup, run_teardown),
        cmocka_unit_test_setup_teardown(real_run_time_to_target_later_epoch, run_setup,
                                        run_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
