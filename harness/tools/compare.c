/* `./bench compare BASE NEW`. Reads both runs' summary.csv (figures) and
 * epochs.csv (per-epoch samples for the significance test) by column name,
 * joins rows on the configuration, and judges each metric:
 *   images/s       slower beyond --max-slowdown, and significant by a
 *                  Mann-Whitney U test when there are enough samples
 *   s/epoch        shown, not judged (images/s carries the same news and
 *                  stays valid when the epoch size differs)
 *   test accuracy  dropped by more than --max-accuracy-drop points
 *   train loss     deterministic for the same seed and settings: a change
 *                  beyond rounding is "changed numerics"
 * Exit 0 nothing regressed, 1 regressed, 2 unusable input. */
#include "harness/tools/compare.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "harness/formats/csv.h"
#include "harness/run/columns.h"
#include "harness/run/config.h"
#include "harness/run/options.h"
#include "harness/run/status.h"
#include "harness/run/sysinfo.h"
#include "harness/tools/count.h"
#include "harness/tools/stats.h"

/* ---- judging speed ------------------------------------------------------- */

speed_verdict judge_speed(double base, double next, const double *base_samples, int n_base,
                          const double *next_samples, int n_next, double max_slowdown_pct,
                          double alpha)
{
    speed_verdict v = {0, 0, 1, 0};
    v.slowdown_pct = (base / next - 1) * 100;
    int beyond = v.slowdown_pct > max_slowdown_pct;
    if (mann_whitney_min_p(n_base, n_next) < alpha) {
        v.u_test_used = 1;
        v.p = mann_whitney_u(base_samples, n_base, next_samples, n_next).p;
        v.regression = beyond && v.p < alpha;
    } else {
        v.regression = beyond;
    }
    return v;
}

/* ---- reading a run -------------------------------------------------------- */

typedef struct run_row {
    const char *backend, *workload, *precision;
    int batch_size, threads, devices, replicas, ranks;
    run_status status;
    const char *message, *optimizer, *cpu_model, *details; /* "" when absent */
    int epochs;            /* -1 when absent */
    long images_per_epoch; /* -1 when absent */
    double images_per_second, epoch_seconds, accuracy, train_loss;
    int line;
    double *samples; /* per-epoch images/s of the ok epochs in epochs.csv */
    int n_samples, samples_cap;
    int paired;
} run_row;

typedef struct run_files {
    const char *label; /* BASE or NEW */
    char summary_path[PATH_LEN + 32], epochs_path[PATH_LEN + 32], system_path[PATH_LEN + 32];
    csv_table summary, epochs;
    int have_epochs;
    run_row *rows;
    int n_rows;
    /* rows by the hash of their loose key (same_loose_key): bucket heads
     * and a chain, -1 ending each; so that finding a row is not a scan of
     * every row (40k rows took 32 s) */
    int *bucket, *chain;
    size_t n_buckets;
    char **settings; /* training options from system.json, sorted "name=value" */
    int n_settings;
    int have_settings;
    char settings_why[256]; /* why they are unknown */
    sysinfo_record system;  /* compiler and libraries: "" when absent */
} run_files;

typedef struct field_reader {
    const csv_table *t;
    const char *path;
    char *err;
    size_t err_len;
    int failed;
} field_reader;

static int need_column(field_reader *r, const char *name)
{
    int c = csv_column(r->t, name);
    if (c < 0 && !r->failed) {
        snprintf(r->err, r->err_len, "%s: no column '%s' in the header", r->path, name);
        r->failed = 1;
    }
    return c;
}

static const char *text_at(const field_reader *r, int row, int col)
{
    return col < 0 ? "" : r->t->rows[row][col];
}

static long integer_at(field_reader *r, int row, int col)
{
    if (col < 0 || r->failed)
        return -1;
    const char *s = r->t->rows[row][col];
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) {
        snprintf(r->err, r->err_len, "%s:%d: column '%s': '%s' is not a whole number", r->path,
                 r->t->lines[row], r->t->header[col], s);
        r->failed = 1;
        return -1;
    }
    return v;
}

static double number_at(field_reader *r, int row, int col)
{
    if (col < 0 || r->failed)
        return NAN;
    const char *s = r->t->rows[row][col];
    if (!*s)
        return NAN;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end) {
        snprintf(r->err, r->err_len, "%s:%d: column '%s': '%s' is not a number", r->path,
                 r->t->lines[row], r->t->header[col], s);
        r->failed = 1;
        return NAN;
    }
    return v;
}

typedef struct key_columns {
    int backend, workload, precision, batch_size, threads, devices, status;
    int replicas, ranks; /* optional: 1 when absent (older runs) */
} key_columns;

static key_columns find_key_columns(field_reader *r)
{
    key_columns k = {
        .backend = need_column(r, "backend"),
        .workload = need_column(r, "workload"),
        .precision = need_column(r, "precision"),
        .batch_size = need_column(r, "batch_size"),
        .threads = need_column(r, "threads"),
        .devices = need_column(r, "devices"),
        .status = need_column(r, "status"),
        .replicas = csv_column(r->t, "replicas"),
        .ranks = csv_column(r->t, "ranks"),
    };
    return k;
}

static run_status status_at(field_reader *r, int row, int col)
{
    run_status s = STATUS_FAILED;
    if (col < 0 || r->failed)
        return s;
    const char *text = r->t->rows[row][col];
    if (status_parse(text, &s) != 0) {
        snprintf(r->err, r->err_len,
                 "%s:%d: column 'status': '%s' is not a status (ok, failed, diverged, "
                 "interrupted, skipped)",
                 r->path, r->t->lines[row], text);
        r->failed = 1;
    }
    return s;
}

static int count_at(field_reader *r, int row, int col)
{
    return col < 0 ? 1 : (int)integer_at(r, row, col);
}

/* Data-parallel rows of one backend differ by replicas and ranks, so those
 * join too when the files have them. */
static int same_key(const run_row *a, const run_row *b)
{
    return !strcmp(a->backend, b->backend) && !strcmp(a->workload, b->workload) &&
           !strcmp(a->precision, b->precision) && a->batch_size == b->batch_size &&
           a->threads == b->threads && a->devices == b->devices && a->replicas == b->replicas &&
           a->ranks == b->ranks;
}

/* The configuration without the placement, which a failed or skipped row
 * may not know (threads 0 when the engine never started). */
static int same_loose_key(const run_row *a, const run_row *b)
{
    return !strcmp(a->backend, b->backend) && !strcmp(a->workload, b->workload) &&
           !strcmp(a->precision, b->precision) && a->batch_size == b->batch_size;
}

static size_t hash_text(size_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

static size_t loose_key_hash(const run_row *r)
{
    size_t h = hash_text(hash_text(hash_text(14695981039346656037ull, r->backend), r->workload),
                         r->precision);
    return (h ^ (size_t)(unsigned)r->batch_size) * 1099511628211ull;
}

static void index_init(run_files *run, int capacity)
{
    run->n_buckets = 16;
    while (run->n_buckets < 2 * (size_t)capacity)
        run->n_buckets *= 2;
    run->bucket = xmalloc(sizeof(int) * run->n_buckets);
    run->chain = xmalloc(sizeof(int) * (size_t)(capacity > 0 ? capacity : 1));
    for (size_t i = 0; i < run->n_buckets; i++)
        run->bucket[i] = -1;
}

static void index_add(run_files *run, int i)
{
    size_t b = loose_key_hash(&run->rows[i]) & (run->n_buckets - 1);
    run->chain[i] = run->bucket[b];
    run->bucket[b] = i;
}

/* The first row of run (in the chain's order) that has `like`'s exact key
 * (exact) or loose key, and is unpaired when unpaired_only; -1 if none. */
static int index_find(const run_files *run, const run_row *like, int exact, int unpaired_only)
{
    if (!run->bucket)
        return -1;
    int found = -1;
    for (int j = run->bucket[loose_key_hash(like) & (run->n_buckets - 1)]; j >= 0;
         j = run->chain[j]) {
        const run_row *r = &run->rows[j];
        if ((exact ? same_key(r, like) : same_loose_key(r, like)) &&
            !(unpaired_only && r->paired))
            found = j; /* chains run newest first: keep going for the earliest */
    }
    return found;
}

static void describe_row(const run_row *r, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s %s %s batch=%d threads=%d devices=%d", r->backend,
                     r->workload, r->precision, r->batch_size, r->threads, r->devices);
    if (r->replicas != 1 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " replicas=%d", r->replicas);
    if (r->ranks != 1 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " ranks=%d", r->ranks);
}

static void push_sample(run_row *r, double v)
{
    if (r->n_samples == r->samples_cap) {
        r->samples_cap = r->samples_cap ? 2 * r->samples_cap : 16;
        r->samples = xrealloc(r->samples, sizeof(double) * (size_t)r->samples_cap);
    }
    r->samples[r->n_samples++] = v;
}

static int read_summary(run_files *run, char *err, size_t err_len)
{
    if (csv_read(run->summary_path, &run->summary, err, err_len) != 0 ||
        columns_check_csv(summary_columns, &run->summary, run->summary_path, err, err_len) != 0)
        return -1;
    field_reader r = {&run->summary, run->summary_path, err, err_len, 0};
    key_columns k = find_key_columns(&r);
    int ips = need_column(&r, "images_per_second");
    int secs = need_column(&r, "epoch_seconds_median");
    int acc = need_column(&r, "final_test_accuracy");
    int loss = need_column(&r, "final_train_loss");
    if (r.failed)
        return -1;
    /* Optional: without them the numerics check says it cannot tell. */
    int message = csv_column(&run->summary, "message");
    int optimizer = csv_column(&run->summary, "optimizer");
    int cpu = csv_column(&run->summary, "cpu_model");
    int details = csv_column(&run->summary, "details");
    int epochs = csv_column(&run->summary, "epochs");
    int images = csv_column(&run->summary, "images_per_epoch");

    run->rows = xcalloc((size_t)run->summary.n_rows, sizeof(run_row));
    index_init(run, run->summary.n_rows);
    for (int i = 0; i < run->summary.n_rows && !r.failed; i++) {
        run_row *row = &run->rows[run->n_rows];
        row->backend = text_at(&r, i, k.backend);
        row->workload = text_at(&r, i, k.workload);
        row->precision = text_at(&r, i, k.precision);
        row->batch_size = (int)integer_at(&r, i, k.batch_size);
        row->threads = (int)integer_at(&r, i, k.threads);
        row->devices = (int)integer_at(&r, i, k.devices);
        row->replicas = count_at(&r, i, k.replicas);
        row->ranks = count_at(&r, i, k.ranks);
        row->status = status_at(&r, i, k.status);
        row->message = text_at(&r, i, message);
        row->optimizer = text_at(&r, i, optimizer);
        row->cpu_model = text_at(&r, i, cpu);
        row->details = text_at(&r, i, details);
        row->epochs = (int)integer_at(&r, i, epochs);
        row->images_per_epoch = integer_at(&r, i, images);
        row->images_per_second = number_at(&r, i, ips);
        row->epoch_seconds = number_at(&r, i, secs);
        row->accuracy = number_at(&r, i, acc);
        row->train_loss = number_at(&r, i, loss);
        row->line = run->summary.lines[i];
        if (r.failed)
            break;
        if (!*row->backend) {
            snprintf(err, err_len, "%s:%d: empty backend name", run->summary_path, row->line);
            return -1;
        }
        int j = index_find(run, row, 1, 0);
        if (j >= 0) {
            char name[512];
            describe_row(row, name, sizeof name);
            snprintf(err, err_len, "%s:%d: a second row for %.300s (the first is line %d)",
                     run->summary_path, row->line, name, run->rows[j].line);
            return -1;
        }
        index_add(run, run->n_rows++);
    }
    return r.failed ? -1 : 0;
}

static int read_epochs(run_files *run, char *err, size_t err_len)
{
    struct stat st;
    if (stat(run->epochs_path, &st) != 0)
        return 0; /* a summary on its own: no samples */
    if (csv_read(run->epochs_path, &run->epochs, err, err_len) != 0 ||
        columns_check_csv(epoch_columns, &run->epochs, run->epochs_path, err, err_len) != 0)
        return -1;
    run->have_epochs = 1;
    field_reader r = {&run->epochs, run->epochs_path, err, err_len, 0};
    key_columns k = find_key_columns(&r);
    int ips = need_column(&r, "images_per_second");
    if (r.failed)
        return -1;
    int epoch_col = csv_column(&run->epochs, "epoch"); /* optional: warm-up unknown */
    for (int i = 0; i < run->epochs.n_rows; i++) {
        run_row e = {
            .backend = text_at(&r, i, k.backend),
            .workload = text_at(&r, i, k.workload),
            .precision = text_at(&r, i, k.precision),
            .batch_size = (int)integer_at(&r, i, k.batch_size),
            .threads = (int)integer_at(&r, i, k.threads),
            .devices = (int)integer_at(&r, i, k.devices),
            .replicas = count_at(&r, i, k.replicas),
            .ranks = count_at(&r, i, k.ranks),
        };
        double v = number_at(&r, i, ips);
        long epoch = integer_at(&r, i, epoch_col);
        run_status status = status_at(&r, i, k.status);
        if (r.failed)
            return -1;
        if (status != STATUS_OK || !(v > 0))
            continue;
        int j = index_find(run, &e, 1, 0);
        /* the summary's figures leave out warm-up epochs; so do the samples */
        if (j >= 0 && !(run->rows[j].epochs > 0 && epoch >= 1 &&
                        epoch <= warmup_epochs(run->rows[j].epochs)))
            push_sample(&run->rows[j], v);
    }
    return 0;
}

/* Options that cannot change the trained numbers: where the results go,
 * how often to repeat, what to print, and placement (threads and devices
 * are part of the row's configuration already). */
static const char *const not_training_options[] = {
    "backend", "out", "repeat", "format", "profile-layers", "target-accuracy", "threads",
    "device", "cuda-graph", "data-on-device", "list", "help", "no-peak", "step-losses",
    NULL,
};

static int cmp_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_training_option(const char *name)
{
    for (const char *const *o = not_training_options; *o; o++)
        if (!strcmp(name, *o))
            return 0;
    return 1;
}

/* Adds "name=value" to the run's settings unless the option cannot change
 * the numbers; the last of a repeated option wins, as with getopt. */
static void add_setting(run_files *run, const char *name, size_t name_len, const char *value)
{
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)name_len, name);
    if (!is_training_option(key))
        return;
    size_t len = strlen(key) + strlen(value) + 2;
    char *s = xmalloc(len);
    snprintf(s, len, "%s=%s", key, value);
    for (int i = 0; i < run->n_settings; i++)
        if (!strncmp(run->settings[i], s, strlen(key) + 1)) {
            free(run->settings[i]);
            run->settings[i] = s;
            return;
        }
    run->settings[run->n_settings++] = s;
}

/* The training options of the run's command line, from system.json:
 * "--name value" and "--name=value" alike, less the ones listed above. */
static void read_settings(run_files *run)
{
    sysinfo_record *sys = &run->system;
    if (sysinfo_read_json(run->system_path, sys, run->settings_why, sizeof run->settings_why))
        return;
    const int n = sys->n_args;
    char **args = sys->command_line;
    /* at most one setting per argument */
    run->settings = xcalloc((size_t)n, sizeof(char *));
    /* args[0] is the program's path, which says nothing about training */
    for (int i = 1; i < n; i++) {
        if (!strncmp(args[i], "--", 2)) {
            const char *name = args[i] + 2, *eq = strchr(name, '=');
            if (eq)
                add_setting(run, name, (size_t)(eq - name), eq + 1);
            else if (i + 1 < n && strncmp(args[i + 1], "--", 2))
                add_setting(run, name, strlen(name), args[++i]);
            else
                add_setting(run, name, strlen(name), "");
        } else {
            add_setting(run, "argument", 8, args[i]);
        }
    }
    qsort(run->settings, (size_t)run->n_settings, sizeof(char *), cmp_strings);
    run->have_settings = 1;
}

/* BASE and NEW may each be a run directory or a summary.csv. */
static int open_run(run_files *run, const char *label, const char *arg, char *err,
                    size_t err_len)
{
    memset(run, 0, sizeof *run);
    run->label = label;
    struct stat st;
    if (strlen(arg) >= PATH_LEN) {
        snprintf(err, err_len, "%s: path too long", label);
        return -1;
    }
    if (stat(arg, &st) != 0) {
        snprintf(err, err_len, "%s: cannot open %s: %s", label, arg, strerror(errno));
        return -1;
    }
    char dir[PATH_LEN];
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", arg);
        snprintf(run->summary_path, sizeof run->summary_path, "%s/summary.csv", dir);
    } else {
        snprintf(run->summary_path, sizeof run->summary_path, "%s", arg);
        const char *slash = strrchr(arg, '/');
        if (slash)
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - arg), arg);
        else
            snprintf(dir, sizeof dir, ".");
    }
    snprintf(run->epochs_path, sizeof run->epochs_path, "%s/epochs.csv", dir);
    snprintf(run->system_path, sizeof run->system_path, "%s/system.json", dir);
    char why[2 * PATH_LEN + 1024];
    if (read_summary(run, why, sizeof why) != 0 || read_epochs(run, why, sizeof why) != 0) {
        snprintf(err, err_len, "%s: %.4000s", label, why);
        return -1;
    }
    read_settings(run);
    return 0;
}

static void close_run(run_files *run)
{
    for (int i = 0; i < run->n_rows; i++)
        free(run->rows[i].samples);
    free(run->rows);
    free(run->bucket);
    free(run->chain);
    for (int i = 0; i < run->n_settings; i++)
        free(run->settings[i]);
    free(run->settings);
    sysinfo_record_free(&run->system);
    csv_free(&run->summary);
    csv_free(&run->epochs);
}

/* ---- judging ---------------------------------------------------------------- */

typedef struct compare_options {
    double max_slowdown_pct;
    double max_accuracy_drop_points;
    double alpha;
    double loss_tolerance;
    int numerics_gate;
    double max_count_growth_pct;
    const char *relative_to; /* NULL: absolute images/s */
} compare_options;

typedef struct tally {
    int regressions, numerics, notes, compared;
    FILE *findings; /* printed after the table */
} tally;

static int is_ok(const run_row *r) { return r->status == STATUS_OK; }
static int is_skipped(const run_row *r) { return r->status == STATUS_SKIPPED; }

static void finding(tally *t, const char *kind, const char *row, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void finding(tally *t, const char *kind, const char *row, const char *fmt, ...)
{
    if (!strcmp(kind, "REGRESSION"))
        t->regressions++;
    else if (!strcmp(kind, "NUMERICS"))
        t->numerics++;
    else
        t->notes++;
    FILE *f = t->findings ? t->findings : stdout;
    fprintf(f, "%-10s %s: ", kind, row);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

/* The reference row for --relative-to: same workload and batch, ok; one
 * replica in one process when there is such a row. */
static const run_row *reference_row(const run_files *run, const char *ref, const run_row *like)
{
    for (int single = 1; single >= 0; single--)
        for (int i = 0; i < run->n_rows; i++) {
            const run_row *r = &run->rows[i];
            if (!strcmp(r->backend, ref) && !strcmp(r->workload, like->workload) &&
                r->batch_size == like->batch_size && is_ok(r) && r->images_per_second > 0 &&
                r->epoch_seconds > 0 && (!single || (r->replicas == 1 && r->ranks == 1)))
                return r;
        }
    return NULL;
}

/* Why two ok rows' final train losses need not be equal, or NULL when they
 * must be (same seed, settings, epochs and CPU). */
static const char *numerics_incomparable(const run_files *base, const run_files *next,
                                         const run_row *b, const run_row *n, char *why,
                                         size_t len)
{
    if (!base->have_settings || !next->have_settings) {
        snprintf(why, len, "training options unknown: %.160s",
                 base->have_settings ? next->settings_why : base->settings_why);
        return why;
    }
    int i = 0, j = 0;
    while (i < base->n_settings || j < next->n_settings) {
        int c = i == base->n_settings   ? 1
                : j == next->n_settings ? -1
                                        : strcmp(base->settings[i], next->settings[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        if (i < base->n_settings && j < next->n_settings) {
            /* one option with two values: sorted "name=value" puts them side by side */
            const char *bs = base->settings[i], *ns = next->settings[j];
            size_t bn = strcspn(bs, "="), nn = strcspn(ns, "=");
            if (bn == nn && !strncmp(bs, ns, bn)) {
                snprintf(why, len, "training options differ: --%.*s is %.60s in %s and %.60s in %s",
                         (int)(bn < 60 ? bn : 60), bs, bs[bn] ? bs + bn + 1 : "", base->label,
                         ns[nn] ? ns + nn + 1 : "", next->label);
                return why;
            }
        }
        const char *s = c < 0 ? base->settings[i] : next->settings[j];
        snprintf(why, len, "training options differ: --%.160s only in %s", s,
                 c < 0 ? base->label : next->label);
        return why;
    }
    if (b->epochs < 0 || n->epochs < 0 || b->images_per_epoch < 0 || n->images_per_epoch < 0) {
        snprintf(why, len, "epochs or images_per_epoch not recorded");
        return why;
    }
    if (b->epochs != n->epochs || b->images_per_epoch != n->images_per_epoch) {
        snprintf(why, len, "different length: %d x %ld images vs %d x %ld", b->epochs,
                 b->images_per_epoch, n->epochs, n->images_per_epoch);
        return why;
    }
    if (strcmp(b->optimizer, n->optimizer)) {
        snprintf(why, len, "different optimizer");
        return why;
    }
    if (!*b->cpu_model || strcmp(b->cpu_model, n->cpu_model)) {
        snprintf(why, len, "different or unknown CPU model (libraries pick other kernels)");
        return why;
    }
    /* another compiler or library version may round differently */
    if (strcmp(base->system.compiler, next->system.compiler)) {
        snprintf(why, len, "compilers differ: '%.60s' vs '%.60s'", base->system.compiler,
                 next->system.compiler);
        return why;
    }
    if (strcmp(base->system.libraries, next->system.libraries)) {
        snprintf(why, len, "library versions differ (system.json)");
        return why;
    }
    /* the engine's own account of its precision, math mode, library kernels */
    if (strcmp(b->details, n->details)) {
        snprintf(why, len, "engine details differ: '%.80s' vs '%.80s'", b->details, n->details);
        return why;
    }
    return NULL;
}

static void table_row(const char *config, const char *metric, const char *base,
                      const char *next, const char *change, const char *verdict)
{
    printf("| %s | %s | %s | %s | %s | %s |\n", config, metric, base, next, change, verdict);
}

static void judge_pair(const compare_options *o, const run_files *base, const run_files *next,
                       const run_row *b, const run_row *n, tally *t)
{
    char name[512], cell_b[64], cell_n[64], change[64], verdict[256];
    describe_row(n, name, sizeof name);
    t->compared++;

    /* speed */
    const char *metric = "images/s";
    char metric_buf[96];
    double fig_b = b->images_per_second, fig_n = n->images_per_second;
    double sec_b = b->epoch_seconds, sec_n = n->epoch_seconds;
    double scale_b = 1, scale_n = 1;
    int speed_known = fig_b > 0 && fig_n > 0;
    const char *speed_why = "no images/s figure";
    int is_reference = o->relative_to && reference_row(base, o->relative_to, b) == b;
    if (o->relative_to && !is_reference) {
        snprintf(metric_buf, sizeof metric_buf, "images/s / %s", o->relative_to);
        metric = metric_buf;
        const run_row *rb = reference_row(base, o->relative_to, b);
        const run_row *rn = reference_row(next, o->relative_to, n);
        if (!rb || !rn) {
            speed_known = 0;
            speed_why = !rb ? "no ok reference row in BASE" : "no ok reference row in NEW";
        } else {
            scale_b = rb->images_per_second;
            scale_n = rn->images_per_second;
            fig_b /= scale_b;
            fig_n /= scale_n;
            sec_b /= rb->epoch_seconds;
            sec_n /= rn->epoch_seconds;
        }
    }
    if (is_reference) {
        snprintf(cell_b, sizeof cell_b, "%.1f", fig_b);
        snprintf(cell_n, sizeof cell_n, "%.1f", fig_n);
        snprintf(change, sizeof change, "%.3f", fig_n / fig_b);
        table_row(name, metric, cell_b, cell_n, change, "reference (not judged)");
    } else if (!speed_known) {
        table_row(name, metric, "-", "-", "-", speed_why);
        finding(t, "NOTE", name, "speed not compared: %s", speed_why);
    } else {
        double *sb = xcalloc((size_t)b->n_samples, sizeof(double));
        double *sn = xcalloc((size_t)n->n_samples, sizeof(double));
        int nb = b->n_samples, nn = n->n_samples;
        for (int i = 0; i < nb; i++)
            sb[i] = b->samples[i] / scale_b;
        for (int i = 0; i < nn; i++)
            sn[i] = n->samples[i] / scale_n;
        speed_verdict v = judge_speed(fig_b, fig_n, sb, nb, sn, nn, o->max_slowdown_pct, o->alpha);
        free(sb);
        free(sn);
        const char *fmt = o->relative_to ? "%.4f" : "%.1f";
        snprintf(cell_b, sizeof cell_b, fmt, fig_b);
        snprintf(cell_n, sizeof cell_n, fmt, fig_n);
        snprintf(change, sizeof change, "%.3f", fig_n / fig_b);
        char test[160];
        if (v.u_test_used)
            snprintf(test, sizeof test, "U test p=%.4f, %d vs %d samples", v.p, nb, nn);
        else if (nb == 0 || nn == 0)
            snprintf(test, sizeof test, "threshold alone: no per-epoch samples in %s",
                     nb ? "NEW" : nn ? "BASE" : "either run");
        else
            snprintf(test, sizeof test, "threshold alone: %d vs %d samples are too few for the U test",
                     nb, nn);
        /* slower: more time per image; faster: more images per second */
        const char *word = v.slowdown_pct >= 0 ? "slower" : "faster";
        double size = v.slowdown_pct >= 0 ? v.slowdown_pct : (fig_n / fig_b - 1) * 100;
        snprintf(verdict, sizeof verdict, "%s%.1f%% %s (%s)", v.regression ? "REGRESSION " : "",
                 size, word, test);
        table_row(name, metric, cell_b, cell_n, change, verdict);
        if (v.regression)
            finding(t, "REGRESSION", name, "%s %.1f%% slower, beyond the %g%% limit (%s)", metric,
                    v.slowdown_pct, o->max_slowdown_pct, test);
    }
    if (sec_b > 0 && sec_n > 0 && (speed_known || is_reference)) {
        const char *fmt = o->relative_to && !is_reference ? "%.4f" : "%.3f";
        snprintf(cell_b, sizeof cell_b, fmt, sec_b);
        snprintf(cell_n, sizeof cell_n, fmt, sec_n);
        snprintf(change, sizeof change, "%.3f", sec_n / sec_b);
        snprintf(metric_buf, sizeof metric_buf, "s/epoch%s%s", o->relative_to && !is_reference ? " / " : "",
                 o->relative_to && !is_reference ? o->relative_to : "");
        table_row("", metric_buf, cell_b, cell_n, change,
                  b->images_per_epoch == n->images_per_epoch ? "shown, not judged"
                                                             : "different epoch sizes");
    }

    /* accuracy, in percentage points */
    double drop = (b->accuracy - n->accuracy) * 100;
    snprintf(cell_b, sizeof cell_b, "%.4f", b->accuracy);
    snprintf(cell_n, sizeof cell_n, "%.4f", n->accuracy);
    snprintf(change, sizeof change, "%+.2f pt", -drop);
    if (isfinite(b->accuracy) && !isfinite(n->accuracy)) {
        table_row("", "test accuracy", cell_b, cell_n, "-", "REGRESSION: no accuracy in NEW");
        finding(t, "REGRESSION", name, "test accuracy missing in NEW (was %.4f)", b->accuracy);
    } else if (drop > o->max_accuracy_drop_points) {
        snprintf(verdict, sizeof verdict, "REGRESSION: %.2f points lower", drop);
        table_row("", "test accuracy", cell_b, cell_n, change, verdict);
        finding(t, "REGRESSION", name,
                "test accuracy %.4f -> %.4f, %.2f points lower, beyond the %g point limit",
                b->accuracy, n->accuracy, drop, o->max_accuracy_drop_points);
    } else {
        table_row("", "test accuracy", cell_b, cell_n, change, "ok");
    }

    /* train loss: deterministic for the same seed and settings */
    snprintf(cell_b, sizeof cell_b, "%.6f", b->train_loss);
    snprintf(cell_n, sizeof cell_n, "%.6f", n->train_loss);
    snprintf(change, sizeof change, "%.6f", n->train_loss / b->train_loss);
    char why[256];
    const char *incomparable = numerics_incomparable(base, next, b, n, why, sizeof why);
    double diff = fabs(n->train_loss - b->train_loss);
    /* the CSV prints 6 decimals: allow one unit of the last digit as well */
    int changed = !(diff <= o->loss_tolerance * fabs(b->train_loss) + 1e-6);
    if (!changed) {
        table_row("", "train loss", cell_b, cell_n, change, diff == 0 ? "identical" : "same");
    } else if (incomparable) {
        snprintf(verdict, sizeof verdict, "differs; not judged (%.200s)", incomparable);
        table_row("", "train loss", cell_b, cell_n, change, verdict);
    } else {
        snprintf(verdict, sizeof verdict, "CHANGED NUMERICS%s",
                 o->numerics_gate ? "" : " (reported, not gated)");
        table_row("", "train loss", cell_b, cell_n, change, verdict);
        finding(t, o->numerics_gate ? "NUMERICS" : "NOTE", name,
                "final train loss %.6f -> %.6f (relative change %.2e, tolerance %.0e) with the same "
                "seed, options, epochs and CPU: the arithmetic changed",
                b->train_loss, n->train_loss, diff / fabs(b->train_loss), o->loss_tolerance);
    }
}

static void judge_status(const run_row *b, const run_row *n, tally *t)
{
    char name[512];
    describe_row(is_ok(b) ? b : n, name, sizeof name);
    t->compared++;
    const char *was = status_name(b->status), *now = status_name(n->status);
    table_row(name, "status", was, now, "-",
              is_ok(b) && !is_skipped(n) ? "REGRESSION" : "not compared");
    if (is_ok(b) && is_skipped(n))
        finding(t, "NOTE", name, "skipped in NEW (%s); not compared", n->message);
    else if (is_ok(b))
        finding(t, "REGRESSION", name, "ok in BASE, %s in NEW: %s", now,
                *n->message ? n->message : "(no message)");
    else if (is_ok(n))
        finding(t, "NOTE", name, "%s in BASE, ok in NEW", was);
    else
        finding(t, "NOTE", name, "%s in BASE, %s in NEW", was, now);
}

static void print_samples_line(const run_files *run)
{
    int lo = -1, hi = -1;
    for (int i = 0; i < run->n_rows; i++) {
        int s = run->rows[i].n_samples;
        if (!is_ok(&run->rows[i]))
            continue;
        lo = lo < 0 || s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    printf("%-4s %s (%d rows; ", run->label, run->summary_path, run->n_rows);
    if (!run->have_epochs)
        printf("no epochs.csv beside it, so no samples for the U test)\n");
    else if (lo == hi)
        printf("%d per-epoch samples per row)\n", lo < 0 ? 0 : lo);
    else
        printf("%d to %d per-epoch samples per row)\n", lo, hi);
}

static int compare_runs(const compare_options *o, run_files *base, run_files *next)
{
    if (o->relative_to) {
        for (int s = 0; s < 2; s++) {
            const run_files *run = s ? next : base;
            int found = 0;
            for (int i = 0; i < run->n_rows; i++)
                found |= !strcmp(run->rows[i].backend, o->relative_to);
            if (!found) {
                fprintf(stderr, "bench compare: --relative-to %s: %s has no %s row\n",
                        o->relative_to, run->summary_path, o->relative_to);
                return 2;
            }
        }
    }
    /* Pair exactly first, then by the loose key when a row did not run. */
    int *partner = xcalloc((size_t)base->n_rows, sizeof(int));
    for (int i = 0; i < base->n_rows; i++) {
        partner[i] = index_find(next, &base->rows[i], 1, 1);
        if (partner[i] >= 0)
            next->rows[partner[i]].paired = base->rows[i].paired = 1;
    }
    for (int i = 0; i < base->n_rows; i++) {
        run_row *b = &base->rows[i];
        if (partner[i] >= 0)
            continue;
        /* the earliest unpaired row of the loose key for which one of the
         * two did not finish */
        int found = -1;
        for (int j = next->bucket ? next->bucket[loose_key_hash(b) & (next->n_buckets - 1)] : -1;
             j >= 0; j = next->chain[j]) {
            run_row *n = &next->rows[j];
            if (!n->paired && same_loose_key(b, n) && (!is_ok(b) || !is_ok(n)))
                found = j;
        }
        if (found >= 0) {
            partner[i] = found;
            next->rows[found].paired = b->paired = 1;
        }
    }
    int pairs = 0;
    for (int i = 0; i < base->n_rows; i++)
        pairs += partner[i] >= 0;
    if (pairs == 0) {
        fprintf(stderr,
                "bench compare: no common rows: %s and %s share no configuration "
                "(backend, workload, precision, batch_size, threads, devices, replicas, ranks)\n",
                base->summary_path, next->summary_path);
        free(partner);
        return 2;
    }

    print_samples_line(base);
    print_samples_line(next);
    if (o->relative_to)
        printf("speed: images/s divided by %s's images/s in the same run, so machine speed cancels\n",
               o->relative_to);
    printf("limits: slowdown %g%% (and U test at alpha %g when the samples allow), test accuracy "
           "drop %g points, numerics %s\n\n",
           o->max_slowdown_pct, o->alpha, o->max_accuracy_drop_points,
           o->numerics_gate ? "gated" : "reported only");
    printf("| configuration | metric | BASE | NEW | NEW/BASE | verdict |\n");
    printf("|---|---|---:|---:|---:|---|\n");

    /* The table first; the findings gathered meanwhile follow it. */
    char *findings_text = NULL;
    size_t findings_len = 0;
    tally t = {0};
    t.findings = open_memstream(&findings_text, &findings_len);
    for (int i = 0; i < base->n_rows; i++) {
        if (partner[i] < 0)
            continue;
        const run_row *b = &base->rows[i], *n = &next->rows[partner[i]];
        if (is_ok(b) && is_ok(n))
            judge_pair(o, base, next, b, n, &t);
        else
            judge_status(b, n, &t);
    }
    for (int s = 0; s < 2; s++) {
        const run_files *run = s ? next : base;
        for (int i = 0; i < run->n_rows; i++) {
            const run_row *r = &run->rows[i];
            if (r->paired)
                continue;
            char name[512];
            describe_row(r, name, sizeof name);
            finding(&t, "NOTE", name, "only in %s (%s); not compared", run->label,
                    status_name(r->status));
        }
    }
    if (t.findings && fclose(t.findings) == 0 && findings_len) {
        printf("\n");
        fwrite(findings_text, 1, findings_len, stdout);
    }
    free(findings_text);
    free(partner);
    int rc = t.regressions || t.numerics ? 1 : 0;
    printf("\ncompare: %d configuration%s compared, %d regression%s, %d numerics change%s, "
           "%d note%s -> exit %d\n",
           t.compared, t.compared == 1 ? "" : "s", t.regressions, t.regressions == 1 ? "" : "s",
           t.numerics, t.numerics == 1 ? "" : "s", t.notes, t.notes == 1 ? "" : "s", rc);
    return rc;
}

/* ---- command line ------------------------------------------------------------ */

static void compare_usage(FILE *f)
{
    fprintf(f,
        "usage: ./bench compare [options] BASE NEW\n"
        "\n"
        "Compares two runs, each a run directory or its summary.csv, row by row:\n"
        "rows are joined on backend, workload, precision, batch_size, threads,\n"
        "devices, replicas and ranks (the last two taken as 1 when absent). For\n"
        "each it prints images/s, s/epoch, final test accuracy and final train\n"
        "loss, BASE against NEW, and judges them.\n"
        "\n"
        "  --max-slowdown PCT       a row taking more than PCT percent longer per\n"
        "                           image than in BASE regressed (default 10, that\n"
        "                           is images/s down by more than 9.1%%)\n"
        "  --max-accuracy-drop PTS  final test accuracy lower by more than PTS\n"
        "                           percentage points regressed (default 1.0)\n"
        "  --relative-to BACKEND    judge each row's images/s divided by BACKEND's\n"
        "                           images/s in the same run, so the machine's speed\n"
        "                           cancels (CI uses --relative-to naive); BACKEND's\n"
        "                           own speed is then shown, not judged\n"
        "  --alpha A                significance level of the U test (default 0.05)\n"
        "  --loss-tolerance REL     relative change of final train loss still counted\n"
        "                           as the same numerics, on top of one unit of the\n"
        "                           CSV's sixth decimal (default 1e-6)\n"
        "  --numerics gate|report   whether changed numerics fail the comparison\n"
        "                           (gate, the default) or are only reported\n"
        "  --max-count-growth PCT   instruction counts (counts.csv from ./bench count):\n"
        "                           an item whose instructions per image grew by more\n"
        "                           than PCT percent regressed (default %g)\n"
        "  --help                   this text\n"
        "\n"
        "Counts: when both BASE and NEW hold a counts.csv (or are one), their\n"
        "instructions per image are compared item by item; when NEW has no\n"
        "summary.csv, only the counts are. Counts made with a different compiler,\n"
        "build target, OpenBLAS or kernels, valgrind or presented CPU are not\n"
        "judged (a message says which, exit 0).\n"
        "\n"
        "Speed: a slowdown regresses only when the figures (summary.csv, from the\n"
        "median epoch) differ by more than --max-slowdown and, when both runs\n"
        "have enough per-epoch samples in epochs.csv, a two-sided Mann-Whitney U\n"
        "test (normal approximation with tie and continuity corrections) finds\n"
        "the samples different at --alpha. The samples are the per-epoch images/s\n"
        "of ok epochs, less the warm-up epochs the summary leaves out too. When\n"
        "they are too few for the test ever to reach --alpha (3 against 3 or 4\n"
        "with 0.05; 4 against 4 is enough) the threshold alone decides, and the\n"
        "table says so.\n"
        "\n"
        "Numerics: the final train loss is deterministic for one seed, so a change\n"
        "beyond --loss-tolerance is CHANGED NUMERICS when both rows ran the same\n"
        "training options (system.json's command line, less --out, --repeat,\n"
        "--backend and other options that cannot change the numbers), the same\n"
        "epochs, images per epoch and optimizer, on the same CPU model, compiler\n"
        "and library versions, with the same engine details (precision, math\n"
        "mode, library kernels). Otherwise the difference is shown and not\n"
        "judged.\n"
        "\n"
        "Status: a row ok in BASE that failed, diverged or was interrupted in NEW\n"
        "regressed; a row skipped in NEW, or in only one run, is a note (that\n"
        "machine or build cannot run it), never a failure.\n"
        "\n"
        "Exit status: 0 nothing regressed, 1 a regression or changed numerics,\n"
        "2 unusable input (a missing file, a bad CSV line, a missing column, no\n"
        "common rows), with the file and line named.\n",
        COUNT_MAX_GROWTH_PCT);
}

int compare_main(int argc, char **argv)
{
    compare_options o = {
        .max_slowdown_pct = 10,
        .max_accuracy_drop_points = 1.0,
        .alpha = 0.05,
        .loss_tolerance = 1e-6,
        .numerics_gate = 1,
        .max_count_growth_pct = COUNT_MAX_GROWTH_PCT,
    };
    enum { O_SLOW = 256, O_ACC, O_REL, O_ALPHA, O_LOSS, O_NUMERICS, O_COUNT, O_HELP };
    static const struct option options[] = {
        {"max-slowdown", required_argument, 0, O_SLOW},
        {"max-accuracy-drop", required_argument, 0, O_ACC},
        {"relative-to", required_argument, 0, O_REL},
        {"alpha", required_argument, 0, O_ALPHA},
        {"loss-tolerance", required_argument, 0, O_LOSS},
        {"numerics", required_argument, 0, O_NUMERICS},
        {"max-count-growth", required_argument, 0, O_COUNT},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    const char *cmd = "compare";
    options_begin();
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        switch (c) {
        case O_SLOW:
            rc = option_number(cmd, "--max-slowdown", optarg, 0, 1e6, &o.max_slowdown_pct);
            break;
        case O_ACC:
            rc = option_number(cmd, "--max-accuracy-drop", optarg, 0, 100,
                               &o.max_accuracy_drop_points);
            break;
        case O_REL: o.relative_to = optarg; break;
        case O_ALPHA: rc = option_number(cmd, "--alpha", optarg, 1e-12, 0.5, &o.alpha); break;
        case O_LOSS:
            rc = option_number(cmd, "--loss-tolerance", optarg, 0, 1, &o.loss_tolerance);
            break;
        case O_NUMERICS:
            if (!strcmp(optarg, "gate") || !strcmp(optarg, "report"))
                o.numerics_gate = !strcmp(optarg, "gate");
            else {
                fprintf(stderr, "bench compare: --numerics expects gate or report, got '%s'\n",
                        optarg);
                rc = 2;
            }
            break;
        case O_COUNT:
            rc = option_number(cmd, "--max-count-growth", optarg, 0, 1e6,
                               &o.max_count_growth_pct);
            break;
        case O_HELP: compare_usage(stdout); return 0;
        default: return option_error(cmd, options, c, argv);
        }
    }
    if (rc)
        return rc;
    if (argc - optind != 2) {
        fprintf(stderr, "bench compare: expects two runs, BASE and NEW (see ./bench compare --help)\n");
        return 2;
    }
    /* Instruction counts (./bench count) are judged beside the timings, or
     * alone when NEW has no timings. */
    char base_counts[PATH_LEN + 32], new_counts[PATH_LEN + 32];
    int counts = count_path(argv[optind], base_counts, sizeof base_counts) &&
                 count_path(argv[optind + 1], new_counts, sizeof new_counts);
    if (counts && count_only(argv[optind + 1]))
        return count_compare(base_counts, new_counts, o.max_count_growth_pct);
    run_files base, next;
    char err[2 * PATH_LEN];
    if (open_run(&base, "BASE", argv[optind], err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s\n", err);
        close_run(&base);
        return 2;
    }
    if (open_run(&next, "NEW", argv[optind + 1], err, sizeof err) != 0) {
        fprintf(stderr, "bench compare: %s\n", err);
        close_run(&base);
        close_run(&next);
        return 2;
    }
    rc = compare_runs(&o, &base, &next);
    close_run(&base);
    close_run(&next);
    if (counts) {
        printf("\n");
        int counts_rc = count_compare(base_counts, new_counts, o.max_count_growth_pct);
        rc = counts_rc > rc ? counts_rc : rc;
    }
    return rc;
}
