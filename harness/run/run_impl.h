/* The parts of the run loop (run.c: the run; run_start.c: its inputs and
 * destinations; run_train.c: training one configuration; run_summary.c:
 * its summary rows and the report at the end; stop.c: the signals that
 * stop it; label.c: its rows' keys) and what they share. Not for use
 * outside them. */
#ifndef LB_RUN_IMPL_H
#define LB_RUN_IMPL_H

#include <signal.h>
#include <stdio.h>

#include "backends/registry.h"
#include "harness/run/config.h"
#include "harness/run/plan.h"
#include "harness/run/results.h"
#include "harness/run/run.h"

/* The first stop signal received, 0 while none (stop.c's handler sets it). */
extern volatile sig_atomic_t run_stop_signal;

/* A finished configuration's speed, for the speedup over naive and the
 * scaling efficiency of the same engine with more replicas. */
typedef struct baseline {
    const char *name; /* the engine's own name (dp_base_name for wrappers) */
    precision prec;
    int batch_size;
    double images_per_second;
} baseline;

/* Outcome of training one backend once. */
typedef struct attempt {
    run_status status;
    char message[512];
    double *epoch_seconds; /* one per completed epoch */
    int epochs_done;
    double final_train_loss;
    eval_counts final_eval;
    double time_to_target; /* < 0: not reached */
    char details[BACKEND_DETAILS_MAX];
    int threads, devices, replicas;
    size_t peak_memory;
    size_t host_memory; /* heap bytes the engine held (see heap_in_use) */
    memory_use worker_memory; /* itemised by the engine (its largest worker) */
    int worker_memory_itemised; /* 0: the engine does not itemise its memory */
    double device_peak_gflops; /* from the backend's peak_gflops, 0 if none */
    char arithmetic[16];       /* what its products ran on (backend_arithmetic) */
} attempt;

/* Everything shared by the backends of one run. */
typedef struct run_state {
    const run_config *cfg;
    unsigned label_axes; /* row_key.label_axes of every row */
    dataset train, test;
    float *init_params;
    int32_t *order;
    float *losses;
    results res;
    /* Under mpirun every rank trains; rank 0 alone reports. */
    int root;
    int repeat;               /* of the backend being trained, 1-based */
    FILE *step_losses;        /* --step-losses; NULL when not asked */
    int step_losses_created;  /* made by this run (removed if it cannot start) */
    int save_failed;          /* a --save-params file could not be written */
    int n_baselines;          /* one-replica, one-rank speeds */
    baseline baselines[MAX_RUN_CONFIGS];
    /* the configurations, each one's attempts (repeat r of configuration
     * i is runs[i * cfg->repeat + r]) and how many of them ran */
    configuration *configs;
    int n_configs;
    attempt *runs;
    int done_runs[MAX_RUN_CONFIGS];
    int current_config, current_repeat; /* being trained (-1: none) */
    int ending; /* the report of a run that was stuck: no peak probes */
    run_chart_drawer *draw_charts; /* run_benchmark's; NULL: no charts */
    int interim; /* summary.csv as a configuration ends: no peak probes */
} run_state;

/* label.c */
/* The key of configuration c's rows, a its attempt (where it ran). */
row_key run_row_key(const run_state *s, const configuration *c, const attempt *a);

/* run_start.c */
/* Loads the data and makes the initial parameters. 0 or an exit status
 * (message printed). */
int run_load_inputs(run_state *s);
void run_free_inputs(run_state *s);
/* A run that cannot start leaves nothing it made behind: the step-loss
 * file it created, its inputs. */
void run_abandon_start(run_state *s);
/* --step-losses and --save-params, checked before anything is trained or
 * written, so a mistyped destination costs no training. 0 or an exit
 * status (message printed). */
int run_open_destinations(run_state *s);
/* Plain and .gz spellings of one file side by side: say which is read. */
void run_note_unread_data_files(const char *dir);

/* run_train.c */
/* A run whose training is long enough for the machine's load to change
 * under it: its CPU peaks are probed before the rows and again after. */
int run_is_long(const run_state *s);
/* Trains configuration c once (repeat r, 1-based). Returns 0, or -1 when
 * a results file could not be written (the run must stop). */
int run_train_configuration(run_state *s, const configuration *c, int r, attempt *a);

/* stop.c */
/* SIGINT and SIGTERM stop the run (run_stop_signal), SIGPIPE fails the
 * write instead of ending it; the stop request of base/stop.h is the
 * run's stop signal. */
void run_install_signal_handlers(void);
/* Rank 0 of several: a thread that, when a SIGTERM finds the run stuck
 * waiting for the others, takes it over and ends the process with
 * finish(run)'s status (the report of what was done). */
void run_watch_ranks(int (*finish)(void *), void *run);
/* Whether the run stops now: the first stop signal this process or, under
 * mpirun, any rank received (0: none). Every rank asks at the same points
 * (agree_on_stop: chunk becomes rank 0's next number of steps). */
int run_stopping(int *chunk);
/* Around a call that may wait for the other ranks (training steps,
 * scoring): while it waits, a stuck run may be taken over. */
void run_wait_begin(void);
void run_wait_end(void);

/* run_summary.c */
/* The summary: every configuration's row (in s->configs, trained as
 * s->runs and s->done_runs say) into summary.csv, with its confusion
 * matrix, then system.json, the printed summary and the charts. Returns
 * the run's exit status, rc being what it was before. */
int run_report(run_state *s, int rc);
/* summary.csv rewritten with the rows of the configurations that have
 * ended so far (skipped ones too), their peaks not yet measured, so that a
 * process that dies loses at most the row it was training. Rank 0 alone;
 * 0, or -1 with the message printed (the report at the end tries again). */
int run_save_summary(run_state *s);

#endif
