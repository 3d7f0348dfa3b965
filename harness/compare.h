/* `./bench compare BASE NEW`: which configurations got slower, less
 * accurate or numerically different between two runs, with a significance
 * test so that timing noise cannot flap the gate. Also the CSV reader the
 * history tool shares. */
#ifndef LB_COMPARE_H
#define LB_COMPARE_H

#include <stddef.h>

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

/* Two-sided Mann-Whitney U test, normal approximation with tie and
 * continuity corrections (scipy's "asymptotic" method). u is the U of x;
 * p is 1 when every value is tied. */
typedef struct u_test {
    double u, z, p;
} u_test;
u_test mann_whitney_u(const double *x, int nx, const double *y, int ny);

/* The smallest p the test can give for these sample counts (the two
 * samples fully separated, no ties): when it is >= alpha the test can
 * never find a difference, so it is not worth running. */
double mann_whitney_min_p(int nx, int ny);

/* Whether a configuration's speed regressed. base and next are the figures
 * (images/s, higher is faster); the samples are per-epoch images/s. */
typedef struct speed_verdict {
    double slowdown_pct; /* (base / next - 1) * 100: > 0 means slower */
    int u_test_used;     /* 0: too few samples, the threshold alone decided */
    double p;            /* the U test's p when used */
    int regression;
} speed_verdict;
speed_verdict judge_speed(double base, double next, const double *base_samples, int n_base,
                          const double *next_samples, int n_next, double max_slowdown_pct,
                          double alpha);

/* The subcommand; argv[0] is "compare". Exit status 0, 1 or 2. */
int compare_main(int argc, char **argv);

#endif
