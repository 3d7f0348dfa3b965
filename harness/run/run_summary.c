/* The summary of a run: each configuration's row from its attempts (the
 * statistics of its timed epochs, its speed against naive and against one
 * replica, its peak, memory and how it is parallel), then the report at
 * the end of the run. A part of the run (run_impl.h). */
#include "harness/run/run_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "harness/run/label.h"
#include "harness/run/peak.h"
#include "harness/run/report.h"
#include "harness/common/stats.h"
#include "parallel/data_parallel.h"
#include "parallel/model_parallel.h"

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

/* The epochs of run a that time its configuration, appended to out. A
 * failed run's warm-up epoch is no measure of its speed, so a run that
 * failed before passing it times nothing (stats.h's fallback to every
 * epoch stands for a stopped run, whose figures are still its speed). */
static int run_samples(const run_config *cfg, const attempt *a, double *out)
{
    int done = a->epochs_done;
    if (a->status == STATUS_FAILED && done <= warmup_epochs(cfg->epochs))
        done = 0;
    return timed_samples(a->epoch_seconds, done, cfg->epochs, out);
}

/* The arithmetic whose peak bounds a CPU row, as its engine said (peak.h):
 * a bf16 row on vdpbf16ps is held to the bf16 dot product's, not to
 * fp32's. */
static peak_arith row_arith(const attempt *a) { return peak_arith_held_to(a->arithmetic); }

/* Before any row is written: every CPU row's rate is held to the peak of
 * its thread count (a faster row has the probe run again, or makes the
 * peak uncertain), so the rows of a run share one figure per thread count
 * and none is over 100%. A long run's peaks are first probed once more. */
static void settle_cpu_peaks(run_state *s, double *samples)
{
    const run_config *cfg = s->cfg;
    const configuration *configs = s->configs;
    const attempt *runs = s->runs;
    const int *done_runs = s->done_runs;
    const int n = s->n_configs;
    if (cfg->no_peak || !s->root || s->ending || run_stop_signal)
        return;
    int again[MAX_RUN_CONFIGS], n_again = 0; /* thread count x ARITH_COUNT + arithmetic */
    for (int i = 0; i < n; i++) {
        if (!configs[i].runnable || done_runs[i] == 0)
            continue;
        const attempt *last = &runs[i * cfg->repeat + done_runs[i] - 1];
        if (last->status != STATUS_OK || last->devices != 0 || last->device_peak_gflops > 0)
            continue;
        const peak_arith arith = row_arith(last);
        int seen = 0;
        for (int k = 0; k < n_again && !seen; k++)
            seen = again[k] == last->threads * ARITH_COUNT + (int)arith;
        if (!seen && run_is_long(s)) {
            again[n_again++] = last->threads * ARITH_COUNT + (int)arith;
            cpu_peak_measure_again_of(arith, last->threads);
        }
        int m = 0;
        for (int r = 0; r < done_runs[i]; r++)
            m += run_samples(cfg, &runs[i * cfg->repeat + r], samples + m);
        double median = stats_of(samples, m).median;
        if (median > 0)
            cpu_peak_check_of(arith, last->threads,
                           s->train.count / median * cfg->work.train_flops_per_image * 1e-9,
                           peak_rival(configs[i].b));
    }
}

static void fill_summary(run_state *s, const configuration *c, const attempt *runs, int n_runs,
                         summary_row *row, double *samples)
{
    const run_config *cfg = s->cfg;
    const backend *b = c->b;
    const attempt *last = &runs[n_runs - 1];
    /* the warm-up rule and what epoch times exclude: stats.h */
    int n = 0, all_epochs = 0;
    for (int r = 0; r < n_runs; r++) {
        n += run_samples(cfg, &runs[r], samples + n);
        all_epochs += runs[r].epochs_done;
    }
    sample_stats st = stats_of(samples, n);
    summary_row_init(row); /* what is not set below was not measured */
    row->key = run_row_key(s, c, last);
    row->epochs = cfg->epochs;
    row->repeats = n_runs;
    row->images_per_epoch = s->train.count;
    if (st.n > 0) {
        row->epoch_seconds_median = st.median;
        row->epoch_seconds_mean = st.mean;
        row->epoch_seconds_stddev = st.stddev;
        row->epoch_seconds_min = st.min;
        row->epoch_seconds_max = st.max;
    }
    row->timed_samples = st.n;
    row->warmup_epochs = n < all_epochs ? warmup_epochs(cfg->epochs) : 0;
    if (st.median > 0) {
        row->images_per_second = s->train.count / st.median;
        row->gflops_per_second = row->images_per_second * cfg->work.train_flops_per_image * 1e-9;
    }
    const backend *reference = plan_reference();
    double naive = reference ? baseline_speed(s, reference->name, c->prec, c->batch_size) : 0;
    if (naive > 0 && row->images_per_second > 0 && last->status == STATUS_OK)
        row->speedup_vs_naive = row->images_per_second / naive;
    if (last->epochs_done > 0)
        row->final_train_loss = last->final_train_loss;
    const eval_counts *ev = &last->final_eval;
    if (ev->count > 0) {
        eval_stats es = eval_stats_of(ev);
        row->final_test_accuracy = es.accuracy;
        row->macro_precision = es.macro_precision;
        row->macro_recall = es.macro_recall;
        row->macro_f1 = es.macro_f1;
    }
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
        else if (s->ending) /* no time left for a probe */
            pk = (peak_measure){.source = "not measured (the run was ended)"};
        else if (run_stop_signal) /* stopped: no probe holds the stop up */
            pk = (peak_measure){.source = "not measured (the run was stopped)"};
        else if (s->interim) /* the row as its configuration ended: no probe between them */
            pk = (peak_measure){.source = "not measured (the run did not reach its end)"};
        else if (pk.gflops <= 0 && row->key.devices == 0) {
            const peak_arith arith = row_arith(last);
            pk = cpu_peak_check_of(arith, row->key.threads, row->gflops_per_second, peak_rival(b));
            row->peak_arithmetic = peak_arith_key(arith);
        }
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
    if (last->worker_memory_itemised) {
        row->worker_params_bytes = (double)m->params;
        row->worker_grads_bytes = (double)m->grads;
        row->worker_opt_state_bytes = (double)m->opt_state;
        row->worker_activation_bytes = (double)m->activations;
        row->worker_workspace_bytes = (double)m->workspace;
    }
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

/* Images/s over replicas x the images/s of one replica of the same engine
 * at the same precision and batch size earlier in this run, or 0. */
static double scaling_efficiency(const run_state *s, const configuration *c,
                                 const summary_row *row)
{
    const backend *b = c->b;
    const char *base = dp_base_name(b);
    const int replicas = row->key.replicas;
    if (replicas < 1 || !(row->images_per_second > 0) || row->status != STATUS_OK)
        return 0;
    if (replicas == 1 && row->key.ranks == 1)
        return 1; /* its own baseline */
    double one = baseline_speed(s, base ? base : b->name, c->prec, c->batch_size);
    return one > 0 ? row->images_per_second / (replicas * one) : 0;
}

/* The row of every configuration so far (skipped, or trained as
 * s->done_runs says) into rows, with the index of its configuration in
 * of_config; their details and messages are copies of their own (the
 * attempts that held them are reused by the next backend). Returns the
 * count. */
static int summary_rows(run_state *s, summary_row *rows, int *of_config, double *samples)
{
    const run_config *cfg = s->cfg;
    int n_rows = 0;
    s->n_baselines = 0;
    for (int i = 0; i < s->n_configs; i++) {
        const configuration *c = &s->configs[i];
        const backend *b = c->b;
        summary_row *row = &rows[n_rows];
        if (!c->runnable) {
            summary_row_init(row);
            attempt none = {.threads = 0, .replicas = c->replicas};
            row->key = run_row_key(s, c, &none);
            row->status = STATUS_SKIPPED;
            row->message = xstrdup(s->configs[i].reason);
            of_config[n_rows++] = i;
            continue;
        }
        const int done = s->done_runs[i];
        if (done == 0)
            continue; /* not reached: no row */
        const attempt *backend_runs = &s->runs[i * cfg->repeat];
        fill_summary(s, c, backend_runs, done, row, samples);
        row->details = xstrdup(row->details);
        row->message = xstrdup(row->message);
        of_config[n_rows++] = i;
        if (row->status == STATUS_OK && row->key.replicas == 1 && row->key.ranks == 1 &&
            s->n_baselines < MAX_RUN_CONFIGS)
            s->baselines[s->n_baselines++] = (baseline){
                .name = b->name,
                .prec = c->prec,
                .batch_size = c->batch_size,
                .images_per_second = row->images_per_second,
            };
        row->scaling_efficiency = scaling_efficiency(s, c, row);
        if (!strcmp(b->name, "naive") && row->status == STATUS_OK && row->key.replicas == 1 &&
            row->key.ranks == 1)
            row->speedup_vs_naive = 1;
    }
    return n_rows;
}

static void free_summary_rows(summary_row *rows, int n_rows)
{
    for (int i = 0; i < n_rows; i++) {
        free((char *)rows[i].details);
        free((char *)rows[i].message);
    }
}

int run_save_summary(run_state *s)
{
    if (!s->root)
        return 0;
    summary_row *rows = xcalloc(MAX_RUN_CONFIGS, sizeof *rows);
    int *of_config = xcalloc(MAX_RUN_CONFIGS, sizeof *of_config);
    double *samples = xcalloc((size_t)s->cfg->epochs * s->cfg->repeat, sizeof(double));
    s->interim = 1; /* no peak probe between configurations */
    int n_rows = summary_rows(s, rows, of_config, samples);
    s->interim = 0;
    int rc = results_write_summary(&s->res, rows, n_rows);
    free_summary_rows(rows, n_rows);
    free(samples);
    free(of_config);
    free(rows);
    return rc;
}

int run_report(run_state *s, int rc)
{
    const run_config *cfg = s->cfg;
    char err[1024];
    summary_row *rows = xcalloc(MAX_RUN_CONFIGS, sizeof *rows);
    int *of_config = xcalloc(MAX_RUN_CONFIGS, sizeof *of_config);
    int failed = 0, trained = 0, finished = 0, interrupted = 0;
    char first_failure[768] = ""; /* said again last, after the charts' lines */
    double *samples = xcalloc((size_t)cfg->epochs * cfg->repeat, sizeof(double));
    settle_cpu_peaks(s, samples);
    const int n_rows = summary_rows(s, rows, of_config, samples);
    for (int k = 0; k < n_rows; k++) {
        const int i = of_config[k];
        const summary_row *row = &rows[k];
        if (!s->configs[i].runnable)
            continue;
        if (row->status == STATUS_FAILED)
            failed = 1;
        trained++;
        finished += row->status == STATUS_OK;
        interrupted += row->status == STATUS_INTERRUPTED;
        if (!s->root)
            continue; /* rank 0 reports */
        char label[128];
        config_label(&row->key, label, sizeof label);
        const attempt *last = &s->runs[i * cfg->repeat + s->done_runs[i] - 1];
        if (row->status == STATUS_OK && write_confusion(&s->res, label, &last->final_eval) != 0) {
            fprintf(stderr, "bench: cannot write %s/confusion-%s.csv: %s\n", s->res.dir, label,
                    strerror(errno));
            rc = 1;
        }
        if (row->status != STATUS_OK)
            fprintf(stderr, "%-10s %s: %s\n", label, status_name(row->status), row->message);
        if (row->status == STATUS_FAILED && !first_failure[0])
            snprintf(first_failure, sizeof first_failure, "%s failed: %s", label, row->message);
    }
    if (s->root && results_write_summary(&s->res, rows, n_rows) != 0)
        rc = 1;

    if (s->step_losses && fclose(s->step_losses) != 0) {
        fprintf(stderr, "bench: cannot finish writing --step-losses %s\n", cfg->step_losses);
        rc = 1;
    }
    if (s->root && !cfg->no_peak && !run_stop_signal) {
        /* the peaks the rows were held to, beside the rest of the system
         * (a stop while they are measured cuts them short: peak.h) */
        cpu_peak_record(&s->res.sys);
        if (results_write_system(&s->res, cfg, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            rc = 1;
        }
    }
    if (s->root) {
        print_summary(stdout, cfg->format, rows, n_rows, &s->res);
        if (results_close(&s->res) != 0)
            rc = 1;
        fprintf(stderr, "results in %s\n", s->res.dir);
        if (!run_stop_signal && s->draw_charts && s->draw_charts(s->res.dir) != 0)
            rc = 1; /* a chart could not be written */
    }
    free_summary_rows(rows, n_rows);
    if (s->save_failed)
        rc = 1;
    free(samples);
    free(of_config);
    free(rows);
    if (run_stop_signal) {
        /* a stop outside training (while the peaks were probed, between
         * configurations) is said here: no row says it */
        if (!interrupted && s->root)
            fprintf(stderr, "bench: stopped by signal %d outside training: every finished row "
                            "kept, the peaks not measured, no charts drawn\n",
                    (int)run_stop_signal);
        return 130;
    }
    if (trained > 0 && finished == 0 && !failed && s->root)
        fprintf(stderr, "bench: no backend finished: every one diverged\n");
    if (first_failure[0] && s->root)
        fprintf(stderr, "bench: %s\n", first_failure);
    return rc ? rc : failed || (trained > 0 && finished == 0) ? 1 : 0;
}
