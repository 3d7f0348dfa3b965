#include "harness/run/report.h"

#include <math.h>
#include <string.h>

#include "harness/run/columns.h"
#include "harness/run/sysinfo.h"

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

static int is_ok(const summary_row *r) { return r->status == STATUS_OK; }

static void print_md(FILE *f, const summary_row *rows, int n)
{
    fputc('\n', f);
    columns_md_header(f, summary_columns);
    for (int i = 0; i < n; i++)
        columns_md_row(f, summary_columns, &rows[i]);
}

/* The same columns and lines as summary.csv. */
static void print_csv(FILE *f, const summary_row *rows, int n, const sysinfo *sys)
{
    columns_csv_header(f, summary_columns);
    for (int i = 0; i < n; i++)
        columns_csv_row(f, summary_columns, &rows[i], sys);
}

static void print_json(FILE *f, const summary_row *rows, int n, const sysinfo *sys)
{
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  ");
        columns_json_object(f, summary_columns, &rows[i], sys);
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
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
            else if (isnan(r->peak_gflops))
                fprintf(f, "%s %s", n_shown > 1 ? "," : "", r->peak_source); /* "peak uncertain: ..." */
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
    case FORMAT_CSV: print_csv(f, rows, n, &r->sys); break;
    case FORMAT_JSON: print_json(f, rows, n, &r->sys); break;
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
    if (!b->ops->profile_layers) {
        fprintf(out, "%s: no per-layer profile (this backend does not offer one)\n", label);
        return 0;
    }
    layer_times t;
    memset(&t, 0, sizeof t);
    if (b->ops->profile_layers(e, indices, batch, reps, &t) != 0) {
        fprintf(stderr, "bench: %s: per-layer profile failed: %s\n", label, b->ops->error(e));
        return -1;
    }
    print_profile(out, label, w, &t, reps, batch);
    if (write_profile(r, label, w, &t) != 0) {
        fprintf(stderr, "bench: cannot write %s/profile-%s.csv\n", r->dir, label);
        return -1;
    }
    return 0;
}
