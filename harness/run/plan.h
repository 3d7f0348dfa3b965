/* How a run turns what it was asked for into what it trains: the whole
 * product of backends, replicas, model-parallel splits, precisions and
 * batch sizes, each a configuration passed to what trains and reports it
 * (the harness's side of data and model parallelism). */
#ifndef LB_PLAN_H
#define LB_PLAN_H

#include <stdio.h>

#include "harness/run/config.h"
#include "parallel/data_parallel.h"

/* The largest --batch-size. */
#define PLAN_MAX_BATCH (1 << 20)

/* One configuration of a run, a row of its summary: a backend (wrapped for
 * data or model parallelism as asked) at one precision and one batch size,
 * passed to what trains and reports it. */
typedef struct configuration {
    const backend *b;
    int replicas; /* asked for: the row's key until the engine says where it runs */
    precision prec;
    int batch_size;
    int runnable;
    char reason[512]; /* why not, when not runnable */
} configuration;

/* The reference backend (the registry's first, naive) that every row's
 * "speedup vs naive" is stated against; NULL in an empty registry. */
const backend *plan_reference(void);

/* The whole product of the run, into out (at most max): each backend asked
 * for, as it becomes
 *   under mpirun (world size > 1): wrapped, one replica per rank (multi-gpu
 *     stays itself and says it cannot run here);
 *   multi-gpu: the coordinator over cuda with --gpus replicas;
 *   otherwise: once per --replicas value, wrapped when the value is above 1;
 * then its --parallel configurations (plan_model_parallel below), each of
 * these at every --precision and then every --batch-size. The reference
 * backend (the registry's first, naive, with its replicas) comes first so
 * that the others' speedup over it can be stated. --averaging-frequency
 * and --average-optimizer-state go to every wrapped backend. Each
 * configuration says whether it can run here, and why not. Returns the
 * count, or -1 with err. */
int plan_configurations(const run_config *cfg, configuration *out, int max, char *err,
                        size_t err_len);

/* One line each for --list: how to run data-parallel here (threads, MPI,
 * NCCL) and what is missing. */
void dp_print_support(FILE *f);

#endif
