/* Reading a run for `./bench compare`: see compare_read.h. */
#include "harness/tools/compare_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "harness/run/columns.h"
#include "harness/common/stats.h"

/* The columns compare cannot do without, in the order a missing one is
 * named; the others are optional (without them the numerics check says it
 * cannot tell, and replicas and ranks are 1 as in runs from before data
 * parallelism). */
static const column_field summary_needed[] = {
    IN_SUMMARY(key.backend), IN_SUMMARY(key.workload), IN_SUMMARY(key.precision),
    IN_SUMMARY(key.batch_size), IN_SUMMARY(key.threads), IN_SUMMARY(key.devices),
    IN_SUMMARY(status), IN_SUMMARY(images_per_second), IN_SUMMARY(epoch_seconds_median),
    IN_SUMMARY(final_test_accuracy), IN_SUMMARY(final_train_loss),
};
static const column_field epoch_needed[] = {
    IN_EPOCH(key.backend), IN_EPOCH(key.workload), IN_EPOCH(key.precision),
    IN_EPOCH(key.batch_size), IN_EPOCH(key.threads), IN_EPOCH(key.devices),
    IN_EPOCH(status), IN_EPOCH(images_per_second),
};

/* Reads and checks one of the run's files, which must have `needed`. */
static int read_table(result_table *t, const column *cols, const char *path,
                      const column_field *needed, int n_needed, char *err, size_t err_len)
{
    if (result_table_read(t, cols, path, err, err_len) != 0 ||
        result_table_check(t, err, err_len) != 0)
        return -1;
    const column *missing = result_table_missing(t, needed, n_needed);
    if (missing) {
        snprintf(err, err_len, "%s: no column '%s' in the header", path, missing->name);
        return -1;
    }
    return 0;
}

/* Rows are joined on whole numbers and judged by them, so an empty one
 * (which the check lets pass as not measured) is refused. */
static int whole_numbers_given(const result_table *t, int i, char *err, size_t err_len)
{
    for (const column *c = t->cols; c->name; c++)
        if ((c->kind == COL_INT || c->kind == COL_LONG) && result_has(t, c) &&
            !*result_text(t, i, c)) {
            snprintf(err, err_len, "%s:%d: column '%s': '' is not a whole number", t->path,
                     t->csv.lines[i], c->name);
            return -1;
        }
    return 0;
}

/* What a column an older file lacks means; the reader fills in the rest. */
static row_key key_defaults(void)
{
    return (row_key){.backend = "", .workload = "", .precision = "", .optimizer = "",
                     .replicas = 1, .ranks = 1};
}

/* Data-parallel rows of one backend differ by replicas and ranks, so those
 * join too when the files have them. */
static int same_key(const row_key *a, const row_key *b)
{
    return same_loose_key(a, b) && a->threads == b->threads && a->devices == b->devices &&
           a->replicas == b->replicas && a->ranks == b->ranks;
}

/* The configuration without the placement, which a failed or skipped row
 * may not know (threads 0 when the engine never started). */
int same_loose_key(const row_key *a, const row_key *b)
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

size_t loose_key_hash(const row_key *k)
{
    size_t h = hash_text(hash_text(hash_text(14695981039346656037ull, k->backend), k->workload),
                         k->precision);
    return (h ^ (size_t)(unsigned)k->batch_size) * 1099511628211ull;
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
    size_t b = loose_key_hash(&run->rows[i].s.key) & (run->n_buckets - 1);
    run->chain[i] = run->bucket[b];
    run->bucket[b] = i;
}

/* The first row of run (in the chain's order) that has `like`'s exact key
 * (exact) or loose key, and is unpaired when unpaired_only; -1 if none. */
int index_find(const run_files *run, const row_key *like, int exact, int unpaired_only)
{
    if (!run->bucket)
        return -1;
    int found = -1;
    for (int j = run->bucket[loose_key_hash(like) & (run->n_buckets - 1)]; j >= 0;
         j = run->chain[j]) {
        const run_row *r = &run->rows[j];
        if ((exact ? same_key(&r->s.key, like) : same_loose_key(&r->s.key, like)) &&
            !(unpaired_only && r->paired))
            found = j; /* chains run newest first: keep going for the earliest */
    }
    return found;
}

void describe_row(const run_row *r, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s %s %s batch=%d threads=%d devices=%d", r->s.key.backend,
                     r->s.key.workload, r->s.key.precision, r->s.key.batch_size, r->s.key.threads,
                     r->s.key.devices);
    if (r->s.key.replicas != 1 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " replicas=%d", r->s.key.replicas);
    if (r->s.key.ranks != 1 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " ranks=%d", r->s.key.ranks);
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
    result_table *t = &run->summary;
    if (read_table(t, summary_columns, run->summary_path, summary_needed,
                   (int)(sizeof summary_needed / sizeof *summary_needed), err, err_len) != 0)
        return -1;
    const column *cpu = SYSTEM_COLUMN(cpu_model);
    run->rows = xcalloc((size_t)t->csv.n_rows, sizeof(run_row));
    index_init(run, t->csv.n_rows);
    for (int i = 0; i < t->csv.n_rows; i++) {
        run_row *row = &run->rows[run->n_rows];
        summary_row *s = &row->s;
        summary_row_init(s);
        s->key = key_defaults();
        s->message = s->details = "";
        s->status = STATUS_FAILED;
        s->epochs = -1;
        s->images_per_epoch = -1;
        if (whole_numbers_given(t, i, err, err_len) != 0)
            return -1;
        result_table_row(t, i, s);
        row->cpu_model = result_text(t, i, cpu);
        row->line = t->csv.lines[i];
        if (!*row->s.key.backend) {
            snprintf(err, err_len, "%s:%d: empty backend name", run->summary_path, row->line);
            return -1;
        }
        int j = index_find(run, &row->s.key, 1, 0);
        if (j >= 0) {
            char name[512];
            describe_row(row, name, sizeof name);
            snprintf(err, err_len, "%s:%d: a second row for %.300s (the first is line %d)",
                     run->summary_path, row->line, name, run->rows[j].line);
            return -1;
        }
        index_add(run, run->n_rows++);
    }
    return 0;
}

static int read_epochs(run_files *run, char *err, size_t err_len)
{
    struct stat st;
    if (stat(run->epochs_path, &st) != 0)
        return 0; /* a summary on its own: no samples */
    result_table *t = &run->epochs;
    if (read_table(t, epoch_columns, run->epochs_path, epoch_needed,
                   (int)(sizeof epoch_needed / sizeof *epoch_needed), err, err_len) != 0)
        return -1;
    run->have_epochs = 1;
    for (int i = 0; i < t->csv.n_rows; i++) {
        epoch_row e = {.key = key_defaults(), .status = STATUS_FAILED,
                       .epoch = -1 /* no column: warm-up unknown */};
        if (whole_numbers_given(t, i, err, err_len) != 0)
            return -1;
        result_table_row(t, i, &e);
        if (e.status != STATUS_OK || !(e.images_per_second > 0))
            continue;
        int j = index_find(run, &e.key, 1, 0);
        /* the summary's figures leave out warm-up epochs; so do the samples */
        if (j >= 0 && !(run->rows[j].s.epochs > 0 && e.epoch >= 1 &&
                        e.epoch <= warmup_epochs(run->rows[j].s.epochs)))
            push_sample(&run->rows[j], e.images_per_second);
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
    result_table_free(&run->summary);
    result_table_free(&run->epochs);
}
