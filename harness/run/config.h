/* Everything a run is told on the command line, parsed once by cli.c. */
#ifndef LB_CONFIG_H
#define LB_CONFIG_H

#include <stdint.h>

#include "backends/engine.h"
#include "parallel/model_parallel.h"
#include "workloads/workload.h"

#define MAX_RUN_BACKENDS 16
#define PATH_LEN 4096
#define MAX_REPLICA_COUNTS 8
#define MAX_BATCH_SIZES 8
#define MAX_AXIS_VALUES 8
/* Rows of one run: backends x replica counts x precisions x batch sizes. */
#define MAX_RUN_CONFIGS 256

typedef enum output_format { FORMAT_MD, FORMAT_CSV, FORMAT_JSON } output_format;

typedef struct run_config {
    const backend *backends[MAX_RUN_BACKENDS];
    int n_backends;
    int all_backends; /* --backend all: skip what cannot run here */

    workload work;
    int epochs;
    int limit;      /* first N training images; 0 = all */
    int test_limit; /* first N test images; 0 = all */
    int shuffle;
    uint64_t seed;
    /* What every engine is created with: optimiser, threads, device, graph,
     * data residency. Its batch size and precision are left unset: each
     * configuration (plan.h) brings its own from the lists below. */
    engine_config engine;
    /* The axes every backend runs over, each value its own configuration. */
    precision precisions[PRECISION_COUNT]; /* --precision, in the order given */
    int n_precisions;
    int batch_sizes[MAX_BATCH_SIZES]; /* --batch-size, ascending */
    int n_batch_sizes;

    /* Data parallelism (parallel/data_parallel.h) */
    int replicas[MAX_REPLICA_COUNTS]; /* --replicas, ascending; {1} by default */
    int n_replicas;
    int gpus;                    /* --gpus: multi-gpu replicas; 0 = every visible GPU */
    int averaging_frequency;     /* 0: synchronous gradient all-reduce */
    int average_optimizer_state; /* with averaging: the optimiser state too */

    /* Model parallelism (parallel/model_parallel.h): --parallel model and/or hybrid
     * add, for each backend, a configuration per split x micro-batch count x
     * prefetch depth. */
    int model_parallel, hybrid_parallel;
    mp_split splits[2]; /* --split, in the order given */
    int n_splits;
    int workers; /* --workers: model-parallel workers (hybrid: over every group) */
    int groups;  /* --groups: hybrid's data-parallel groups */
    int micro_batches[MAX_AXIS_VALUES]; /* --micro-batches, ascending */
    int n_micro_batches;
    int prefetch[MAX_AXIS_VALUES]; /* --prefetch, ascending */
    int n_prefetch;
    int workers_given; /* --workers was on the command line (mpirun checks it) */
    char data_dir[PATH_LEN];
    char out_dir[PATH_LEN]; /* empty: results/<date>-<time>-<host>/ */
    char init_params[PATH_LEN];
    char save_params[PATH_LEN];
    char step_losses[PATH_LEN]; /* --step-losses FILE; empty: none */

    int repeat;             /* runs of each backend */
    int profile_layers;
    int no_peak;            /* --no-peak: no peak-GFLOP/s probe after a run */
    double target_accuracy; /* 0: not asked */
    output_format format;

    int argc;
    char **argv;
} run_config;

/* Parses argv into *cfg. Returns 0 to go on, 1 when the request was served
 * already (--help, --list), 2 on a usage error (message printed). */
int cli_parse(int argc, char **argv, run_config *cfg);

/* Checks that needs the loaded data (batch size, --limit). 0 or 2. */
int cli_check_against_data(const run_config *cfg, int train_count, int test_count);

const char *optimizer_name(optimizer_kind k);

#endif
