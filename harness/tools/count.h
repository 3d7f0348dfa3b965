/* `./bench count`: instructions per image of each part of a training run,
 * counted under valgrind's callgrind, for a regression gate that a busy
 * machine cannot fool (timings move by tens of percent there; instruction
 * counts of the same build repeat almost exactly).
 *
 * The counted parts ("items"), each its own region between client requests,
 * so start-up, engine creation and warm-up are never counted:
 *   load         reading and validating the test split's IDX files
 *   train-NAME   `steps` training steps of backend NAME (after one warm-up step)
 *   eval-NAME    scoring `eval images` test images with backend NAME
 * Backends are reached through the registry and the engine contract only
 * (backend_find, create, set_params, bind_dataset, train_steps, evaluate). */
#ifndef LB_COUNT_H
#define LB_COUNT_H

#include <stddef.h>

/* Where the counts and their history live by default. */
#define COUNT_FILE "counts.csv"
#define COUNT_HISTORY "results/count-history.csv"

/* The subcommand; argv[0] is "count". Exit status 0 counted, 1 the counted
 * run failed, 2 bad input, 3 valgrind missing or this build cannot be
 * counted (an AVX-512 target). */
int count_main(int argc, char **argv);

/* Judges NEW's counts against BASE's (each a counts.csv): an item whose
 * instructions per image grew by more than max_growth_pct regressed. When
 * the two were counted with a different compiler, build target, OpenBLAS
 * or kernels, valgrind, or CPU as valgrind presents it, nothing is judged:
 * a message says why and the status is 0. Exit status 0 none regressed,
 * 1 regressed, 2 unusable input. */
int count_compare(const char *base_path, const char *new_path, double max_growth_pct);

/* Appends the rows of counts.csv (run directory `run`) to the count history
 * file; rows already there are not added again. 0, or 2 on bad input. */
int count_history(const char *counts_path, const char *history_path, const char *run);

/* 1 when arg is a file whose name ends in counts.csv, or a directory holding one, with its path in
 * path; else 0. */
int count_path(const char *arg, char *path, size_t len);
/* 1 when arg holds counts and no timings (no summary.csv beside them). */
int count_only(const char *arg);

/* The gate's default limit on growth, percent (see
 * docs/regression-tracking.md, "The gate and its threshold"). */
#define COUNT_MAX_GROWTH_PCT 0.5

#endif
