/* The run's stop handling: the signals that stop it (SIGINT, SIGTERM: the
 * first stops it after the current row, a second ends the process) and a
 * closed output's SIGPIPE, the points where every rank asks whether to
 * stop, and under mpirun rank 0's watch for a run stuck waiting for a rank
 * that died. Its own file, below the run's others: training (run_train.c),
 * the report (run_summary.c) and the run (run.c) ask it, and it calls none
 * of them (a stuck run's report is handed to it). */
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

#include "base/stop.h"
#include "harness/run/agree.h"
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

static int (*finish_stuck)(void *); /* run.c's: the report of a stuck run */

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
            _exit(finish_stuck(arg));
        nanosleep(&(struct timespec){.tv_nsec = 20000000L}, NULL);
    }
}

void run_watch_ranks(int (*finish)(void *), void *run)
{
    if (world_size() <= 1)
        return;
    finish_stuck = finish;
    pthread_t t;
    if (sem_init(&signalled, 0, 0) != 0 || sem_init(&answered, 0, 0) != 0 ||
        pthread_create(&t, NULL, watch_for_a_stuck_run, run) != 0)
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

void run_install_signal_handlers(void)
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
