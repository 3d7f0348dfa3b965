/* Under mpirun every rank parses its own command line and reads its own
 * files. Ranks told different things would train different models (a loss
 * that matches neither) or wait for each other forever, so before training
 * they compare what they were told and what they read. */
#ifndef LB_AGREE_H
#define LB_AGREE_H

#include <stddef.h>

#include "backends/engine.h"
#include "harness/run/config.h"

/* The parsed configuration as "option value" lines, in a fixed order
 * (what every rank must share; paths of files only rank 0 writes, and
 * --device, are left out). Returns the length written. */
size_t agree_describe(const run_config *cfg, char *buf, size_t len);

/* Every rank's configuration against rank 0's. 0, or 2 on every rank when
 * one differs (rank 0 names the option and both values). A plain process: 0. */
int agree_on_config(const run_config *cfg);

/* Every rank's start-up status (rc: 0 or the exit status it would end
 * with) and a checksum of the data and initial parameters it holds. Returns
 * on every rank the first non-zero status of any rank, else 2 when the
 * checksums differ (rank 0 says so), else 0. A plain process: rc. */
int agree_on_inputs(int rc, const dataset *train, const dataset *test, const float *params,
                    size_t n_params);

/* Which of the n configurations every rank can run: runnable[i] (1 or 0)
 * and reason[i] (reason_len bytes: why not) are this rank's answers on
 * entry. On return a configuration one rank cannot run is not runnable on
 * any rank, its reason that rank's, prefixed "rank R: " when another rank
 * could run it (a rank that cannot run a configuration the others train
 * would leave them waiting in its collectives). 0, or 2 when the ranks
 * cannot compare (said on stderr). A plain process: 0, nothing changed. */
int agree_on_runnable(int n, int *runnable, char *const *reason, size_t reason_len);

/* Whether the run stops, asked at the same points on every rank (a
 * collective under mpirun): returns the first of the ranks' stop signals
 * (signal: this rank's, 0 for none), 0 when none has one. chunk (NULL: not
 * asked) becomes rank 0's number of steps for the next call to
 * train_steps, so that the ranks run their steps' collectives alike and
 * all stop after the same step. A plain process: signal. */
int agree_on_stop(int signal, int *chunk);

/* Rank 0's value on every rank (a collective under mpirun; -1 when the
 * ranks cannot reach each other): what rank 0 alone found, such as a
 * results file it could not write, so that the others stop where it stops
 * instead of waiting for it in the next collective. A plain process:
 * value. */
int agree_on_root(int value);

#endif
