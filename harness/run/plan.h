/* How a run turns the backends it was asked for into what it trains:
 * the harness's side of data parallelism. */
#ifndef LB_PLAN_H
#define LB_PLAN_H

#include <stdio.h>

#include "harness/run/config.h"
#include "parallel/data_parallel.h"

/* Parses --replicas: a comma list of counts in 1..DP_MAX_REPLICAS, stored
 * ascending without repeats (so the one-replica baseline runs first). 0, or
 * 2 after printing a one-line error. */
int dp_parse_replicas(const char *list, int *out, int max, int *n);

/* Parses --batch-size: a comma list of sizes in 1..PLAN_MAX_BATCH, stored
 * ascending (so the losses buffer is sized by the first). Empty items,
 * repeats and more than max sizes are refused. 0, or 2 after printing a
 * one-line error. */
#define PLAN_MAX_BATCH (1 << 20)
int plan_parse_batch_sizes(const char *list, int *out, int max, int *n);

/* Parses a comma list of whole numbers in lo..hi for `flag` (e.g.
 * "--micro-batches"), stored ascending; empty items, repeats and more than
 * max values are refused. 0, or 2 after printing a one-line error. */
int plan_parse_counts(const char *flag, const char *list, int lo, int hi, int *out, int max,
                      int *n);

/* Parses a comma list of names out of names[0..count) for `flag` (each a
 * `what`, for messages: "unknown <what> 'x'"), each stored as its index,
 * in the order given; empty items, unknown names and repeats are refused.
 * 0, or 2 after printing a one-line error. */
int plan_parse_names(const char *flag, const char *what, const char *list,
                     const char *const *names, int count, int *out, int max, int *n);

/* Parses --precision: a comma list of precision names (precision_name),
 * kept in the order given; empty items, unknown names and repeats are
 * refused. 0, or 2 after printing a one-line error. */
int plan_parse_precisions(const char *list, precision *out, int max, int *n);

/* What each requested backend becomes, in order, into out (at most max):
 *   under mpirun (world size > 1): every backend wrapped, one replica per
 *     rank (multi-gpu stays itself and says it cannot run here);
 *   multi-gpu: the coordinator over cuda with --gpus replicas;
 *   otherwise: each backend once per --replicas value, wrapped when the
 *     value is above 1.
 * --averaging-frequency and --average-optimizer-state go to every wrapped
 * backend. Returns the count, or -1 with err. */
int dp_expand_backends(const run_config *cfg, const backend *const *in, int n,
                       const backend **out, int max, char *err, size_t err_len);

/* The model-parallel and hybrid configurations of backend b that
 * --parallel asks for, appended to out[*n] (at most max): for each split,
 * micro-batch count and prefetch depth, b split over --workers (model; under
 * mpirun one worker per rank), and --groups data-parallel groups of
 * --workers / --groups (hybrid). 0, or -1 with err. */
int plan_model_parallel(const run_config *cfg, const backend *b, const backend **out, int *n,
                        int max, char *err, size_t err_len);

/* One line each for --list: how to run data-parallel here (threads, MPI,
 * NCCL) and what is missing. */
void dp_print_support(FILE *f);

#endif
