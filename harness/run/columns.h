/* The columns of the result files, each defined once: its name (the CSV
 * header and the JSON key), the kind of value, where the value sits in the
 * row, and how it is written. summary.csv, epochs.csv and the summary that
 * `--format csv|json|md` prints all loop over these lists (as llama-bench's
 * printers loop over its field list), so `--format csv` prints summary.csv
 * again, and a new metric is its field in results.h and one line in
 * columns.c. compare, history and plot read the files back through the
 * same lists (result_table below); plots/ and scripts/ read the columns by
 * name: keep names and meanings, add new ones at the end. */
#ifndef LB_COLUMNS_H
#define LB_COLUMNS_H

#include <stddef.h>
#include <stdio.h>

#include "harness/formats/csv.h"
#include "harness/run/results.h"
#include "harness/run/sysinfo.h"

typedef enum column_kind {
    COL_TEXT,   /* const char * in the row; NULL is written as empty */
    COL_INT,    /* int */
    COL_LONG,   /* long */
    COL_REAL,   /* double, written with `format` */
    COL_STATUS, /* run_status, written by name */
    COL_SYSTEM, /* a char array in the run's sysinfo: the same in every row */
} column_kind;

/* The values a COL_REAL column may hold when read back (result_table_check). */
typedef enum column_range {
    RANGE_ANY,
    RANGE_NONNEGATIVE, /* times, rates, bytes */
    RANGE_FRACTION,    /* accuracies: 0..1 */
} column_range;

typedef struct column {
    const char *name; /* NULL ends a list */
    column_kind kind;
    size_t offset;      /* of the value in the row, or in sysinfo (COL_SYSTEM) */
    const char *format; /* COL_REAL: printf format in CSV and JSON */
    int none_unless_positive; /* COL_REAL: 0 or less means none: empty, JSON null */
    /* COL_REAL: NaN is a measured value, written "nan" in CSV (a loss that
     * became NaN). Elsewhere NaN is NOT_MEASURED: empty, JSON null. */
    int nan_is_value;
    column_range range;
    /* The markdown table of summary rows: columns without a title are left
     * out. Numbers with md_format show "-" unless > 0; md_cell, when set,
     * writes the cell instead. */
    const char *md_title;
    const char *md_format;
    void (*md_cell)(char *buf, size_t len, const summary_row *row);
} column;

extern const column summary_columns[]; /* summary.csv, one row per configuration */
extern const column epoch_columns[];   /* epochs.csv, one row per epoch */

/* CSV: the header line, and one row (of the list's row type) as a line. */
void columns_csv_header(FILE *f, const column *cols);
void columns_csv_row(FILE *f, const column *cols, const void *row, const sysinfo *sys);

/* One row as a JSON object on one line; values that are not finite are
 * null, since JSON has no NaN. */
void columns_json_object(FILE *f, const column *cols, const void *row, const sysinfo *sys);

/* The markdown table of summary rows: the header with its alignment line
 * (text left, numbers right), then one line per row. */
void columns_md_header(FILE *f, const column *cols);
void columns_md_row(FILE *f, const column *cols, const summary_row *row);

/* ---- reading the files back (compare, history, plot) -------------------- */

/* Where a column's value sits, as a constant: in the row (summary_row or
 * epoch_row), or in the run's sysinfo. IN_SUMMARY(images_per_second) names
 * summary.csv's column by the field it is written from, so a reader never
 * spells a column's name again. */
typedef struct column_field {
    int system;
    size_t offset;
} column_field;
#define IN_SUMMARY(field) {0, offsetof(summary_row, field)}
#define IN_EPOCH(field) {0, offsetof(epoch_row, field)}
#define IN_SYSTEM(field) {1, offsetof(sysinfo, field)}

/* The column of cols written from `at`; the program stops when there is
 * none (a reader's mistake, found by its first test). */
const column *column_of(const column *cols, column_field at);
#define SUMMARY_COLUMN(field) column_of(summary_columns, (column_field)IN_SUMMARY(field))
#define EPOCH_COLUMN(field) column_of(epoch_columns, (column_field)IN_EPOCH(field))
#define SYSTEM_COLUMN(field) column_of(summary_columns, (column_field)IN_SYSTEM(field))

/* A results CSV read back: summary.csv (summary_columns) or epochs.csv
 * (epoch_columns), its cells found by their column's definition whatever
 * order the file has them in. */
typedef struct result_table {
    csv_table csv;
    const column *cols;
    const char *path; /* the caller's string, for messages */
    int *at;          /* per column of cols: its field in csv, -1 when absent */
} result_table;

/* Reads path as a file of cols. 0, or -1 with a one-line message naming
 * the file (and line). Free with result_table_free either way. */
int result_table_read(result_table *t, const column *cols, const char *path, char *err,
                      size_t err_len);
void result_table_free(result_table *t);

/* The one check of a results file read back (compare, history, plot):
 * every number column the file holds must be empty (not measured) or a
 * number of its kind: a whole integer, or a finite real written as the
 * bench writes one (no leading space or '+', nothing after it, not out of
 * range like 1e999); NaN or Inf only where a row that did not finish
 * recorded one (a diverged loss); status a known status. 0, or -1 with
 * "PATH:LINE: column 'NAME': 'VALUE' is not ..." in err. */
int result_table_check(const result_table *t, char *err, size_t err_len);

/* The first of the n columns at `needed` that the file lacks, or NULL. */
const column *result_table_missing(const result_table *t, const column_field *needed, int n);
int result_has(const result_table *t, const column *c);

/* Row i's cell of column c as written; "" when the file lacks the column. */
const char *result_text(const result_table *t, int i, const column *c);

/* Row i as the row it was written from (summary_row or epoch_row, as
 * t->cols): each column the file holds is parsed by its kind, text
 * pointing into t, an empty number cell (not measured) NOT_MEASURED for a
 * real and left as it was for a whole number. Columns the file lacks, and
 * COL_SYSTEM ones (read with result_text), keep what row held, so the
 * caller sets what an older file's missing column means first. */
void result_table_row(const result_table *t, int i, void *row);

#endif
