/* The run directory: epochs.csv, summary.csv and system.json. Rows are
 * written and flushed as they happen (summary.csv whole again as each
 * configuration ends), so an interrupted run keeps every row it finished. */
#ifndef LB_RESULTS_H
#define LB_RESULTS_H

#include <math.h>
#include <stdio.h>

#include "harness/run/config.h"
#include "harness/run/status.h"
#include "harness/run/sysinfo.h"

/* What identifies a configuration: the columns both CSV files start with. */
typedef struct row_key {
    const char *backend;
    const char *workload;
    const char *precision;
    int threads, devices, replicas, ranks;
    int batch_size;
    const char *optimizer;
    /* Which axes vary in the run (LABEL_PRECISION, LABEL_BATCH): they then
     * name the row too (config_label). Not a column. */
    unsigned label_axes;
} row_key;

enum { LABEL_PRECISION = 1u, LABEL_BATCH = 2u };

typedef struct epoch_row {
    row_key key;
    int repeat; /* 1-based */
    int epoch;  /* 1-based */
    long images;
    double epoch_seconds, images_per_second, gflops_per_second;
    double train_loss, test_loss, test_accuracy;
    run_status status;
    const char *message;
} epoch_row;

/* A summary figure that was not measured (no peak probe, no target asked,
 * no device, a row that was skipped): written empty in CSV, null in JSON
 * and "-" in the table, never as a 0 or -1 that reads like a measurement.
 * summary_row_init starts every figure of a row so; a row sets what it
 * measured. Epoch rows keep NaN as a value: a NaN loss was measured. */
#define NOT_MEASURED NAN

typedef struct summary_row {
    row_key key;
    int epochs, repeats;
    long images_per_epoch;
    double epoch_seconds_median, epoch_seconds_mean, epoch_seconds_stddev;
    double images_per_second, gflops_per_second, percent_of_peak;
    double speedup_vs_naive; /* 0 (empty in the CSV) when naive or this row did not finish */
    /* images/s / (replicas x images/s of one replica of the same engine
     * earlier in this run); 1 for that one-replica run; 0 (empty in the
     * CSV) when there is no such run, e.g. under mpirun */
    double scaling_efficiency;
    double final_train_loss, final_test_accuracy;
    double macro_precision, macro_recall, macro_f1;
    double time_to_target_seconds; /* < 0: asked, not reached; NOT_MEASURED: not asked */
    double peak_memory_bytes;
    const char *details; /* precision, math mode, algorithms, threads */
    run_status status;
    const char *message;
    /* Which epoch times the statistics used (see warmup_epochs in stats.h). */
    int timed_samples, warmup_epochs;
    double epoch_seconds_min, epoch_seconds_max;
    double peak_gflops;      /* measured in this run; 0: not measured */
    const char *peak_source; /* how the peak was measured */
    const char *peak_arithmetic; /* a CPU row's: whose peak it is held to, "fp32", "bf16-dot" ... */
    double target_accuracy;  /* --target-accuracy; 0: not asked */
    /* The engine's memory: peak_memory_bytes for a GPU engine, else the
     * heap bytes the harness saw a CPU engine hold (not OpenBLAS's own
     * buffers); memory_source says which. 0 / NULL: not known. */
    double memory_bytes;
    const char *memory_source;
    /* How the configuration is parallel: "single", "data", "model" or
     * "hybrid"; split (model, hybrid: "layers" or "filters", else NULL),
     * workers (engines in all), micro-batches and prefetch depth. */
    const char *parallel, *split;
    int workers, micro_batches, prefetch;
    /* What one worker holds (the largest, for model-parallel rows), by
     * kind, when its engines itemise it (memory_use): 0 is a measurement
     * (a worker of pools alone holds no parameters); NOT_MEASURED when
     * they do not. */
    double worker_params_bytes, worker_grads_bytes, worker_opt_state_bytes;
    double worker_activation_bytes, worker_workspace_bytes;
} summary_row;

typedef struct results {
    char dir[PATH_LEN];
    FILE *epochs, *summary;
    sysinfo sys;
    unsigned created; /* files results_open made: removed again if it fails */
} results;

/* Creates the run directory (never an existing one) and writes the headers
 * and system.json. 0, or -1 with a one-line message. */
int results_open(results *r, const run_config *cfg, char *err, size_t err_len);
int results_epoch(results *r, const epoch_row *row);
/* summary.csv rewritten with these n rows: in a file beside it renamed
 * over it, so that it holds the rows of the last call whole whatever ends
 * the process (in place when the disk has no room for the copy). 0, or -1
 * with the message printed. */
int results_write_summary(results *r, const summary_row *rows, int n);
/* A row of zeros whose every number column (summary_columns' COL_REAL) is
 * NOT_MEASURED. */
void summary_row_init(summary_row *row);
/* Opens `name` inside the run directory for writing (confusion matrices,
 * profiles). NULL on failure. */
FILE *results_file(results *r, const char *name);
/* (Re)writes system.json from r->sys: at the start, and after the rows
 * once the peaks they were held to are known. */
int results_write_system(results *r, const run_config *cfg, char *err, size_t err_len);
int results_close(results *r);

#endif
