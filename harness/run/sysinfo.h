/* The system a run happened on: machine, accelerators, build and libraries
 * (MLPerf's system description, Google Benchmark's context block). */
#ifndef LB_SYSINFO_H
#define LB_SYSINFO_H

#include <stdio.h>

typedef struct sysinfo {
    char host[256];
    char os[256];
    char cpu_model[256];
    int cores;          /* logical CPUs online */
    int physical_cores; /* 0: unknown */
    double cpu_mhz;     /* current clock of cpu0 */
    double cpu_max_mhz; /* 0: not reported (virtual machines often do not) */
    char simd[256];     /* vector extensions the CPU offers and the OS saves (base/cpu.h's
                         * names), e.g. "AVX, FMA, F16C, AVX2, AVX512F" */
    char caches[256];
    double memory_gib;
    double load_average[3]; /* 1, 5 and 15 minutes, at the start of the run */
    int gpu_count;
    char gpu_model[256];   /* "none" when no NVIDIA GPU is visible */
    double gpu_memory_gib; /* of the first GPU */
    char gpu_driver[64];
    char compiler[128];
    char build[128];       /* optimisation and target of this build */
    char git_commit[64];   /* with -dirty when the tree had changes */
    int git_dirty;
    char libraries[1024];  /* each built backend's libraries and versions */
    char environment[512]; /* variables that change how the backends run */
    /* What the blas backend started with, when it was loaded ("" when
     * not): OpenBLAS's kernels, who chose them and why; OpenMP waiting. */
    /* blas_kernels: the core OpenBLAS ran (its own corename, which
     * `libraries` holds); blas_kernels_asked: the one decided or set in
     * OPENBLAS_CORETYPE, which the library may not know (it then runs its
     * own choice, and the reason says so). */
    char blas_kernels[32], blas_kernels_source[32], blas_kernels_reason[512];
    char blas_kernels_asked[32];
    char omp_wait_policy[32], omp_wait_policy_source[32];
    char gomp_spin_count[32], gomp_spin_count_source[32]; /* "" when unset */
    /* the environment a framework peer was started in (its OpenBLAS
     * kernels and OpenMP waiting, the rows' own); "" when none ran */
    char peer_environment[512];
    char date[64];         /* ISO 8601, UTC */
    /* the CPU peaks measured in the run, a JSON array from cpu_peak_json
     * (harness/peak.h): figure, trials and their spread per thread count;
     * filled by the run after its rows, "" before */
    char cpu_peak[16384];
    /* the per-precision peaks (one thread and all) and the memory
     * bandwidth, JSON arrays (harness/run/peak.h); "" before the run fills
     * them */
    char cpu_peaks[8192];
    char memory_bandwidth[2048];
    /* the data files read, and spellings beside them that were not (both
     * plain and .gz present); filled by the run, not by sysinfo_collect */
    char data_files[4 * 4096 + 16];
    char data_files_not_read[8 * 4096 + 64];
} sysinfo;

void sysinfo_collect(sysinfo *s);

/* The record as a JSON object, with the command line. */
void sysinfo_write_json(FILE *f, const sysinfo *s, int argc, char **argv);

/* What compare reads back from a run's system.json: the build's compiler
 * and libraries ("" when absent) and the command line, decoded. */
typedef struct sysinfo_record {
    char compiler[256];
    char libraries[1024];
    char **command_line; /* point into text */
    int n_args;
    char *text;
} sysinfo_record;

/* 0, or -1 with why in a few words (no file, no command line, a malformed
 * one); compiler and libraries are filled in as far as the file has them
 * either way. Free with sysinfo_record_free. */
int sysinfo_read_json(const char *path, sysinfo_record *r, char *why, size_t why_len);
void sysinfo_record_free(sysinfo_record *r);

/* Writes `str` as a JSON string literal (quoted, escaped). */
void json_string(FILE *f, const char *str);

#endif
