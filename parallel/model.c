/* The model-parallel coordinator (see model.h). One thread per worker; a
 * job runs a program on every worker at once. In the by-layers split the
 * workers pass micro-batches along through counters (stage k waits until
 * stage k - 1 has finished micro-batch m); in the split within layers every
 * worker takes part in every layer, and a barrier separates writing the
 * gathered activations from reading them. */
#include "parallel/model.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/registry.h"
#include "parallel/comm.h"
#include "parallel/prefetch.h"
#include "parallel/workers.h"
#include "parallel/wrap.h"
#include "parallel/world.h"

typedef enum job_kind {
    JOB_CREATE,
    JOB_DESTROY,
    JOB_SET_PARAMS,
    JOB_GET_PARAMS,
    JOB_STEP,     /* forward and backward of every micro-batch, no update */
    JOB_FORWARD,  /* forward only, for evaluation */
    JOB_UPDATE,   /* each stage applies its gradients */
    JOB_GATHER_GRADS,  /* the stages' gradients into the whole vector */
    JOB_SCATTER_UPDATE, /* the whole vector's gradients back, then the update */
    JOB_DESCRIBE,
} job_kind;

/* One engine: a stage of the network (by layers) or one worker's share of
 * a segment (within layers). */
typedef struct stage {
    workload w;
    engine *e;
    float *params;      /* w.param_count: staging between the engine and the whole vector */
    int device;         /* GPU engines: the worker's device */
    size_t out_size;    /* floats per image of its output */
    size_t out_offset;  /* within layers: where its share starts in the gathered output */
} stage;

typedef struct worker_state {
    int rc;
    char err[384];
    /* within layers: this worker's share of an output, of its gradient, and
     * its partial sum of an input gradient (micro-batch x largest size) */
    float *share_out, *share_dout, *part_din;
} worker_state;

struct engine {
    const backend *inner;
    mp_options opt;
    workload w;
    engine_config cfg, inner_cfg;
    int workers;
    int segments; /* by layers: one per worker; within layers: one per layer with parameters */
    int parts;    /* shares of each segment: 1 by layers, `workers` within layers */
    int cut[WORKLOAD_MAX_LAYERS + 1]; /* segment s is layers [cut[s], cut[s + 1]) */
    stage st[WORKLOAD_MAX_LAYERS][MP_MAX_WORKERS]; /* [segment][part] */
    int micro_cap; /* images per micro-batch the stage engines hold */

    /* boundary s: the input of segment s (s = 0: the images), its floats
     * per image, and per micro-batch the activations and their gradient */
    size_t size[WORKLOAD_MAX_LAYERS + 1];
    float *act[WORKLOAD_MAX_LAYERS + 1][MP_MAX_MICRO_BATCHES];
    float *grad[WORKLOAD_MAX_LAYERS + 1][MP_MAX_MICRO_BATCHES];
    size_t exchange_bytes[MP_MAX_WORKERS]; /* of those, what each worker needs */

    worker_state ws[MP_MAX_WORKERS];
    /* Across MPI ranks (under mpirun) each rank is one worker, `first_local`
     * its index, and activations travel as messages; in one process every
     * worker is local and they share the buffers above. */
    int distributed, first_local, local_workers;
    int gpus; /* GPU engines: devices visible, over which the workers spread */
    float *gathered; /* across ranks, within layers: every rank's share, padded */
    worker_team *team;
    pthread_mutex_t lock;
    pthread_cond_t moved;
    pthread_barrier_t barrier;
    int sync_ready;
    int fwd_done[WORKLOAD_MAX_LAYERS + 1], bwd_done[WORKLOAD_MAX_LAYERS + 1];
    int failed;

    float *grads; /* param_count: the whole network's gradient, for hybrid training */
    const dataset *train, *test;

    /* the current job */
    job_kind job;
    const float *params_in;
    float *params_out;
    const dataset *data;
    const int32_t *indices; /* NULL: images first .. first + batch */
    const float *prepared;  /* the batch's pixels from the input pipeline, or NULL */
    int first, batch;
    int micro, mb_start[MP_MAX_MICRO_BATCHES], mb_count[MP_MAX_MICRO_BATCHES];
    int *labels;        /* batch_size */
    double *image_loss; /* batch_size */
    float grad_scale;
    char describe_buf[256];

    char err[512];
};

const char *mp_split_name(mp_split s) { return s == MP_SPLIT_FILTERS ? "filters" : "layers"; }

static int fail(engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *error(engine *e) { return e ? e->err : "model-parallel: no engine"; }

/* Where the by-layers split cuts ------------------------------------------ */

/* Work of a layer for the balance: its training multiply-adds, or the
 * numbers a pool or ReLU touches. */
static double layer_work(const layer *l)
{
    if (l->kind == LAYER_CONV)
        return 3.0 * (double)l->weight_count * l->out.h * l->out.w;
    if (l->kind == LAYER_DENSE)
        return 3.0 * (double)l->weight_count;
    return (double)shape3_size(l->in);
}

typedef struct cut_search {
    const workload *w;
    int workers;
    double limit;  /* the largest stage may do at most this much */
    double best_crossing;
    int cut[WORKLOAD_MAX_LAYERS + 1], best[WORKLOAD_MAX_LAYERS + 1];
    double best_max;
} cut_search;

/* Every way to cut layers [from, n) into the stages k.. that are left. */
static void search_cuts(cut_search *c, int k, int from, double max_so_far, double crossing)
{
    const int n = c->w->n_layers, left = c->workers - k;
    if (left == 1) {
        double work = 0;
        for (int i = from; i < n; i++)
            work += layer_work(&c->w->layers[i]);
        const double max = work > max_so_far ? work : max_so_far;
        if (c->limit > 0 ? (max <= c->limit && crossing < c->best_crossing) : max < c->best_max) {
            c->cut[k + 1] = n;
            memcpy(c->best, c->cut, sizeof c->best);
            c->best_max = max;
            c->best_crossing = crossing;
        }
        return;
    }
    double work = 0;
    for (int end = from + 1; end <= n - (left - 1); end++) {
        work += layer_work(&c->w->layers[end - 1]);
        const double max = work > max_so_far ? work : max_so_far;
        if (c->limit > 0 && max > c->limit)
            break;
        c->cut[k + 1] = end;
        search_cuts(c, k + 1, end, max, crossing + shape3_size(c->w->layers[end - 1].out));
    }
}

int mp_layer_cuts(const workload *w, int workers, int *cut)
{
    if (workers < 1 || workers > w->n_layers)
        return -1;
    cut_search c = {.w = w, .workers = workers, .best_max = 1e300, .best_crossing = 1e300};
    search_cuts(&c, 0, 0, 0, 0); /* the smallest largest stage */
    c.limit = c.best_max * 1.02;
    c.best_crossing = 1e300;
    search_cuts(&c, 0, 0, 0, 0); /* then the fewest activations crossing */
    memcpy(cut, c.best, sizeof(int) * (workers + 1));
    cut[0] = 0;
    return 0;
}

/* Sync between workers ------------------------------------------------------ */

/* Across ranks a worker's failure cannot reach the others, who wait for
 * its messages or collectives: the job ends with the reason instead of
 * hanging. */
static void end_job(const char *reason)
{
    fprintf(stderr, "bench: model-parallel: %s; ending the job\n", reason);
    world_abort(1);
}

/* Marks the job failed with worker i's message and wakes every waiter
 * (across ranks: ends the job). */
static void worker_fail(engine *e, int i, const stage *s, const char *what)
{
    worker_state *w = &e->ws[i];
    if (!w->rc)
        snprintf(w->err, sizeof w->err, "worker %d: %s: %s", i, what,
                 s && s->e ? e->inner->error(s->e) : "no engine");
    w->rc = -1;
    if (e->distributed)
        end_job(w->err);
    pthread_mutex_lock(&e->lock);
    e->failed = 1;
    pthread_cond_broadcast(&e->moved);
    pthread_mutex_unlock(&e->lock);
}

/* Waits until *counter reaches value; -1 when the job failed meanwhile. */
static int wait_for(engine *e, const int *counter, int value)
{
    pthread_mutex_lock(&e->lock);
    while (*counter < value && !e->failed)
        pthread_cond_wait(&e->moved, &e->lock);
    const int failed = e->failed;
    pthread_mutex_unlock(&e->lock);
    return failed ? -1 : 0;
}

static void post(engine *e, int *counter)
{
    pthread_mutex_lock(&e->lock);
    (*counter)++;
    pthread_cond_broadcast(&e->moved);
    pthread_mutex_unlock(&e->lock);
}

static int job_failed(engine *e)
{
    pthread_mutex_lock(&e->lock);
    const int failed = e->failed;
    pthread_mutex_unlock(&e->lock);
    return failed;
}

/* The pieces of a step ------------------------------------------------------ */

/* Images [lo, hi) of micro-batch m as scaled pixels into act[0][m], unless
 * the input pipeline prepared them. */
static void fill_pixels(engine *e, int m, int lo, int hi)
{
    const dataset *d = e->data;
    if (e->prepared)
        return;
    const size_t pixels = (size_t)d->rows * d->cols;
    for (int j = lo; j < hi; j++) {
        const int b = e->mb_start[m] + j;
        const long i = e->indices ? e->indices[b] : e->first + b;
        const uint8_t *src = d->images + (size_t)i * pixels;
        float *dst = e->act[0][m] + (size_t)j * pixels;
        for (size_t p = 0; p < pixels; p++)
            dst[p] = lb_pixel(src[p]);
    }
}

/* The input of segment s for micro-batch m. */
static const float *segment_input(const engine *e, int s, int m)
{
    if (s == 0 && e->prepared)
        return e->prepared + (size_t)e->mb_start[m] * e->size[0];
    return e->act[s][m];
}

/* Images [lo, hi) of micro-batch m: their losses, and the gradient of the
 * batch's mean loss with respect to their logits. */
static void loss_of(engine *e, int m, int lo, int hi)
{
    const int S = e->segments, C = e->w.classes;
    for (int j = lo; j < hi; j++) {
        const int b = e->mb_start[m] + j;
        e->image_loss[b] = lb_softmax_xent(e->act[S][m] + (size_t)j * C, C, e->labels[b],
                                           1.0f / (float)e->batch,
                                           e->grad[S][m] + (size_t)j * C);
    }
}

/* Images [lo, hi) of n cut into `parts` shares: worker i's. */
static void part_of(int n, int parts, int i, int *lo, int *hi)
{
    int start, count;
    share_of(n, parts, i, &start, &count);
    *lo = start;
    *hi = start + count;
}

/* Moving activations between workers ------------------------------------ */

static size_t boundary_bytes(const engine *e, int s, int m)
{
    return sizeof(float) * (size_t)e->mb_count[m] * e->size[s];
}

/* A message between ranks that could not go: the job ends (end_job). */
static int link_failed(int i, const char *what)
{
    char reason[128];
    snprintf(reason, sizeof reason, "worker %d: %s failed", i, what);
    end_job(reason);
    return -1;
}

/* By layers: stage k's output of micro-batch m on to stage k + 1. */
static int pass_activation(engine *e, int k, int m)
{
    if (!e->distributed) {
        post(e, &e->fwd_done[k + 1]);
        return 0;
    }
    if (world_send_bytes(e->act[k + 1][m], boundary_bytes(e, k + 1, m), k + 1))
        return link_failed(k, "sending activations");
    return 0;
}

/* By layers: stage k's input of micro-batch m, once stage k - 1 has it. */
static int receive_activation(engine *e, int k, int m)
{
    if (!e->distributed)
        return wait_for(e, &e->fwd_done[k], m + 1);
    if (world_recv_bytes(e->act[k][m], boundary_bytes(e, k, m), k - 1))
        return link_failed(k, "receiving activations");
    return 0;
}

/* By layers: the gradient of stage k's input back to stage k - 1. */
static int pass_gradient(engine *e, int k, int m)
{
    if (!e->distributed) {
        post(e, &e->bwd_done[k]);
        return 0;
    }
    if (world_send_bytes(e->grad[k][m], boundary_bytes(e, k, m), k - 1))
        return link_failed(k, "sending gradients");
    return 0;
}

/* By layers: the gradient of stage k's output, once stage k + 1 has it. */
static int receive_gradient(engine *e, int k, int m)
{
    if (!e->distributed)
        return wait_for(e, &e->bwd_done[k + 1], m + 1);
    if (world_recv_bytes(e->grad[k + 1][m], boundary_bytes(e, k + 1, m), k + 1))
        return link_failed(k, "receiving gradients");
    return 0;
}

/* Worker k of the by-layers split: its stage's forward passes as the
 * micro-batches arrive, then (training) its backward passes as their
 * gradients arrive. The backward passes go in the forward order, so that
 * an engine that adds image after image into its gradients (naive) sums
 * in the same order as with the whole batch at once. */
static void layers_program(engine *e, int k, int train)
{
    stage *s = &e->st[k][0];
    const int last = e->segments - 1, M = e->micro;
    for (int m = 0; m < M; m++) {
        if (k == 0)
            fill_pixels(e, m, 0, e->mb_count[m]);
        else if (receive_activation(e, k, m))
            return;
        if (e->inner->stage_forward(s->e, m, segment_input(e, k, m), e->mb_count[m],
                                    e->act[k + 1][m])) {
            worker_fail(e, k, s, "stage_forward");
            return;
        }
        if (k < last) {
            if (pass_activation(e, k, m))
                return;
        } else if (train)
            loss_of(e, m, 0, e->mb_count[m]);
    }
    if (!train)
        return;
    for (int m = 0; m < M; m++) {
        if (k < last && receive_gradient(e, k, m))
            return;
        if (e->inner->stage_backward(s->e, m, e->grad[k + 1][m], k ? e->grad[k][m] : NULL,
                                     m > 0)) {
            worker_fail(e, k, s, "stage_backward");
            return;
        }
        if (k > 0 && pass_gradient(e, k, m))
            return;
    }
}

/* Per image, a share's block of a gathered activation: copies between the
 * gathered rows (whole floats per image) and the share's rows. */
static void copy_share(float *gathered, float *share, int n, size_t whole, size_t part,
                       size_t offset, int to_gathered)
{
    for (int j = 0; j < n; j++) {
        float *g = gathered + (size_t)j * whole + offset, *s = share + (size_t)j * part;
        memcpy(to_gathered ? g : s, to_gathered ? s : g, sizeof(float) * part);
    }
}

/* Within layers: worker i's share of segment s's output (share_out) into
 * the gathered activation, and across ranks every other rank's too. */
static void gather_shares(engine *e, int s, int i, int m)
{
    const int n = e->mb_count[m];
    if (!e->distributed) {
        const stage *st = &e->st[s][i];
        copy_share(e->act[s + 1][m], e->ws[i].share_out, n, e->size[s + 1], st->out_size,
                   st->out_offset, 1);
        return;
    }
    size_t block = 0; /* the largest share of the segment, padded to by every rank */
    for (int p = 0; p < e->parts; p++)
        block = e->st[s][p].out_size > block ? e->st[s][p].out_size : block;
    block *= (size_t)n;
    if (world_allgather_bytes(e->ws[i].share_out, sizeof(float) * block, e->gathered))
        link_failed(i, "gathering activations");
    for (int p = 0; p < e->parts; p++) {
        const stage *st = &e->st[s][p];
        copy_share(e->act[s + 1][m], e->gathered + p * block, n, e->size[s + 1], st->out_size,
                   st->out_offset, 1);
    }
}

/* Within layers: the workers' partial input gradients of segment s added
 * up into grad[s][m]; in one process worker i adds its range, in worker
 * order, between two barriers. */
static void sum_input_gradients(engine *e, int s, int i, int m)
{
    const int n = e->mb_count[m];
    const size_t count = (size_t)n * e->size[s];
    if (e->distributed) {
        if (world_allreduce_floats(e->ws[i].part_din, count))
            link_failed(i, "adding input gradients");
        memcpy(e->grad[s][m], e->ws[i].part_din, sizeof(float) * count);
        return;
    }
    pthread_barrier_wait(&e->barrier); /* every partial sum written */
    if (!job_failed(e)) {
        int lo, hi;
        part_of((int)count, e->parts, i, &lo, &hi);
        float *sum = e->grad[s][m];
        memcpy(sum + lo, e->ws[0].part_din + lo, sizeof(float) * (size_t)(hi - lo));
        for (int j = 1; j < e->parts; j++)
            for (int x = lo; x < hi; x++)
                sum[x] += e->ws[j].part_din[x];
    }
    pthread_barrier_wait(&e->barrier); /* the sum complete */
}

/* Worker i of the split within layers. Every worker passes every barrier,
 * failed or not, so that none is left waiting. */
static void filters_program(engine *e, int i, int train)
{
    const int S = e->segments, M = e->micro, P = e->parts;
    worker_state *w = &e->ws[i];
    for (int m = 0; m < M; m++) {
        const int n = e->mb_count[m];
        int lo, hi; /* this worker's images: its share in one process, all across ranks */
        part_of(n, e->distributed ? 1 : P, e->distributed ? 0 : i, &lo, &hi);
        fill_pixels(e, m, lo, hi);
        pthread_barrier_wait(&e->barrier);
        for (int s = 0; s < S; s++) {
            stage *st = &e->st[s][i];
            if (!w->rc && e->inner->stage_forward(st->e, m, segment_input(e, s, m), n, w->share_out))
                worker_fail(e, i, st, "stage_forward");
            if (!w->rc)
                gather_shares(e, s, i, m);
            pthread_barrier_wait(&e->barrier);
        }
        if (train && !job_failed(e))
            loss_of(e, m, lo, hi);
    }
    if (!train)
        return;
    pthread_barrier_wait(&e->barrier); /* every logit gradient written */
    for (int m = 0; m < M; m++) {
        const int n = e->mb_count[m];
        for (int s = S - 1; s >= 0; s--) {
            stage *st = &e->st[s][i];
            if (!job_failed(e)) {
                copy_share(e->grad[s + 1][m], w->share_dout, n, e->size[s + 1], st->out_size,
                           st->out_offset, 0);
                if (e->inner->stage_backward(st->e, m, w->share_dout, s ? w->part_din : NULL,
                                             m > 0))
                    worker_fail(e, i, st, "stage_backward");
            }
            if (s > 0)
                sum_input_gradients(e, s, i, m);
        }
    }
}

/* Gradients between a stage engine and its staging floats. */
static int stage_grads(engine *e, stage *s, int to_engine)
{
    size_t n = 0;
    float *g = e->inner->buffer ? e->inner->buffer(s->e, BUF_GRADS, &n) : NULL;
    if (!g || n != s->w.param_count)
        return -1;
    if (e->inner->buffer_space == MEM_HOST) {
        memcpy(to_engine ? g : s->params, to_engine ? s->params : g, sizeof(float) * n);
        return 0;
    }
    char err[256];
    return to_engine ? devmem_to_device(g, s->params, n, s->device, err, sizeof err)
                     : devmem_to_host(s->params, g, n, s->device, err, sizeof err);
}

/* GPU engines: worker i's device, the next one after the configured
 * device for each worker (each rank's under mpirun), so that workers
 * spread over the GPUs there are; one GPU takes them all. */
static int worker_device(const engine *e, int i)
{
    if (e->inner->buffer_space != MEM_DEVICE || e->gpus < 2)
        return e->cfg.device;
    const int k = e->distributed ? world_local_rank() : i;
    return (e->cfg.device + k) % e->gpus;
}

/* The stages worker i holds: (segment, part) pairs. */
static int worker_stages(engine *e, int i, stage **out)
{
    int n = 0;
    if (e->opt.split == MP_SPLIT_LAYERS)
        out[n++] = &e->st[i][0];
    else
        for (int s = 0; s < e->segments; s++)
            out[n++] = &e->st[s][i];
    return n;
}

static void run_job(void *ctx, int local)
{
    engine *e = ctx;
    const int i = e->first_local + local;
    const backend *b = e->inner;
    stage *mine[WORKLOAD_MAX_LAYERS];
    const int n = worker_stages(e, i, mine);
    char err[256] = "";
    switch (e->job) {
    case JOB_STEP:
    case JOB_FORWARD:
        if (e->opt.split == MP_SPLIT_LAYERS)
            layers_program(e, i, e->job == JOB_STEP);
        else
            filters_program(e, i, e->job == JOB_STEP);
        return;
    case JOB_DESCRIBE:
        if (local == 0)
            backend_describe(b, mine[0]->e, e->describe_buf, sizeof e->describe_buf);
        return;
    default:
        break;
    }
    for (int k = 0; k < n && !e->ws[i].rc; k++) {
        stage *s = mine[k];
        switch (e->job) {
        case JOB_CREATE: {
            engine_config c = e->inner_cfg;
            c.device = s->device = worker_device(e, i);
            s->e = backend_create(b, &s->w, &c, err, sizeof err);
            if (!s->e) {
                snprintf(e->ws[i].err, sizeof e->ws[i].err, "worker %d: %s", i,
                         err[0] ? err : "create failed");
                e->ws[i].rc = -1;
            }
            break;
        }
        case JOB_DESTROY:
            if (s->e)
                b->destroy(s->e);
            s->e = NULL;
            break;
        case JOB_SET_PARAMS:
            workload_stage_params_from(&s->w, s->params, e->params_in);
            if (b->set_params(s->e, s->params))
                worker_fail(e, i, s, "set_params");
            break;
        case JOB_GET_PARAMS:
            if (b->get_params(s->e, s->params))
                worker_fail(e, i, s, "get_params");
            else
                workload_stage_params_to(&s->w, s->params, e->params_out);
            break;
        case JOB_UPDATE:
            if (b->apply_update(s->e, 1.0f))
                worker_fail(e, i, s, "apply_update");
            break;
        case JOB_GATHER_GRADS:
            if (stage_grads(e, s, 0))
                worker_fail(e, i, s, "reading the gradients");
            else
                workload_stage_params_to(&s->w, s->params, e->grads);
            break;
        case JOB_SCATTER_UPDATE:
            workload_stage_params_from(&s->w, s->params, e->grads);
            if (stage_grads(e, s, 1))
                worker_fail(e, i, s, "writing the gradients");
            else if (b->apply_update(s->e, e->grad_scale))
                worker_fail(e, i, s, "apply_update");
            break;
        default:
            break;
        }
    }
}

/* Runs `job` on every worker; 0, or -1 with the first error. */
static int run_all(engine *e, job_kind job)
{
    e->job = job;
    e->failed = 0;
    memset(e->fwd_done, 0, sizeof e->fwd_done);
    memset(e->bwd_done, 0, sizeof e->bwd_done);
    for (int i = 0; i < e->workers; i++)
        e->ws[i].rc = 0;
    worker_team_run(e->team, run_job, e);
    for (int i = e->first_local; i < e->first_local + e->local_workers; i++)
        if (e->ws[i].rc)
            return fail(e, "model-parallel: %s", e->ws[i].err);
    return 0;
}

/* The contract's entries ---------------------------------------------------- */

static int set_params(engine *e, const float *params)
{
    e->params_in = params;
    return run_all(e, JOB_SET_PARAMS);
}

/* Across ranks each rank holds its shares: zeros elsewhere, then a sum. */
static int get_params(engine *e, float *params)
{
    e->params_out = params;
    if (e->distributed)
        memset(params, 0, sizeof(float) * e->w.param_count);
    if (run_all(e, JOB_GET_PARAMS))
        return -1;
    if (e->distributed && world_allreduce_floats(params, e->w.param_count))
        return fail(e, "model-parallel: gathering the parameters over the ranks failed");
    return 0;
}

static int bind_dataset(engine *e, const dataset *train, const dataset *test)
{
    const shape3 in = e->w.input;
    const dataset *sets[2] = {train, test};
    for (int k = 0; k < 2; k++)
        if (sets[k] && (in.c != 1 || sets[k]->rows != in.h || sets[k]->cols != in.w))
            return fail(e, "model-parallel: %dx%d images do not fit workload %s (%dx%d)",
                        sets[k]->rows, sets[k]->cols, e->w.name, in.h, in.w);
    e->train = train;
    e->test = test;
    return 0;
}

/* Checks and takes the labels of images idx[0..n) (first.. when idx is
 * NULL) of d, and cuts the batch into micro-batches. */
static int prepare(engine *e, const dataset *d, const int32_t *idx, int first, int n)
{
    if (!d)
        return fail(e, "model-parallel: no data set bound");
    if (n < 1 || n > e->cfg.batch_size)
        return fail(e, "model-parallel: batch of %d images, engine was created for 1..%d", n,
                    e->cfg.batch_size);
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        if (i < 0 || i >= d->count)
            return fail(e, "model-parallel: image index %ld out of range (0..%d)", i,
                        d->count - 1);
        if (d->labels[i] >= e->w.classes)
            return fail(e, "model-parallel: label %d of image %ld out of range", d->labels[i], i);
        e->labels[b] = d->labels[i];
    }
    e->data = d;
    e->indices = idx;
    e->first = first;
    e->batch = n;
    e->micro = n < e->opt.micro_batches ? n : e->opt.micro_batches;
    for (int m = 0; m < e->micro; m++)
        share_of(n, e->micro, m, &e->mb_start[m], &e->mb_count[m]);
    return 0;
}

/* By layers across ranks the last stage's rank has the logits: its
 * results go to every rank. */
static int share_from_last(engine *e, void *buf, size_t bytes)
{
    if (!e->distributed || e->opt.split != MP_SPLIT_LAYERS)
        return 0;
    if (world_broadcast_bytes(buf, bytes, e->workers - 1))
        return fail(e, "model-parallel: sharing the last stage's results failed");
    return 0;
}

static int compute_step(engine *e, const int32_t *indices, int batch, float *loss)
{
    if (prepare(e, e->train, indices, 0, batch) || run_all(e, JOB_STEP) ||
        share_from_last(e, e->image_loss, sizeof(double) * (size_t)batch))
        return -1;
    double sum = 0;
    for (int b = 0; b < batch; b++)
        sum += e->image_loss[b];
    if (loss)
        *loss = (float)(sum / batch);
    return 0;
}

/* With --prefetch K the batches' pixels come from the input pipeline's
 * threads, K batches ahead; else the first stage's worker converts them. */
static int train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
{
    prefetch *pipe = NULL;
    char err[256];
    if (e->opt.prefetch > 0 && e->train &&
        !(pipe = prefetch_start(e->train, indices, batch, steps, e->opt.prefetch, err, sizeof err)))
        return fail(e, "model-parallel: input pipeline: %s", err);
    int rc = 0;
    for (int t = 0; t < steps && rc == 0; t++) {
        const prefetch_batch *ready = pipe ? prefetch_take(pipe) : NULL;
        if (pipe && !ready) {
            const char *why = prefetch_error(pipe);
            rc = fail(e, "model-parallel: input pipeline: %s", why ? why : "ended early");
            break;
        }
        e->prepared = ready ? ready->pixels : NULL;
        rc = compute_step(e, indices + (size_t)t * batch, batch, losses ? losses + t : NULL) ||
             run_all(e, JOB_UPDATE);
    }
    e->prepared = NULL;
    prefetch_stop(pipe);
    return rc ? -1 : 0;
}

/* For a data-parallel wrapper (hybrid): the whole gradient in host memory. */
static int compute_gradients(engine *e, const int32_t *indices, int batch, float *loss)
{
    return compute_step(e, indices, batch, loss) || run_all(e, JOB_GATHER_GRADS) ? -1 : 0;
}

static int apply_update(engine *e, float grad_scale)
{
    e->grad_scale = grad_scale;
    return run_all(e, JOB_SCATTER_UPDATE);
}

static float *buffer(engine *e, engine_buffer which, size_t *count)
{
    *count = which == BUF_GRADS ? e->w.param_count : 0;
    return which == BUF_GRADS ? e->grads : NULL;
}

static int evaluate(engine *e, int limit, eval_counts *out)
{
    const dataset *d = e->test;
    if (!d)
        return fail(e, "model-parallel: no test set bound");
    const int n = limit <= 0 || limit > d->count ? d->count : limit;
    const int C = e->w.classes, S = e->segments, round = e->cfg.batch_size;
    memset(out, 0, sizeof *out);
    out->classes = C;
    for (int first = 0; first < n; first += round) {
        const int count = n - first < round ? n - first : round;
        if (prepare(e, d, NULL, first, count) || run_all(e, JOB_FORWARD))
            return -1;
        for (int m = 0; m < e->micro; m++)
            if (share_from_last(e, e->act[S][m], boundary_bytes(e, S, m)))
                return -1;
        for (int m = 0; m < e->micro; m++)
            for (int j = 0; j < e->mb_count[m]; j++) {
                const float *logits = e->act[S][m] + (size_t)j * C;
                const int label = e->labels[e->mb_start[m] + j];
                out->loss_sum += lb_softmax_xent(logits, C, label, 1.0f, NULL);
                out->confusion[label * C + lb_argmax(logits, C)]++;
                out->count++;
            }
    }
    return 0;
}

int mp_worker_memory(engine *e, int i, memory_use *out)
{
    if (i < 0 || i >= e->workers)
        return -1;
    stage *mine[WORKLOAD_MAX_LAYERS];
    const int n = worker_stages(e, i, mine);
    memset(out, 0, sizeof *out);
    for (int k = 0; k < n; k++) {
        memory_use m;
        if (!backend_memory_use(e->inner, mine[k]->e, &m))
            continue;
        out->params += m.params;
        out->grads += m.grads;
        out->opt_state += m.opt_state;
        out->activations += m.activations;
        out->workspace += m.workspace;
    }
    out->workspace += e->exchange_bytes[i];
    return 0;
}

/* The largest worker's (of this rank's, across ranks). */
static void memory_use_entry(engine *e, memory_use *out)
{
    memset(out, 0, sizeof *out);
    for (int i = e->first_local; i < e->first_local + e->local_workers; i++) {
        memory_use m;
        mp_worker_memory(e, i, &m);
        if (memory_use_total(&m) > memory_use_total(out))
            *out = m;
    }
}

/* The largest worker's memory, from its engines' own itemised accounting
 * (memory_use). Not their peak_memory: a GPU engine's is a device-wide
 * cudaMemGetInfo delta, which counts every other stage sharing the device
 * (and anything else running there) as its own. Engines without memory_use
 * (the CPU ones) report 0 here, as they do for peak_memory. */
static size_t peak_memory(engine *e)
{
    memory_use m;
    memory_use_entry(e, &m);
    return memory_use_total(&m);
}

static void placement(engine *e, int *threads, int *devices, int *replicas)
{
    int t, d, r;
    stage *mine[WORKLOAD_MAX_LAYERS] = {0};
    worker_stages(e, e->first_local, mine);
    backend_placement(e->inner, mine[0]->e, &t, &d, &r);
    *threads = t * e->workers;
    *devices = d; /* one engine's; spread workers use as many GPUs as there are workers */
    if (d > 0 && e->gpus > 1)
        *devices = e->workers < e->gpus ? e->workers : e->gpus;
    *replicas = 1;
}

static void describe(engine *e, char *buf, size_t len)
{
    e->describe_buf[0] = '\0';
    run_all(e, JOB_DESCRIBE);
    char how[160] = "";
    size_t used = 0;
    if (e->opt.split == MP_SPLIT_LAYERS)
        for (int s = 0; s < e->segments && used < sizeof how; s++) {
            const layer *a = &e->w.layers[e->cut[s]], *z = &e->w.layers[e->cut[s + 1] - 1];
            used += (size_t)snprintf(how + used, sizeof how - used, "%s%s-%s", s ? " | " : "",
                                     a->name, z->name);
        }
    else
        snprintf(how, sizeof how, "each worker 1/%d of every layer's filters and units", e->parts);
    char input[64] = "";
    if (e->opt.prefetch > 0)
        snprintf(input, sizeof input, ", input pipeline %d batches ahead", e->opt.prefetch);
    snprintf(buf, len, "%d workers by %s (%s), %d micro-batch%s%s, each: %s", e->workers,
             mp_split_name(e->opt.split), how, e->opt.micro_batches,
             e->opt.micro_batches > 1 ? "es" : "", input,
             e->describe_buf[0] ? e->describe_buf : "-");
}

static void destroy(engine *e)
{
    if (!e)
        return;
    if (e->team)
        run_all(e, JOB_DESTROY);
    worker_team_destroy(e->team);
    if (e->sync_ready) {
        pthread_barrier_destroy(&e->barrier);
        pthread_cond_destroy(&e->moved);
        pthread_mutex_destroy(&e->lock);
    }
    for (int s = 0; s <= e->segments; s++)
        for (int m = 0; m < e->opt.micro_batches; m++) {
            free(e->act[s][m]);
            free(e->grad[s][m]);
        }
    for (int s = 0; s < e->segments; s++)
        for (int p = 0; p < e->parts; p++)
            free(e->st[s][p].params);
    for (int i = 0; i < e->workers; i++) {
        free(e->ws[i].share_out);
        free(e->ws[i].share_dout);
        free(e->ws[i].part_din);
    }
    free(e->gathered);
    free(e->grads);
    free(e->labels);
    free(e->image_loss);
    free(e);
}

/* Creation ---------------------------------------------------------------- */

/* The segments: by layers, the cuts; within layers, a cut before every
 * layer with parameters but the first. */
static const char *plan_segments(engine *e)
{
    const workload *w = &e->w;
    if (e->opt.split == MP_SPLIT_LAYERS) {
        if (mp_layer_cuts(w, e->workers, e->cut))
            return "more workers than the network has layers";
        e->segments = e->workers;
        e->parts = 1;
        return NULL;
    }
    e->segments = 0;
    e->cut[0] = 0;
    int seen_params = 0;
    for (int i = 0; i < w->n_layers; i++) {
        const int params = w->layers[i].weight_count > 0;
        if (params && seen_params)
            e->cut[++e->segments] = i;
        seen_params |= params;
    }
    e->cut[++e->segments] = w->n_layers;
    e->parts = e->workers;
    return NULL;
}

static float *alloc_floats(size_t n, size_t *counter)
{
    if (counter)
        *counter += n * sizeof(float);
    return calloc(n ? n : 1, sizeof(float));
}

/* The stages' workloads and every buffer; NULL or why not. */
static const char *plan_buffers(engine *e)
{
    const int S = e->segments, P = e->parts, M = e->opt.micro_batches, cap = e->micro_cap;
    size_t largest_share = 0;
    for (int s = 0; s < S; s++) {
        size_t offset = 0;
        for (int p = 0; p < P; p++) {
            stage *st = &e->st[s][p];
            const char *why = workload_stage(&e->w, e->cut[s], e->cut[s + 1], p, P, &st->w);
            if (why)
                return why;
            st->out_size = (size_t)shape3_size(st->w.layers[st->w.n_layers - 1].out);
            st->out_offset = offset;
            offset += st->out_size;
            if (!(st->params = alloc_floats(st->w.param_count, NULL)))
                return "out of memory";
            if (st->out_size > largest_share)
                largest_share = st->out_size;
        }
        e->size[s] = (size_t)shape3_size(e->w.layers[e->cut[s]].in);
        e->size[s + 1] = offset;
    }
    for (int s = 0; s <= S; s++)
        for (int m = 0; m < M; m++) {
            const size_t n = (size_t)cap * e->size[s];
            /* by layers a worker needs the boundaries on either side of its
             * stage, within layers every boundary (the gathered inputs) */
            for (int i = 0; i < e->workers; i++)
                if (e->opt.split == MP_SPLIT_FILTERS || s == i || s == i + 1)
                    e->exchange_bytes[i] += n * sizeof(float) * (s > 0 ? 2 : 1);
            e->act[s][m] = alloc_floats(n, NULL);
            e->grad[s][m] = s > 0 ? alloc_floats(n, NULL) : NULL;
            if (!e->act[s][m] || (s > 0 && !e->grad[s][m]))
                return "out of memory";
        }
    if (e->opt.split == MP_SPLIT_FILTERS) {
        size_t largest_input = 0;
        for (int s = 0; s < S; s++)
            largest_input = e->size[s] > largest_input ? e->size[s] : largest_input;
        for (int i = 0; i < e->workers; i++) {
            worker_state *w = &e->ws[i];
            w->share_out = alloc_floats((size_t)cap * largest_share, &e->exchange_bytes[i]);
            w->share_dout = alloc_floats((size_t)cap * largest_share, &e->exchange_bytes[i]);
            w->part_din = alloc_floats((size_t)cap * largest_input, &e->exchange_bytes[i]);
            if (!w->share_out || !w->share_dout || !w->part_din)
                return "out of memory";
        }
        if (e->distributed &&
            !(e->gathered = alloc_floats((size_t)e->workers * cap * largest_share,
                                         &e->exchange_bytes[e->first_local])))
            return "out of memory";
    }
    e->grads = alloc_floats(e->w.param_count, NULL);
    e->labels = calloc((size_t)e->cfg.batch_size, sizeof *e->labels);
    e->image_loss = calloc((size_t)e->cfg.batch_size, sizeof *e->image_loss);
    return e->grads && e->labels && e->image_loss ? NULL : "out of memory";
}

static engine *mp_create(const backend *inner, const mp_options *o, const workload *w,
                         const engine_config *cfg, char *err, size_t err_len)
{
    const char *why = NULL;
    if (o->workers < 1 || o->workers > MP_MAX_WORKERS)
        why = "workers must be 1 to 16";
    else if (o->micro_batches < 1 || o->micro_batches > MP_MAX_MICRO_BATCHES)
        why = "micro-batches must be 1 to 64";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if (cfg->precision == PREC_FP64)
        why = "model-parallel stages hand activations over as float, so fp64 is not offered";
    else if (!inner->stage_forward || !inner->stage_backward || !inner->apply_update)
        why = "the backend offers no model-parallel stages";
    else if (world_size() > 1 && o->workers != world_size())
        why = "under mpirun every rank is one worker: the workers must be the ranks";
    if (why) {
        snprintf(err, err_len, "model-parallel: %s", why);
        return NULL;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "model-parallel: out of memory");
        return NULL;
    }
    e->inner = inner;
    e->opt = *o;
    e->w = *w;
    e->cfg = *cfg;
    e->workers = o->workers;
    e->distributed = world_size() > 1;
    e->first_local = e->distributed ? world_rank() : 0;
    e->local_workers = e->distributed ? 1 : e->workers;
    e->micro_cap = (cfg->batch_size + o->micro_batches - 1) / o->micro_batches;
    if (inner->buffer_space == MEM_DEVICE) {
        char none[256];
        e->gpus = devmem_device_count(none, sizeof none); /* 0: create says why */
    }
    e->inner_cfg = *cfg;
    e->inner_cfg.batch_size = e->micro_cap;
    e->inner_cfg.stage_slots = o->micro_batches;
    e->inner_cfg.threads =
        cfg->threads > 0 ? (cfg->threads / o->workers > 0 ? cfg->threads / o->workers : 1)
                         : threads_per_worker(e->local_workers);
    if (!(why = plan_segments(e)))
        why = plan_buffers(e);
    if (!why) {
        if (pthread_mutex_init(&e->lock, NULL) || pthread_cond_init(&e->moved, NULL) ||
            pthread_barrier_init(&e->barrier, NULL, (unsigned)e->local_workers))
            why = "cannot make the workers' locks";
        else
            e->sync_ready = 1;
    }
    char team_err[256] = "";
    if (!why && !(e->team = worker_team_create(e->local_workers, team_err, sizeof team_err)))
        why = team_err;
    if (why) {
        snprintf(err, err_len, "model-parallel: %s", why);
        destroy(e);
        return NULL;
    }
    int rc = run_all(e, JOB_CREATE);
    if (e->distributed) { /* every rank creates, or none goes on */
        float failed = rc != 0;
        if (world_allreduce_floats(&failed, 1) || (failed > 0 && rc == 0)) {
            fail(e, "model-parallel: a worker on another rank could not be created");
            rc = -1;
        }
    }
    if (rc) {
        snprintf(err, err_len, "%s", e->err);
        destroy(e);
        return NULL;
    }
    return e;
}

/* The wrapped backends ------------------------------------------------------ */

static const mp_options *options_of(const wrapped_backend *w) { return w->options; }

static int wrapped_probe(void *ctx, char *why, size_t why_len)
{
    wrapped_backend *w = ctx;
    if (!backend_runnable(w->inner, PREC_FP32, why, why_len))
        return 0;
    if (!w->inner->stage_forward || !w->inner->stage_backward) {
        snprintf(why, why_len, "%s offers no model-parallel stages", w->inner->name);
        return 0;
    }
    w->b.precisions = w->inner->precisions & ~(1u << PREC_FP64 | 1u << PREC_FP16);
    w->b.library_info = w->inner->library_info;
    return 1;
}

static int wrapped_probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    const wrapped_backend *w = ctx;
    if (p == PREC_FP64) {
        snprintf(why, why_len, "model-parallel stages hand activations over as float");
        return 0;
    }
    if (p == PREC_FP16) {
        snprintf(why, why_len, "model-parallel stages offer no fp16: its loss scale belongs to "
                               "the whole network");
        return 0;
    }
    return backend_runnable(w->inner, p, why, why_len);
}

static engine *wrapped_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                              size_t err_len)
{
    const wrapped_backend *m = ctx;
    return mp_create(m->inner, options_of(m), w, cfg, err, err_len);
}

static const backend mp_entries = {
    .probe = wrapped_probe,
    .probe_precision = wrapped_probe_precision,
    .create = wrapped_create,
    .destroy = destroy,
    .error = error,
    .set_params = set_params,
    .get_params = get_params,
    .bind_dataset = bind_dataset,
    .train_steps = train_steps,
    .evaluate = evaluate,
    .compute_gradients = compute_gradients,
    .apply_update = apply_update,
    .buffer = buffer,
    .buffer_space = MEM_HOST,
    .placement = placement,
    .describe = describe,
    .peak_memory = peak_memory,
    .memory_use = memory_use_entry,
};

const mp_options *mp_options_of(const backend *b)
{
    const wrapped_backend *w = wrapper_from(b, &mp_entries);
    return w ? options_of(w) : NULL;
}

const backend *mp_wrap(const backend *inner, const mp_options *o, const char *name)
{
    char tail[64];
    snprintf(tail, sizeof tail, "model-parallel by %s", mp_split_name(o->split));
    return wrap_backend(&mp_entries, inner, o, sizeof *o, name, tail);
}
