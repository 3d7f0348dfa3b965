#include "parallel/prefetch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "base/clock.h"

/* One batch buffer. Batch t lives in slot t mod nslots; the counters below
 * say which stage owns it, so the data itself needs no lock. */
typedef struct slot {
    uint8_t *bytes;
    int32_t *labels;
    float *pixels;
    prefetch_batch batch;
} slot;

struct prefetch {
    dataset d;
    const int32_t *indices;
    int batch, depth, nslots;
    long steps;
    size_t pixels; /* per image */
    slot *slots;

    pthread_mutex_t lock;
    pthread_cond_t slot_freed;   /* the reader waits for a released slot */
    pthread_cond_t may_convert;  /* the converter waits for a read batch and room */
    pthread_cond_t batch_ready;  /* the taker waits for a converted batch */
    pthread_t reader, converter;
    int threads; /* started: 0, 1 (the reader) or 2 */

    /* Batches [0, released) are given back by the taker, [released, taken)
     * is the one it holds (at most one), [taken, converted) wait in the
     * queue, [converted, read_done) wait for conversion. */
    long read_done, converted, taken, released;
    int reader_ended, converter_ended, quit, failed;
    char error[256];
    prefetch_stats stats;
};

/* Stage 1 for batch t into s; -1 with p->error on a bad index (the caller
 * holds no lock: error is written before `failed` is published). */
static int read_batch(prefetch *p, long t, slot *s)
{
    const int32_t *idx = p->indices + (size_t)t * (size_t)p->batch;
    for (int b = 0; b < p->batch; b++) {
        const int32_t i = idx[b];
        if (i < 0 || i >= p->d.count) {
            snprintf(p->error, sizeof p->error,
                     "batch %ld, image %d: index %ld outside the data set's 0..%d", t, b,
                     (long)i, p->d.count - 1);
            return -1;
        }
        memcpy(s->bytes + (size_t)b * p->pixels, p->d.images + (size_t)i * p->pixels, p->pixels);
        s->labels[b] = p->d.labels[i];
    }
    s->batch = (prefetch_batch){.step = t,
                                .count = p->batch,
                                .pixels_per_image = (int)p->pixels,
                                .indices = idx,
                                .pixels = s->pixels,
                                .labels = s->labels};
    return 0;
}

/* Stage 2. */
static void convert_batch(const prefetch *p, slot *s)
{
    const size_t n = (size_t)p->batch * p->pixels;
    for (size_t k = 0; k < n; k++)
        s->pixels[k] = lb_pixel(s->bytes[k]);
}

static void *reader_main(void *arg)
{
    prefetch *p = arg;
    for (long t = 0; t < p->steps; t++) {
        pthread_mutex_lock(&p->lock);
        while (!p->quit && t - p->released >= p->nslots)
            pthread_cond_wait(&p->slot_freed, &p->lock);
        const int quit = p->quit;
        pthread_mutex_unlock(&p->lock);
        if (quit)
            break;

        const double t0 = now_seconds();
        const int rc = read_batch(p, t, &p->slots[t % p->nslots]);
        const double spent = now_seconds() - t0;

        pthread_mutex_lock(&p->lock);
        p->stats.read_seconds += spent;
        if (rc == 0)
            p->read_done = t + 1;
        else
            p->failed = 1;
        pthread_cond_signal(&p->may_convert);
        pthread_mutex_unlock(&p->lock);
        if (rc)
            break;
    }
    pthread_mutex_lock(&p->lock);
    p->reader_ended = 1;
    pthread_cond_signal(&p->may_convert);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *converter_main(void *arg)
{
    prefetch *p = arg;
    for (long t = 0;; t++) {
        pthread_mutex_lock(&p->lock);
        /* room: at most depth batches prepared ahead of the taker */
        while (!p->quit && !(t < p->read_done && t - p->taken < p->depth) &&
               !(p->reader_ended && t >= p->read_done))
            pthread_cond_wait(&p->may_convert, &p->lock);
        const int go = !p->quit && t < p->read_done;
        pthread_mutex_unlock(&p->lock);
        if (!go)
            break;

        const double t0 = now_seconds();
        convert_batch(p, &p->slots[t % p->nslots]);
        const double spent = now_seconds() - t0;

        pthread_mutex_lock(&p->lock);
        p->stats.convert_seconds += spent;
        p->converted = t + 1;
        if (p->converted - p->taken > p->stats.peak_ready)
            p->stats.peak_ready = (int)(p->converted - p->taken);
        pthread_cond_signal(&p->batch_ready);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_lock(&p->lock);
    p->converter_ended = 1;
    pthread_cond_signal(&p->batch_ready);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void free_pipeline(prefetch *p)
{
    for (int i = 0; p->slots && i < p->nslots; i++) {
        free(p->slots[i].bytes);
        free(p->slots[i].labels);
        free(p->slots[i].pixels);
    }
    free(p->slots);
    pthread_cond_destroy(&p->batch_ready);
    pthread_cond_destroy(&p->may_convert);
    pthread_cond_destroy(&p->slot_freed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void end_threads(prefetch *p)
{
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->slot_freed);
    pthread_cond_broadcast(&p->may_convert);
    pthread_mutex_unlock(&p->lock);
    if (p->threads >= 1)
        pthread_join(p->reader, NULL);
    if (p->threads >= 2)
        pthread_join(p->converter, NULL);
    p->threads = 0;
}

prefetch *prefetch_start(const dataset *d, const int32_t *indices, int batch, long steps,
                         int depth, char *err, size_t err_len)
{
    if (!d || d->count < 0 || d->rows < 1 || d->cols < 1 ||
        (d->count > 0 && (!d->images || !d->labels))) {
        snprintf(err, err_len, "prefetch: no data set, or one without images");
        return NULL;
    }
    if (batch < 1 || steps < 0 || depth < 0 || depth > PREFETCH_MAX_DEPTH ||
        (steps > 0 && !indices)) {
        snprintf(err, err_len,
                 "prefetch: batch of %d images, %ld steps, depth %d%s: need a batch >= 1, "
                 "steps >= 0, depth 0..%d and the indices",
                 batch, steps, depth, indices ? "" : ", no indices", PREFETCH_MAX_DEPTH);
        return NULL;
    }
    prefetch *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, err_len, "prefetch: out of memory");
        return NULL;
    }
    p->d = *d;
    p->indices = indices;
    p->batch = batch;
    p->steps = steps;
    p->depth = depth < steps ? depth : (int)steps; /* more than steps is no use */
    p->pixels = (size_t)d->rows * (size_t)d->cols;
    /* depth prepared, one held by the taker, one being read; never more
     * than there are batches */
    p->nslots = p->depth == 0 ? 1 : (p->depth + 2 < steps ? p->depth + 2 : (int)steps);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->slot_freed, NULL);
    pthread_cond_init(&p->may_convert, NULL);
    pthread_cond_init(&p->batch_ready, NULL);

    const size_t values = (size_t)batch * p->pixels;
    p->slots = calloc((size_t)p->nslots, sizeof *p->slots);
    for (int i = 0; p->slots && i < p->nslots; i++) {
        slot *s = &p->slots[i];
        s->bytes = malloc(values);
        s->labels = malloc((size_t)batch * sizeof *s->labels);
        s->pixels = malloc(values * sizeof *s->pixels);
        if (!s->bytes || !s->labels || !s->pixels) {
            free_pipeline(p);
            snprintf(err, err_len, "prefetch: out of memory for %d buffers of %d images", p->nslots,
                     batch);
            return NULL;
        }
    }
    if (!p->slots) {
        free_pipeline(p);
        snprintf(err, err_len, "prefetch: out of memory");
        return NULL;
    }
    p->stats.buffers = p->nslots;

    if (p->depth > 0) {
        if (pthread_create(&p->reader, NULL, reader_main, p) == 0)
            p->threads = 1;
        if (p->threads == 1 && pthread_create(&p->converter, NULL, converter_main, p) == 0)
            p->threads = 2;
        if (p->threads < 2) {
            end_threads(p);
            free_pipeline(p);
            snprintf(err, err_len, "prefetch: cannot start the reader and converter threads");
            return NULL;
        }
    }
    return p;
}

/* depth 0: both input stages here, in the caller. */
static const prefetch_batch *take_inline(prefetch *p)
{
    p->released = p->taken;
    if (p->failed || p->taken >= p->steps)
        return NULL;
    slot *s = &p->slots[0];
    const double t0 = now_seconds();
    if (read_batch(p, p->taken, s)) {
        p->failed = 1;
        return NULL;
    }
    const double t1 = now_seconds();
    convert_batch(p, s);
    const double t2 = now_seconds();
    pthread_mutex_lock(&p->lock);
    p->stats.read_seconds += t1 - t0;
    p->stats.convert_seconds += t2 - t1;
    p->stats.wait_seconds += t2 - t0;
    p->read_done = p->converted = ++p->taken;
    p->stats.taken = p->taken;
    pthread_mutex_unlock(&p->lock);
    return &s->batch;
}

const prefetch_batch *prefetch_take(prefetch *p)
{
    if (!p)
        return NULL;
    if (p->depth == 0)
        return take_inline(p);
    const double t0 = now_seconds();
    pthread_mutex_lock(&p->lock);
    if (p->released < p->taken) { /* give back the batch held since the last take */
        p->released = p->taken;
        pthread_cond_signal(&p->slot_freed);
    }
    while (p->converted <= p->taken && !p->converter_ended)
        pthread_cond_wait(&p->batch_ready, &p->lock);
    const prefetch_batch *b = NULL;
    if (p->converted > p->taken) {
        b = &p->slots[p->taken % p->nslots].batch;
        p->stats.taken = ++p->taken;
        pthread_cond_signal(&p->may_convert); /* room in the queue */
    }
    p->stats.wait_seconds += now_seconds() - t0;
    pthread_mutex_unlock(&p->lock);
    return b;
}

const char *prefetch_error(prefetch *p)
{
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->lock);
    const int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return failed ? p->error : NULL;
}

void prefetch_get_stats(prefetch *p, prefetch_stats *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    pthread_mutex_unlock(&p->lock);
}

int prefetch_stop(prefetch *p)
{
    if (!p)
        return 0;
    end_threads(p);
    const int rc = p->failed ? -1 : 0;
    free_pipeline(p);
    return rc;
}
