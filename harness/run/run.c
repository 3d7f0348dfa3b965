/* The run: load the data once, make the initial parameters once, then train
 * each backend from those same floats in the same batch order, timing each
 * epoch and writing a row as it ends. Its parts: run_impl.h. */
#include "harness/run/run_impl.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/stop.h"
#include "harness/formats/fileio.h"
#include "harness/run/agree.h"
#include "harness/run/label.h"
#include "parallel/world.h"

volatile sig_atomic_t run_stop_signal;

/* Under mpirun rank 0 waits in its steps' collectives for the other
 * ranks. When one of them dies, mpirun ends the job with SIGTERM and a
 * second later SIGKILL (odls_base_sigkill_timeout), and rank 0 may be
 * waiting for the dead rank then, never to reach its summary. So rank 0
 * keeps a thread that, when a SIGTERM finds the run waiting and not at a
 * stopping point within STUCK_GRACE_NS (a chunk of steps takes about a
 * quarter of that), takes the run over: the configuration being trained
 * becomes a failed row with the epochs it finished, the summary is
 * written and the process ends. The run is the main thread's while it
 * works and may be taken only while it waits (run_phase). A SIGINT is a
 * person's, with no SIGKILL behind it: the run stops by itself, or a
 * second one ends it. */
#define STUCK_GRACE_NS 800000000L
enum { RUN_WORKING, RUN_WAITING, RUN_TAKEN };
static _Atomic int run_phase;
static sem_t signalled, answered;
static int watching; /* the thread runs: the semaphores are live */

/* The first signal stops the run after the current row; a second one (the
 * run is stuck, or the user insists) ends the process at once. */
static void on_signal(int sig)
{
    if (run_stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    run_stop_signal = sig;
    if (watching && sig == SIGTERM)
        sem_post(&signalled);
}

void run_wait_begin(void) { atomic_store(&run_phase, RUN_WAITING); }

void run_wait_end(void)
{
    int waiting = RUN_WAITING;
    if (!atomic_compare_exchange_strong(&run_phase, &waiting, RUN_WORKING))
        for (;;)
            pause(); /* taken over: the thread that has it ends the process */
}

int run_stopping(int *chunk)
{
    run_wait_begin();
    int sig = agree_on_stop(run_stop_signal, chunk);
    run_wait_end();
    if (sig && !run_stop_signal)
        run_stop_signal = sig; /* another rank's: this one stops alike */
    if (sig && watching)
        sem_post(&answered);
    return sig;
}

/* The failed row of the configuration the stuck run was training, then
 * the report; the process's exit status. */
static int finish_stuck_run(run_state *s)
{
    const run_config *cfg = s->cfg;
    const int i = s->current_config, r = s->current_repeat;
    if (i >= 0) {
        attempt *a = &s->runs[i * cfg->repeat + r];
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message,
                 "signal %d in epoch %d (%d of %d epochs finished) while this rank waited for "
                 "the others: one of them stopped answering", (int)run_stop_signal,
                 a->epochs_done + 1, a->epochs_done, cfg->epochs);
        s->done_runs[i] = r + 1;
    }
    s->ending = 1;
    run_report(s, 1);
    fflush(stdout);
    fflush(stderr);
    return 1;
}

static void *watch_for_a_stuck_run(void *arg)
{
    while (sem_wait(&signalled) != 0)
        ;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += STUCK_GRACE_NS;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    while (sem_timedwait(&answered, &until) != 0)
        if (errno == ETIMEDOUT)
            break;
    for (;;) {
        if (sem_trywait(&answered) == 0)
            return NULL; /* the run reached a stopping point: it stops by itself */
        int waiting = RUN_WAITING;
        if (atomic_compare_exchange_strong(&run_phase, &waiting, RUN_TAKEN))
            _exit(finish_stuck_run(arg));
        nanosleep(&(struct timespec){.tv_nsec = 20000000L}, NULL);
    }
}

/* Rank 0 of several: the thread above, for run s. */
static void watch_ranks(run_state *s)
{
    if (!s->root || world_size() <= 1)
        return;
    pthread_t t;
    if (sem_init(&signalled, 0, 0) != 0 || sem_init(&answered, 0, 0) != 0 ||
        pthread_create(&t, NULL, watch_for_a_stuck_run, s) != 0)
        return; /* a run that cannot be watched still runs */
    pthread_detach(t);
    watching = 1;
}

/* A reader of standard output or error that left (`./bench | head -1`):
 * the write fails with EPIPE instead of ending the process, so every row
 * decided reaches the results files and the lost output is said at the
 * end (main.c). A handler, not SIG_IGN, so that the programs the run
 * starts (gnuplot, a peer's interpreter) get the default again. */
static void on_broken_pipe(int sig) { (void)sig; }

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal must not fail a CSV write with EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    stop_request_watch(&run_stop_signal); /* probes and checks end early */
    sa.sa_handler = on_broken_pipe;
    sigaction(SIGPIPE, &sa, NULL);
}

/* A stop signal during start-up: 130, said once (under mpirun by rank 0). */
static int stopped_at_start(void)
{
    if (world_rank() == 0)
        fprintf(stderr, "bench: stopped by signal %d during start-up\n", (int)run_stop_signal);
    return 130;
}

static int run_backends(const run_config *cfg, run_chart_drawer *draw_charts)
{
    configuration *configs = xcalloc(MAX_RUN_CONFIGS, sizeof *configs);
    char err[1024];
    int n = plan_configurations(cfg, configs, MAX_RUN_CONFIGS, err, sizeof err);
    if (n < 0) {
        if (world_rank() == 0) /* every rank refuses alike; one says why */
            fprintf(stderr, "bench: %s\n", err);
        free(configs);
        return 2;
    }
    if (run_stopping(NULL)) { /* every rank asks here, so all stop alike */
        free(configs);
        return stopped_at_start();
    }
    /* a configuration one rank cannot run is skipped on every rank */
    int runnable[MAX_RUN_CONFIGS];
    char *reasons[MAX_RUN_CONFIGS];
    for (int i = 0; i < n; i++) {
        runnable[i] = configs[i].runnable;
        reasons[i] = configs[i].reason;
    }
    if (agree_on_runnable(n, runnable, reasons, sizeof configs[0].reason) != 0) {
        free(configs);
        return 2;
    }
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= configs[i].runnable = runnable[i];
    if (!any) {
        for (int i = 0; i < n && world_rank() == 0; i++) /* every rank alike: one says */
            if (cfg->n_precisions > 1)
                fprintf(stderr, "bench: %s at %s: %s\n", configs[i].b->name,
                        precision_name(configs[i].prec), configs[i].reason);
            else
                fprintf(stderr, "bench: %s: %s\n", configs[i].b->name, configs[i].reason);
        free(configs);
        return 3;
    }

    run_state s = {.cfg = cfg, .root = world_rank() == 0, .draw_charts = draw_charts};
    s.label_axes = (cfg->n_precisions > 1 ? LABEL_PRECISION : 0) |
                   (cfg->n_batch_sizes > 1 ? LABEL_BATCH : 0);
    int rc = run_load_inputs(&s);
    if (!rc && run_stop_signal)
        rc = stopped_at_start();
    if (!rc && s.root)
        rc = run_open_destinations(&s);
    /* every rank stops when one cannot start, or read other data */
    rc = agree_on_inputs(rc, &s.train, &s.test, s.init_params, (size_t)cfg->work.param_count);
    if (rc) {
        run_abandon_start(&s);
        free(configs);
        return rc;
    }
    if (s.root && results_open(&s.res, cfg, err, sizeof err) != 0) {
        int status = write_failure_status(errno);
        fprintf(stderr, "bench: %s\n", err);
        results_close(&s.res);
        run_abandon_start(&s);
        free(configs);
        return status;
    }
    attempt *runs = xcalloc((size_t)n * cfg->repeat, sizeof *runs);
    for (int k = 0; k < n * cfg->repeat; k++)
        runs[k].epoch_seconds = xcalloc((size_t)cfg->epochs, sizeof(double));
    s.configs = configs;
    s.n_configs = n;
    s.runs = runs;
    s.current_config = -1;
    /* the skipped rows, from the start: before anything is printed, so
     * that a process ended by its output (a closed pipe, a full terminal
     * log) still has them */
    run_save_summary(&s);
    if (s.root)
        run_note_unread_data_files(cfg->data_dir);
    if (s.root) {
        char batches[MAX_BATCH_SIZES * 12] = "";
        size_t used = 0;
        for (int k = 0; k < cfg->n_batch_sizes && used < sizeof batches; k++)
            used += (size_t)snprintf(batches + used, sizeof batches - used, "%s%d", k ? "," : "",
                                     cfg->batch_sizes[k]);
        fprintf(stderr, "%s: %d training and %d test images from %s, %s, batch %s, %d epoch%s -> %s\n",
            cfg->work.name, s.train.count, s.test.count, cfg->data_dir,
            optimizer_name(cfg->engine.opt.kind), batches, cfg->epochs,
            cfg->epochs == 1 ? "" : "s", s.res.dir);
    }
    for (int i = 0; i < n && s.root; i++)
        if (!configs[i].runnable) {
            attempt none = {.replicas = configs[i].replicas};
            row_key key = run_row_key(&s, &configs[i], &none);
            char label[128];
            config_label(&key, label, sizeof label);
            fprintf(stderr, "%-10s skipped: %s\n", label, configs[i].reason);
        }

    /* --repeat interleaves: round r trains every backend once (A B A B, not
     * A A B B), so a change in the machine's load falls on all of them. */
    watch_ranks(&s);
    int stopped[MAX_RUN_CONFIGS] = {0};
    for (int r = 0; r < cfg->repeat && rc == 0 && !run_stopping(NULL); r++)
        for (int i = 0; i < n && rc == 0 && !run_stopping(NULL); i++) {
            if (!configs[i].runnable || stopped[i])
                continue;
            attempt *a = &runs[i * cfg->repeat + r];
            s.current_config = i;
            s.current_repeat = r;
            /* a row that could not be written (a full disk) stops the
             * run, yet the configuration keeps its row, failed */
            const int io_error = run_train_configuration(&s, &configs[i], r + 1, a) != 0;
            s.done_runs[i] = r + 1;
            s.current_config = -1;
            stopped[i] = a->status != STATUS_OK;
            run_save_summary(&s); /* the report at the end tries again if it fails */
            if (io_error) {
                rc = 1;
                break;
            }
        }
    rc = run_report(&s, rc);
    for (int k = 0; k < n * cfg->repeat; k++)
        free(runs[k].epoch_seconds);
    free(runs);
    free(configs);
    run_free_inputs(&s);
    return rc;
}

int run_benchmark(const run_config *cfg, run_chart_drawer *draw_charts)
{
    /* from here a signal ends the run with 130: while MPI starts, the
     * backends are probed (modules, kernel-choice children, a peer's
     * interpreter) and the data loads too */
    install_signal_handlers();
    char err[512];
    if (world_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    /* ranks told different things would train different models, or wait
     * for each other in a collective forever */
    int rc = agree_on_config(cfg);
    if (rc == 0)
        rc = run_backends(cfg, draw_charts);
    world_finalize();
    return rc;
}
