/* The memory bandwidth probe (peak_bandwidth.h). */
#include "harness/run/peak_bandwidth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/stop.h"
#include "harness/run/peak.h"

/* Each array: at least this, and four times the last-level cache, so that
 * no pass finds its data in a cache. */
#define MIN_ARRAY_BYTES (32.0 * 1024 * 1024)
#define MAX_ARRAY_BYTES (128.0 * 1024 * 1024)
#define ROUND_SECONDS 0.25
enum { MAX_THREADS = 256, MAX_KEPT = 8, PASSES = 2 };

typedef struct triad_job {
    double *a;
    const double *b, *c;
    size_t n;
    pthread_barrier_t *start;
} triad_job;

static void *triad_thread(void *arg)
{
    triad_job *j = arg;
    pthread_barrier_wait(j->start);
    for (int p = 0; p < PASSES; p++)
        for (size_t i = 0; i < j->n; i++)
            j->a[i] = j->b[i] + 3.0 * j->c[i];
    return NULL;
}

/* Seconds for PASSES triads over n elements split over threads; -1 when
 * the threads cannot be started. */
static double one_trial(double *a, const double *b, const double *c, size_t n, int threads)
{
    pthread_t ids[MAX_THREADS];
    triad_job jobs[MAX_THREADS];
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, (unsigned)threads + 1) != 0)
        return -1;
    int started = 0;
    for (int t = 0; t < threads; t++) {
        size_t first = n * (size_t)t / (size_t)threads, last = n * (size_t)(t + 1) / (size_t)threads;
        jobs[t] = (triad_job){a + first, b + first, c + first, last - first, &start};
        if (pthread_create(&ids[t], NULL, triad_thread, &jobs[t]) != 0)
            break;
        started++;
    }
    if (started < threads) { /* the barrier would wait for ever: end as they can */
        for (int t = 0; t < started; t++)
            pthread_cancel(ids[t]), pthread_join(ids[t], NULL);
        pthread_barrier_destroy(&start);
        return -1;
    }
    pthread_barrier_wait(&start);
    const double t0 = now_seconds();
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    const double seconds = now_seconds() - t0;
    pthread_barrier_destroy(&start);
    return seconds;
}

static double array_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    double bytes = l3 > 0 && 4.0 * l3 > MIN_ARRAY_BYTES ? 4.0 * l3 : MIN_ARRAY_BYTES;
    if (bytes > MAX_ARRAY_BYTES)
        bytes = MAX_ARRAY_BYTES; /* (a server's whole L3, not one core's share) */
    /* and no more than a sixteenth of the memory for the three */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && 3 * bytes > (double)pages * page / 16)
        bytes = (double)pages * page / 48;
    return bytes;
}

static bandwidth_measure measure(int threads)
{
    bandwidth_measure m = {.threads = threads, .array_bytes = array_bytes()};
    const size_t n = (size_t)(m.array_bytes / sizeof(double));
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        goto done;
    for (size_t i = 0; i < n; i++) /* touched: the pages exist before the clock runs */
        a[i] = 0, b[i] = (double)(i & 7), c[i] = 0.5;
    const double end = now_seconds() + ROUND_SECONDS * peak_round_seconds();
    do {
        double s = one_trial(a, b, c, n, threads);
        if (s <= 0)
            break;
        double rate = 24.0 * (double)n * PASSES / s * 1e-9;
        if (rate > m.gbytes_per_s)
            m.gbytes_per_s = rate;
        m.trials++;
    } while ((now_seconds() < end || m.trials < 3) && !stop_requested());
done:
    free(a);
    free(b);
    free(c);
    return m;
}

static bandwidth_measure kept[MAX_KEPT];
static int n_kept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

bandwidth_measure cpu_bandwidth(int threads)
{
    const int cpus = peak_usable_cpus();
    threads = threads < 1 ? 1 : threads > cpus ? cpus : threads;
    threads = threads > MAX_THREADS ? MAX_THREADS : threads;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < n_kept; i++)
        if (kept[i].threads == threads) {
            bandwidth_measure m = kept[i];
            pthread_mutex_unlock(&kept_lock);
            return m;
        }
    bandwidth_measure m = measure(threads);
    if (n_kept < MAX_KEPT)
        kept[n_kept++] = m;
    pthread_mutex_unlock(&kept_lock);
    return m;
}

void cpu_bandwidth_json(char *buf, size_t len)
{
    const int all = peak_usable_cpus();
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < (all > 1 ? 2 : 1) && used < len; k++) {
        bandwidth_measure m = cpu_bandwidth(k ? all : 1);
        used += (size_t)snprintf(buf + used, len - used,
                                 "%s{\"probe\": \"triad\", \"threads\": %d, \"gbytes_per_second\": ",
                                 k ? ", " : "", m.threads);
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, m.gbytes_per_s > 0 ? "%.2f" : "null",
                                     m.gbytes_per_s);
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used,
                                     ", \"array_mib\": %.0f, \"trials\": %d, \"bytes_per_element\": 24}",
                                     m.array_bytes / 1048576.0, m.trials);
    }
    if (used + 2 <= len)
        snprintf(buf + used, len - used, "]");
    else
        snprintf(buf, len, "[]");
}
