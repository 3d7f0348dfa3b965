/* What a person reads at the end of a run: the summary table and the
 * evaluation statistics (as DL4J's Evaluation.stats() reports them). */
#ifndef LB_REPORT_H
#define LB_REPORT_H

#include <stdio.h>

#include "harness/results.h"

typedef struct eval_stats {
    double accuracy;
    double macro_precision, macro_recall, macro_f1;
} eval_stats;

/* Macro averages over the classes that occur (a class never predicted
 * counts precision 0, as scikit-learn's zero_division=0 does). */
eval_stats eval_stats_of(const eval_counts *ev);

/* confusion-<backend>.csv: rows are true classes, columns predictions. */
int write_confusion(results *r, const char *backend_name, const eval_counts *ev);

void print_summary(FILE *f, output_format fmt, const summary_row *rows, int n,
                   const results *r);

#endif
