/* What a person reads at the end of a run: the summary table, the
 * evaluation statistics (as DL4J's Evaluation.stats() reports them) and the
 * per-layer profile (as `caffe time` prints it). */
#ifndef LB_REPORT_H
#define LB_REPORT_H

#include <stdio.h>

#include "harness/run/label.h"
#include "harness/run/results.h"

typedef struct eval_stats {
    double accuracy;
    double macro_precision, macro_recall, macro_f1;
} eval_stats;

/* Macro averages over the classes that occur (a class never predicted
 * counts precision 0, as scikit-learn's zero_division=0 does). */
eval_stats eval_stats_of(const eval_counts *ev);

/* confusion-<label>.csv: rows are true classes, columns predictions. */
int write_confusion(results *r, const char *label, const eval_counts *ev);

/* The summary table in the chosen format on f. In md the notes that say how
 * to read it (which epoch times were used, what "% of peak" compares with,
 * the machine) and each backend's evaluation statistics follow the table;
 * in csv and json they go to stderr so that f stays machine-readable. */
void print_summary(FILE *f, output_format fmt, const summary_row *rows, int n,
                   const results *r);

/* --profile-layers: runs b's profile_layers over `reps` steps of one batch,
 * writes profile-<label>.csv (layer,forward_ms,backward_ms: one row per
 * layer, then "loss" = softmax cross-entropy with its gradient, counted as
 * forward, and "update" = the optimiser step, counted as backward) and
 * prints the table on out. A backend without the callback gets a note.
 * 0, or -1 when the profile failed or its file could not be written. */
int report_layer_profile(results *r, const char *label, const backend *b, engine *e,
                         const workload *w, const int32_t *indices, int batch, int reps,
                         FILE *out);

#endif
