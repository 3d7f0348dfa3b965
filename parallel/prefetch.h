/* The input pipeline of a training loop, in three stages, each on its own
 * thread, so that the compute stage does not wait for its inputs:
 *
 *   reading:        the uint8 images and the labels of batch t are gathered
 *                   from the in-memory data set by their indices;
 *   preprocessing:  the bytes become floats, x = lb_pixel(p) = p * (1/255)
 *                   (backends/common/elementwise.h), bitwise what every
 *                   engine computes from the same bytes;
 *   compute:        the caller, taking batch after batch in order.
 *
 * Between preprocessing and compute sits a bounded queue of at most `depth`
 * prepared batches (DL4J's prefetchBuffer). With depth 0 there are no
 * threads: each batch is read and converted in the caller when it is taken.
 *
 * Memory is bounded and allocated once at the start: depth + 2 batch buffers
 * (depth prepared, one held by the caller, one being read), or one buffer
 * with depth 0. A buffer holds a batch's bytes, labels and floats.
 *
 * One thread takes; prefetch_stop may be called at any point, also before
 * every batch was taken, and returns promptly. */
#ifndef LB_PREFETCH_H
#define LB_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "backends/engine.h"

typedef struct prefetch prefetch;

/* A sanity bound on depth: a few batches ahead hide the input work. */
#define PREFETCH_MAX_DEPTH 1024

typedef struct prefetch_batch {
    long step;              /* t: 0, 1, ... steps - 1 */
    int count;              /* images in the batch */
    int pixels_per_image;   /* rows * cols of the data set */
    const int32_t *indices; /* the batch's data-set indices (the caller's array) */
    const float *pixels;    /* count * pixels_per_image floats, image after image */
    const int32_t *labels;  /* count labels */
} prefetch_batch;

/* What the pipeline did, for reporting how much of the input work the
 * threads hid: wait_seconds is the compute stage's stall, the time spent
 * inside prefetch_take (with depth 0 all of the input work). read_seconds
 * and convert_seconds are the time the two input stages spent working. */
typedef struct prefetch_stats {
    long taken;             /* batches handed out */
    double wait_seconds;
    double read_seconds, convert_seconds;
    int buffers;            /* batch buffers allocated */
    int peak_ready;         /* most prepared batches waiting at once */
} prefetch_stats;

/* Batches t = 0..steps-1 of `batch` images each, the images
 * indices[t * batch .. (t + 1) * batch) of `d`, which must stay alive and
 * unchanged until prefetch_stop. depth 0: no threads; depth K in
 * 1..PREFETCH_MAX_DEPTH: a reader thread and a converter thread keep up to K
 * batches ready ahead (K above steps is taken as steps). An index outside
 * the data set is not checked here but by the reading stage, as it
 * reaches it. NULL on bad arguments or when out of memory or threads, with
 * a one-line err. */
prefetch *prefetch_start(const dataset *d, const int32_t *indices, int batch, long steps,
                         int depth, char *err, size_t err_len);

/* The next batch in order, valid until the next take or prefetch_stop; NULL
 * after the last batch or when a stage failed (prefetch_error says which). */
const prefetch_batch *prefetch_take(prefetch *p);

/* NULL while no stage has failed; else the one-line reason (for a bad index:
 * the step and the index). */
const char *prefetch_error(prefetch *p);

/* Safe to call while the threads run. */
void prefetch_get_stats(prefetch *p, prefetch_stats *out);

/* Stops the threads (NULL is ignored) and frees everything; 0, or -1 when a
 * stage failed. */
int prefetch_stop(prefetch *p);

#endif
