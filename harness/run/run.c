/* The run: load the data once, make the initial parameters once, then train
 * each backend from those same floats in the same batch order, timing each
 * epoch and writing a row as it ends. */
#include "harness/run/run.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/registry.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "harness/formats/fileio.h"
#include "harness/formats/idx.h"
#include "harness/formats/paramfile.h"
#include "harness/run/agree.h"
#include "harness/run/init.h"
#include "harness/run/peak.h"
#include "harness/run/plan.h"
#include "harness/run/progress.h"
#include "harness/run/report.h"
#include "harness/run/results.h"
#include "harness/tools/plot.h"
#include "harness/tools/stats.h"
#include "parallel/world.h"

static volatile sig_atomic_t stop_signal;

/* The first signal stops the run after the current row; a second one (the
 * run is stuck, or the user insists) ends the process at once. */
static void on_signal(int sig)
{
    if (stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
}

static void install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal must not fail a CSV write with EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* One row of the run: a backend (maybe wrapped for data parallelism) at
 * one precision and one batch size. */
typedef struct configuration {
    const backend *b;
    precision prec;
    int batch_size;
    int runnable;
    char reason[512]; /* why not, when not runnable */
} configuration;

/* A finished configuration's speed, for the speedup over naive and the
 * scaling efficiency of the same engine with more replicas. */
typedef struct baseline {
    const char *name; /* the engine's own name (dp_base_name for wrappers) */
    precision prec;
    int batch_size;
    double images_per_second;
} baseline;

/* Everything shared by the backends of one run. */
typedef struct run_state {
    const run_config *cfg;
    /* the configuration being trained: cfg->engine with its precision and
     * batch size */
    engine_config engine;
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
} run_state;

/* Outcome of training one backend once. */
typedef struct attempt {
    run_status status;
    char message[512];
    double *epoch_seconds; /* one per completed epoch */
    int epochs_done;
    double final_train_loss;
    eval_counts final_eval;
    double time_to_target; /* < 0: not reached */
    char details[256];
    int threads, devices, replicas;
    size_t peak_memory;
    size_t host_memory; /* heap bytes the engine held (see heap_in_use) */
    memory_use worker_memory; /* itemised by the engine (its largest worker), or zeros */
    double device_peak_gflops; /* from the backend's peak_gflops, 0 if none */
} attempt;

static row_key key_for(const run_state *s, const backend *b, const attempt *a)
{
    const run_config *cfg = s->cfg;
    row_key k = {
        .backend = b->name,
        .workload = cfg->work.name,
        .precision = precision_name(s->engine.precision),
        .threads = a->threads,
        .devices = a->devices,
        .replicas = a->replicas,
        .ranks = world_size(),
        .batch_size = s->engine.batch_size,
        .optimizer = optimizer_name(cfg->engine.opt.kind),
        .label_axes = s->label_axes,
    };
    return k;
}

static int all_finite(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* A loss above this many times the loss of a uniform guess, ln(classes),
 * is divergence, as NaN and Inf are. Training starts near ln(classes)
 * (2.3 for 10 classes) and goes down; a model that puts e^-23 on the right
 * class on average, as a mean loss of 10 x ln(10) says, has blown up (its
 * weights grow without bound and the loss would reach Inf a few epochs
 * later), while a healthy run's worst epoch stays within 2 x. */
#define DIVERGED_LOSS_FACTOR 10.0

static double diverged_loss_limit(const workload *w)
{
    return DIVERGED_LOSS_FACTOR * log(w->classes > 1 ? w->classes : 2);
}

/* Marks a diverged when loss (named by what) is NaN, Inf or above the
 * limit. 1 when it did. */
static int check_divergence(const workload *w, attempt *a, const char *what, double loss,
                            int epoch)
{
    if (a->status != STATUS_OK)
        return 0;
    if (!isfinite(loss))
        snprintf(a->message, sizeof a->message, "%s became NaN or Inf in epoch %d", what, epoch);
    else if (loss > diverged_loss_limit(w))
        snprintf(a->message, sizeof a->message,
                 "%s %.3g in epoch %d is above %.3g, %g x the loss of a uniform guess (ln %d)",
                 what, loss, epoch, diverged_loss_limit(w), DIVERGED_LOSS_FACTOR, w->classes);
    else
        return 0;
    a->status = STATUS_DIVERGED;
    return 1;
}

/* Scores the test set; returns 0 or fills the failure into a. */
static int evaluate(const run_state *s, const backend *b, engine *e, attempt *a,
                    eval_counts *ev)
{
    memset(ev, 0, sizeof *ev);
    if (b->ops->evaluate(e, s->test.count, ev) != 0) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "evaluate: %s", b->ops->error(e));
        return -1;
    }
    return 0;
}

/* --step-losses: one row per training step, as the steps complete. */
static void write_step_losses(run_state *s, const backend *b, const attempt *a, int epoch,
                              int first_step, int steps, int batch, const float *losses)
{
    if (!s->step_losses)
        return;
    const row_key k = key_for(s, b, a);
    for (int i = 0; i < steps; i++)
        fprintf(s->step_losses, "%s,%d,%d,%d,%d,%d,%d,%.9g,%s,%s,%d,%d,%d,%s\n", b->name,
                a->replicas, world_size(), s->repeat, epoch + 1, first_step + i + 1, batch,
                losses[i], k.workload, k.precision, k.threads, k.devices, k.batch_size,
                k.optimizer);
    fflush(s->step_losses);
}

/* Trains one epoch in chunks of steps sized to ~0.25 s, so progress stays
 * live and a signal is noticed quickly. Returns the images trained. */
static long train_epoch(run_state *s, const backend *b, engine *e, int epoch, attempt *a,
                        progress *prog, double *seconds, double *loss_sum)
{
    const run_config *cfg = s->cfg;
    int n = s->train.count, batch = s->engine.batch_size;
    int full_steps = n / batch, rest = n % batch;
    epoch_order(cfg->seed, epoch, n, cfg->shuffle, s->order);

    double start = now_seconds();
    int done_steps = 0, chunk = 1;
    *loss_sum = 0;
    while (done_steps < full_steps && !stop_signal) {
        int k = chunk < full_steps - done_steps ? chunk : full_steps - done_steps;
        double t0 = now_seconds();
        if (b->ops->train_steps(e, s->order + (size_t)done_steps * batch, batch, k,
                           s->losses + done_steps) != 0) {
            a->status = STATUS_FAILED;
            snprintf(a->message, sizeof a->message, "train: %s", b->ops->error(e));
            break;
        }
        double dt = now_seconds() - t0;
        if (!all_finite(s->losses + done_steps, k)) {
            a->status = STATUS_DIVERGED;
            snprintf(a->message, sizeof a->message, "loss became NaN or Inf in epoch %d",
                     epoch + 1);
        }
        for (int i = 0; i < k; i++)
            *loss_sum += s->losses[done_steps + i];
        write_step_losses(s, b, a, epoch, done_steps, k, batch, s->losses + done_steps);
        done_steps += k;
        if (a->status != STATUS_OK)
            break;
        /* aim each call at about a quarter of a second */
        double per_step = dt / k;
        int want = per_step > 0 ? (int)(0.25 / per_step) : chunk * 2;
        chunk = want < 1 ? 1 : want > 4 * chunk ? 4 * chunk : want;
        if (s->root)
            progress_update(prog, (long)done_steps * batch, now_seconds() - start,
                            *loss_sum / done_steps);
    }
    long images = (long)done_steps * batch;
    if (rest && done_steps == full_steps && !stop_signal && a->status == STATUS_OK) {
        float last;
        if (b->ops->train_steps(e, s->order + (size_t)full_steps * batch, rest, 1, &last) != 0) {
            a->status = STATUS_FAILED;
            snprintf(a->message, sizeof a->message, "train: %s", b->ops->error(e));
        } else {
            /* weight the partial batch by its size in the epoch mean */
            *loss_sum += last * ((double)rest / batch);
            write_step_losses(s, b, a, epoch, full_steps, 1, rest, &last);
            images += rest;
            if (!isfinite(last)) {
                a->status = STATUS_DIVERGED;
                snprintf(a->message, sizeof a->message, "loss became NaN or Inf in epoch %d",
                         epoch + 1);
            }
        }
    }
    *seconds = now_seconds() - start;
    return images;
}

/* Heap bytes in use in this process (malloc's own count, mmap'd blocks
 * included). The difference across an engine's life is what a CPU engine
 * allocated through malloc: its parameters, gradients, optimiser state,
 * activations and workspace. Memory a library maps itself (OpenBLAS's
 * buffers) and thread stacks are not in it. */
static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* The engine's share of the heap: the most it held after setup or after
 * training, above what the process held before it was created. */
static void note_engine_heap(attempt *a, size_t before)
{
    size_t now = heap_in_use();
    if (now > before && now - before > a->host_memory)
        a->host_memory = now - before;
}

/* A run whose training is long enough for the machine's load to change
 * under it: its CPU peaks are probed before the rows and again after. */
static int long_run(const run_state *s)
{
    return (double)s->train.count * s->cfg->epochs * s->cfg->repeat >= 60000;
}

static engine *start_engine(run_state *s, const backend *b, attempt *a, size_t heap_before)
{
    char err[512] = "";
    engine *e = backend_create(b, &s->cfg->work, &s->engine, err, sizeof err);
    if (!e) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "create: %s", err[0] ? err : "unknown error");
        return NULL;
    }
    if (b->ops->set_params(e, s->init_params) != 0 || b->ops->bind_dataset(e, &s->train, &s->test) != 0) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "setup: %s", b->ops->error(e));
        b->ops->destroy(e);
        return NULL;
    }
    a->threads = 1;
    a->devices = 0;
    a->replicas = 1;
    backend_placement(b, e, &a->threads, &a->devices, &a->replicas);
    /* a long run probes the CPU's peak before its rows too (kept per
     * thread count; settle_cpu_peaks probes again after them) */
    if (!s->cfg->no_peak && s->root && a->devices == 0 && long_run(s))
        cpu_peak_gflops(a->threads);
    backend_describe(b, e, a->details, sizeof a->details);
    note_engine_heap(a, heap_before);
    return e;
}

static int save_params(run_state *s, const backend *b, engine *e, const char *label,
                       int several)
{
    const run_config *cfg = s->cfg;
    char path[PATH_LEN + 160], err[512];
    if (several)
        snprintf(path, sizeof path, "%s.%s", cfg->save_params, label);
    else
        snprintf(path, sizeof path, "%s", cfg->save_params);
    float *p = xmalloc(sizeof(float) * cfg->work.param_count);
    int rc = -1;
    /* every rank reads them back (a model split over ranks gathers its
     * shares), rank 0 writes them */
    if (b->ops->get_params(e, p) != 0)
        fprintf(stderr, "bench: %s: cannot read back the parameters to save\n", b->name);
    else if (!s->root)
        rc = 0;
    else if (paramfile_save(path, &cfg->work, p, err, sizeof err) != 0)
        fprintf(stderr, "bench: %s\n", err);
    else {
        fprintf(stderr, "%s: parameters saved to %s\n", b->name, path);
        rc = 0;
    }
    free(p);
    return rc;
}

/* More than one row: --save-params then names its files by configuration. */
static int several_configurations(const run_config *cfg)
{
    return cfg->n_backends > 1 || cfg->n_replicas > 1 || cfg->n_precisions > 1 ||
           cfg->n_batch_sizes > 1 || cfg->model_parallel || cfg->hybrid_parallel;
}

/* Trains backend b once (repeat r, 1-based). Returns 0, or -1 when a
 * results file could not be written (the run must stop). */
static int train_backend(run_state *s, const backend *b, int r, attempt *a)
{
    const run_config *cfg = s->cfg;
    /* nothing of the previous backend's attempt may reach this one's rows */
    double *epoch_seconds = a->epoch_seconds;
    memset(a, 0, sizeof *a);
    a->epoch_seconds = epoch_seconds;
    a->status = STATUS_OK;
    a->time_to_target = -1;
    s->repeat = r;
    const size_t heap_before = heap_in_use();
    engine *e = start_engine(s, b, a, heap_before);
    if (!e)
        return 0;
    double flops_per_image = cfg->work.train_flops_per_image;
    double wall_start = now_seconds();
    row_key key = key_for(s, b, a);
    char config_name[128], label[160];
    config_label(&key, config_name, sizeof config_name);
    if (cfg->repeat > 1)
        snprintf(label, sizeof label, "%s#%d", config_name, r);
    else
        snprintf(label, sizeof label, "%s", config_name);
    int io_error = 0;
    for (int ep = 0; ep < cfg->epochs && a->status == STATUS_OK; ep++) {
        progress prog;
        if (s->root)
            progress_start(&prog, label, ep + 1, cfg->epochs, s->train.count);
        double seconds, loss_sum;
        long images = train_epoch(s, b, e, ep, a, &prog, &seconds, &loss_sum);
        double steps = (double)images / s->engine.batch_size;
        double train_loss = steps > 0 ? loss_sum / steps : NAN;
        eval_counts ev = {0};
        double test_loss = NAN, accuracy = NAN;
        if (steps > 0)
            check_divergence(&cfg->work, a, "train loss", train_loss, ep + 1);
        if (stop_signal && a->status == STATUS_OK) {
            a->status = STATUS_INTERRUPTED;
            snprintf(a->message, sizeof a->message, "stopped by signal %d during epoch %d",
                     (int)stop_signal, ep + 1);
        }
        if (a->status == STATUS_OK && evaluate(s, b, e, a, &ev) == 0 && ev.count > 0) {
            test_loss = ev.loss_sum / ev.count;
            check_divergence(&cfg->work, a, "test loss", test_loss, ep + 1);
            long correct = 0;
            for (int k = 0; k < ev.classes; k++)
                correct += ev.confusion[k * ev.classes + k];
            accuracy = (double)correct / ev.count;
            a->final_eval = ev;
            if (cfg->target_accuracy > 0 && a->time_to_target < 0 &&
                accuracy >= cfg->target_accuracy)
                a->time_to_target = now_seconds() - wall_start;
        }
        epoch_row row = {
            .key = key_for(s, b, a),
            .repeat = r,
            .epoch = ep + 1,
            .images = images,
            .epoch_seconds = seconds,
            .images_per_second = seconds > 0 ? images / seconds : 0,
            .gflops_per_second = seconds > 0 ? images * flops_per_image / seconds * 1e-9 : 0,
            .train_loss = train_loss,
            .test_loss = test_loss,
            .test_accuracy = accuracy,
            .status = a->status,
            .message = a->message,
        };
        if (s->root && results_epoch(&s->res, &row) != 0) {
            io_error = 1;
            break;
        }
        if (s->root)
            progress_finish(&prog, images, seconds, train_loss, accuracy, a->status);
        if (a->status == STATUS_OK) {
            a->epoch_seconds[a->epochs_done++] = seconds;
            a->final_train_loss = train_loss;
        }
    }
    a->peak_memory = backend_peak_memory(b, e);
    backend_memory_use(b, e, &a->worker_memory);
    note_engine_heap(a, heap_before);
    if (a->status == STATUS_OK && !cfg->no_peak)
        a->device_peak_gflops = backend_peak_gflops(b, e);
    if (cfg->profile_layers && r == cfg->repeat && a->status == STATUS_OK && s->root) {
        /* the first batch of epoch 1, 10 steps, like `caffe time` */
        epoch_order(cfg->seed, 0, s->train.count, cfg->shuffle, s->order);
        report_layer_profile(&s->res, config_name, b, e, &cfg->work, s->order,
                             s->engine.batch_size, 10, stderr);
    }
    if (cfg->save_params[0] && r == cfg->repeat && a->status == STATUS_OK &&
        save_params(s, b, e, config_name, several_configurations(cfg)) != 0)
        s->save_failed = 1;
    b->ops->destroy(e);
    return io_error ? -1 : 0;
}

/* Images/s of the configuration `name` at this precision and batch size
 * with one replica on one rank earlier in this run, or 0. */
static double baseline_speed(const run_state *s, const char *name, precision prec, int batch)
{
    for (int i = 0; i < s->n_baselines; i++) {
        const baseline *bl = &s->baselines[i];
        if (!strcmp(bl->name, name) && bl->prec == prec && bl->batch_size == batch)
            return bl->images_per_second;
    }
    return 0;
}

/* How b is parallel, from the wrappers it is made of. */
static void describe_parallel(const backend *b, summary_row *row)
{
    const backend *inner = dp_inner(b);
    const mp_options *o = mp_options_of(inner ? inner : b);
    const int replicas = row->key.replicas > 0 ? row->key.replicas : 1;
    row->parallel = o ? (inner ? "hybrid" : "model") : replicas > 1 ? "data" : "single";
    row->split = o ? mp_split_name(o->split) : NULL;
    row->workers = (o ? o->workers : 1) * replicas;
    row->micro_batches = o ? o->micro_batches : 1;
    row->prefetch = o ? o->prefetch : 0;
}

/* What a rate held to the peak is called in "peak uncertain: ...". */
static const char *peak_rival(const backend *b)
{
    static char what[MAX_RUN_CONFIGS][64];
    static int n;
    char name[64];
    snprintf(name, sizeof name, "%s's row", b->name);
    for (int i = 0; i < n; i++)
        if (!strcmp(what[i], name))
            return what[i];
    if (n == MAX_RUN_CONFIGS)
        return "a row";
    snprintf(what[n], sizeof what[n], "%s", name);
    return what[n++];
}

/* Before any row is written: every CPU row's rate is held to the peak of
 * its thread count (a faster row has the probe run again, or makes the
 * peak uncertain), so the rows of a run share one figure per thread count
 * and none is over 100%. A long run's peaks are first probed once more. */
static void settle_cpu_peaks(run_state *s, const configuration *configs, int n,
                             const attempt *runs, const int *done_runs, double *samples)
{
    const run_config *cfg = s->cfg;
    if (cfg->no_peak || !s->root)
        return;
    int again[MAX_RUN_CONFIGS], n_again = 0;
    for (int i = 0; i < n; i++) {
        if (!configs[i].runnable || done_runs[i] == 0)
            continue;
        const attempt *last = &runs[i * cfg->repeat + done_runs[i] - 1];
        if (last->status != STATUS_OK || last->devices != 0 || last->device_peak_gflops > 0)
            continue;
        int seen = 0;
        for (int k = 0; k < n_again && !seen; k++)
            seen = again[k] == last->threads;
        if (!seen && long_run(s)) {
            again[n_again++] = last->threads;
            cpu_peak_measure_again(last->threads);
        }
        int m = 0;
        for (int r = 0; r < done_runs[i]; r++) {
            const attempt *a = &runs[i * cfg->repeat + r];
            m += timed_samples(a->epoch_seconds, a->epochs_done, cfg->epochs, samples + m);
        }
        double median = stats_of(samples, m).median;
        if (median > 0)
            cpu_peak_check(last->threads,
                           s->train.count / median * cfg->work.train_flops_per_image * 1e-9,
                           peak_rival(configs[i].b));
    }
}

static void fill_summary(run_state *s, const backend *b, const attempt *runs, int n_runs,
                         summary_row *row, double *samples)
{
    const run_config *cfg = s->cfg;
    const attempt *last = &runs[n_runs - 1];
    /* the warm-up rule and what epoch times exclude: stats.h */
    int n = 0, all_epochs = 0;
    for (int r = 0; r < n_runs; r++) {
        n += timed_samples(runs[r].epoch_seconds, runs[r].epochs_done, cfg->epochs, samples + n);
        all_epochs += runs[r].epochs_done;
    }
    sample_stats st = stats_of(samples, n);
    summary_row_init(row); /* what is not set below was not measured */
    row->key = key_for(s, b, last);
    row->epochs = cfg->epochs;
    row->repeats = n_runs;
    row->images_per_epoch = s->train.count;
    row->epoch_seconds_median = st.median;
    row->epoch_seconds_mean = st.mean;
    row->epoch_seconds_stddev = st.stddev;
    row->epoch_seconds_min = st.min;
    row->epoch_seconds_max = st.max;
    row->timed_samples = st.n;
    row->warmup_epochs = n < all_epochs ? warmup_epochs(cfg->epochs) : 0;
    row->images_per_second = st.median > 0 ? s->train.count / st.median : 0;
    row->gflops_per_second = row->images_per_second * cfg->work.train_flops_per_image * 1e-9;
    double naive = baseline_speed(s, "naive", s->engine.precision, s->engine.batch_size);
    if (naive > 0 && row->images_per_second > 0 && last->status == STATUS_OK)
        row->speedup_vs_naive = row->images_per_second / naive;
    row->final_train_loss = last->final_train_loss;
    const eval_counts *ev = &last->final_eval;
    eval_stats es = eval_stats_of(ev);
    row->final_test_accuracy = es.accuracy;
    row->macro_precision = es.macro_precision;
    row->macro_recall = es.macro_recall;
    row->macro_f1 = es.macro_f1;
    /* MLPerf times several runs; report the median of those that got there */
    int reached = 0;
    for (int r = 0; r < n_runs; r++)
        if (runs[r].time_to_target >= 0)
            samples[reached++] = runs[r].time_to_target;
    if (cfg->target_accuracy > 0) {
        row->time_to_target_seconds = reached ? stats_of(samples, reached).median : -1;
        row->target_accuracy = cfg->target_accuracy;
    }
    if (last->status == STATUS_OK && s->root) {
        peak_measure pk = {.gflops = last->device_peak_gflops,
                           .source = "the backend's GEMM probe on its device"};
        if (cfg->no_peak)
            pk = (peak_measure){.source = "not measured (--no-peak)"};
        else if (pk.gflops <= 0 && row->key.devices == 0)
            pk = cpu_peak_check(row->key.threads, row->gflops_per_second, peak_rival(b));
        else if (pk.gflops <= 0)
            pk = (peak_measure){.source = "not measured"};
        /* measured: the figure and its percentage; uncertain (NaN) or not
         * measured: both stay NOT_MEASURED, empty in CSV, null in JSON */
        row->peak_source = pk.source;
        if (pk.gflops > 0) {
            row->peak_gflops = pk.gflops;
            row->percent_of_peak = percent_of_peak(row->gflops_per_second, pk.gflops);
        }
    }
    const int peer = backend_is_peer(b);
    if (last->peak_memory > 0 && row->key.devices > 0)
        row->peak_memory_bytes = (double)last->peak_memory; /* a device's; CPU rows have none */
    /* a GPU engine's own peak on its device, a CPU peer's process's peak
     * resident memory, else what the harness saw the engine take from the
     * heap; a GPU peer's memory is in a process the heap count cannot see */
    if (peer && row->key.devices == 0 && last->peak_memory > 0) {
        row->memory_bytes = (double)last->peak_memory;
        row->memory_source = "peak resident memory of the framework's process (VmHWM)";
    } else if (peer && last->peak_memory == 0) {
        row->memory_source = "not measured (the framework's own process)";
    } else if (last->peak_memory > 0) {
        row->memory_bytes = (double)last->peak_memory;
        row->memory_source = "device peak (engine)";
    } else if (last->host_memory > 0) {
        row->memory_bytes = (double)last->host_memory;
        row->memory_source = "host heap held by the engine";
    }
    describe_parallel(b, row);
    const memory_use *m = &last->worker_memory;
    row->worker_params_bytes = (double)m->params;
    row->worker_grads_bytes = (double)m->grads;
    row->worker_opt_state_bytes = (double)m->opt_state;
    row->worker_activation_bytes = (double)m->activations;
    row->worker_workspace_bytes = (double)m->workspace;
    if (row->workers > 1 && strcmp(row->parallel, "data") && memory_use_total(m) > 0) {
        /* one worker holds a part of the model: what matters is the largest */
        row->memory_bytes = (double)memory_use_total(m);
        row->memory_source = "largest worker, itemised by its engines";
    }
    row->details = last->details;
    row->status = last->status;
    row->message = last->message;
    for (int r = 0; r < n_runs; r++)
        if (runs[r].status != STATUS_OK) {
            row->status = runs[r].status;
            row->message = runs[r].message;
        }
}

static int load_inputs(run_state *s)
{
    const run_config *cfg = s->cfg;
    const workload *w = &cfg->work;
    char err[1024];
    if (idx_load(cfg->data_dir, w->classes, w->input.h, w->input.w, &s->train, &s->test, err,
                 sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return errno == ENOMEM ? 1 : 2; /* out of memory is no fault of the input */
    }
    if (cli_check_against_data(cfg, s->train.count, s->test.count) != 0)
        return 2;
    if (cfg->limit)
        s->train.count = cfg->limit;
    if (cfg->test_limit)
        s->test.count = cfg->test_limit;
    s->init_params = xmalloc(sizeof(float) * w->param_count);
    s->order = xmalloc(sizeof(int32_t) * (size_t)s->train.count);
    /* batch_sizes is ascending: the smallest batch takes the most steps */
    s->losses = xmalloc(sizeof(float) * ((size_t)s->train.count / cfg->batch_sizes[0] + 1));
    if (cfg->init_params[0]) {
        if (paramfile_load(cfg->init_params, w, s->init_params, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            return errno == ENOMEM ? 1 : 2;
        }
    } else {
        init_params(w, cfg->seed, s->init_params);
    }
    return 0;
}

static void free_inputs(run_state *s)
{
    dataset_free(&s->train);
    dataset_free(&s->test);
    free(s->init_params);
    free(s->order);
    free(s->losses);
}

/* A run that cannot start leaves nothing it made behind: the step-loss
 * file it created, its inputs. */
static void abandon_start(run_state *s, const run_config *cfg)
{
    if (s->step_losses) {
        fclose(s->step_losses);
        if (s->step_losses_created)
            unlink(cfg->step_losses);
    }
    free_inputs(s);
}

/* The configurations of the run, into out (at most MAX_RUN_CONFIGS):
 * each backend (as --replicas, multi-gpu and MPI make it), naive first so
 * the others' speedup can be stated, at each --precision and then each
 * --batch-size. Returns the count, or -1 (message printed). */
static int plan(const run_config *cfg, configuration *out)
{
    const backend *wanted[MAX_RUN_CONFIGS];
    char err[256];
    int n_wanted = dp_expand_backends(cfg, cfg->backends, cfg->n_backends, wanted,
                                      MAX_RUN_CONFIGS, err, sizeof err);
    if (n_wanted < 0) {
        if (world_rank() == 0) /* every rank refuses alike; one says why */
            fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    long total = (long)n_wanted * cfg->n_precisions * cfg->n_batch_sizes;
    if (total > MAX_RUN_CONFIGS) {
        fprintf(stderr, "bench: %ld configurations (backends x --replicas and --parallel x "
                "--precision x --batch-size) are more than the %d one run takes\n", total,
                MAX_RUN_CONFIGS);
        return -1;
    }
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_wanted; i++) {
            int is_naive = strcmp(wanted[i]->name, "naive") == 0;
            if (is_naive != (pass == 0))
                continue;
            for (int p = 0; p < cfg->n_precisions; p++)
                for (int k = 0; k < cfg->n_batch_sizes; k++) {
                    configuration *c = &out[n++];
                    c->b = wanted[i];
                    c->prec = cfg->precisions[p];
                    c->batch_size = cfg->batch_sizes[k];
                    c->reason[0] = 0;
                    c->runnable = backend_runnable(c->b, c->prec, c->reason, sizeof c->reason);
                }
        }
    return n;
}

/* Images/s over replicas x the images/s of one replica of the same engine
 * at the same precision and batch size earlier in this run, or 0. */
static double scaling_efficiency(const run_state *s, const backend *b, const summary_row *row)
{
    const char *base = dp_base_name(b);
    const int replicas = row->key.replicas;
    if (replicas < 1 || row->images_per_second <= 0 || row->status != STATUS_OK)
        return 0;
    if (replicas == 1 && row->key.ranks == 1)
        return 1; /* its own baseline */
    double one = baseline_speed(s, base ? base : b->name, s->engine.precision,
                                s->engine.batch_size);
    return one > 0 ? row->images_per_second / (replicas * one) : 0;
}

/* A name the run writes in its results directory (results.c, plot.c). */
static int written_by_the_run(const char *name)
{
    static const char *const files[] = {"epochs.csv", "summary.csv", "system.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        if (!strcmp(name, files[i]))
            return 1;
    size_t n = strlen(name);
    int csv = n > 4 && !strcmp(name + n - 4, ".csv");
    return (csv && (!strncmp(name, "confusion-", 10) || !strncmp(name, "profile-", 8))) ||
           (n > 4 && (!strcmp(name + n - 4, ".png") || !strcmp(name + n - 4, ".svg"))) ||
           strstr(name, ".part-") != NULL;
}

/* Destinations that would overwrite each other or what is not ours: an
 * --out that holds files and no run of ours (`--out /`, a home directory),
 * --save-params or --step-losses on a file the run writes in --out, and
 * the two on one path. 0, or 2 with the message printed. */
static int check_collisions(const run_config *cfg)
{
    char out[PATH_LEN], file[2 * PATH_LEN];
    if (cfg->out_dir[0]) {
        canonical_path(cfg->out_dir, out, sizeof out);
        struct stat st;
        int entries = stat(cfg->out_dir, &st) == 0 && S_ISDIR(st.st_mode)
                          ? directory_entries(cfg->out_dir) : 0;
        char probe[PATH_LEN + 16];
        snprintf(probe, sizeof probe, "%s/epochs.csv", cfg->out_dir);
        if (entries > 0 && access(probe, F_OK) != 0) {
            fprintf(stderr, "bench: --out %s is a directory that holds %d entr%s and no "
                    "run: give a new or empty directory\n", cfg->out_dir, entries,
                    entries == 1 ? "y" : "ies");
            return 2;
        }
    }
    const char *flags[2] = {"--save-params", "--step-losses"};
    const char *paths[2] = {cfg->save_params, cfg->step_losses};
    char canon[2][PATH_LEN] = {"", ""};
    for (int i = 0; i < 2; i++) {
        if (!paths[i][0])
            continue;
        canonical_path(paths[i], canon[i], sizeof canon[i]);
        snprintf(file, sizeof file, "%s", canon[i]);
        char *slash = strrchr(file, '/');
        if (cfg->out_dir[0] && slash) {
            *slash = 0;
            if (!strcmp(file[0] ? file : "/", out) && written_by_the_run(slash + 1)) {
                fprintf(stderr, "bench: %s %s is a file the run writes in --out %s: choose "
                        "another name or place\n", flags[i], paths[i], cfg->out_dir);
                return 2;
            }
        }
    }
    if (cfg->save_params[0] && cfg->step_losses[0] && !strcmp(canon[0], canon[1])) {
        fprintf(stderr, "bench: --step-losses %s and --save-params %s are both one file: give "
                "each its own\n", cfg->step_losses, cfg->save_params);
        return 2;
    }
    return 0;
}

/* --step-losses and --save-params, checked before anything is trained or
 * written, so a mistyped destination costs no training. 0 or an exit
 * status (message printed). */
static int open_destinations(run_state *s)
{
    const run_config *cfg = s->cfg;
    char err[PATH_LEN + 256];
    if (check_collisions(cfg) != 0)
        return 2;
    if (cfg->save_params[0] && check_output_path("--save-params", cfg->save_params, err,
                                                 sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return write_failure_status(errno);
    }
    if (cfg->step_losses[0]) {
        s->step_losses = create_new_file("--step-losses", cfg->step_losses,
                                         &s->step_losses_created, err, sizeof err);
        if (!s->step_losses) {
            fprintf(stderr, "bench: %s\n", err);
            return write_failure_status(errno);
        }
        /* the first eight columns as they always were; the rest of the
         * row's key after them, so that configurations can be told apart */
        fprintf(s->step_losses, "backend,replicas,ranks,repeat,epoch,step,images,loss,"
                                "workload,precision,threads,devices,batch_size,optimizer\n");
    }
    return 0;
}

/* Plain and .gz spellings of one file side by side: say which is read. */
static void note_unread_data_files(const char *dir)
{
    char used[4 * PATH_LEN], unread[8 * PATH_LEN];
    idx_describe_files(dir, used, sizeof used, unread, sizeof unread);
    if (unread[0])
        fprintf(stderr, "note: not read: %s\n", unread);
}

static int run_backends(const run_config *cfg);

/* What the engine of configuration c is created with, and its rows keyed by. */
static void use_configuration(run_state *s, const configuration *c)
{
    s->engine.precision = c->prec;
    s->engine.batch_size = c->batch_size;
}

int run_benchmark(const run_config *cfg)
{
    char err[512];
    if (world_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    /* ranks told different things would train different models, or wait
     * for each other in a collective forever */
    int rc = agree_on_config(cfg);
    if (rc == 0)
        rc = run_backends(cfg);
    world_finalize();
    return rc;
}

static int run_backends(const run_config *cfg)
{
    configuration *configs = xcalloc(MAX_RUN_CONFIGS, sizeof *configs);
    int n = plan(cfg, configs);
    if (n < 0) {
        free(configs);
        return 2;
    }
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= configs[i].runnable;
    if (!any) {
        for (int i = 0; i < n; i++)
            if (cfg->n_precisions > 1)
                fprintf(stderr, "bench: %s at %s: %s\n", configs[i].b->name,
                        precision_name(configs[i].prec), configs[i].reason);
            else
                fprintf(stderr, "bench: %s: %s\n", configs[i].b->name, configs[i].reason);
        free(configs);
        return 3;
    }

    /* from here a signal ends the run with 130, during loading too */
    install_signal_handlers();
    run_state s = {.cfg = cfg, .root = world_rank() == 0, .engine = cfg->engine};
    s.label_axes = (cfg->n_precisions > 1 ? LABEL_PRECISION : 0) |
                   (cfg->n_batch_sizes > 1 ? LABEL_BATCH : 0);
    int rc = load_inputs(&s);
    if (!rc && stop_signal)
        rc = 130;
    if (!rc && s.root)
        rc = open_destinations(&s);
    /* every rank stops when one cannot start, or read other data */
    rc = agree_on_inputs(rc, &s.train, &s.test, s.init_params, (size_t)cfg->work.param_count);
    if (rc) {
        abandon_start(&s, cfg);
        free(configs);
        return rc;
    }
    char err[1024];
    if (s.root && results_open(&s.res, cfg, err, sizeof err) != 0) {
        int status = write_failure_status(errno);
        fprintf(stderr, "bench: %s\n", err);
        results_close(&s.res);
        abandon_start(&s, cfg);
        free(configs);
        return status;
    }
    if (s.root)
        note_unread_data_files(cfg->data_dir);
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
            use_configuration(&s, &configs[i]);
            attempt none = {.replicas = 1};
            row_key key = key_for(&s, configs[i].b, &none);
            char label[128];
            config_label(&key, label, sizeof label);
            fprintf(stderr, "%-10s skipped: %s\n", label, configs[i].reason);
        }

    /* a row's details and message are its own copies (freed at the end):
     * the attempts that held them are reused by the next backend */
    summary_row *rows = xcalloc(MAX_RUN_CONFIGS, sizeof *rows);
    int n_rows = 0, failed = 0, trained = 0, finished = 0;
    char first_failure[768] = ""; /* said again last, after the charts' lines */
    double *samples = xcalloc((size_t)cfg->epochs * cfg->repeat, sizeof(double));
    /* --repeat interleaves: round r trains every backend once (A B A B, not
     * A A B B), so a change in the machine's load falls on all of them. */
    attempt *runs = xcalloc((size_t)n * cfg->repeat, sizeof *runs);
    int done_runs[MAX_RUN_CONFIGS] = {0}, stopped[MAX_RUN_CONFIGS] = {0};
    for (int k = 0; k < n * cfg->repeat; k++)
        runs[k].epoch_seconds = xcalloc((size_t)cfg->epochs, sizeof(double));
    for (int r = 0; r < cfg->repeat && !stop_signal && rc == 0; r++)
        for (int i = 0; i < n && !stop_signal && rc == 0; i++) {
            if (!configs[i].runnable || stopped[i])
                continue;
            attempt *a = &runs[i * cfg->repeat + r];
            use_configuration(&s, &configs[i]);
            if (train_backend(&s, configs[i].b, r + 1, a) != 0) {
                rc = 1;
                break;
            }
            done_runs[i] = r + 1;
            stopped[i] = a->status != STATUS_OK;
        }

    settle_cpu_peaks(&s, configs, n, runs, done_runs, samples);
    for (int i = 0; i < n; i++) {
        const backend *b = configs[i].b;
        use_configuration(&s, &configs[i]);
        summary_row *row = &rows[n_rows];
        if (!configs[i].runnable) {
            summary_row_init(row);
            attempt none = {.threads = 0, .replicas = 1};
            row->key = key_for(&s, b, &none);
            row->status = STATUS_SKIPPED;
            row->message = xstrdup(configs[i].reason);
            n_rows++;
            if (s.root && results_summary(&s.res, row) != 0)
                rc = 1;
            continue;
        }
        const int done = done_runs[i];
        if (done == 0)
            continue; /* not reached, or a results file could not be written: no row */
        const attempt *backend_runs = &runs[i * cfg->repeat];
        fill_summary(&s, b, backend_runs, done, row, samples);
        row->details = xstrdup(row->details);
        row->message = xstrdup(row->message);
        n_rows++;
        if (row->status == STATUS_OK && row->key.replicas == 1 && row->key.ranks == 1 &&
            s.n_baselines < MAX_RUN_CONFIGS)
            s.baselines[s.n_baselines++] = (baseline){
                .name = b->name,
                .prec = s.engine.precision,
                .batch_size = s.engine.batch_size,
                .images_per_second = row->images_per_second,
            };
        row->scaling_efficiency = scaling_efficiency(&s, b, row);
        if (!strcmp(b->name, "naive") && row->status == STATUS_OK && row->key.replicas == 1 &&
            row->key.ranks == 1)
            row->speedup_vs_naive = 1;
        if (row->status == STATUS_FAILED)
            failed = 1;
        trained++;
        finished += row->status == STATUS_OK;
        if (!s.root)
            continue; /* rank 0 reports */
        char label[128];
        config_label(&row->key, label, sizeof label);
        if (row->status == STATUS_OK &&
            write_confusion(&s.res, label, &backend_runs[done - 1].final_eval) != 0) {
            fprintf(stderr, "bench: cannot write %s/confusion-%s.csv: %s\n", s.res.dir, label,
                    strerror(errno));
            rc = 1;
        }
        if (results_summary(&s.res, row) != 0)
            rc = 1;
        if (row->status != STATUS_OK)
            fprintf(stderr, "%-10s %s: %s\n", label, status_name(row->status), row->message);
        if (row->status == STATUS_FAILED && !first_failure[0])
            snprintf(first_failure, sizeof first_failure, "%s failed: %s", label, row->message);
    }

    if (s.step_losses && fclose(s.step_losses) != 0) {
        fprintf(stderr, "bench: cannot finish writing --step-losses %s\n", cfg->step_losses);
        rc = 1;
    }
    if (s.root && !cfg->no_peak) {
        /* the peaks the rows were held to, beside the rest of the system */
        cpu_peak_json(s.res.sys.cpu_peak, sizeof s.res.sys.cpu_peak);
        if (results_write_system(&s.res, cfg, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            rc = 1;
        }
    }
    if (s.root) {
        print_summary(stdout, cfg->format, rows, n_rows, &s.res);
        if (results_close(&s.res) != 0)
            rc = 1;
        fprintf(stderr, "results in %s\n", s.res.dir);
        if (!stop_signal && plot_after_run(s.res.dir) != 0)
            rc = 1; /* a chart could not be written */
    }
    for (int i = 0; i < n_rows; i++) {
        free((char *)rows[i].details);
        free((char *)rows[i].message);
    }
    if (s.save_failed)
        rc = 1;
    for (int k = 0; k < n * cfg->repeat; k++)
        free(runs[k].epoch_seconds);
    free(runs);
    free(samples);
    free(rows);
    free(configs);
    free_inputs(&s);
    if (stop_signal)
        return 130;
    if (trained > 0 && finished == 0 && !failed && s.root)
        fprintf(stderr, "bench: no backend finished: every one diverged\n");
    if (first_failure[0] && s.root)
        fprintf(stderr, "bench: %s\n", first_failure);
    return rc ? rc : failed || (trained > 0 && finished == 0) ? 1 : 0;
}
