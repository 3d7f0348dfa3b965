/* A history file that rows are appended to, by `./bench history`: the
 * timings (results/history.csv) and the instruction counts
 * (results/count-history.csv). The header is written once; a file that is
 * there already must have it; the rows already there are kept at hand so
 * that none is added twice. */
#ifndef LB_HISTORY_FILE_H
#define LB_HISTORY_FILE_H

#include <stdio.h>

#include "harness/formats/csv.h"

typedef struct history_file {
    const char *path;
    csv_table known; /* the rows there before (none in a new file) */
    FILE *out;
    int added, already_there;
} history_file;

/* Opens path to append rows of the n columns `names`. 0, or 2 with the
 * reason on stderr: an unreadable file, or another header ("not the WHAT
 * header (...); move it aside or pick another FLAG"). Free with
 * history_file_close either way. */
int history_file_open(history_file *h, const char *path, const char *const *names, int n,
                      const char *what, const char *flag);
/* Appends one row of n values. */
void history_file_append(history_file *h, const char *const *values, int n);
/* Closes the file and says what was added: "history: N ROWs of RUN
 * appended to PATH, K already there" and then `note` (when not NULL). 0,
 * or 2 when the file could not be written. */
int history_file_close(history_file *h, const char *rows, const char *run, const char *note);

#endif
