/* The per-precision peaks as a table (system.json, ./bench peaks) and the
 * arithmetic each row is held to (peak.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "harness/run/peak.h"
#include "harness/run/peak_bandwidth.h"
#include "harness/run/sysinfo.h"

peak_arith peak_arith_held_to(const char *key)
{
    static const peak_arith falls_back_to[ARITH_COUNT] = {
        [ARITH_FP64] = ARITH_FP32, /* never taken: every CPU has an fp64 loop */
        [ARITH_FP32] = ARITH_FP32,
        [ARITH_BF16_DOT] = ARITH_FP32,
        [ARITH_FP16] = ARITH_FP32,
        [ARITH_AMX_BF16] = ARITH_BF16_DOT,
    };
    peak_arith a = ARITH_FP32;
    for (int i = 0; i < ARITH_COUNT; i++)
        if (key && !strcmp(key, peak_arith_key((peak_arith)i)))
            a = (peak_arith)i;
    peak_kernel k;
    char why[128];
    while (a != ARITH_FP32 && !peak_kernel_for(a, &k, why, sizeof why))
        a = falls_back_to[a];
    return a;
}

typedef struct table_row {
    peak_arith arith;
    peak_measure one, all;
} table_row;

/* The arithmetics this CPU has, each measured on 1 thread and on all. */
static int measure_table(table_row *rows, int *all_threads)
{
    *all_threads = peak_usable_cpus();
    int n = 0;
    for (int a = 0; a < ARITH_COUNT; a++) {
        peak_kernel k;
        char why[200];
        if (!peak_kernel_for((peak_arith)a, &k, why, sizeof why))
            continue; /* absent, not zero */
        rows[n].arith = (peak_arith)a;
        rows[n].one = cpu_peak_survey((peak_arith)a, 1);
        rows[n].all = cpu_peak_survey((peak_arith)a, *all_threads);
        n++;
    }
    return n;
}

/* The figure, or an uncertain probe's best trial; NaN when neither. */
static double best_rate(const peak_measure *m)
{
    if (m->gflops > 0 && isfinite(m->gflops))
        return m->gflops;
    if (!m->uncertain)
        return NAN;
    /* a trial that waited for its core still reached its rate */
    double best = m->kernel.best > m->kernel.best_waited ? m->kernel.best : m->kernel.best_waited;
    return best > 0 ? best : NAN;
}

/* A figure for JSON: null when it is not one (uncertain, not measured). */
static void json_figure(FILE *f, const char *key, double v)
{
    if (v > 0 && isfinite(v))
        fprintf(f, "\"%s\": %.1f", key, v);
    else
        fprintf(f, "\"%s\": null", key);
}

static void json_text(FILE *f, const char *key, const char *text)
{
    fprintf(f, "\"%s\": \"", key);
    for (const char *p = text; *p; p++)
        fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fputc('"', f);
}

void cpu_peak_table_json(char *buf, size_t len)
{
    table_row rows[ARITH_COUNT];
    int threads;
    const int n = measure_table(rows, &threads);
    peak_json j;
    FILE *f = peak_json_open(&j);
    for (int i = 0; i < n && f; i++) {
        fprintf(f, "%s{\"arithmetic\": \"%s\", ", i ? ", " : "", peak_arith_key(rows[i].arith));
        json_figure(f, "one_thread_gflops", rows[i].one.gflops);
        fprintf(f, ", \"threads\": %d, ", threads);
        json_figure(f, "all_threads_gflops", rows[i].all.gflops);
        /* what an uncertain probe's best trial reached: no peak, but a rate
         * this machine ran at (the roofline draws it, marked so) */
        fputs(", ", f);
        json_figure(f, "one_thread_best_trial_gflops", best_rate(&rows[i].one));
        fputs(", ", f);
        json_figure(f, "all_threads_best_trial_gflops", best_rate(&rows[i].all));
        fputs(", ", f);
        json_text(f, "one_thread_source", rows[i].one.source);
        fputs(", ", f);
        json_text(f, "all_threads_source", rows[i].all.source);
        fputc('}', f);
    }
    peak_json_close(&j, buf, len);
}

static void print_figure(FILE *f, const peak_measure *m)
{
    if (m->gflops > 0 && isfinite(m->gflops))
        fprintf(f, " %12.1f", m->gflops);
    else if (best_rate(m) > 0)
        fprintf(f, " %11.1f?", best_rate(m)); /* the best trial, unsettled */
    else
        fprintf(f, " %12s", "-");
}

void cpu_peak_table_print(FILE *f)
{
    table_row rows[ARITH_COUNT];
    int threads;
    const int n = measure_table(rows, &threads);
    const cpu_info *cpu = cpu_this();
    fprintf(f, "CPU peaks, GFLOP/s (multiply-adds count 2): %s\n",
            cpu->brand[0] ? cpu->brand : "unknown CPU");
    fprintf(f, "%-32s %12s %9d thr  x fp32\n", "arithmetic", "1 thread", threads);
    double fp32 = NAN;
    for (int i = 0; i < n; i++)
        if (rows[i].arith == ARITH_FP32)
            fp32 = best_rate(&rows[i].one);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%-32s", peak_arith_name(rows[i].arith));
        print_figure(f, &rows[i].one);
        print_figure(f, &rows[i].all);
        double ratio = best_rate(&rows[i].one) / fp32;
        if (ratio > 0 && isfinite(ratio))
            fprintf(f, "  %5.2fx", ratio);
        fputc('\n', f);
    }
    for (int a = 0; a < ARITH_COUNT; a++) {
        peak_kernel k;
        char why[200];
        if (!peak_kernel_for((peak_arith)a, &k, why, sizeof why))
            fprintf(f, "%-32s absent: %s\n", peak_arith_name((peak_arith)a), why);
    }
    bandwidth_measure one = cpu_bandwidth(1), all = cpu_bandwidth(threads);
    fprintf(f, "%-32s %9.1f GB/s %7.1f GB/s\n", "memory bandwidth (triad)", one.gbytes_per_s,
            all.gbytes_per_s);
    for (int i = 0; i < n; i++)
        if (rows[i].one.uncertain || rows[i].all.uncertain) {
            fprintf(f, "?: uncertain, the best trial shown (other work shared the CPUs: "
                       "the trials disagree); e.g. %s\n",
                    rows[i].one.uncertain ? rows[i].one.source : rows[i].all.source);
            break;
        }
}

int peaks_main(int argc, char **argv)
{
    if (argc > 1) {
        int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
        fprintf(help ? stdout : stderr,
                "%susage: ./bench peaks\n"
                "Measures this CPU's multiply-add peak in each arithmetic it has (fp64, fp32,\n"
                "bf16 dot products, fp16, AMX tiles) on one thread and on every usable CPU.\n"
                "LB_PEAK_SECONDS sets the length of a round of trials (0.05..10, default 1).\n",
                help ? "" : "bench peaks: takes no arguments\n");
        return help ? 0 : 2;
    }
    if (peak_check_round_seconds("peaks"))
        return 2;
    cpu_peak_table_print(stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "bench peaks: cannot write the table\n");
        return 2;
    }
    return 0;
}

void cpu_peak_record(struct sysinfo *s)
{
    cpu_peak_table_json(s->cpu_peaks, sizeof s->cpu_peaks);
    cpu_bandwidth_json(s->memory_bandwidth, sizeof s->memory_bandwidth);
    cpu_peak_json(s->cpu_peak, sizeof s->cpu_peak); /* last: every probe of the run */
}
