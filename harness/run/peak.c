#include "harness/run/peak.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "backends/registry.h"
#include "base/clock.h"


/* The C probe: the inner kernel of a GEMM, C[6 x 2V] += A[6 x K] B[K x 2V]
 * with V floats per vector register, twelve accumulators held in registers
 * and A and B small enough to stay in L1. This is how BLIS and OpenBLAS
 * reach peak, so it measures what the cores can do, not the memory. */
enum { MR = 6, PROBE_K = 256 };

#if defined(__AVX512F__)
#define LANES 16
#define PROBE_ISA "AVX-512"
typedef __m512 vec;
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VBCAST(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#define LANES 8
#define PROBE_ISA "AVX2+FMA"
typedef __m256 vec;
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VBCAST(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float vsum(vec v)
{
    float f[8];
    _mm256_storeu_ps(f, v);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#define VSUM(v) vsum(v)
#else
/* Any other target: the compiler's generic vectors (multiply then add). */
#define LANES 4
#define PROBE_ISA "generic-vector"
typedef float vec __attribute__((vector_size(16)));
#define VZERO() ((vec){0, 0, 0, 0})
static vec vload(const float *p)
{
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
#define VLOAD(p) vload(p)
#define VBCAST(x) ((vec){0, 0, 0, 0} + (x))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VSUM(v) ((v)[0] + (v)[1] + (v)[2] + (v)[3])
#endif

enum { NR = 2 * LANES };

/* `reps` passes of the 6 x NR x K kernel; returns a value that depends on
 * every accumulator so the compiler cannot drop the work. */
static float kernel_passes(const float *a, const float *b, long reps)
{
    vec c[MR][2];
    for (int r = 0; r < MR; r++)
        c[r][0] = c[r][1] = VZERO();
    for (long rep = 0; rep < reps; rep++)
        for (int k = 0; k < PROBE_K; k++) {
            vec b0 = VLOAD(b + k * NR), b1 = VLOAD(b + k * NR + LANES);
            for (int r = 0; r < MR; r++) {
                vec x = VBCAST(a[k * MR + r]);
                c[r][0] = VFMA(x, b0, c[r][0]);
                c[r][1] = VFMA(x, b1, c[r][1]);
            }
        }
    float sum = 0;
    for (int r = 0; r < MR; r++)
        sum += VSUM(c[r][0]) + VSUM(c[r][1]);
    return sum;
}

typedef struct probe_job {
    long reps;
    float result;
} probe_job;

static void *probe_thread(void *arg)
{
    probe_job *job = arg;
    static const float scale = 1.0f / 1024;
    float a[PROBE_K * MR], b[PROBE_K * NR];
    for (int i = 0; i < PROBE_K * MR; i++)
        a[i] = (float)(i % 7) * scale;
    for (int i = 0; i < PROBE_K * NR; i++)
        b[i] = (float)(i % 5) * scale;
    job->result = kernel_passes(a, b, job->reps);
    return NULL;
}

/* Seconds for `threads` threads each doing `reps` passes at once. */
static double time_probe(int threads, long reps)
{
    enum { MAX_PROBE_THREADS = 256 };
    pthread_t ids[MAX_PROBE_THREADS];
    probe_job jobs[MAX_PROBE_THREADS];
    if (threads > MAX_PROBE_THREADS)
        threads = MAX_PROBE_THREADS;
    double t0 = now_seconds();
    int started = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t].reps = reps;
        if (pthread_create(&ids[t], NULL, probe_thread, &jobs[t]) != 0)
            break;
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], NULL);
    double seconds = now_seconds() - t0;
    return started == threads ? seconds : -1;
}

static double c_kernel_peak(int threads)
{
    const double flops_per_pass = 2.0 * MR * NR * PROBE_K;
    /* size the trials to about 60 ms from one short single-thread pass */
    long reps = 64;
    double t = time_probe(1, reps);
    while (t >= 0 && t < 0.005 && reps < (1L << 30)) {
        reps *= 4;
        t = time_probe(1, reps);
    }
    if (t <= 0)
        return 0;
    reps = (long)(reps * 0.06 / t) + 1;
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        double s = time_probe(threads, reps);
        if (s <= 0)
            return 0;
        double g = flops_per_pass * reps * threads / s * 1e-9;
        if (g > best)
            best = g;
    }
    return best;
}

peak_measure cpu_peak_gflops(int threads)
{
    enum { CACHE = 16 };
    static struct {
        int threads;
        peak_measure m;
        char source[96];
    } cache[CACHE];
    static int cached;
    if (threads < 1)
        threads = 1;
    for (int i = 0; i < cached; i++)
        if (cache[i].threads == threads)
            return cache[i].m;
    /* Both probes only bound the true peak from below (an sgemm library may
     * not know this CPU and fall back to old kernels), so take the higher. */
    peak_measure m = {c_kernel_peak(threads), NULL};
    char source[96];
    snprintf(source, sizeof source, "C %s multiply-add kernel, %d thread%s", PROBE_ISA, threads,
             threads == 1 ? "" : "s");
    /* A loaded CPU backend's GEMM library may beat it (never loads one:
     * a naive run does not map OpenBLAS for this) */
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        double lib = backend_loaded(b) ? backend_library_peak_gflops(b, threads) : 0;
        if (lib > m.gflops) {
            m.gflops = lib;
            snprintf(source, sizeof source, "sgemm of the %s backend's library, %d thread%s", b->name,
                     threads, threads == 1 ? "" : "s");
        }
    }
    /* More threads cannot lower what the machine can do: a probe of several
     * threads that lost to one thread met other load, so keep the better. */
    if (threads > 1) {
        peak_measure one = cpu_peak_gflops(1);
        if (one.gflops > m.gflops) {
            m.gflops = one.gflops;
            snprintf(source, sizeof source, "%s, which beat %d here", one.source,
                     threads);
        }
    }
    if (m.gflops <= 0)
        return (peak_measure){0, "not measured"};
    if (cached == CACHE)
        return (peak_measure){m.gflops, "C multiply-add kernel"};
    cache[cached].threads = threads;
    snprintf(cache[cached].source, sizeof cache[cached].source, "%s", source);
    cache[cached].m.gflops = m.gflops;
    cache[cached].m.source = cache[cached].source;
    return cache[cached++].m;
}

double percent_of_peak(double achieved_gflops, double peak_gflops)
{
    return peak_gflops > 0 && achieved_gflops > 0 ? 100.0 * achieved_gflops / peak_gflops : 0;
}
