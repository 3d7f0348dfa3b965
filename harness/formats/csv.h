/* CSV as the run directory holds it: a header row of column names, then one
 * row per record (RFC 4180 quoting). The writer of one field, and a reader
 * that loads a whole file so that compare, history and plot find columns by
 * name. */
#ifndef LB_CSV_H
#define LB_CSV_H

#include <stddef.h>
#include <stdio.h>

/* Writes s as one CSV field, quoted when it needs to be; NULL as empty. */
void csv_field(FILE *f, const char *s);

/* A CSV file read whole: the header's names and each data row's fields.
 * Fields point into `text`, unquoted in place. Blank lines are skipped. */
typedef struct csv_table {
    char *text;
    char **header;
    int n_cols;
    char ***rows;   /* rows[i][j]: field j of data row i */
    int *lines;     /* line in the file where data row i starts */
    int n_rows;
} csv_table;

/* 0, or -1 with a one-line message naming the file (and line). */
int csv_read(const char *path, csv_table *t, char *err, size_t err_len);
/* Index of the column called name, or -1. */
int csv_column(const csv_table *t, const char *name);
void csv_free(csv_table *t);

/* The whole of a file, NUL-terminated, *len bytes (for the JSON records
 * beside the CSV files too). NULL with a one-line message when it cannot be
 * read. The caller frees it. */
char *read_text_file(const char *path, size_t *len, char *err, size_t err_len);

#endif
