/* Reading a run for `./bench compare`: see compare_read.h. */
#include "harness/tools/compare_read.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "harness/run/columns.h"
#include "harness/tools/stats.h"

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
int same_loose_key(const run_row *a, const run_row *b)
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

size_t loose_key_hash(const run_row *r)
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
int index_find(const run_files *run, const run_row *like, int exact, int unpaired_only)
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

void describe_row(const run_row *r, char *buf, size_t len)
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
int open_run(run_files *run, const char *label, const char *arg, char *err,
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

void close_run(run_files *run)
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
