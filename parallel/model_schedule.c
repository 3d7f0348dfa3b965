/* The model-parallel workers' programs: how a job's steps run on every
 * worker at once, by layers or within layers. */
#include "parallel/model_parallel_impl.h"

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
static void worker_fail(mp_engine *e, int i, const stage *s, const char *what)
{
    worker_state *w = &e->ws[i];
    if (!w->rc)
        snprintf(w->err, sizeof w->err, "worker %d: %s: %s", i, what,
                 s && s->e ? e->inner->ops->error(s->e) : "no engine");
    w->rc = -1;
    if (e->distributed)
        end_job(w->err);
    pthread_mutex_lock(&e->lock);
    e->failed = 1;
    pthread_cond_broadcast(&e->moved);
    pthread_mutex_unlock(&e->lock);
}

/* Waits until *counter reaches value; -1 when the job failed meanwhile. */
static int wait_for(mp_engine *e, const int *counter, int value)
{
    pthread_mutex_lock(&e->lock);
    while (*counter < value && !e->failed)
        pthread_cond_wait(&e->moved, &e->lock);
    const int failed = e->failed;
    pthread_mutex_unlock(&e->lock);
    return failed ? -1 : 0;
}

static void post(mp_engine *e, int *counter)
{
    pthread_mutex_lock(&e->lock);
    (*counter)++;
    pthread_cond_broadcast(&e->moved);
    pthread_mutex_unlock(&e->lock);
}

static int job_failed(mp_engine *e)
{
    pthread_mutex_lock(&e->lock);
    const int failed = e->failed;
    pthread_mutex_unlock(&e->lock);
    return failed;
}

/* The pieces of a step ------------------------------------------------------ */

/* Images [lo, hi) of micro-batch m as scaled pixels into act[0][m], unless
 * the input pipeline prepared them. */
static void fill_pixels(mp_engine *e, int m, int lo, int hi)
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
static const float *segment_input(const mp_engine *e, int s, int m)
{
    if (s == 0 && e->prepared)
        return e->prepared + (size_t)e->mb_start[m] * e->size[0];
    return e->act[s][m];
}

/* Images [lo, hi) of micro-batch m: their losses, and the gradient of the
 * batch's mean loss with respect to their logits. */
static void loss_of(mp_engine *e, int m, int lo, int hi)
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

size_t mp_boundary_bytes(const mp_engine *e, int s, int m)
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
static int pass_activation(mp_engine *e, int k, int m)
{
    if (!e->distributed) {
        post(e, &e->fwd_done[k + 1]);
        return 0;
    }
    if (world_send_bytes(e->act[k + 1][m], mp_boundary_bytes(e, k + 1, m), k + 1))
        return link_failed(k, "sending activations");
    return 0;
}

/* By layers: stage k's input of micro-batch m, once stage k - 1 has it. */
static int receive_activation(mp_engine *e, int k, int m)
{
    if (!e->distributed)
        return wait_for(e, &e->fwd_done[k], m + 1);
    if (world_recv_bytes(e->act[k][m], mp_boundary_bytes(e, k, m), k - 1))
        return link_failed(k, "receiving activations");
    return 0;
}

/* By layers: the gradient of stage k's input back to stage k - 1. */
static int pass_gradient(mp_engine *e, int k, int m)
{
    if (!e->distributed) {
        post(e, &e->bwd_done[k]);
        return 0;
    }
    if (world_send_bytes(e->grad[k][m], mp_boundary_bytes(e, k, m), k - 1))
        return link_failed(k, "sending gradients");
    return 0;
}

/* By layers: the gradient of stage k's output, once stage k + 1 has it. */
static int receive_gradient(mp_engine *e, int k, int m)
{
    if (!e->distributed)
        return wait_for(e, &e->bwd_done[k + 1], m + 1);
    if (world_recv_bytes(e->grad[k + 1][m], mp_boundary_bytes(e, k + 1, m), k + 1))
        return link_failed(k, "receiving gradients");
    return 0;
}

/* Worker k of the by-layers split: its stage's forward passes as the
 * micro-batches arrive, then (training) its backward passes as their
 * gradients arrive. The backward passes go in the forward order, so that
 * an engine that adds image after image into its gradients (naive) sums
 * in the same order as with the whole batch at once. */
static void layers_program(mp_engine *e, int k, int train)
{
    stage *s = &e->st[k][0];
    const int last = e->segments - 1, M = e->micro;
    for (int m = 0; m < M; m++) {
        if (k == 0)
            fill_pixels(e, m, 0, e->mb_count[m]);
        else if (receive_activation(e, k, m))
            return;
        if (e->inner->stage->stage_forward(s->e, m, segment_input(e, k, m), e->mb_count[m],
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
        if (e->inner->stage->stage_backward(s->e, m, e->grad[k + 1][m], k ? e->grad[k][m] : NULL,
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
static void gather_shares(mp_engine *e, int s, int i, int m)
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
static void sum_input_gradients(mp_engine *e, int s, int i, int m)
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
static void filters_program(mp_engine *e, int i, int train)
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
            if (!w->rc &&
                e->inner->stage->stage_forward(st->e, m, segment_input(e, s, m), n, w->share_out))
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
                if (e->inner->stage->stage_backward(st->e, m, w->share_dout, s ? w->part_din : NULL,
                                             m > 0))
                    worker_fail(e, i, st, "stage_backward");
            }
            if (s > 0)
                sum_input_gradients(e, s, i, m);
        }
    }
}

/* Gradients between a stage engine and its staging floats. */
static int stage_grads(mp_engine *e, stage *s, int to_engine)
{
    size_t n = 0;
    float *g = e->inner->dp->buffer(s->e, BUF_GRADS, &n); /* mp_create checked dp */
    if (!g || n != s->w.param_count)
        return -1;
    if (e->inner->dp->buffer_space == MEM_HOST) {
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
static int worker_device(const mp_engine *e, int i)
{
    if (e->inner->dp->buffer_space != MEM_DEVICE || e->gpus < 2)
        return e->cfg.device;
    const int k = e->distributed ? world_local_rank() : i;
    return (e->cfg.device + k) % e->gpus;
}

/* The stages worker i holds: (segment, part) pairs. */
int mp_worker_stages(mp_engine *e, int i, stage **out)
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
    mp_engine *e = ctx;
    const int i = e->first_local + local;
    const backend *b = e->inner;
    stage *mine[WORKLOAD_MAX_LAYERS];
    const int n = mp_worker_stages(e, i, mine);
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
        case JOB_CREATE:
            s->device = worker_device(e, i);
            s->e = member_create(b, &s->w, &e->inner_cfg, s->device, "worker", i, e->ws[i].err,
                                 sizeof e->ws[i].err);
            if (!s->e)
                e->ws[i].rc = -1;
            break;
        case JOB_DESTROY:
            member_destroy(b, &s->e);
            break;
        case JOB_SET_PARAMS:
            workload_stage_params_from(&s->w, s->params, e->params_in);
            if (b->ops->set_params(s->e, s->params))
                worker_fail(e, i, s, "set_params");
            break;
        case JOB_GET_PARAMS:
            if (b->ops->get_params(s->e, s->params))
                worker_fail(e, i, s, "get_params");
            else
                workload_stage_params_to(&s->w, s->params, e->params_out);
            break;
        case JOB_UPDATE:
            if (b->dp->apply_update(s->e, 1.0f))
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
            else if (b->dp->apply_update(s->e, e->grad_scale))
                worker_fail(e, i, s, "apply_update");
            break;
        default:
            break;
        }
    }
}

/* Runs `job` on every worker; 0, or -1 with the first error. */
int mp_run_all(mp_engine *e, job_kind job)
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
            return mp_fail(e, "model-parallel: %s", e->ws[i].err);
    return 0;
}
