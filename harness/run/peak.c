#include "harness/run/peak.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/registry.h"
#include "base/clock.h"
#include "base/stop.h"
#include "harness/run/options.h"
#include "harness/run/peak_kernels.h"


/* ---- one trial: every thread runs the kernel at once -------------------- */

enum { MAX_PROBE_THREADS = 256 };

/* The threads of one trial wait at this gate until all are ready, so the
 * clock starts when the last of them can run; `go` < 0 calls them off. */
typedef struct start_gate {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int ready, go;
} start_gate;

typedef struct probe_job {
    peak_loop run;
    long reps;
    int cpu; /* -1: not pinned */
    start_gate *gate;
    float result;
    double cpu_seconds; /* the thread's own CPU time over the kernel */
} probe_job;

static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *probe_thread(void *arg)
{
    probe_job *job = arg;
    if (job->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(job->cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* unpinned if refused */
    }
    float a[KERNEL_A_FLOATS] __attribute__((aligned(64))), b[KERNEL_B_FLOATS];
    peak_kernel_operands(a, b);
    start_gate *g = job->gate;
    pthread_mutex_lock(&g->lock);
    g->ready++;
    pthread_cond_broadcast(&g->changed);
    while (g->go == 0)
        pthread_cond_wait(&g->changed, &g->lock);
    int go = g->go;
    pthread_mutex_unlock(&g->lock);
    if (go > 0) {
        double cpu0 = thread_cpu_seconds();
        job->result = job->run(a, b, job->reps);
        job->cpu_seconds = thread_cpu_seconds() - cpu0;
    }
    return NULL;
}

/* Seconds for `threads` threads each doing `reps` passes at once, timed
 * from the moment all of them are ready; -1 when they cannot be started.
 * `cpus` (NULL: none) pins thread t to cpus[t]. *ran_share (may be NULL):
 * the least CPU time a thread got over the wall time, 1 when none of them
 * waited for its core behind other work. */
static double time_probe(peak_loop run, int threads, long reps, const int *cpus,
                         double *ran_share)
{
    pthread_t ids[MAX_PROBE_THREADS];
    probe_job jobs[MAX_PROBE_THREADS];
    start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    if (threads > MAX_PROBE_THREADS)
        return -1;
    int started = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (probe_job){.run = run, .reps = reps, .cpu = cpus ? cpus[t] : -1, .gate = &gate};
        if (pthread_create(&ids[t], NULL, probe_thread, &jobs[t]) != 0)
            break;
        started++;
    }
    pthread_mutex_lock(&gate.lock);
    while (started == threads && gate.ready < started)
        pthread_cond_wait(&gate.changed, &gate.lock);
    /* the clock starts before the threads may: were this thread preempted
     * after opening the gate, a later start would time only part of the
     * work and report a rate no core can reach */
    double t0 = now_seconds();
    gate.go = started == threads ? 1 : -1;
    pthread_cond_broadcast(&gate.changed);
    pthread_mutex_unlock(&gate.lock);
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], NULL);
    double seconds = now_seconds() - t0;
    if (ran_share) {
        *ran_share = 1;
        for (int t = 0; t < started; t++)
            if (seconds > 0 && jobs[t].cpu_seconds / seconds < *ran_share)
                *ran_share = jobs[t].cpu_seconds / seconds;
    }
    pthread_mutex_destroy(&gate.lock);
    pthread_cond_destroy(&gate.changed);
    return started == threads ? seconds : -1;
}

/* ---- rounds of trials, per thread count --------------------------------- */

/* A trial of about 10 ms fits inside the gaps a duty-cycled neighbour
 * leaves (one busy 140 ms of every 200 leaves 60 ms gaps), so some trials
 * run on idle cores; about a second of them meets several gaps. */
#define TRIAL_SECONDS 0.010
#define DEFAULT_ROUND_SECONDS 1.0
enum { MAX_TRIALS = 1 << 14, MAX_ROUNDS = 4, CACHE = 32, CACHE_WHY_LEN = 300 };
/* A probe only the table asks for (no row of the run computes in that
 * arithmetic on that many threads) runs rounds of this share of a second:
 * every run's system.json holds the table, and its cost stays small. */
#define TABLE_ROUND_SHARE 0.25
/* A clean trial: every thread had its core (its own CPU time over the
 * trial's wall time) for at least this share; the rest is waking up. */
#define CLEAN_SHARE 0.97
/* Clean trials needed before the best of them can be a peak. */
enum { MIN_CLEAN_TRIALS = 3 };

typedef struct probe_entry {
    peak_arith arith;
    peak_kernel kernel;
    int threads;
    long reps;     /* passes per thread per trial */
    int cpus[MAX_PROBE_THREADS], pinned;
    double *trial_gflops;  /* the trials that ran without waiting (clean) */
    int n_waited;          /* trials in which a thread waited for its core */
    double best_waited;    /* the best of those */
    int n_trials, rounds;
    double seconds;
    double library_gflops; /* best sgemm probe of a loaded backend, 0: none */
    char library_name[32];
    double beaten_by;      /* a rate of this run above the peak, 0: none */
    char beaten_what[64];
    int failed;            /* threads could not be started */
    char note[200];        /* threads asked beyond the CPUs, a CPU quota */
    double round_share;    /* of a round's seconds: 1, or less for the table alone */
    char source[512];
} probe_entry;

static probe_entry cache[CACHE];
static int cached;

/* LB_PEAK_SECONDS as last read: its text and the seconds it gave (the
 * default when unset or refused); a value is parsed once, again only
 * when the variable changes. */
static char round_text[64];
static int round_read, round_refused;
static double round_value = DEFAULT_ROUND_SECONDS;

int peak_check_round_seconds(const char *subcommand)
{
    const char *env = getenv("LB_PEAK_SECONDS");
    if (round_read && !strcmp(round_text, env ? env : ""))
        return round_refused ? 2 : 0;
    round_read = 1;
    snprintf(round_text, sizeof round_text, "%s", env ? env : "");
    round_value = DEFAULT_ROUND_SECONDS;
    round_refused = env && option_number(subcommand, "LB_PEAK_SECONDS (seconds per round of "
                                                     "peak trials)",
                                         env, 0.05, 10, &round_value) != 0;
    if (round_refused)
        round_value = DEFAULT_ROUND_SECONDS;
    return round_refused ? 2 : 0;
}

double peak_round_seconds(void)
{
    peak_check_round_seconds(NULL);
    return round_value;
}

static double round_seconds(void) { return peak_round_seconds(); }

/* Threads pinned to distinct CPUs of the ones this process may use, so two
 * probe threads never share a core while another core idles. A single
 * thread is left to the scheduler, which moves it off a busy core.
 * LB_PEAK_PIN=0 turns pinning off. */
static int choose_cpus(int threads, int *cpus)
{
    const char *env = getenv("LB_PEAK_PIN");
    if (threads < 2 || (env && !strcmp(env, "0")))
        return 0;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < threads)
        return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < threads; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    return n == threads;
}

/* Sizes the trials to about TRIAL_SECONDS from short single-thread passes. */
static long size_trials(peak_loop run)
{
    long reps = 16;
    double t = time_probe(run, 1, reps, NULL, NULL);
    while (t >= 0 && t < 0.002 && reps < (1L << 30)) {
        reps *= 2;
        t = time_probe(run, 1, reps, NULL, NULL);
    }
    if (t <= 0)
        return 0;
    /* the quickest of a few: a slow first pass would make trials too short */
    for (int i = 0; i < 4; i++) {
        double u = time_probe(run, 1, reps, NULL, NULL);
        if (u > 0 && u < t)
            t = u;
    }
    return (long)(reps * TRIAL_SECONDS / t) + 1;
}

static void run_round(probe_entry *e)
{
    if (e->failed || e->rounds >= MAX_ROUNDS || stop_requested())
        return;
    if (!e->trial_gflops) {
        e->trial_gflops = malloc(MAX_TRIALS * sizeof *e->trial_gflops);
        e->pinned = choose_cpus(e->threads, e->cpus);
        e->reps = size_trials(e->kernel.run);
        if (!e->trial_gflops || e->reps <= 0) {
            e->failed = 1;
            return;
        }
    }
    const double work = e->kernel.flops_per_pass * e->reps * e->threads * 1e-9;
    const double t0 = now_seconds(), end = t0 + round_seconds() * e->round_share;
    int in_round = 0;
    do {
        double ran;
        double s = time_probe(e->kernel.run, e->threads, e->reps, e->pinned ? e->cpus : NULL, &ran);
        if (s <= 0) {
            e->failed = e->n_trials + e->n_waited == 0;
            break;
        }
        /* a trial in which a thread waited behind other work on its core
         * timed that work too: it counts only as a rate reached */
        if (ran >= CLEAN_SHARE) {
            e->trial_gflops[e->n_trials++] = work / s;
        } else {
            e->n_waited++;
            if (work / s > e->best_waited)
                e->best_waited = work / s;
        }
        in_round++;
    } while ((now_seconds() < end || in_round < 5) && e->n_trials < MAX_TRIALS &&
             in_round < MAX_TRIALS && !stop_requested());
    e->seconds += now_seconds() - t0;
    e->rounds++;
}

static int by_descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static peak_trials trials_of(const probe_entry *e)
{
    peak_trials t = {.trials = e->n_trials, .waited = e->n_waited,
                     .best_waited = e->best_waited, .rounds = e->rounds, .seconds = e->seconds,
                     .pinned = e->pinned, .top_spread = 1};
    if (e->n_trials == 0)
        return t;
    double *g = malloc((size_t)e->n_trials * sizeof *g);
    if (!g)
        return t;
    memcpy(g, e->trial_gflops, (size_t)e->n_trials * sizeof *g);
    qsort(g, (size_t)e->n_trials, sizeof *g, by_descending);
    int n = e->n_trials;
    t.best = g[0];
    t.third_best = g[n > 2 ? 2 : n - 1];
    t.median = n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]);
    t.worst = g[n - 1];
    t.top_spread = n >= 3 ? 1 - t.third_best / t.best : 1;
    free(g);
    return t;
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* The entry's figure from what it has measured so far. */
static peak_measure measure_of(probe_entry *e)
{
    peak_trials k = trials_of(e);
    /* a trial that waited is still a rate reached: the peak is not below it */
    double figure = k.best > k.best_waited ? k.best : k.best_waited;
    char *src = e->source;
    size_t len = sizeof e->source;
    int w = snprintf(src, len,
                     "%s, C %s kernel, %d thread%s%s, best of %d clean trials in %.1f s%s%s",
                     peak_arith_name(e->arith), e->kernel.isa, e->threads, plural(e->threads),
                     e->pinned ? " pinned" : "", k.trials, k.seconds,
                     figure > k.best ? " (or of one that waited for its core)" : "", e->note);
    /* A library's GEMM only bounds the peak from below too (it may not know
     * this CPU), so the higher of the two stands. */
    if (e->library_gflops > figure) {
        figure = e->library_gflops;
        w = snprintf(src, len, "sgemm of the %s backend's library, %d thread%s (the C kernel: "
                     "%.1f)%s", e->library_name, e->threads, plural(e->threads), k.best, e->note);
    }
    /* More threads cannot lower what the machine can do: a probe of several
     * threads that lost to one thread met other load all along, so its
     * figure is no peak of those threads (the one thread's is kept to
     * say so). */
    double one_thread = 0;
    if (e->threads > 1) {
        /* its best trial counts even when its own figure is uncertain:
         * it is a rate this machine reached */
        peak_measure one = cpu_peak_of(e->arith, 1);
        double rate = one.uncertain ? one.kernel.best : one.gflops;
        if (rate > figure) {
            one_thread = figure = rate;
            w = snprintf(src, len, "%s, 1 thread, which beat %d here", peak_arith_name(e->arith),
                         e->threads);
        }
    }
    (void)w;
    peak_measure m = {.gflops = figure, .source = src, .kernel = k};
    if (e->failed || (figure <= 0 && k.waited == 0))
        return (peak_measure){0, "not measured", 0, k};
    char why[160] = "";
    if (k.trials < MIN_CLEAN_TRIALS)
        snprintf(why, sizeof why, "%d of %d trials had every thread on its own core", k.trials,
                 k.trials + k.waited);
    else if (e->beaten_by > figure)
        snprintf(why, sizeof why, "%s at %.1f GFLOP/s beat the probe's %.1f", e->beaten_what,
                 e->beaten_by, figure);
    else if (one_thread > 0)
        snprintf(why, sizeof why, "1 thread's %.1f GFLOP/s beat the probe's %.1f", one_thread,
                 k.best > e->library_gflops ? k.best : e->library_gflops);
    else if (k.best_waited > k.best * (1 + PEAK_SETTLED_SPREAD) && figure == k.best_waited)
        snprintf(why, sizeof why, "a trial that waited for its core reached %.1f GFLOP/s, over "
                 "%.0f%% above the clean trials' %.1f", k.best_waited, 100 * PEAK_SETTLED_SPREAD,
                 k.best);
    else if (k.top_spread > PEAK_SETTLED_SPREAD && figure == k.best)
        snprintf(why, sizeof why, "the best trials spread %.0f%% (over %.0f%%)", 100 * k.top_spread,
                 100 * PEAK_SETTLED_SPREAD);
    if (why[0]) {
        char detail[512];
        snprintf(detail, sizeof detail, "peak uncertain: %s after %d round%s of %d thread%s (%s)%s",
                 why, k.rounds, plural(k.rounds), e->threads, plural(e->threads),
                 peak_arith_name(e->arith), e->note);
        snprintf(src, len, "%s", detail);
        m.gflops = NAN;
        m.uncertain = 1;
    }
    return m;
}

int peak_usable_cpus(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
        return CPU_COUNT(&allowed);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

/* The first number of a small file (a cgroup's setting); NaN when none,
 * and "max" (no limit) in *unlimited. */
static double first_number(const char *path, double *second, int *unlimited)
{
    *unlimited = 0;
    *second = NAN;
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    char first[32] = "";
    *second = NAN;
    int n = fscanf(f, "%31s %lf", first, second);
    fclose(f);
    *unlimited = n >= 1 && strcmp(first, "max") == 0;
    char *end;
    double v = n >= 1 ? strtod(first, &end) : NAN;
    return n >= 1 && end != first ? v : NAN;
}

/* This process's cgroup path in the hierarchy /proc/self/cgroup names by
 * `controller` ("" for cgroup v2's unified line), "/" when not found. */
static void cgroup_path(const char *controller, char *out, size_t len)
{
    snprintf(out, len, "/");
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *names = strchr(line, ':'), *path = names ? strchr(names + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = 0;
        path[strcspn(path, "\n")] = 0;
        names++;
        int match = !*controller ? !*names : strstr(names, controller) != NULL;
        if (match) {
            snprintf(out, len, "%s", path);
            break;
        }
    }
    fclose(f);
}

double peak_cpu_quota(void)
{
    /* LB_PEAK_CGROUP_ROOT stands for /sys/fs/cgroup (the tests' own tree) */
    const char *root = getenv("LB_PEAK_CGROUP_ROOT");
    root = root && *root ? root : "/sys/fs/cgroup";
    char where[256], path[800];
    double period;
    int unlimited;
    /* cgroup v2: cpu.max is "QUOTA PERIOD" or "max PERIOD" */
    cgroup_path("", where, sizeof where);
    snprintf(path, sizeof path, "%s%s/cpu.max", root, where);
    double quota = first_number(path, &period, &unlimited);
    if (isnan(quota) && !unlimited) {
        snprintf(path, sizeof path, "%s/cpu.max", root);
        quota = first_number(path, &period, &unlimited);
    }
    if (isnan(quota) && !unlimited) { /* cgroup v1: cfs_quota_us (-1: none) over cfs_period_us */
        cgroup_path("cpu", where, sizeof where);
        snprintf(path, sizeof path, "%s/cpu%s/cpu.cfs_quota_us", root, where);
        double spare;
        quota = first_number(path, &spare, &unlimited);
        snprintf(path, sizeof path, "%s/cpu%s/cpu.cfs_period_us", root, where);
        period = first_number(path, &spare, &unlimited);
    }
    return quota > 0 && period > 0 ? quota / period : 0;
}

/* Threads beyond the CPUs this process may use add nothing to what the
 * cores can do: the probe runs as many as there are CPUs, and says so; a
 * CPU quota below them is said too (the trials are short enough to run
 * inside it, the rows are not). */
static void note_quota(probe_entry *e)
{
    const double quota = peak_cpu_quota();
    e->note[0] = 0;
    if (quota > 0 && quota < e->threads)
        snprintf(e->note, sizeof e->note, "; a CPU quota of %.2f CPUs (cgroup) holds longer work "
                 "below this peak", quota);
}

/* The entry's measure for `asked` threads, which says when it was probed
 * on fewer (the CPUs this process may use). */
static peak_measure measured(probe_entry *e, int asked)
{
    note_quota(e); /* as the quota stands now */
    peak_measure m = measure_of(e);
    size_t used = strlen(e->source);
    if (asked > e->threads && used < sizeof e->source)
        snprintf(e->source + used, sizeof e->source - used,
                 "; %d threads asked, %d CPUs usable: probed on %d", asked, peak_usable_cpus(),
                 e->threads);
    return m;
}

static probe_entry *entry_for_share(peak_arith arith, int asked, double round_share)
{
    const int cpus = peak_usable_cpus();
    int threads = asked > cpus ? cpus : asked;
    threads = threads > MAX_PROBE_THREADS ? MAX_PROBE_THREADS : threads < 1 ? 1 : threads;
    for (int i = 0; i < cached; i++)
        if (cache[i].arith == arith && cache[i].threads == threads)
            return &cache[i];
    if (cached == CACHE)
        return NULL;
    probe_entry *e = &cache[cached];
    memset(e, 0, sizeof *e);
    e->arith = arith;
    if (!peak_kernel_for(arith, &e->kernel, e->source, sizeof e->source))
        return NULL; /* absent on this CPU: no entry */
    cached++;
    e->threads = threads;
    e->round_share = round_share;
    run_round(e);
    /* best trials that disagree met load in some of them: one more round */
    if (trials_of(e).top_spread > PEAK_SETTLED_SPREAD)
        run_round(e);
    /* a loaded CPU backend's GEMM library (never loads one: a naive run
     * does not map OpenBLAS for this) */
    for (int i = 0; i < backend_count() && arith == ARITH_FP32; i++) {
        const backend *b = backend_at(i);
        double lib = backend_loaded(b) ? backend_library_peak_gflops(b, e->threads) : 0;
        if (lib > e->library_gflops) {
            e->library_gflops = lib;
            snprintf(e->library_name, sizeof e->library_name, "%s", b->name);
        }
    }
    /* the library, or one thread, beating the kernel says the kernel's
     * trials met load */
    if (e->library_gflops > trials_of(e).best)
        run_round(e);
    else if (e->threads > 1 && cpu_peak_of(arith, 1).kernel.best > trials_of(e).best)
        run_round(e);
    return e;
}

static probe_entry *entry_for(peak_arith arith, int asked)
{
    return entry_for_share(arith, asked, 1);
}

/* Why no entry: the arithmetic is absent here, or the cache is full. */
static peak_measure no_entry(peak_arith arith)
{
    static char why[CACHE_WHY_LEN];
    peak_kernel k;
    char absent[200];
    if (!peak_kernel_for(arith, &k, absent, sizeof absent))
        snprintf(why, sizeof why, "not measured (%s: %s)", peak_arith_name(arith), absent);
    else
        snprintf(why, sizeof why, "not measured (too many thread counts)");
    return (peak_measure){0, why, 0, {0}};
}

peak_measure cpu_peak_of(peak_arith arith, int threads)
{
    probe_entry *e = entry_for(arith, threads);
    return e ? measured(e, threads) : no_entry(arith);
}

peak_measure cpu_peak_gflops(int threads) { return cpu_peak_of(ARITH_FP32, threads); }

peak_measure cpu_peak_survey(peak_arith arith, int threads)
{
    probe_entry *e = entry_for_share(arith, threads, TABLE_ROUND_SHARE);
    return e ? measured(e, threads) : no_entry(arith);
}

peak_measure cpu_peak_measure_again_of(peak_arith arith, int threads)
{
    probe_entry *e = entry_for(arith, threads);
    if (!e)
        return no_entry(arith);
    run_round(e);
    return measured(e, threads);
}

peak_measure cpu_peak_measure_again(int threads)
{
    return cpu_peak_measure_again_of(ARITH_FP32, threads);
}

peak_measure cpu_peak_check(int threads, double measured_gflops, const char *what)
{
    return cpu_peak_check_of(ARITH_FP32, threads, measured_gflops, what);
}

peak_measure cpu_peak_check_of(peak_arith arith, int threads, double measured_gflops,
                               const char *what)
{
    probe_entry *e = entry_for(arith, threads);
    if (!e)
        return no_entry(arith);
    peak_measure m = measured(e, threads);
    if (m.uncertain || !(measured_gflops > m.gflops) || m.gflops <= 0)
        return m;
    run_round(e);
    m = measured(e, threads);
    if (!m.uncertain && measured_gflops > m.gflops) {
        e->beaten_by = measured_gflops;
        snprintf(e->beaten_what, sizeof e->beaten_what, "%s", what);
        m = measured(e, threads);
    }
    return m;
}

/* A number for JSON: null when it is not one. */
static void json_number(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

FILE *peak_json_open(peak_json *j)
{
    *j = (peak_json){0};
    j->f = open_memstream(&j->text, &j->size);
    if (j->f)
        fputc('[', j->f);
    return j->f;
}

void peak_json_close(peak_json *j, char *buf, size_t len)
{
    if (len == 0) {
        if (j->f)
            fclose(j->f);
        free(j->text);
        return;
    }
    if (j->f)
        fputc(']', j->f);
    if (j->f && fclose(j->f) == 0 && j->text && j->size < len)
        memcpy(buf, j->text, j->size + 1);
    else
        snprintf(buf, len, "[]");
    free(j->text);
}

void cpu_peak_json(char *buf, size_t len)
{
    peak_json j;
    FILE *f = peak_json_open(&j);
    if (!f) {
        peak_json_close(&j, buf, len);
        return;
    }
    for (int i = 0, shown = 0; i < cached; i++) {
        probe_entry *e = &cache[i];
        if (e->round_share < 1)
            continue; /* the table's alone (cpu_peaks), held to no row */
        peak_measure m = measure_of(e);
        fprintf(f, "%s{\"threads\": %d", shown++ ? ", " : "", e->threads);
        json_number(f, "gflops", "%.1f", m.gflops > 0 ? m.gflops : NAN);
        fprintf(f, ", \"uncertain\": %s, \"source\": \"", m.uncertain ? "true" : "false");
        for (const char *p = m.source; *p; p++)
            fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        fputc('"', f);
        json_number(f, "kernel_best_gflops", "%.1f", m.kernel.trials ? m.kernel.best : NAN);
        json_number(f, "kernel_third_best_gflops", "%.1f", m.kernel.trials ? m.kernel.third_best : NAN);
        json_number(f, "kernel_median_gflops", "%.1f", m.kernel.trials ? m.kernel.median : NAN);
        json_number(f, "kernel_worst_gflops", "%.1f", m.kernel.trials ? m.kernel.worst : NAN);
        json_number(f, "top_spread", "%.4f", m.kernel.trials >= 3 ? m.kernel.top_spread : NAN);
        fprintf(f, ", \"settled_spread\": %.2f, \"trials\": %d, \"rounds\": %d", PEAK_SETTLED_SPREAD,
                m.kernel.trials, m.kernel.rounds);
        fprintf(f, ", \"clean_share\": %.2f, \"waited_trials\": %d", CLEAN_SHARE, m.kernel.waited);
        json_number(f, "best_waited_gflops", "%.1f", m.kernel.waited ? m.kernel.best_waited : NAN);
        json_number(f, "seconds", "%.2f", m.kernel.seconds);
        fprintf(f, ", \"pinned\": %s", m.kernel.pinned ? "true" : "false");
        json_number(f, "library_gflops", "%.1f", e->library_gflops > 0 ? e->library_gflops : NAN);
        fputc('}', f);
    }
    peak_json_close(&j, buf, len);
}

double percent_of_peak(double achieved_gflops, double peak_gflops)
{
    if (isnan(peak_gflops))
        return NAN;
    return peak_gflops > 0 && achieved_gflops > 0 ? 100.0 * achieved_gflops / peak_gflops : 0;
}
