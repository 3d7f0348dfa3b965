/* Training one configuration once: its engine made and given the run's
 * parameters and data, its epochs in chunks of steps (each epoch's row
 * written as it ends), divergence and signals noticed, its parameters
 * saved. A part of the run (run_impl.h). */
#include "harness/run/run_impl.h"

#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "harness/formats/paramfile.h"
#include "harness/run/agree.h"
#include "harness/run/init.h"
#include "harness/run/label.h"
#include "harness/run/peak.h"
#include "harness/run/progress.h"
#include "harness/run/report.h"
#include "parallel/world.h"

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
    run_wait_begin();
    const int failed = b->ops->evaluate(e, s->test.count, ev) != 0;
    run_wait_end();
    if (failed) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "evaluate: %s", b->ops->error(e));
        return -1;
    }
    return 0;
}

/* --step-losses: one row per training step, as the steps complete. */
static void write_step_losses(run_state *s, const configuration *c, const attempt *a, int epoch,
                              int first_step, int steps, int batch, const float *losses)
{
    if (!s->step_losses)
        return;
    const row_key k = run_row_key(s, c, a);
    for (int i = 0; i < steps; i++)
        fprintf(s->step_losses, "%s,%d,%d,%d,%d,%d,%d,%.9g,%s,%s,%d,%d,%d,%s\n", k.backend,
                a->replicas, world_size(), s->repeat, epoch + 1, first_step + i + 1, batch,
                losses[i], k.workload, k.precision, k.threads, k.devices, k.batch_size,
                k.optimizer);
    fflush(s->step_losses);
}

/* Trains one epoch in chunks of steps sized to ~0.25 s, so progress stays
 * live and a signal is noticed quickly. Returns the images trained. */
static long train_epoch(run_state *s, const configuration *c, engine *e, int epoch, attempt *a,
                        progress *prog, double *seconds, double *loss_sum)
{
    const run_config *cfg = s->cfg;
    const backend *b = c->b;
    int n = s->train.count, batch = c->batch_size;
    int full_steps = n / batch, rest = n % batch;
    epoch_order(cfg->seed, epoch, n, cfg->shuffle, s->order);

    double start = now_seconds();
    int done_steps = 0, chunk = 1;
    *loss_sum = 0;
    /* under mpirun the ranks agree on each chunk (rank 0's), so that they
     * run the same steps and stop after the same one */
    while (done_steps < full_steps && !run_stopping(&chunk)) {
        int k = chunk < full_steps - done_steps ? chunk : full_steps - done_steps;
        double t0 = now_seconds();
        run_wait_begin();
        const int failed = b->ops->train_steps(e, s->order + (size_t)done_steps * batch, batch,
                                               k, s->losses + done_steps) != 0;
        run_wait_end();
        if (failed) {
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
        write_step_losses(s, c, a, epoch, done_steps, k, batch, s->losses + done_steps);
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
    if (rest && done_steps == full_steps && a->status == STATUS_OK && !run_stopping(NULL)) {
        float last;
        run_wait_begin();
        const int failed =
            b->ops->train_steps(e, s->order + (size_t)full_steps * batch, rest, 1, &last) != 0;
        run_wait_end();
        if (failed) {
            a->status = STATUS_FAILED;
            snprintf(a->message, sizeof a->message, "train: %s", b->ops->error(e));
        } else {
            /* weight the partial batch by its size in the epoch mean */
            *loss_sum += last * ((double)rest / batch);
            write_step_losses(s, c, a, epoch, full_steps, 1, rest, &last);
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

int run_is_long(const run_state *s)
{
    return (double)s->train.count * s->cfg->epochs * s->cfg->repeat >= 60000;
}

static engine *start_engine(run_state *s, const configuration *c, attempt *a,
                            size_t heap_before)
{
    const backend *b = c->b;
    char err[512] = "";
    /* an engine that could not be made ran on nothing: 0 threads and the
     * replicas asked for, as a skipped row */
    a->replicas = c->replicas;
    engine_config config = s->cfg->engine;
    config.precision = c->prec;
    config.batch_size = c->batch_size;
    engine *e = backend_create(b, &s->cfg->work, &config, err, sizeof err);
    if (!e) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "create: %s", err[0] ? err : "unknown error");
        return NULL;
    }
    /* where it runs is known from here, so a row that fails below says it */
    a->threads = 1;
    backend_placement(b, e, &a->threads, &a->devices, &a->replicas);
    if (b->ops->set_params(e, s->init_params) != 0 ||
        b->ops->bind_dataset(e, &s->train, &s->test) != 0) {
        a->status = STATUS_FAILED;
        snprintf(a->message, sizeof a->message, "setup: %s", b->ops->error(e));
        b->ops->destroy(e);
        return NULL;
    }
    /* a long run probes the CPU's peak before its rows too (kept per
     * thread count; settle_cpu_peaks probes again after them) */
    if (!s->cfg->no_peak && s->root && a->devices == 0 && run_is_long(s))
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

int run_train_configuration(run_state *s, const configuration *c, int r, attempt *a)
{
    const run_config *cfg = s->cfg;
    const backend *b = c->b;
    /* nothing of the previous backend's attempt may reach this one's rows */
    double *epoch_seconds = a->epoch_seconds;
    memset(a, 0, sizeof *a);
    a->epoch_seconds = epoch_seconds;
    a->status = STATUS_OK;
    a->time_to_target = -1;
    s->repeat = r;
    const size_t heap_before = heap_in_use();
    engine *e = start_engine(s, c, a, heap_before);
    if (!e)
        return 0;
    double flops_per_image = cfg->work.train_flops_per_image;
    double wall_start = now_seconds();
    row_key key = run_row_key(s, c, a);
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
        long images = train_epoch(s, c, e, ep, a, &prog, &seconds, &loss_sum);
        double steps = (double)images / c->batch_size;
        double train_loss = steps > 0 ? loss_sum / steps : NAN;
        eval_counts ev = {0};
        double test_loss = NAN, accuracy = NAN;
        if (steps > 0)
            check_divergence(&cfg->work, a, "train loss", train_loss, ep + 1);
        if (a->status == STATUS_OK && run_stopping(NULL)) {
            a->status = STATUS_INTERRUPTED;
            snprintf(a->message, sizeof a->message, "stopped by signal %d during epoch %d",
                     (int)run_stop_signal, ep + 1);
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
            .key = run_row_key(s, c, a),
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
        int unwritten = s->root && results_epoch(&s->res, &row) != 0;
        /* the other ranks stop where rank 0 does, not in its next collective */
        if (agree_on_root(unwritten) != 0) {
            io_error = 1;
            a->status = STATUS_FAILED;
            snprintf(a->message, sizeof a->message,
                     "the row of epoch %d could not be written to epochs.csv%s (%d of %d "
                     "epochs finished)", ep + 1, s->root ? "" : " by rank 0", a->epochs_done,
                     cfg->epochs);
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
    a->worker_memory_itemised = backend_memory_use(b, e, &a->worker_memory);
    note_engine_heap(a, heap_before);
    if (a->status == STATUS_OK && !cfg->no_peak)
        a->device_peak_gflops = backend_peak_gflops(b, e);
    snprintf(a->arithmetic, sizeof a->arithmetic, "%s", backend_arithmetic(b, e, c->prec));
    if (cfg->profile_layers && r == cfg->repeat && a->status == STATUS_OK && s->root) {
        /* the first batch of epoch 1, 10 steps, like `caffe time` */
        epoch_order(cfg->seed, 0, s->train.count, cfg->shuffle, s->order);
        report_layer_profile(&s->res, config_name, b, e, &cfg->work, s->order,
                             c->batch_size, 10, stderr);
    }
    if (cfg->save_params[0] && r == cfg->repeat && a->status == STATUS_OK &&
        save_params(s, b, e, config_name, several_configurations(cfg)) != 0)
        s->save_failed = 1;
    b->ops->destroy(e);
    return io_error ? -1 : 0;
}
