#include "harness/run/columns.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/formats/csv.h"
#include "harness/run/label.h"
#include "harness/run/options.h"

/* ---- markdown cells that are more than one number ------------------------ */

static void md_label(char *buf, size_t len, const summary_row *r)
{
    config_label(&r->key, buf, len);
}

static void md_seconds(char *buf, size_t len, const summary_row *r)
{
    if (!(r->epoch_seconds_median > 0))
        snprintf(buf, len, "-");
    else if (r->timed_samples > 1)
        snprintf(buf, len, "%.3f ± %.3f", r->epoch_seconds_median, r->epoch_seconds_stddev);
    else
        snprintf(buf, len, "%.3f", r->epoch_seconds_median);
}

static void md_target(char *buf, size_t len, const summary_row *r)
{
    if (!(r->target_accuracy > 0) || r->status != STATUS_OK)
        snprintf(buf, len, "-");
    else if (!(r->time_to_target_seconds >= 0))
        snprintf(buf, len, "not reached");
    else
        snprintf(buf, len, "%.2f", r->time_to_target_seconds);
}

static void md_mebibytes(char *buf, size_t len, const summary_row *r)
{
    double mib = r->memory_bytes / 1048576.0;
    if (mib > 0 && isfinite(mib))
        snprintf(buf, len, "%.1f", mib);
    else
        snprintf(buf, len, "-");
}

/* Not a number either way: the peak was uncertain (its source says so),
 * which is not the same as not measured (a skipped row, --no-peak) */
static void md_percent_of_peak(char *buf, size_t len, const summary_row *r)
{
    if (isnan(r->percent_of_peak) && r->peak_source &&
        strncmp(r->peak_source, "peak uncertain", 14) == 0)
        snprintf(buf, len, "peak uncertain");
    else if (r->percent_of_peak > 0)
        snprintf(buf, len, "%.1f", r->percent_of_peak);
    else
        snprintf(buf, len, "-");
}

/* ---- the lists ------------------------------------------------------------ */

/* Each column names its kind; md_ fields follow as designated initialisers. */
#define TEXT(n, off) .name = n, .kind = COL_TEXT, .offset = off
#define INT(n, off) .name = n, .kind = COL_INT, .offset = off
#define LONG(n, off) .name = n, .kind = COL_LONG, .offset = off
#define REAL(n, off, fmt) .name = n, .kind = COL_REAL, .offset = off, .format = fmt
#define STATUS(n, off) .name = n, .kind = COL_STATUS, .offset = off
#define SYSTEM(n, off) .name = n, .kind = COL_SYSTEM, .offset = off

/* The configuration, first in both files (row_key is each row's `key`). */
#define KEY_COLUMNS(row)                                                                           \
    {TEXT("backend", offsetof(row, key.backend)), .md_title = "backend", .md_cell = md_label},     \
    {TEXT("workload", offsetof(row, key.workload))},                                               \
    {TEXT("precision", offsetof(row, key.precision)), .md_title = "precision"},                    \
    {INT("threads", offsetof(row, key.threads)), .md_title = "threads"},                           \
    {INT("devices", offsetof(row, key.devices)), .md_title = "devices"},                           \
    {INT("replicas", offsetof(row, key.replicas))},                                                \
    {INT("ranks", offsetof(row, key.ranks))},                                                      \
    {INT("batch_size", offsetof(row, key.batch_size))},                                            \
    {TEXT("optimizer", offsetof(row, key.optimizer))}

#define S(field) offsetof(summary_row, field)
#define SYS(field) offsetof(sysinfo, field)

const column summary_columns[] = {
    KEY_COLUMNS(summary_row),
    {INT("epochs", S(epochs))},
    {INT("repeats", S(repeats))},
    {LONG("images_per_epoch", S(images_per_epoch))},
    {REAL("epoch_seconds_median", S(epoch_seconds_median), "%.6f"), .range = RANGE_NONNEGATIVE,
     .md_title = "s/epoch (median)", .md_cell = md_seconds},
    {REAL("epoch_seconds_mean", S(epoch_seconds_mean), "%.6f"), .range = RANGE_NONNEGATIVE},
    {REAL("epoch_seconds_stddev", S(epoch_seconds_stddev), "%.6f"), .range = RANGE_NONNEGATIVE},
    {REAL("images_per_second", S(images_per_second), "%.1f"), .range = RANGE_NONNEGATIVE,
     .md_title = "images/s", .md_format = "%.0f"},
    {REAL("gflops_per_second", S(gflops_per_second), "%.3f"), .range = RANGE_NONNEGATIVE,
     .md_title = "GFLOP/s", .md_format = "%.2f"},
    {REAL("percent_of_peak", S(percent_of_peak), "%.2f"), .range = RANGE_NONNEGATIVE,
     .md_title = "% of peak", .md_cell = md_percent_of_peak},
    {REAL("speedup_vs_naive", S(speedup_vs_naive), "%.3f"), .range = RANGE_NONNEGATIVE,
     .none_unless_positive = 1,
     .md_title = "speedup vs naive", .md_format = "%.2fx"},
    {REAL("final_train_loss", S(final_train_loss), "%.6f")},
    {REAL("final_test_accuracy", S(final_test_accuracy), "%.6f"), .range = RANGE_FRACTION,
     .md_title = "test accuracy", .md_format = "%.4f"},
    {REAL("macro_precision", S(macro_precision), "%.6f"), .range = RANGE_FRACTION},
    {REAL("macro_recall", S(macro_recall), "%.6f"), .range = RANGE_FRACTION},
    {REAL("macro_f1", S(macro_f1), "%.6f"), .range = RANGE_FRACTION},
    {REAL("time_to_target_seconds", S(time_to_target_seconds), "%.3f"),
     .md_title = "time to target (s)", .md_cell = md_target},
    {REAL("peak_memory_bytes", S(peak_memory_bytes), "%.0f"), .range = RANGE_NONNEGATIVE},
    {TEXT("details", S(details))},
    {STATUS("status", S(status)), .md_title = "status"},
    {TEXT("message", S(message))},
    {SYSTEM("cpu_model", SYS(cpu_model))},
    {SYSTEM("host", SYS(host))},
    {SYSTEM("git_commit", SYS(git_commit))},
    {SYSTEM("date", SYS(date))},
    {INT("timed_samples", S(timed_samples))},
    {INT("warmup_epochs", S(warmup_epochs))},
    {REAL("epoch_seconds_min", S(epoch_seconds_min), "%.6f"), .range = RANGE_NONNEGATIVE},
    {REAL("epoch_seconds_max", S(epoch_seconds_max), "%.6f"), .range = RANGE_NONNEGATIVE},
    {REAL("peak_gflops", S(peak_gflops), "%.1f"), .range = RANGE_NONNEGATIVE},
    {TEXT("peak_source", S(peak_source))},
    {SYSTEM("gpu_model", SYS(gpu_model))},
    {REAL("target_accuracy", S(target_accuracy), "%.4f"), .range = RANGE_FRACTION},
    {REAL("scaling_efficiency", S(scaling_efficiency), "%.4f"), .range = RANGE_NONNEGATIVE,
     .none_unless_positive = 1},
    {REAL("memory_bytes", S(memory_bytes), "%.0f"), .range = RANGE_NONNEGATIVE,
     .none_unless_positive = 1,
     .md_title = "memory (MiB)", .md_cell = md_mebibytes},
    {TEXT("memory_source", S(memory_source))},
    {TEXT("parallel", S(parallel))},
    {TEXT("split", S(split))},
    {INT("workers", S(workers))},
    {INT("micro_batches", S(micro_batches))},
    {INT("prefetch", S(prefetch))},
    /* 0 is a measurement here (a pool-only worker holds no parameters);
     * an engine that does not itemise leaves them NOT_MEASURED */
    {REAL("worker_params_bytes", S(worker_params_bytes), "%.0f"), .range = RANGE_NONNEGATIVE},
    {REAL("worker_grads_bytes", S(worker_grads_bytes), "%.0f"), .range = RANGE_NONNEGATIVE},
    {REAL("worker_opt_state_bytes", S(worker_opt_state_bytes), "%.0f"), .range = RANGE_NONNEGATIVE},
    {REAL("worker_activation_bytes", S(worker_activation_bytes), "%.0f"),
     .range = RANGE_NONNEGATIVE},
    {REAL("worker_workspace_bytes", S(worker_workspace_bytes), "%.0f"), .range = RANGE_NONNEGATIVE},
    /* the arithmetic a CPU row's peak is of (fp32, bf16-dot, fp64 ...) */
    {TEXT("peak_arithmetic", S(peak_arithmetic))},
    {.name = NULL},
};

#define E(field) offsetof(epoch_row, field)

const column epoch_columns[] = {
    KEY_COLUMNS(epoch_row),
    {INT("repeat", E(repeat))},
    {INT("epoch", E(epoch))},
    {LONG("images", E(images))},
    {REAL("epoch_seconds", E(epoch_seconds), "%.6f"), .range = RANGE_NONNEGATIVE},
    {REAL("images_per_second", E(images_per_second), "%.1f"), .range = RANGE_NONNEGATIVE},
    {REAL("gflops_per_second", E(gflops_per_second), "%.3f"), .range = RANGE_NONNEGATIVE},
    {REAL("train_loss", E(train_loss), "%.6f"), .nan_is_value = 1},
    {REAL("test_loss", E(test_loss), "%.6f"), .nan_is_value = 1},
    {REAL("test_accuracy", E(test_accuracy), "%.6f"), .range = RANGE_FRACTION, .nan_is_value = 1},
    {STATUS("status", E(status))},
    {TEXT("message", E(message))},
    {.name = NULL},
};

/* ---- reading a value ------------------------------------------------------ */

static const void *at(const column *c, const void *row, const sysinfo *sys)
{
    return (const char *)(c->kind == COL_SYSTEM ? (const void *)sys : row) + c->offset;
}

/* Text for COL_TEXT, COL_STATUS and COL_SYSTEM; never NULL. */
static const char *text_of(const column *c, const void *row, const sysinfo *sys)
{
    const void *p = at(c, row, sys);
    switch (c->kind) {
    case COL_TEXT: return *(const char *const *)p ? *(const char *const *)p : "";
    case COL_STATUS: return status_name(*(const run_status *)p);
    case COL_SYSTEM: return (const char *)p;
    default: return "";
    }
}

static int is_text(const column *c)
{
    return c->kind == COL_TEXT || c->kind == COL_STATUS || c->kind == COL_SYSTEM;
}

static double real_of(const column *c, const void *row)
{
    return *(const double *)at(c, row, NULL);
}

static int is_none(const column *c, double v)
{
    return (c->none_unless_positive && !(v > 0)) || (isnan(v) && !c->nan_is_value);
}

/* Writes a number column's value the way CSV and JSON share. */
static void write_number(FILE *f, const column *c, const void *row)
{
    switch (c->kind) {
    case COL_INT: fprintf(f, "%d", *(const int *)at(c, row, NULL)); break;
    case COL_LONG: fprintf(f, "%ld", *(const long *)at(c, row, NULL)); break;
    case COL_REAL: fprintf(f, c->format, real_of(c, row)); break;
    default: break;
    }
}

/* ---- writers ------------------------------------------------------------ */

void columns_csv_header(FILE *f, const column *cols)
{
    for (const column *c = cols; c->name; c++)
        fprintf(f, "%s%s", c == cols ? "" : ",", c->name);
    fputc('\n', f);
}

void columns_csv_row(FILE *f, const column *cols, const void *row, const sysinfo *sys)
{
    for (const column *c = cols; c->name; c++) {
        if (c != cols)
            fputc(',', f);
        if (is_text(c))
            csv_field(f, text_of(c, row, sys));
        else if (!(c->kind == COL_REAL &&
                   (!isfinite(real_of(c, row)) || is_none(c, real_of(c, row)))))
            write_number(f, c, row); /* NaN (e.g. a peak uncertain): an empty cell */
    }
    fputc('\n', f);
}

void columns_json_object(FILE *f, const column *cols, const void *row, const sysinfo *sys)
{
    for (const column *c = cols; c->name; c++) {
        fprintf(f, "%s\"%s\": ", c == cols ? "{" : ", ", c->name);
        if (is_text(c))
            json_string(f, text_of(c, row, sys));
        else if (c->kind == COL_REAL &&
                 (!isfinite(real_of(c, row)) || is_none(c, real_of(c, row))))
            fputs("null", f);
        else
            write_number(f, c, row);
    }
    fputc('}', f);
}

void columns_md_header(FILE *f, const column *cols)
{
    for (const column *c = cols; c->name; c++)
        if (c->md_title)
            fprintf(f, "| %s ", c->md_title);
    fputs("|\n", f);
    for (const column *c = cols; c->name; c++)
        if (c->md_title)
            fputs(is_text(c) ? "|---" : "|---:", f);
    fputs("|\n", f);
}

void columns_md_row(FILE *f, const column *cols, const summary_row *row)
{
    for (const column *c = cols; c->name; c++) {
        if (!c->md_title)
            continue;
        char cell[128];
        if (c->md_cell) {
            c->md_cell(cell, sizeof cell, row);
        } else if (is_text(c)) {
            snprintf(cell, sizeof cell, "%s", text_of(c, row, NULL));
        } else if (c->kind == COL_INT) {
            snprintf(cell, sizeof cell, "%d", *(const int *)at(c, row, NULL));
        } else {
            double v = real_of(c, row);
            if (v > 0 && isfinite(v))
                snprintf(cell, sizeof cell, c->md_format, v);
            else
                snprintf(cell, sizeof cell, "-");
        }
        fprintf(f, "| %s ", cell);
    }
    fputs("|\n", f);
}

void summary_row_init(summary_row *row)
{
    memset(row, 0, sizeof *row);
    for (const column *c = summary_columns; c->name; c++)
        if (c->kind == COL_REAL)
            *(double *)((char *)row + c->offset) = NOT_MEASURED;
}

static int is_number(const column *c)
{
    return c->kind == COL_INT || c->kind == COL_LONG || c->kind == COL_REAL;
}

static const column *status_column(const column *cols)
{
    for (const column *c = cols; c->name; c++)
        if (c->kind == COL_STATUS)
            return c;
    return NULL;
}

/* What is wrong with a number cell, or NULL when it is one: written as
 * the command line's numbers are (options.h), within the column's range;
 * NaN and Inf only in a column that measures them (a loss that became NaN)
 * of a row that did not finish. */
static const char *bad_number(const column *c, const char *s, int finished)
{
    if (!*s)
        return NULL; /* not measured */
    double v;
    long long whole;
    if (!strcmp(s, "nan") || !strcmp(s, "-nan") || !strcmp(s, "inf") || !strcmp(s, "-inf"))
        return c->kind == COL_REAL && c->nan_is_value && !finished ? NULL : "is not finite";
    const int read = number_read(s, &v);
    if (read == -1)
        return "is not a number";
    if (c->kind != COL_REAL) {
        const long long hi = c->kind == COL_INT ? INT_MAX : LONG_MAX;
        const int read_whole = number_read_whole(s, &whole);
        if (read_whole == -1)
            return "is not a whole number";
        return read_whole || whole < -hi - 1 || whole > hi ? "is out of range" : NULL;
    }
    if (read)
        return "is out of range";
    if (c->range == RANGE_NONNEGATIVE && v < 0)
        return "is negative";
    if (c->range == RANGE_FRACTION && !(v >= 0 && v <= 1))
        return "is not in 0..1";
    return NULL;
}

int result_table_check(const result_table *t, char *err, size_t err_len)
{
    const csv_table *csv = &t->csv;
    const column *status = status_column(t->cols);
    for (int r = 0; r < csv->n_rows; r++) {
        run_status st = STATUS_OK;
        if (status && result_has(t, status) && status_parse(result_text(t, r, status), &st) != 0) {
            snprintf(err, err_len, "%s:%d: column '%s': '%.80s' is not a status", t->path,
                     csv->lines[r], status->name, result_text(t, r, status));
            return -1;
        }
        for (const column *c = t->cols; c->name; c++) {
            if (!is_number(c) || !result_has(t, c))
                continue;
            const char *why = bad_number(c, result_text(t, r, c), st == STATUS_OK);
            if (why) {
                snprintf(err, err_len, "%s:%d: column '%s': '%.80s' %s", t->path, csv->lines[r],
                         c->name, result_text(t, r, c), why);
                return -1;
            }
        }
    }
    return 0;
}

/* ---- reading the files back ------------------------------------------------ */

const column *column_of(const column *cols, column_field at)
{
    for (const column *c = cols; c->name; c++)
        if ((c->kind == COL_SYSTEM) == (at.system != 0) && c->offset == at.offset)
            return c;
    fprintf(stderr, "bench: internal error: no column is written from field offset %zu\n",
            at.offset);
    abort();
}

int result_table_read(result_table *t, const column *cols, const char *path, char *err,
                      size_t err_len)
{
    memset(t, 0, sizeof *t);
    t->cols = cols;
    t->path = path;
    if (csv_read(path, &t->csv, err, err_len) != 0)
        return -1;
    size_t n = 0;
    while (cols[n].name)
        n++;
    t->at = xmalloc(sizeof(int) * (n ? n : 1));
    for (size_t k = 0; k < n; k++)
        t->at[k] = csv_column(&t->csv, cols[k].name);
    return 0;
}

void result_table_free(result_table *t)
{
    csv_free(&t->csv);
    free(t->at);
    t->at = NULL;
}

int result_has(const result_table *t, const column *c)
{
    return t->at[c - t->cols] >= 0;
}

const column *result_table_missing(const result_table *t, const column_field *needed, int n)
{
    for (int k = 0; k < n; k++) {
        const column *c = column_of(t->cols, needed[k]);
        if (!result_has(t, c))
            return c;
    }
    return NULL;
}

const char *result_text(const result_table *t, int i, const column *c)
{
    int field = t->at[c - t->cols];
    return field < 0 ? "" : t->csv.rows[i][field];
}

void result_table_row(const result_table *t, int i, void *row)
{
    for (const column *c = t->cols; c->name; c++) {
        if (c->kind == COL_SYSTEM || !result_has(t, c))
            continue;
        const char *s = result_text(t, i, c);
        void *p = (char *)row + c->offset;
        switch (c->kind) {
        case COL_TEXT: *(const char **)p = s; break;
        case COL_INT:
            if (*s)
                *(int *)p = (int)strtol(s, NULL, 10);
            break;
        case COL_LONG:
            if (*s)
                *(long *)p = strtol(s, NULL, 10);
            break;
        case COL_REAL: *(double *)p = *s ? strtod(s, NULL) : NOT_MEASURED; break;
        case COL_STATUS: status_parse(s, (run_status *)p); break;
        case COL_SYSTEM: break;
        }
    }
}
