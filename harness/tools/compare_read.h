/* compare's view of a run: summary.csv's rows (and the per-epoch samples
 * of epochs.csv) joined on the configuration, indexed by the loose key,
 * with the training options and system of system.json. */
#ifndef LB_COMPARE_READ_H
#define LB_COMPARE_READ_H

#include <stddef.h>

#include "harness/run/columns.h"
#include "harness/run/config.h"
#include "harness/run/status.h"
#include "harness/run/sysinfo.h"

typedef struct run_row {
    /* as written, text "" when absent; replicas and ranks 1, epochs and
     * images_per_epoch -1 when the file has no such column */
    summary_row s;
    const char *cpu_model;
    int line;
    double *samples; /* per-epoch images/s of the ok epochs in epochs.csv */
    int n_samples, samples_cap;
    int paired;
} run_row;

typedef struct run_files {
    const char *label; /* BASE or NEW */
    char summary_path[PATH_LEN + 32], epochs_path[PATH_LEN + 32], system_path[PATH_LEN + 32];
    result_table summary, epochs;
    int have_epochs;
    run_row *rows;
    int n_rows;
    /* rows by the hash of their loose key (same_loose_key): bucket heads
     * and a chain, -1 ending each; so that finding a row is not a scan of
     * every row (40k rows took 32 s) */
    int *bucket, *chain;
    size_t n_buckets;
    char **settings; /* training options from system.json, sorted "name=value" */
    int n_settings;
    int have_settings;
    char settings_why[256]; /* why they are unknown */
    sysinfo_record system;  /* compiler and libraries: "" when absent */
} run_files;

/* Reads BASE or NEW (label), a run directory or a summary.csv: 0, or -1
 * with "LABEL: why" in err. close_run frees what it read, either way. */
int open_run(run_files *run, const char *label, const char *arg, char *err, size_t err_len);
void close_run(run_files *run);

/* The configuration without the placement, which a failed or skipped row
 * may not know (threads 0 when the engine never started). */
int same_loose_key(const row_key *a, const row_key *b);
/* Its hash: run->bucket[loose_key_hash(r) & (run->n_buckets - 1)] heads
 * the chain of rows that may share r's loose key. */
size_t loose_key_hash(const row_key *k);
/* The first row of run (in the chain's order) that has `like`'s exact key
 * (exact) or loose key, and is unpaired when unpaired_only; -1 if none. */
int index_find(const run_files *run, const row_key *like, int exact, int unpaired_only);
/* "backend workload precision batch=B threads=T devices=D" and replicas
 * and ranks when not 1: the row as the findings name it. */
void describe_row(const run_row *r, char *buf, size_t len);

#endif
