/* The machine's peak, measured in the same run, so that "% of peak" in the
 * summary compares a backend's achieved GFLOP/s with what this CPU (or GPU)
 * did a moment ago rather than with a data-sheet number.
 *
 * On a shared machine a neighbour can take a core for part of any second,
 * so the CPU probe runs many short trials spread over about a second and
 * keeps the best of those in which every thread had its core all along
 * (its CPU time over the trial's wall time): such a trial shows what the
 * cores can do.
 * It says "uncertain" rather than give a figure it cannot stand behind: when
 * its best trials disagree, or a rate measured in the same run beats it,
 * after one more round of trials. */
#ifndef LB_PEAK_H
#define LB_PEAK_H

#include <stddef.h>
#include <stdio.h>

#include "backends/engine.h"
#include "harness/run/peak_kernels.h"

/* A best trial's lead over the third best above which the probe has not
 * settled (it then runs another round of trials, once). */
#define PEAK_SETTLED_SPREAD 0.05

typedef struct peak_trials {
    int trials;          /* clean trials (every thread had its core), all rounds */
    int waited;          /* trials in which a thread waited behind other work */
    double best_waited;  /* GFLOP/s of the best of those */
    int rounds;          /* rounds of about a second each (LB_PEAK_SECONDS) */
    double best, third_best, median, worst; /* GFLOP/s of single trials */
    double top_spread;   /* 1 - third_best / best: 0 when the best recurs */
    double seconds;      /* wall time of the trials */
    int pinned;          /* each thread pinned to its own CPU */
} peak_trials;

typedef struct peak_measure {
    double gflops;      /* 0: not measured; NaN: uncertain */
    const char *source; /* how it was measured, e.g. "sgemm of the blas backend's library, 2 threads" */
    int uncertain;      /* gflops is NaN and source says why */
    peak_trials kernel; /* the C kernel's trials behind it */
} peak_measure;

/* LB_PEAK_SECONDS, the length of a round of trials in seconds (0.05..10,
 * default 1), read through the options' grammar: 0, or 2 after a one-line
 * error (bench SUBCOMMAND: ...) when it is not such a number. Each value
 * is parsed once; the run and `bench peaks` check it before they start. */
int peak_check_round_seconds(const char *subcommand);
/* Its seconds (the default while it is unset or refused). */
double peak_round_seconds(void);

/* A stop requested (base/stop.h) ends a probe at its next trial and starts
 * no round: its figure is then no peak, and the run does not use it. */

/* Peak single-precision GFLOP/s of `threads` CPU threads: the higher of a
 * register-blocked multiply-add kernel in C run on every thread at once
 * (many short trials over about a second, best kept) and, when the blas
 * backend is loaded, its sgemm probe. Cached per thread count for the life
 * of the process. LB_PEAK_SECONDS changes the length of a round (0.05..10). */
peak_measure cpu_peak_gflops(int threads);

/* Holds the peak of `threads` threads to a rate measured in this run on as
 * many threads (`what` names it, e.g. "blas's row"): a rate above the peak
 * has the probe run another round, and when the rate still beats it the
 * peak becomes uncertain. Returns the peak as it now stands. */
peak_measure cpu_peak_check(int threads, double measured_gflops, const char *what);

/* Another round of trials for a peak already measured (a long run probes
 * again after its rows), merged with the earlier ones. */
peak_measure cpu_peak_measure_again(int threads);

/* The same for each arithmetic (peak_kernels.h): the fp32 entries above
 * are cpu_peak_of(ARITH_FP32, ...). One the CPU lacks is not measured
 * (gflops 0, the source says why). Threads beyond the CPUs this process
 * may use are probed as that many, and the source says so. */
peak_measure cpu_peak_of(peak_arith arith, int threads);
peak_measure cpu_peak_check_of(peak_arith arith, int threads, double measured_gflops,
                               const char *what);
peak_measure cpu_peak_measure_again_of(peak_arith arith, int threads);
/* The same as cpu_peak_of for the table: a probe no row asked for yet
 * runs shorter rounds (a quarter of a second of trials each). */
peak_measure cpu_peak_survey(peak_arith arith, int threads);

/* The peak a CPU row is held to, from the arithmetic its engine says its
 * products run on (backend_arithmetic: a key of backends/engine.h): that
 * arithmetic's where this CPU has it, else the next this CPU has that the
 * products can fall back to (AMX tiles to the bf16 dot product, that and
 * fp16 FMA to fp32 FMA, as a library converts). An unknown key: fp32. */
peak_arith peak_arith_held_to(const char *key);

/* The per-precision table for system.json: for each arithmetic this CPU
 * has, its peak on one thread and on every usable CPU, measured now if not
 * yet; an arithmetic it lacks is absent. A JSON array, "[]" when none. */
void cpu_peak_table_json(char *buf, size_t len);

/* Fills system.json's cpu_peak (every probe of the run, cpu_peak_json),
 * cpu_peaks (the table) and memory_bandwidth (peak_bandwidth.h). */
struct sysinfo;
void cpu_peak_record(struct sysinfo *s);

/* The same table for a reader (./bench peaks). */
void cpu_peak_table_print(FILE *f);

/* ./bench peaks: measures and prints the table; 0, or 2 on bad usage or a
 * failed write. */
int peaks_main(int argc, char **argv);

/* CPUs this process may run on (its affinity mask, not the online count). */
int peak_usable_cpus(void);
/* The CPU quota of this process's cgroup in CPUs (cgroup v2's cpu.max, or
 * v1's cpu.cfs_quota_us over cpu.cfs_period_us), 0 when none.
 * LB_PEAK_CGROUP_ROOT stands for /sys/fs/cgroup (for tests). */
double peak_cpu_quota(void);

/* A JSON array written to memory for system.json (the peak files'
 * writers): open writes '[', close writes ']' and copies it into buf, or
 * "[]" when anything failed or it does not fit. */
typedef struct peak_json {
    FILE *f;
    char *text;
    size_t size;
} peak_json;
FILE *peak_json_open(peak_json *j);
void peak_json_close(peak_json *j, char *buf, size_t len);

/* Every peak this process measured, as a JSON array for system.json
 * ("[]" when none). */
void cpu_peak_json(char *buf, size_t len);

/* Achieved as a percentage of peak; 0 when the peak is unknown, NaN when
 * it is uncertain. */
double percent_of_peak(double achieved_gflops, double peak_gflops);

#endif
