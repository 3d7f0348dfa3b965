/* Judging two runs read by compare_read.h: the table, the findings and
 * the exit status of `./bench compare`. */
#ifndef LB_COMPARE_JUDGE_H
#define LB_COMPARE_JUDGE_H

#include "harness/tools/compare_read.h"

typedef struct compare_options {
    double max_slowdown_pct;
    double max_accuracy_drop_points;
    double alpha;
    double loss_tolerance;
    int numerics_gate;
    double max_count_growth_pct;
    const char *relative_to; /* NULL: absolute images/s */
} compare_options;

/* Pairs the rows of base and next, prints the table and the findings.
 * Exit status: 0 nothing regressed, 1 regressed or changed numerics, 2
 * nothing to compare (said on stderr). */
int compare_runs(const compare_options *o, run_files *base, run_files *next);

#endif
