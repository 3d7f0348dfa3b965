#include "harness/report.h"

#include <string.h>

#include "harness/sysinfo.h"

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

int write_confusion(results *r, const char *backend_name, const eval_counts *ev)
{
    char name[128];
    snprintf(name, sizeof name, "confusion-%s.csv", backend_name);
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

static void fmt_num(char *buf, size_t len, double v, const char *fmt)
{
    if (v > 0)
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
}

static void print_md(FILE *f, const summary_row *rows, int n)
{
    fprintf(f, "\n| backend | precision | threads | devices | s/epoch (median) | images/s |"
               " speedup vs naive | test accuracy | time to target (s) | peak memory (MiB) | status |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        char sec[32], ips[32], sp[32], acc[32], ttt[32], mem[32];
        fmt_num(sec, sizeof sec, r->epoch_seconds_median, "%.3f");
        fmt_num(ips, sizeof ips, r->images_per_second, "%.0f");
        fmt_num(sp, sizeof sp, r->speedup_vs_naive, "%.2fx");
        fmt_num(acc, sizeof acc, r->final_test_accuracy, "%.4f");
        fmt_num(ttt, sizeof ttt, r->time_to_target_seconds, "%.2f");
        fmt_num(mem, sizeof mem, r->peak_memory_bytes / 1048576.0, "%.1f");
        fprintf(f, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", r->key.backend,
                r->key.precision, r->key.threads, r->key.devices, sec, ips, sp, acc, ttt, mem,
                r->status);
    }
}

static void print_csv(FILE *f, const summary_row *rows, int n)
{
    fprintf(f, "backend,precision,threads,devices,epoch_seconds_median,images_per_second,"
               "speedup_vs_naive,final_test_accuracy,time_to_target_seconds,peak_memory_bytes,status\n");
    for (int i = 0; i < n; i++) {
        const summary_row *r = &rows[i];
        fprintf(f, "%s,%s,%d,%d,%.6f,%.1f,%.3f,%.6f,%.3f,%.0f,%s\n", r->key.backend,
                r->key.precision, r->key.threads, r->key.devices, r->epoch_seconds_median,
                r->images_per_second, r->speedup_vs_naive, r->final_test_accuracy,
                r->time_to_target_seconds, r->peak_memory_bytes, r->status);
    }
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
        fprintf(f, ", \"threads\": %d, \"devices\": %d, \"epoch_seconds_median\": %.6f, "
                   "\"images_per_second\": %.1f, \"speedup_vs_naive\": %.3f, "
                   "\"final_test_accuracy\": %.6f, \"time_to_target_seconds\": %.3f, "
                   "\"peak_memory_bytes\": %.0f, \"status\": ",
                r->key.threads, r->key.devices, r->epoch_seconds_median, r->images_per_second,
                r->speedup_vs_naive, r->final_test_accuracy, r->time_to_target_seconds,
                r->peak_memory_bytes);
        json_string(f, r->status);
        fprintf(f, ", \"message\": ");
        json_string(f, r->message ? r->message : "");
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
}

void print_summary(FILE *f, output_format fmt, const summary_row *rows, int n,
                   const results *r)
{
    (void)r;
    switch (fmt) {
    case FORMAT_MD: print_md(f, rows, n); break;
    case FORMAT_CSV: print_csv(f, rows, n); break;
    case FORMAT_JSON: print_json(f, rows, n); break;
    }
    fflush(f);
}
