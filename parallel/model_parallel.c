/* The model-parallel coordinator (see model_parallel.h). One thread per
 * worker; a job runs a program on every worker at once. In the by-layers
 * split the workers pass micro-batches along through counters (stage k
 * waits until stage k - 1 has finished micro-batch m); in the split within
 * layers every worker takes part in every layer, and a barrier separates
 * writing the gathered activations from reading them
 * (model_schedule.c). */
#include "parallel/model_parallel_impl.h"

const char *mp_split_name(mp_split s) { return s == MP_SPLIT_FILTERS ? "filters" : "layers"; }

static const char *error(engine *e) { return e ? mp_of(e)->err : "model-parallel: no engine"; }

/* The contract's entries ---------------------------------------------------- */

static int set_params(engine *handle, const float *params)
{
    mp_engine *e = mp_of(handle);
    e->params_in = params;
    return mp_run_all(e, JOB_SET_PARAMS);
}

/* Across ranks each rank holds its shares: zeros elsewhere, then a sum. */
static int get_params(engine *handle, float *params)
{
    mp_engine *e = mp_of(handle);
    e->params_out = params;
    if (e->distributed)
        memset(params, 0, sizeof(float) * e->w.param_count);
    if (mp_run_all(e, JOB_GET_PARAMS))
        return -1;
    if (e->distributed && world_allreduce_floats(params, e->w.param_count))
        return mp_fail(e, "model-parallel: gathering the parameters over the ranks failed");
    return 0;
}

static int bind_dataset(engine *handle, const dataset *train, const dataset *test)
{
    mp_engine *e = mp_of(handle);
    const shape3 in = e->w.input;
    const dataset *sets[2] = {train, test};
    for (int k = 0; k < 2; k++)
        if (sets[k] && (in.c != 1 || sets[k]->rows != in.h || sets[k]->cols != in.w))
            return mp_fail(e, "model-parallel: %dx%d images do not fit workload %s (%dx%d)",
                           sets[k]->rows, sets[k]->cols, e->w.name, in.h, in.w);
    e->train = train;
    e->test = test;
    return 0;
}

/* Checks and takes the labels of images idx[0..n) (first.. when idx is
 * NULL) of d, and cuts the batch into micro-batches. */
static int prepare(mp_engine *e, const dataset *d, const int32_t *idx, int first, int n)
{
    if (!d)
        return mp_fail(e, "model-parallel: no data set bound");
    if (n < 1 || n > e->cfg.batch_size)
        return mp_fail(e, "model-parallel: batch of %d images, engine was created for 1..%d", n,
                       e->cfg.batch_size);
    for (int b = 0; b < n; b++) {
        const long i = idx ? idx[b] : first + b;
        if (i < 0 || i >= d->count)
            return mp_fail(e, "model-parallel: image index %ld out of range (0..%d)", i,
                           d->count - 1);
        if (d->labels[i] >= e->w.classes)
            return mp_fail(e, "model-parallel: label %d of image %ld out of range", d->labels[i],
                           i);
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
static int share_from_last(mp_engine *e, void *buf, size_t bytes)
{
    if (!e->distributed || e->opt.split != MP_SPLIT_LAYERS)
        return 0;
    if (world_broadcast_bytes(buf, bytes, e->workers - 1))
        return mp_fail(e, "model-parallel: sharing the last stage's results failed");
    return 0;
}

static int compute_step(mp_engine *e, const int32_t *indices, int batch, float *loss)
{
    if (prepare(e, e->train, indices, 0, batch) || mp_run_all(e, JOB_STEP) ||
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
static int train_steps(engine *handle, const int32_t *indices, int batch, int steps, float *losses)
{
    mp_engine *e = mp_of(handle);
    prefetch *pipe = NULL;
    char err[256];
    if (e->opt.prefetch > 0 && e->train &&
        !(pipe = prefetch_start(e->train, indices, batch, steps, e->opt.prefetch, err, sizeof err)))
        return mp_fail(e, "model-parallel: input pipeline: %s", err);
    int rc = 0;
    for (int t = 0; t < steps && rc == 0; t++) {
        const prefetch_batch *ready = pipe ? prefetch_take(pipe) : NULL;
        if (pipe && !ready) {
            const char *why = prefetch_error(pipe);
            rc = mp_fail(e, "model-parallel: input pipeline: %s", why ? why : "ended early");
            break;
        }
        e->prepared = ready ? ready->pixels : NULL;
        rc = compute_step(e, indices + (size_t)t * batch, batch, losses ? losses + t : NULL) ||
             mp_run_all(e, JOB_UPDATE);
    }
    e->prepared = NULL;
    prefetch_stop(pipe);
    return rc ? -1 : 0;
}

/* For a data-parallel wrapper (hybrid): the whole gradient in host memory. */
static int compute_gradients(engine *handle, const int32_t *indices, int batch, float *loss)
{
    mp_engine *e = mp_of(handle);
    return compute_step(e, indices, batch, loss) || mp_run_all(e, JOB_GATHER_GRADS) ? -1 : 0;
}

static int apply_update(engine *handle, float grad_scale)
{
    mp_engine *e = mp_of(handle);
    e->grad_scale = grad_scale;
    return mp_run_all(e, JOB_SCATTER_UPDATE);
}

static float *buffer(engine *handle, engine_buffer which, size_t *count)
{
    mp_engine *e = mp_of(handle);
    *count = which == BUF_GRADS ? e->w.param_count : 0;
    return which == BUF_GRADS ? e->grads : NULL;
}

static int evaluate(engine *handle, int limit, eval_counts *out)
{
    mp_engine *e = mp_of(handle);
    const dataset *d = e->test;
    if (!d)
        return mp_fail(e, "model-parallel: no test set bound");
    const int n = limit <= 0 || limit > d->count ? d->count : limit;
    const int C = e->w.classes, S = e->segments, round = e->cfg.batch_size;
    memset(out, 0, sizeof *out);
    out->classes = C;
    for (int first = 0; first < n; first += round) {
        const int count = n - first < round ? n - first : round;
        if (prepare(e, d, NULL, first, count) || mp_run_all(e, JOB_FORWARD))
            return -1;
        for (int m = 0; m < e->micro; m++)
            if (share_from_last(e, e->act[S][m], mp_boundary_bytes(e, S, m)))
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

static int worker_memory(mp_engine *e, int i, memory_use *out)
{
    if (i < 0 || i >= e->workers)
        return -1;
    stage *mine[WORKLOAD_MAX_LAYERS];
    const int n = mp_worker_stages(e, i, mine);
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
static void memory_use_entry(engine *handle, memory_use *out)
{
    mp_engine *e = mp_of(handle);
    memset(out, 0, sizeof *out);
    for (int i = e->first_local; i < e->first_local + e->local_workers; i++) {
        memory_use m;
        worker_memory(e, i, &m);
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

static void placement(engine *handle, int *threads, int *devices, int *replicas)
{
    mp_engine *e = mp_of(handle);
    int t, d, r;
    stage *mine[WORKLOAD_MAX_LAYERS] = {0};
    mp_worker_stages(e, e->first_local, mine);
    backend_placement(e->inner, mine[0]->e, &t, &d, &r);
    *threads = t * e->workers;
    *devices = d; /* one engine's; spread workers use as many GPUs as there are workers */
    if (d > 0 && e->gpus > 1)
        *devices = e->workers < e->gpus ? e->workers : e->gpus;
    *replicas = 1;
}

/* What the stages' products run on (NULL: the precision's own); a field
 * read, so the coordinator asks its first stage itself */
static const char *arithmetic(engine *handle)
{
    mp_engine *e = mp_of(handle);
    stage *mine[WORKLOAD_MAX_LAYERS] = {0};
    mp_worker_stages(e, e->first_local, mine);
    return e->inner->ops->arithmetic && mine[0] ? e->inner->ops->arithmetic(mine[0]->e) : NULL;
}

static void mp_describe(engine *handle, char *buf, size_t len)
{
    mp_engine *e = mp_of(handle);
    e->describe_buf[0] = '\0';
    mp_run_all(e, JOB_DESCRIBE);
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

static void mp_destroy(mp_engine *e)
{
    if (!e)
        return;
    if (e->team)
        mp_run_all(e, JOB_DESTROY);
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
static const char *plan_segments(mp_engine *e)
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
static const char *plan_buffers(mp_engine *e)
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

static mp_engine *mp_create(const backend *inner, const mp_options *o, const workload *w,
                            const engine_config *cfg, char *err, size_t err_len)
{
    const char *why = NULL;
    if (o->workers < 1 || o->workers > MP_MAX_WORKERS)
        why = "workers must be 1 to 16";
    else if (o->micro_batches < 1 || o->micro_batches > MP_MAX_MICRO_BATCHES)
        why = "micro-batches must be 1 to 64";
    else if (cfg->batch_size < 1)
        why = "batch size must be at least 1";
    else if (crossing_refusal(CROSS_STAGE, cfg->precision))
        why = crossing_refusal(CROSS_STAGE, cfg->precision);
    else if (!inner->stage || !inner->dp)
        why = "the backend offers no model-parallel stages";
    else if (world_size() > 1 && o->workers != world_size())
        why = "under mpirun every rank is one worker: the workers must be the ranks";
    if (why) {
        snprintf(err, err_len, "model-parallel: %s", why);
        return NULL;
    }
    mp_engine *e;
    COORDINATOR_NEW(e, "model-parallel", inner, o, w, cfg, err, err_len);
    if (!e)
        return NULL;
    e->workers = o->workers;
    e->distributed = world_size() > 1;
    e->first_local = e->distributed ? world_rank() : 0;
    e->local_workers = e->distributed ? 1 : e->workers;
    e->micro_cap = (cfg->batch_size + o->micro_batches - 1) / o->micro_batches;
    if (inner->dp->buffer_space == MEM_DEVICE) {
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
        mp_destroy(e);
        return NULL;
    }
    int rc = mp_run_all(e, JOB_CREATE);
    if (e->distributed) { /* every rank creates, or none goes on */
        float failed = rc != 0;
        if (world_allreduce_floats(&failed, 1) || (failed > 0 && rc == 0)) {
            mp_fail(e, "model-parallel: a worker on another rank could not be created");
            rc = -1;
        }
    }
    if (rc) {
        snprintf(err, err_len, "%s", e->err);
        mp_destroy(e);
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
    if (!w->inner->stage || !w->inner->dp) {
        snprintf(why, why_len, "%s offers no model-parallel stages", w->inner->name);
        return 0;
    }
    return 1;
}

/* The inner backend's precisions that may cross between stages. */
static unsigned crossable_precisions(void *ctx)
{
    unsigned crossable = 0;
    for (int p = 0; p < PRECISION_COUNT; p++)
        if (!crossing_refusal(CROSS_STAGE, (precision)p))
            crossable |= 1u << p;
    return wrapped_precisions(ctx) & crossable;
}

static engine *wrapped_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                              size_t err_len)
{
    const wrapped_backend *m = ctx;
    return (engine *)mp_create(m->inner, options_of(m), w, cfg, err, err_len);
}

static void destroy(engine *e) { mp_destroy(mp_of(e)); }

int mp_worker_memory(engine *e, int i, memory_use *out)
{
    return worker_memory(mp_of(e), i, out);
}

static const engine_ops mp_ops = {
    .destroy = destroy, .error = error, .set_params = set_params, .get_params = get_params,
    .bind_dataset = bind_dataset, .train_steps = train_steps, .evaluate = evaluate,
    .placement = placement, .describe = mp_describe, .peak_memory = peak_memory,
    .memory_use = memory_use_entry, .arithmetic = arithmetic};

/* So that a data-parallel coordinator can replicate the whole pipeline
 * (hybrid): its gradient is gathered into host memory. */
static const data_parallel_ops mp_data_parallel = {
    .compute_gradients = compute_gradients, .apply_update = apply_update, .buffer = buffer,
    .buffer_space = MEM_HOST};

static const backend mp_entries = {
    .precisions_of = crossable_precisions, .probe = wrapped_probe,
    .probe_precision = wrapped_probe_precision, .create = wrapped_create,
    .library_info = wrapped_library_info, .ops = &mp_ops, .dp = &mp_data_parallel};

const mp_options *mp_options_of(const backend *b)
{
    const wrapped_backend *w = wrapper_from(b, &mp_entries);
    return w ? options_of(w) : NULL;
}

const backend *mp_wrap(const backend *inner, const mp_options *o, const char *name)
{
    char tail[64];
    snprintf(tail, sizeof tail, "model-parallel by %s", mp_split_name(o->split));
    return wrap_backend(&mp_entries, CROSS_STAGE, inner, o, sizeof *o, name, tail);
}
