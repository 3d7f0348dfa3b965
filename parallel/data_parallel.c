/* The data-parallel coordinator (see data_parallel.h). Each local replica
 * is driven by its own thread of a worker team; every call below runs one
 * job on all replicas (data_parallel_replicas.c) and then looks at what
 * each of them reported. Collectives across processes (the per-step loss
 * and the agreement that every rank succeeded) go through a host MPI
 * communicator, once per step, so ranks stay in step whatever chunks of
 * steps the harness hands each of them. */
#include "parallel/data_parallel_impl.h"

static const char *error(engine *e) { return e ? dp_of(e)->err : "data-parallel: no engine"; }

/* The entries ------------------------------------------------------------ */

static int set_params(engine *handle, const float *params)
{
    dp_engine *e = dp_of(handle);
    e->params_in = params;
    e->steps_done = e->since_average = 0;
    return dp_run_all(e, JOB_SET_PARAMS);
}

static int bind_dataset(engine *handle, const dataset *train, const dataset *test)
{
    dp_engine *e = dp_of(handle);
    e->train = train;
    e->test = test;
    return dp_run_all(e, JOB_BIND);
}

/* Synchronous: one step of `batch` images on every replica. */
static int sync_step(dp_engine *e, const int32_t *indices, int batch, float *loss)
{
    e->indices = indices;
    e->batch = batch;
    const int failed = dp_run_all(e, JOB_GRADIENTS) != 0;
    float sum = 0.0f;
    for (int l = 0; l < e->local; l++) {
        replica *r = &e->rep[l];
        if (r->rc)
            continue;
        int start, count;
        share_of(batch, e->total, r->global, &start, &count);
        sum += r->loss * ((float)count / (float)batch);
    }
    if (dp_agree(e, &sum, 1, failed, e->steps_done) != 0)
        return -1;
    if (dp_run_all(e, JOB_REDUCE_UPDATE) != 0)
        return dp_end_job_if_ranks(e);
    *loss = sum;
    e->steps_done++;
    return 0;
}

static int average_now(dp_engine *e)
{
    if (dp_run_all(e, JOB_AVERAGE) != 0)
        return dp_end_job_if_ranks(e);
    e->since_average = 0;
    return 0;
}

/* Averaging: steps [t0, t0 + steps) of the job, batch t on replica t mod R.
 * Steps are taken a round (R consecutive steps) at a time, the replicas of
 * a round in parallel; a round cut by the end of the call finishes in the
 * next call. Which replica trains which batch, and when parameters are
 * averaged, depend only on the global step count. */
static int averaging_steps(dp_engine *e, const int32_t *indices, int batch, int steps,
                           float *losses)
{
    const long R = e->total, window = (long)e->opt.averaging_frequency * R;
    long t = e->steps_done;
    const long end = t + steps;
    e->batch = batch;
    while (t < end) {
        const long round_first = t / R * R;
        const long hi = round_first + R < end ? round_first + R : end;
        e->indices = indices + (size_t)(t - e->steps_done) * batch;
        e->round_first = round_first;
        e->group_lo = t;
        e->group_hi = hi;
        const int failed = dp_run_all(e, JOB_TRAIN_OWN) != 0;
        /* each step's loss comes from the replica that trained it */
        float v[DP_MAX_REPLICAS];
        for (long s = t; s < hi; s++)
            v[s - t] = 0.0f;
        for (int l = 0; l < e->local; l++) {
            const replica *r = &e->rep[l];
            if (!r->rc && r->has_work)
                v[round_first + r->global - t] = r->loss;
        }
        /* once per step, whatever the grouping, so every rank makes the
         * same calls even when the harness cut its chunks differently */
        for (long s = t; s < hi; s++) {
            float one = v[s - t];
            if (dp_agree(e, &one, 1, failed, s) != 0)
                return -1;
            if (losses)
                losses[(size_t)(s - e->steps_done)] = one;
        }
        e->since_average += hi - t;
        t = hi;
        if (e->since_average >= window && average_now(e) != 0)
            return -1;
    }
    e->steps_done = end;
    return 0;
}

static int train_steps(engine *handle, const int32_t *indices, int batch, int steps, float *losses)
{
    dp_engine *e = dp_of(handle);
    if (batch < 1 || batch > e->cfg.batch_size)
        return dp_fail(e, "data-parallel: batch of %d images, engine was created for 1..%d", batch,
                       e->cfg.batch_size);
    if (e->opt.averaging_frequency > 0)
        return averaging_steps(e, indices, batch, steps, losses);
    for (int s = 0; s < steps; s++) {
        float loss = 0.0f;
        if (sync_step(e, indices + (size_t)s * batch, batch, &loss) != 0)
            return -1;
        if (losses)
            losses[s] = loss;
    }
    return 0;
}

/* Rank 0's scores reach every rank, so every rank takes the same decisions
 * (a NaN test loss, a reached target) and none runs ahead into collectives
 * the others will not make. Counts up to 2^24 travel exactly as floats. */
static int share_evaluation(dp_engine *e, int rc, eval_counts *out)
{
    const int k = e->w.classes * e->w.classes;
    float buf[3 + WORKLOAD_MAX_CLASSES * WORKLOAD_MAX_CLASSES];
    memset(buf, 0, sizeof buf);
    if (world_rank() == 0) {
        buf[0] = rc ? 1.0f : 0.0f;
        buf[1] = (float)out->count;
        buf[2] = (float)out->loss_sum;
        for (int i = 0; i < k; i++)
            buf[3 + i] = (float)out->confusion[i];
    }
    if (comm_broadcast(e->proc, buf, (size_t)(3 + k), 0) != 0) {
        fprintf(stderr, "bench: rank %d: %s\n", world_rank(), comm_error(e->proc));
        world_abort(1);
    }
    if (world_rank() == 0)
        return rc;
    if (buf[0] != 0.0f)
        return dp_fail(e, "data-parallel: rank 0 failed to evaluate (see its message)");
    out->count = (long)buf[1];
    out->loss_sum = buf[2];
    for (int i = 0; i < k; i++)
        out->confusion[i] = (long)buf[3 + i];
    return 0;
}

static int evaluate(engine *handle, int limit, eval_counts *out)
{
    dp_engine *e = dp_of(handle);
    /* every rank averages at the same point; rank 0 alone scores */
    if (e->opt.averaging_frequency > 0 && e->since_average > 0 && average_now(e) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->classes = e->w.classes;
    int rc = 0;
    if (world_rank() == 0) {
        e->eval_out = out;
        e->eval_limit = limit;
        rc = dp_run_all(e, JOB_EVALUATE);
    }
    return e->proc ? share_evaluation(e, rc, out) : rc;
}

static int get_params(engine *handle, float *params)
{
    dp_engine *e = dp_of(handle);
    if (e->opt.averaging_frequency > 0 && e->since_average > 0) {
        if (e->ranks > 1)
            return dp_fail(e, "data-parallel: parameters were not averaged since the last step "
                           "(evaluate first)");
        if (average_now(e) != 0)
            return -1;
    }
    e->params_out = params;
    return dp_run_all(e, JOB_GET_PARAMS);
}

static void placement(engine *handle, int *threads, int *devices, int *replicas)
{
    dp_engine *e = dp_of(handle);
    int t, d, r;
    backend_placement(e->inner, e->rep[0].e, &t, &d, &r);
    /* the whole job's hardware: threads and GPUs over every replica */
    *threads = t * e->total;
    *replicas = e->total;
    if (d == 0) {
        *devices = 0;
        return;
    }
    int distinct = 0;
    for (int l = 0; l < e->local; l++) {
        int seen = 0;
        for (int k = 0; k < l; k++)
            seen |= e->rep[k].device == e->rep[l].device;
        distinct += !seen;
    }
    *devices = distinct * e->ranks;
}

static void dp_describe(engine *handle, char *buf, size_t len)
{
    dp_engine *e = dp_of(handle);
    e->describe_buf[0] = '\0';
    dp_run_all(e, JOB_DESCRIBE);
    char mode[128];
    if (e->opt.averaging_frequency > 0)
        snprintf(mode, sizeof mode, "parameters%s averaged every %d steps",
                 e->opt.average_optimizer_state ? " and optimiser state" : "",
                 e->opt.averaging_frequency);
    else
        snprintf(mode, sizeof mode, "synchronous gradient all-reduce");
    snprintf(buf, len, "%d replicas of %s (%s; %s), each: %s", e->total, e->inner->name, mode,
             e->comm_desc, e->describe_buf[0] ? e->describe_buf : "-");
}

/* One replica's: each holds the same. */
static void memory_use_entry(engine *handle, memory_use *out)
{
    dp_engine *e = dp_of(handle);
    backend_memory_use(e->inner, e->rep[0].e, out);
}

static size_t peak_memory(engine *handle)
{
    dp_engine *e = dp_of(handle);
    size_t peak = 0;
    for (int l = 0; l < e->local; l++) {
        size_t p = backend_peak_memory(e->inner, e->rep[l].e);
        peak = p > peak ? p : peak;
    }
    return peak;
}

/* Every GPU of the job: the peak of one, times the GPUs in use. */
static double peak_gflops(engine *handle)
{
    dp_engine *e = dp_of(handle);
    if (!e->inner->ops->peak_gflops)
        return 0;
    int threads, devices, replicas;
    placement(handle, &threads, &devices, &replicas);
    return backend_peak_gflops(e->inner, e->rep[0].e) * (devices > 0 ? devices : 1);
}

/* What the replicas' products run on (NULL: the precision's own) */
static const char *arithmetic(engine *handle)
{
    dp_engine *e = dp_of(handle);
    if (!e->inner->ops->arithmetic || e->local < 1 || !e->rep[0].e)
        return NULL;
    return e->inner->ops->arithmetic(e->rep[0].e);
}

/* The coordinator's entries, shared by every wrapped backend and
 * multi-gpu. It offers no data-parallel entries of its own (it is the
 * data parallelism) and no stages. */
static void destroy(engine *e) { dp_destroy(dp_of(e)); }

static const engine_ops dp_ops = {
    .destroy = destroy, .error = error, .set_params = set_params, .get_params = get_params,
    .bind_dataset = bind_dataset, .train_steps = train_steps, .evaluate = evaluate,
    .placement = placement, .describe = dp_describe, .peak_memory = peak_memory,
    .peak_gflops = peak_gflops, .memory_use = memory_use_entry, .arithmetic = arithmetic};

/* Backends ------------------------------------------------------------- */

/* A wrapped backend's options (parallel/wrap.h keeps the wrappers). */
static const dp_options *options_of(const wrapped_backend *w) { return w->options; }

static int wrapped_probe(void *ctx, char *why, size_t why_len)
{
    wrapped_backend *w = ctx;
    /* every backend runs fp32; the wrapper's precisions are the inner's
     * (wrapped_precisions), asked when wanted */
    if (!backend_runnable(w->inner, PREC_FP32, why, why_len) ||
        !backend_supports_data_parallel(w->inner, why, why_len))
        return 0;
    if (options_of(w)->spread_over_gpus && world_size() > 1) {
        snprintf(why, why_len, "uses the GPUs of one process; under mpirun run --backend %s, "
                               "one GPU per rank", w->inner->name);
        return 0;
    }
    if (options_of(w)->spread_over_gpus && devmem_device_count(why, why_len) < 1)
        return 0;
    return 1;
}

static engine *wrapped_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                              size_t err_len)
{
    const wrapped_backend *d = ctx;
    return (engine *)dp_create(d->inner, options_of(d), w, cfg, err, err_len);
}

static const backend dp_entries = {
    .precisions_of = wrapped_precisions, .probe = wrapped_probe,
    .probe_precision = wrapped_probe_precision, .create = wrapped_create,
    .library_info = wrapped_library_info, .ops = &dp_ops};

/* The wrapper behind b, or NULL when b is not one. */
static const wrapped_backend *wrapper_of(const backend *b) { return wrapper_from(b, &dp_entries); }

const backend *dp_wrap(const backend *inner, const dp_options *o, const char *name)
{
    return wrap_backend(&dp_entries, CROSS_REDUCE, inner, o, sizeof *o, name, "data-parallel");
}

/* multi-gpu ------------------------------------------------------------- */

static const dp_options multi_gpu_defaults = {.replicas = 0, .spread_over_gpus = 1};

static int multi_gpu_probe(void *ctx, char *why, size_t why_len)
{
    (void)ctx;
    wrapped_backend w = {.inner = backend_find("cuda"), .options = &multi_gpu_defaults};
    return wrapped_probe(&w, why, why_len);
}

static engine *multi_gpu_create(void *ctx, const workload *w, const engine_config *cfg,
                                char *err, size_t err_len)
{
    (void)ctx;
    return (engine *)dp_create(backend_find("cuda"), &multi_gpu_defaults, w, cfg, err, err_len);
}

/* Only once NCCL was loaded by this run: the system record never loads it. */
static void multi_gpu_library_info(void *ctx, char *buf, size_t len)
{
    (void)ctx;
    if (module_loaded("nccl"))
        nccl_version_string(buf, len);
    else if (len)
        buf[0] = '\0';
}

const backend multi_gpu_backend = {
    .name = "multi-gpu",
    .summary = "every visible GPU (--gpus N): cuda replicas, NCCL gradient all-reduce",
#ifdef HAVE_CUDA
    .built = 1,
#endif
    .not_built_reason = "needs the cuda backend (nvcc, cuDNN and cuBLAS at build time)",
    .probe = multi_gpu_probe,
    .create = multi_gpu_create,
    .library_info = multi_gpu_library_info,
    .ops = &dp_ops,
};

/* multi-gpu joins the registry as the program starts: the registry sits
 * below parallel/ and cannot name it. */
__attribute__((constructor)) static void register_multi_gpu(void)
{
    backend_register(&multi_gpu_backend);
}

const backend *dp_inner(const backend *b)
{
    const wrapped_backend *w = wrapper_of(b);
    return w ? w->inner : NULL;
}

const char *dp_base_name(const backend *b)
{
    if (b == &multi_gpu_backend)
        return "cuda";
    const wrapped_backend *w = wrapper_of(b);
    return w ? w->inner->name : NULL;
}
