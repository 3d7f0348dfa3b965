/* The columns of the result files, each defined once: its name (the CSV
 * header and the JSON key), the kind of value, where the value sits in the
 * row, and how it is written. summary.csv, epochs.csv and the summary that
 * `--format csv|json|md` prints all loop over these lists (as llama-bench's
 * printers loop over its field list), so `--format csv` prints summary.csv
 * again, and a new metric is its field in results.h and one line in
 * columns.c. Other tools (compare, history, plots/, scripts/) read the
 * columns by name: keep names and meanings, add new ones at the end. */
#ifndef LB_COLUMNS_H
#define LB_COLUMNS_H

#include <stddef.h>
#include <stdio.h>

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

typedef struct column {
    const char *name; /* NULL ends a list */
    column_kind kind;
    size_t offset;      /* of the value in the row, or in sysinfo (COL_SYSTEM) */
    const char *format; /* COL_REAL: printf format in CSV and JSON */
    int none_unless_positive; /* COL_REAL: 0 or less means none: empty, JSON null */
    /* COL_REAL: NaN is a measured value, written "nan" in CSV (a loss that
     * became NaN). Elsewhere NaN is NOT_MEASURED: empty, JSON null. */
    int nan_is_value;
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

/* The one check of a results CSV read back (compare, history, plot): every
 * number column of cols that t holds must be empty (not measured) or a
 * number of its kind: a whole integer, or a finite real written as the
 * bench writes one (no leading space or '+', nothing after it, not out of
 * range like 1e999); NaN or Inf only where a row that did not finish
 * recorded one (a diverged loss); status a known status. 0, or -1 with
 * "PATH:LINE: column 'NAME': 'VALUE' is not ..." in err. */
typedef struct csv_table csv_table;
int columns_check_csv(const column *cols, const csv_table *t, const char *path, char *err,
                      size_t err_len);

#endif
