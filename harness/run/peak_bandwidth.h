/* The memory bandwidth beside the multiply-add peaks: a STREAM-triad-like
 * probe, a[i] = b[i] + s c[i] over three arrays far larger than the
 * caches, on one thread and on every usable CPU, the best of short trials
 * over about a quarter of a second (LB_PEAK_SECONDS scales it). Counted as STREAM
 * counts the triad: 24 bytes an element (two reads, one write; the write's
 * allocation read is not counted). */
#ifndef LB_PEAK_BANDWIDTH_H
#define LB_PEAK_BANDWIDTH_H

#include <stddef.h>

typedef struct bandwidth_measure {
    double gbytes_per_s; /* 0: not measured */
    int threads, trials;
    double array_bytes; /* each of the three */
} bandwidth_measure;

/* Measured once per thread count (kept for the process). */
bandwidth_measure cpu_bandwidth(int threads);

/* One thread and every usable CPU, as a JSON array for system.json. */
void cpu_bandwidth_json(char *buf, size_t len);

#endif
