#include "harness/report.h"

#include <math.h>
#include <string.h>

#include "harness/csv.h"
#include "harness/sysinfo.h"

void config_label_of(const char *backend, int replicas, int ranks, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", backend);
    if (replicas > 1 && used < len)
        used += (size_t)snprintf(buf + used, len - used, "-x%d", replicas);
    if (ranks > 1 && used < len)
        snprintf(buf + used, len - used, "-%dranks", ranks);
}

void config_label(const row_key *k, char *buf, size_t len)
{
    config_label_of(k->backend, k->replicas, k->ranks, buf, len);
}

eval_stats eval_stats_of(const eval_counts *ev)
{
    eval_stats s = {0};
    int k = ev->classes;
    if (ev->count <= 0 || k <= 0)
        return s;
    long correct = 0;
    int present = 0;
    for (int c = 0; c < k; c++) {
        long tp = ev->confusion[c * k + c], actual = 0, predicted = 0;
        for (int j = 0; j < k; j++) {
            actual += ev->confusion[c * k + j];
            predicted += ev->confusion[j * k + c];
        }
        correct += tp;
        if (actual == 0)
            continue;
        present++;
        double p = predicted ? (double)tp / predicted : 0.0;
        double r = (double)tp / actual;
        s.macro_precision += p;
        s.macro_recall += r;
        s.macro_f1 += p + r > 0 ? 2 * p * r / (p + r) : 0.0;
    }
    s.accuracy = (double)correct / ev->count;
    if (present) {
        s.macro_precision /= present;
        s.macro_recall /= present;
        s.macro_f1 /= present;
    }
    return s;
}

int write_confusion(results *r, const char *label, const eval_counts *ev)
{
    char name[160];
    snprintf(name, sizeof name, "confusion-%s.csv", label);
    FILE *f = results_file(r, name);
    if (!f)
        return -1;
    int k = ev->classes;
    fprintf(f, "true\\predicted");
    for (int j = 0; j < k; j++)
        fprintf(f, ",%d", j);
    fputc('\n', f);
    for (int i = 0; i < k; i++) {
        fprintf(f, "%d", i);
        for (int j = 0; j < k; j++)
            fprintf(f, ",%ld", ev->confusion[i * k + j]);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int is_ok(const summary_row *r) { return r->status && strcmp(r->status, "ok") == 0; }

static void fmt_num(char *buf, size_t len, double v, const char *fmt)
{
    if (v > 0 && isfinite(v))
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
}

static void fmt_seconds(char *buf, size_t len, const summary_row *r)
{
    if (!(r->epoch_seconds_median > 0))
        snprintf(buf, len, "-");
    else if (r->timed_samples > 1)
        snprintf(buf, len, "%.3f ± %.3f", r->epoch_seconds_median, r->epoch_seconds_stddev);
    else
        snprintf(buf, len, "%.3f", r->epoch_seconds_median);
}

static void fmt_target(char *buf, size_t len, const summary_row *r)
{
    if (r->target_accuracy <= 0 || !is_ok(r))
        snprintf(buf, len, "-");
    else if (r->time_to_target_seconds < 0)
        snprintf(buf, len, "not reached");
    else
        snprintf(buf, len, "%.2f", r->time_to_target_seconds);
}

static void print_md(FILE *f, const summary_row *rows, int n)
{
    fprintf(f, "\n| backend | precision | threads | devices | s/epoch (median) | images/s |"
               " GFLOP/s | %% of peak | speedup vs naive | test accuracy | time to target (s) |"
               " peak memory (MiB) | status |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        char label[128], sec[48], ips[32], gf[32], pct[32], sp[32], acc[32], ttt[32], mem[32];
        config_label(&r->key, label, sizeof label);
        fmt_seconds(sec, sizeof sec, r);
        fmt_num(ips, sizeof ips, r->images_per_second, "%.0f");
        fmt_num(gf, sizeof gf, r->gflops_per_second, "%.2f");
        fmt_num(pct, sizeof pct, r->percent_of_peak, "%.1f");
        fmt_num(sp, sizeof sp, r->speedup_vs_naive, "%.2fx");
        fmt_num(acc, sizeof acc, r->final_test_accuracy, "%.4f");
        fmt_target(ttt, sizeof ttt, r);
        fmt_num(mem, sizeof mem, r->peak_memory_bytes / 1048576.0, "%.1f");
        fprintf(f, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                label, r->key.precision, r->key.threads, r->key.devices, sec, ips, gf,
                pct, sp, acc, ttt, mem, r->status);
    }
}

static void print_csv(FILE *f, const summary_row *rows, int n)
{
    fprintf(f, "backend,precision,threads,devices,replicas,ranks,epoch_seconds_median,"
               "epoch_seconds_mean,"
               "epoch_seconds_stddev,timed_samples,warmup_epochs,images_per_second,"
               "gflops_per_second,percent_of_peak,peak_gflops,speedup_vs_naive,"
               "final_test_accuracy,macro_precision,macro_recall,macro_f1,target_accuracy,"
               "time_to_target_seconds,peak_memory_bytes,status\n");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        csv_field(f, r->key.backend);
        fputc(',', f);
        csv_field(f, r->key.precision);
        fprintf(f, ",%d,%d,%d,%d,%.6f,%.6f,%.6f,%d,%d,%.1f,%.3f,%.2f,%.1f,%.3f,%.6f,%.6f,%.6f,"
                   "%.6f,%.4f,%.3f,%.0f,",
                r->key.threads, r->key.devices, r->key.replicas, r->key.ranks,
                r->epoch_seconds_median, r->epoch_seconds_mean,
                r->epoch_seconds_stddev, r->timed_samples, r->warmup_epochs,
                r->images_per_second, r->gflops_per_second, r->percent_of_peak, r->peak_gflops,
                r->speedup_vs_naive, r->final_test_accuracy, r->macro_precision,
                r->macro_recall, r->macro_f1, r->target_accuracy, r->time_to_target_seconds,
                r->peak_memory_bytes);
        csv_field(f, r->status);
        fputc('\n', f);
    }
}

/* JSON has no NaN: a number that is not finite is written as null. */
static void json_number(FILE *f, const char *key, const char *fmt, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fprintf(f, "null");
}

static void print_json(FILE *f, const summary_row *rows, int n)
{
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        fprintf(f, "  {\"backend\": ");
        json_string(f, r->key.backend);
        fprintf(f, ", \"precision\": ");
        json_string(f, r->key.precision);
        fprintf(f, ", \"threads\": %d, \"devices\": %d, \"replicas\": %d, \"ranks\": %d",
                r->key.threads, r->key.devices, r->key.replicas, r->key.ranks);
        json_number(f, "epoch_seconds_median", "%.6f", r->epoch_seconds_median);
        json_number(f, "epoch_seconds_mean", "%.6f", r->epoch_seconds_mean);
        json_number(f, "epoch_seconds_stddev", "%.6f", r->epoch_seconds_stddev);
        fprintf(f, ", \"timed_samples\": %d, \"warmup_epochs\": %d", r->timed_samples,
                r->warmup_epochs);
        json_number(f, "images_per_second", "%.1f", r->images_per_second);
        json_number(f, "gflops_per_second", "%.3f", r->gflops_per_second);
        json_number(f, "percent_of_peak", "%.2f", r->percent_of_peak);
        json_number(f, "peak_gflops", "%.1f", r->peak_gflops);
        json_number(f, "speedup_vs_naive", "%.3f", r->speedup_vs_naive);
        json_number(f, "final_test_accuracy", "%.6f", r->final_test_accuracy);
        json_number(f, "macro_precision", "%.6f", r->macro_precision);
        json_number(f, "macro_recall", "%.6f", r->macro_recall);
        json_number(f, "macro_f1", "%.6f", r->macro_f1);
        json_number(f, "target_accuracy", "%.4f", r->target_accuracy);
        json_number(f, "time_to_target_seconds", "%.3f", r->time_to_target_seconds);
        json_number(f, "peak_memory_bytes", "%.0f", r->peak_memory_bytes);
        fprintf(f, ", \"status\": ");
        json_string(f, r->status ? r->status : "");
        fprintf(f, ", \"message\": ");
        json_string(f, r->message ? r->message : "");
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
}

/* How to read the table: the samples behind s/epoch, what the peak was,
 * what time to target means, and where it ran. */
static void print_notes(FILE *f, const summary_row *rows, int n, const results *res)
{
    const summary_row *first = NULL;
    int same_samples = 1;
    for (int i = 0; i < n; i++) {
        if (!is_ok(&rows[i]))
            continue;
        if (!first)
            first = &rows[i];
        else if (rows[i].timed_samples != first->timed_samples ||
                 rows[i].warmup_epochs != first->warmup_epochs)
            same_samples = 0;
    }
    fprintf(f, "\n");
    if (first) {
        int runs = first->repeats;
        fprintf(f, "s/epoch: median%s of %d epoch time%s per backend (",
                first->timed_samples > 1 ? " ± stddev" : "",
                first->timed_samples, first->timed_samples == 1 ? "" : "s");
        if (first->warmup_epochs > 0)
            fprintf(f, "epochs %d-%d of %s%d run%s; epoch 1 of each run is warm-up, kept in "
                       "epochs.csv but not counted",
                    first->warmup_epochs + 1, first->epochs, runs > 1 ? "each of " : "", runs,
                    runs == 1 ? "" : "s");
        else
            fprintf(f, "every epoch of %d run%s; no warm-up epoch is dropped below 3 epochs",
                    runs, runs == 1 ? "" : "s");
        fprintf(f, "%s). An epoch time covers the training steps only: not engine creation, "
                   "parameter or dataset upload, evaluation or graph capture.\n",
                same_samples ? "" : "; backends differ, see timed_samples in summary.csv");
        fprintf(f, "GFLOP/s: training FLOPs per image x images/s. %% of peak: that over the "
                   "peak measured in this run:");
        const char *shown[16];
        int n_shown = 0;
        for (int i = 0; i < n; i++) {
            const summary_row *r = &rows[i];
            if (!is_ok(r) || !r->peak_source)
                continue;
            int dup = 0;
            for (int j = 0; j < n_shown && !dup; j++)
                dup = strcmp(shown[j], r->peak_source) == 0;
            if (dup || n_shown == 16)
                continue;
            shown[n_shown++] = r->peak_source;
            if (r->peak_gflops > 0)
                fprintf(f, "%s %.1f GFLOP/s (%s)", n_shown > 1 ? "," : "", r->peak_gflops,
                        r->peak_source);
            else {
                char label[128];
                config_label(&r->key, label, sizeof label);
                fprintf(f, "%s not measured for %s", n_shown > 1 ? "," : "", label);
            }
        }
        fprintf(f, ".\n");
        if (first->target_accuracy > 0)
            fprintf(f, "time to target: wall time from the first training step to the end of "
                       "the first evaluation with test accuracy >= %.4g, evaluations included "
                       "(MLPerf's definition); median over the runs that reached it.\n",
                    first->target_accuracy);
    }
    const sysinfo *s = &res->sys;
    fprintf(f, "machine: %s, %d cores; GPU: %s%s; %s; commit %s; %s\n", s->cpu_model, s->cores,
            s->gpu_model, s->gpu_count > 1 ? " (and more)" : "", s->compiler, s->git_commit,
            s->date);
}

/* One compact line per backend, DL4J Evaluation.stats() style. */
static void print_eval(FILE *f, const summary_row *rows, int n)
{
    int any = 0;
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        if (!is_ok(r))
            continue;
        if (!any++)
            fprintf(f, "\nevaluation on the test set (macro averages over the classes; "
                       "confusion matrices in confusion-<name>.csv):\n");
        char label[128];
        config_label(&r->key, label, sizeof label);
        fprintf(f, "  %-10s accuracy %.4f  precision %.4f  recall %.4f  F1 %.4f\n", label,
                r->final_test_accuracy, r->macro_precision, r->macro_recall,
                r->macro_f1);
    }
}

void print_summary(FILE *f, output_format fmt, const summary_row *rows, int n,
                   const results *r)
{
    switch (fmt) {
    case FORMAT_MD: print_md(f, rows, n); break;
    case FORMAT_CSV: print_csv(f, rows, n); break;
    case FORMAT_JSON: print_json(f, rows, n); break;
    }
    FILE *notes = fmt == FORMAT_MD ? f : stderr;
    print_notes(notes, rows, n, r);
    print_eval(notes, rows, n);
    fflush(f);
}

static int write_profile(results *r, const char *label, const workload *w, const layer_times *t)
{
    char name[160];
    snprintf(name, sizeof name, "profile-%s.csv", label);
    FILE *f = results_file(r, name);
    if (!f)
        return -1;
    fprintf(f, "layer,forward_ms,backward_ms\n");
    for (int i = 0; i < t->n_layers && i < w->n_layers; i++)
        fprintf(f, "%s,%.6f,%.6f\n", w->layers[i].name, t->forward_ms[i], t->backward_ms[i]);
    fprintf(f, "loss,%.6f,0\n", t->loss_ms);
    fprintf(f, "update,0,%.6f\n", t->update_ms);
    return fclose(f) == 0 ? 0 : -1;
}

static void print_profile(FILE *out, const char *label, const workload *w, const layer_times *t,
                          int reps, int batch)
{
    double fwd = t->loss_ms, bwd = t->update_ms;
    for (int i = 0; i < t->n_layers; i++) {
        fwd += t->forward_ms[i];
        bwd += t->backward_ms[i];
    }
    double total = fwd + bwd;
    fprintf(out, "%s: time per layer, mean of %d steps on one batch of %d images\n",
            label, reps, batch);
    fprintf(out, "  %-10s %12s %12s %7s\n", "layer", "forward ms", "backward ms", "share");
    for (int i = 0; i < t->n_layers && i < w->n_layers; i++)
        fprintf(out, "  %-10s %12.4f %12.4f %6.1f%%\n", w->layers[i].name, t->forward_ms[i],
                t->backward_ms[i],
                total > 0 ? 100 * (t->forward_ms[i] + t->backward_ms[i]) / total : 0.0);
    fprintf(out, "  %-10s %12.4f %12s %6.1f%%  softmax cross-entropy and its gradient\n", "loss",
            t->loss_ms, "-", total > 0 ? 100 * t->loss_ms / total : 0.0);
    fprintf(out, "  %-10s %12s %12.4f %6.1f%%  optimiser step\n", "update", "-", t->update_ms,
            total > 0 ? 100 * t->update_ms / total : 0.0);
    fprintf(out, "  %-10s %12.4f %12.4f   = %.4f ms per step, %.0f images/s\n", "total", fwd,
            bwd, total, total > 0 ? batch / (total * 1e-3) : 0.0);
}

int report_layer_profile(results *r, const char *label, const backend *b, engine *e,
                         const workload *w, const int32_t *indices, int batch, int reps,
                         FILE *out)
{
    if (!b->profile_layers) {
        fprintf(out, "%s: no per-layer profile (this backend does not offer one)\n", label);
        return 0;
    }
    layer_times t;
    memset(&t, 0, sizeof t);
    if (b->profile_layers(e, indices, batch, reps, &t) != 0) {
        fprintf(stderr, "bench: %s: per-layer profile failed: %s\n", label, b->error(e));
        return -1;
    }
    print_profile(out, label, w, &t, reps, batch);
    if (write_profile(r, label, w, &t) != 0) {
        fprintf(stderr, "bench: cannot write %s/profile-%s.csv\n", r->dir, label);
        return -1;
    }
    return 0;
}
