/* The data-parallel coordinator (see coordinator.h). Each local replica is
 * driven by its own thread of a worker team; every call below runs one job
 * on all replicas and then looks at what each of them reported. Collectives
 * across processes (the per-step loss and the agreement that every rank
 * succeeded) go through a host MPI communicator, once per step, so ranks
 * stay in step whatever chunks of steps the harness hands each of them. */
#include "parallel/coordinator.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/module.h"
#include "backends/registry.h"
#include "parallel/comm.h"
#include "parallel/workers.h"
#include "parallel/wrap.h"
#include "parallel/world.h"

typedef enum job_kind {
    JOB_CREATE,
    JOB_DESTROY,
    JOB_SET_PARAMS,
    JOB_BIND,
    JOB_GRADIENTS, /* synchronous: gradients of this replica's slice */
    JOB_REDUCE_UPDATE,
    JOB_TRAIN_OWN, /* averaging: one step on this replica's own batch */
    JOB_AVERAGE,
    JOB_EVALUATE,
    JOB_GET_PARAMS,
    JOB_DESCRIBE,
} job_kind;

typedef struct replica {
    engine *e;
    communicator *comm; /* gradient and parameter collectives */
    int global;         /* index among all replicas of the job */
    int device;
    /* this job's outcome */
    int rc;
    float loss;
    int has_work;
    char err[384];
} replica;

struct engine {
    const backend *inner;
    dp_options opt;
    workload w;
    engine_config cfg;       /* as the harness gave it: batch = the global batch */
    engine_config inner_cfg; /* what each replica was created with */
    int local;               /* replicas in this process */
    int total;               /* replicas in the job */
    int ranks;
    replica rep[DP_MAX_REPLICAS];
    worker_team *team;
    inproc_group *group;
    communicator *proc; /* host scalars across ranks; NULL in one process */
    int peer_pairs;
    int gpus_visible; /* GPU engines spread over GPUs or ranks: devices seen here */
    char comm_desc[128];

    /* the current job */
    job_kind job;
    const float *params_in;
    float *params_out;
    const dataset *train, *test;
    const int32_t *indices; /* the step's (or round's) batch indices */
    int batch;              /* images per step */
    long round_first;       /* averaging: global step of the round's slot 0 */
    long group_lo, group_hi;
    eval_counts *eval_out;
    int eval_limit;
    char describe_buf[256];

    long steps_done;     /* global steps trained since set_params */
    long since_average;  /* global steps since the parameters were last averaged */
    char err[512];
};

static int fail(engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *error(engine *e) { return e ? e->err : "data-parallel: no engine"; }

/* The job each worker runs --------------------------------------------- */

static void set_rep_error(replica *r, const backend *b, const char *what)
{
    snprintf(r->err, sizeof r->err, "replica %d: %s: %s", r->global, what,
             r->e ? b->error(r->e) : "no engine");
    r->rc = -1;
}

static void run_job(void *ctx, int l)
{
    engine *e = ctx;
    replica *r = &e->rep[l];
    const backend *b = e->inner;
    size_t n = 0;
    r->rc = 0;
    r->err[0] = '\0';
    switch (e->job) {
    case JOB_CREATE: {
        engine_config c = e->inner_cfg;
        c.device = r->device;
        char err[300] = "";
        r->e = backend_create(b, &e->w, &c, err, sizeof err);
        if (!r->e) {
            snprintf(r->err, sizeof r->err, "replica %d: %s", r->global, err[0] ? err : "create failed");
            r->rc = -1;
        }
        break;
    }
    case JOB_DESTROY:
        if (r->e)
            b->destroy(r->e);
        r->e = NULL;
        break;
    case JOB_SET_PARAMS:
        if (b->set_params(r->e, e->params_in) != 0)
            set_rep_error(r, b, "set_params");
        break;
    case JOB_BIND:
        if (b->bind_dataset(r->e, e->train, e->test) != 0)
            set_rep_error(r, b, "bind_dataset");
        break;
    case JOB_GRADIENTS: {
        int start, count;
        share_of(e->batch, e->total, r->global, &start, &count);
        r->has_work = count > 0;
        /* an empty slice still computes on one image, weighted 0 below, so
         * its gradient buffer holds finite numbers for the reduction */
        if (b->compute_gradients(r->e, e->indices + (count ? start : 0), count ? count : 1,
                                 &r->loss) != 0)
            set_rep_error(r, b, "compute_gradients");
        break;
    }
    case JOB_REDUCE_UPDATE: {
        int start, count;
        share_of(e->batch, e->total, r->global, &start, &count);
        float *grads = b->buffer(r->e, BUF_GRADS, &n);
        if (!grads || n != e->w.param_count) {
            snprintf(r->err, sizeof r->err, "replica %d: no gradient buffer", r->global);
            r->rc = -1;
            grads = NULL;
        }
        /* take part even on failure, so the others are not left waiting */
        if (comm_allreduce_sum(r->comm, grads, grads ? n : e->w.param_count,
                               (float)count / (float)e->batch) != 0 && r->rc == 0) {
            snprintf(r->err, sizeof r->err, "replica %d: %s", r->global, comm_error(r->comm));
            r->rc = -1;
        }
        if (r->rc == 0 && b->apply_update(r->e, 1.0f) != 0)
            set_rep_error(r, b, "apply_update");
        break;
    }
    case JOB_TRAIN_OWN: {
        /* this replica's batch in the round, if the group holds it */
        const long t = e->round_first + r->global;
        r->has_work = t >= e->group_lo && t < e->group_hi;
        if (r->has_work &&
            b->train_steps(r->e, e->indices + (size_t)(t - e->group_lo) * e->batch, e->batch, 1,
                           &r->loss) != 0)
            set_rep_error(r, b, "train_steps");
        break;
    }
    case JOB_AVERAGE: {
        const engine_buffer which[2] = {BUF_PARAMS, BUF_OPT_STATE};
        const int buffers = e->opt.average_optimizer_state ? 2 : 1;
        for (int k = 0; k < buffers; k++) {
            float *buf = b->buffer(r->e, which[k], &n);
            if (k == 1 && n == 0)
                break; /* sgd: no state */
            if (!buf && r->rc == 0) {
                snprintf(r->err, sizeof r->err, "replica %d: no %s buffer", r->global,
                         k ? "optimiser state" : "parameter");
                r->rc = -1;
            }
            if (comm_allreduce_sum(r->comm, buf, n, 1.0f / (float)e->total) != 0 && r->rc == 0) {
                snprintf(r->err, sizeof r->err, "replica %d: %s", r->global, comm_error(r->comm));
                r->rc = -1;
            }
        }
        break;
    }
    case JOB_EVALUATE:
        if (l == 0 && b->evaluate(r->e, e->eval_limit, e->eval_out) != 0)
            set_rep_error(r, b, "evaluate");
        break;
    case JOB_GET_PARAMS:
        if (l == 0 && b->get_params(r->e, e->params_out) != 0)
            set_rep_error(r, b, "get_params");
        break;
    case JOB_DESCRIBE:
        if (l == 0)
            backend_describe(b, r->e, e->describe_buf, sizeof e->describe_buf);
        break;
    }
}

/* Runs `job` on every local replica; 0, or -1 with the first error. */
static int run_all(engine *e, job_kind job)
{
    e->job = job;
    worker_team_run(e->team, run_job, e);
    for (int l = 0; l < e->local; l++)
        if (e->rep[l].rc)
            return fail(e, "%s", e->rep[l].err);
    return 0;
}

/* Across ranks: sums v[0..n) and tells whether any rank failed (failed is
 * this rank's flag). Every rank calls it at the same points. 0 when all
 * succeeded; -1 (with a message) otherwise. */
static int agree(engine *e, float *v, int n, int failed, long step)
{
    if (!e->proc)
        return failed ? -1 : 0;
    float buf[DP_MAX_REPLICAS + 1];
    memcpy(buf, v, sizeof(float) * (size_t)n);
    buf[n] = failed ? 1.0f : 0.0f;
    if (comm_allreduce_sum(e->proc, buf, (size_t)n + 1, 1.0f) != 0) {
        /* the other ranks cannot know: end the job rather than hang */
        fprintf(stderr, "bench: rank %d: %s\n", world_rank(), comm_error(e->proc));
        world_abort(1);
    }
    memcpy(v, buf, sizeof(float) * (size_t)n);
    if (buf[n] > 0 && !failed) {
        if (step < 0)
            return fail(e, "data-parallel: another rank failed to start (see its message)");
        return fail(e, "data-parallel: another rank failed at step %ld (see its message)",
                    step + 1);
    }
    return failed ? -1 : 0;
}

/* A failure after a collective began on this rank alone cannot be agreed
 * on any more: with several ranks, end the job instead of leaving the
 * others waiting. */
static int end_job_if_ranks(engine *e)
{
    if (e->ranks > 1) {
        fprintf(stderr, "bench: rank %d: %s; ending the job\n", world_rank(), e->err);
        world_abort(1);
    }
    return -1;
}

/* The entries ------------------------------------------------------------ */

static int set_params(engine *e, const float *params)
{
    e->params_in = params;
    e->steps_done = e->since_average = 0;
    return run_all(e, JOB_SET_PARAMS);
}

static int bind_dataset(engine *e, const dataset *train, const dataset *test)
{
    e->train = train;
    e->test = test;
    return run_all(e, JOB_BIND);
}

/* Synchronous: one step of `batch` images on every replica. */
static int sync_step(engine *e, const int32_t *indices, int batch, float *loss)
{
    e->indices = indices;
    e->batch = batch;
    e->job = JOB_GRADIENTS;
    worker_team_run(e->team, run_job, e);
    float sum = 0.0f;
    int failed = 0;
    for (int l = 0; l < e->local; l++) {
        replica *r = &e->rep[l];
        if (r->rc) {
            if (!failed)
                fail(e, "%s", r->err);
            failed = 1;
            continue;
        }
        int start, count;
        share_of(batch, e->total, r->global, &start, &count);
        sum += r->loss * ((float)count / (float)batch);
    }
    if (agree(e, &sum, 1, failed, e->steps_done) != 0)
        return -1;
    if (run_all(e, JOB_REDUCE_UPDATE) != 0)
        return end_job_if_ranks(e);
    *loss = sum;
    e->steps_done++;
    return 0;
}

static int average_now(engine *e)
{
    if (run_all(e, JOB_AVERAGE) != 0)
        return end_job_if_ranks(e);
    e->since_average = 0;
    return 0;
}

/* Averaging: steps [t0, t0 + steps) of the job, batch t on replica t mod R.
 * Steps are taken a round (R consecutive steps) at a time, the replicas of
 * a round in parallel; a round cut by the end of the call finishes in the
 * next call. Which replica trains which batch, and when parameters are
 * averaged, depend only on the global step count. */
static int averaging_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
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
        e->job = JOB_TRAIN_OWN;
        worker_team_run(e->team, run_job, e);
        /* each step's loss comes from the replica that trained it */
        float v[DP_MAX_REPLICAS];
        int failed = 0;
        for (long s = t; s < hi; s++)
            v[s - t] = 0.0f;
        for (int l = 0; l < e->local; l++) {
            replica *r = &e->rep[l];
            if (r->rc) {
                if (!failed)
                    fail(e, "%s", r->err);
                failed = 1;
            } else if (r->has_work) {
                v[round_first + r->global - t] = r->loss;
            }
        }
        /* once per step, whatever the grouping, so every rank makes the
         * same calls even when the harness cut its chunks differently */
        for (long s = t; s < hi; s++) {
            float one = v[s - t];
            if (agree(e, &one, 1, failed, s) != 0)
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

static int train_steps(engine *e, const int32_t *indices, int batch, int steps, float *losses)
{
    if (batch < 1 || batch > e->cfg.batch_size)
        return fail(e, "data-parallel: batch of %d images, engine was created for 1..%d", batch,
                    e->cfg.batch_size);
    if (e->opt.averaging_frequency > 0)
        return averaging_steps(e, indices, batch, steps, losses);
    for (int s = 0; s < steps; s++) {
        float loss;
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
static int share_evaluation(engine *e, int rc, eval_counts *out)
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
        return fail(e, "data-parallel: rank 0 failed to evaluate (see its message)");
    out->count = (long)buf[1];
    out->loss_sum = buf[2];
    for (int i = 0; i < k; i++)
        out->confusion[i] = (long)buf[3 + i];
    return 0;
}

static int evaluate(engine *e, int limit, eval_counts *out)
{
    /* every rank averages at the same point; rank 0 alone scores */
    if (e->opt.averaging_frequency > 0 && e->since_average > 0 && average_now(e) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    out->classes = e->w.classes;
    int rc = 0;
    if (world_rank() == 0) {
        e->eval_out = out;
        e->eval_limit = limit;
        rc = run_all(e, JOB_EVALUATE);
    }
    return e->proc ? share_evaluation(e, rc, out) : rc;
}

static int get_params(engine *e, float *params)
{
    if (e->opt.averaging_frequency > 0 && e->since_average > 0) {
        if (e->ranks > 1)
            return fail(e, "data-parallel: parameters were not averaged since the last step "
                           "(evaluate first)");
        if (average_now(e) != 0)
            return -1;
    }
    e->params_out = params;
    return run_all(e, JOB_GET_PARAMS);
}

static float *buffer(engine *e, engine_buffer which, size_t *count)
{
    /* replica 0's: in synchronous mode every replica holds the same */
    return e->inner->buffer(e->rep[0].e, which, count);
}

static void placement(engine *e, int *threads, int *devices, int *replicas)
{
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

static void describe(engine *e, char *buf, size_t len)
{
    e->describe_buf[0] = '\0';
    run_all(e, JOB_DESCRIBE);
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
static void memory_use_entry(engine *e, memory_use *out)
{
    backend_memory_use(e->inner, e->rep[0].e, out);
}

static size_t peak_memory(engine *e)
{
    size_t peak = 0;
    for (int l = 0; l < e->local; l++) {
        size_t p = backend_peak_memory(e->inner, e->rep[l].e);
        peak = p > peak ? p : peak;
    }
    return peak;
}

/* Every GPU of the job: the peak of one, times the GPUs in use. */
static double peak_gflops(engine *e)
{
    if (!e->inner->peak_gflops)
        return 0;
    int threads, devices, replicas;
    placement(e, &threads, &devices, &replicas);
    return backend_peak_gflops(e->inner, e->rep[0].e) * (devices > 0 ? devices : 1);
}

static void destroy(engine *e)
{
    if (!e)
        return;
    if (e->team)
        run_all(e, JOB_DESTROY);
    for (int l = 0; l < e->local; l++)
        if (!e->group)
            comm_destroy(e->rep[l].comm);
    inproc_group_destroy(e->group);
    comm_destroy(e->proc);
    worker_team_destroy(e->team);
    free(e);
}

/* Creation --------------------------------------------------------------- */

/* Picks each replica's device and the communicator kind. */
static int plan_devices(engine *e, const engine_config *cfg)
{
    const int on_device = e->inner->buffer_space == MEM_DEVICE;
    int devices = 0;
    char why[256] = "";
    if (on_device && (e->opt.spread_over_gpus || e->ranks > 1)) {
        devices = devmem_device_count(why, sizeof why);
        if (devices < 1)
            return fail(e, "data-parallel: %s", why);
    }
    e->gpus_visible = devices;
    for (int l = 0; l < e->local; l++) {
        replica *r = &e->rep[l];
        r->global = world_rank() * e->local + l;
        if (on_device && e->ranks > 1)
            r->device = world_local_rank() % devices; /* one GPU per rank */
        else if (on_device && e->opt.spread_over_gpus)
            r->device = l % devices;
        else
            r->device = cfg->device;
    }
    return 0;
}

static int make_communicators(engine *e)
{
    char err[256] = "";
    const memory_space space = e->inner->buffer_space;
    if (e->ranks > 1) {
        replica *r = &e->rep[0];
        /* NCCL wants a GPU of its own per rank: if ranks share GPUs
         * anywhere, every rank reduces through MPI instead */
        float shared = space == MEM_DEVICE && world_local_size() > e->gpus_visible;
        if (agree(e, &shared, 1, 0, -1) != 0)
            return -1;
        if (space == MEM_DEVICE && nccl_available(NULL, 0) && shared == 0.0f) {
            r->comm = nccl_comm_create_rank(r->device, world_rank(), e->ranks,
                                            world_broadcast_bytes, err, sizeof err);
            snprintf(e->comm_desc, sizeof e->comm_desc, "NCCL over %d MPI ranks", e->ranks);
        } else {
            r->comm = mpi_comm_create(space, r->device, err, sizeof err);
            snprintf(e->comm_desc, sizeof e->comm_desc, "MPI_Allreduce over %d ranks%s%s",
                     e->ranks, space == MEM_DEVICE ? ", staged through host memory" : "",
                     shared > 0 ? " (ranks share GPUs)" : "");
        }
        if (!r->comm) {
            /* a rank that fails here leaves the others in a collective */
            fprintf(stderr, "bench: rank %d: data-parallel: %s; ending the job\n", world_rank(),
                    err);
            world_abort(1);
        }
        return 0;
    }
    int devices[DP_MAX_REPLICAS], distinct = 1;
    for (int l = 0; l < e->local; l++) {
        devices[l] = e->rep[l].device;
        for (int k = 0; k < l; k++)
            distinct &= devices[k] != devices[l];
    }
    if (space == MEM_DEVICE && e->opt.spread_over_gpus && distinct && nccl_available(NULL, 0)) {
        communicator *comms[DP_MAX_REPLICAS];
        if (nccl_comms_create_local(e->local, devices, comms, &e->peer_pairs, err, sizeof err))
            return fail(e, "data-parallel: %s", err);
        for (int l = 0; l < e->local; l++)
            e->rep[l].comm = comms[l];
        snprintf(e->comm_desc, sizeof e->comm_desc, "NCCL over %d GPUs, peer access on %d pairs",
                 e->local, e->peer_pairs);
        return 0;
    }
    e->group = inproc_group_create(e->local, space, devices, err, sizeof err);
    if (!e->group)
        return fail(e, "data-parallel: %s", err);
    for (int l = 0; l < e->local; l++)
        e->rep[l].comm = inproc_group_member(e->group, l);
    snprintf(e->comm_desc, sizeof e->comm_desc, "in-process all-reduce over %d threads%s",
             e->local, space == MEM_DEVICE ? ", staged through host memory" : "");
    return 0;
}

static engine *dp_create(const backend *inner, const dp_options *o, const workload *w,
                         const engine_config *cfg, char *err, size_t err_len)
{
    char why[256];
    if (!backend_supports_data_parallel(inner, why, sizeof why)) {
        snprintf(err, err_len, "%s", why);
        return NULL;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "data-parallel: out of memory");
        return NULL;
    }
    e->inner = inner;
    e->opt = *o;
    e->w = *w;
    e->cfg = *cfg;
    e->ranks = world_size();
    e->local = o->replicas;
    if (e->local == 0 && o->spread_over_gpus && e->ranks == 1)
        e->local = devmem_device_count(why, sizeof why);
    const char *bad = NULL;
    if (crossing_refusal(CROSS_REDUCE, cfg->precision))
        bad = crossing_refusal(CROSS_REDUCE, cfg->precision);
    else if (e->local < 1)
        bad = o->spread_over_gpus ? why : "at least one replica is needed";
    else if (e->local > DP_MAX_REPLICAS)
        bad = "too many replicas (at most " "64" ")";
    else if (e->ranks > 1 && e->local != 1)
        bad = "under mpirun each rank holds one replica (use more ranks, not --replicas)";
    else if (o->averaging_frequency < 0)
        bad = "the averaging frequency must be 0 (synchronous) or more";
    if (bad) {
        snprintf(err, err_len, "data-parallel %s: %s", inner->name, bad);
        free(e);
        return NULL;
    }
    e->total = e->local * e->ranks;
    if (e->total > DP_MAX_REPLICAS) {
        snprintf(err, err_len, "data-parallel %s: %d replicas, at most %d", inner->name, e->total,
                 DP_MAX_REPLICAS);
        free(e);
        return NULL;
    }
    e->inner_cfg = *cfg;
    if (o->averaging_frequency == 0) /* the largest slice */
        e->inner_cfg.batch_size = (cfg->batch_size + e->total - 1) / e->total;
    if (cfg->threads == 0 && (e->local > 1 || e->ranks > 1))
        e->inner_cfg.threads = threads_per_worker(e->local);

    /* Ranks agree after each step that can fail on one rank alone, so that
     * either all go on or all give up; the host communicator comes first
     * (it cannot fail without ending the job). */
    if (e->ranks > 1 && !(e->proc = mpi_comm_create(MEM_HOST, -1, why, sizeof why))) {
        fprintf(stderr, "bench: rank %d: data-parallel: %s; ending the job\n", world_rank(), why);
        world_abort(1);
    }
    int failed = plan_devices(e, cfg) != 0;
    if (!failed && !(e->team = worker_team_create(e->local, why, sizeof why)))
        failed = fail(e, "data-parallel: %s", why);
    float nothing = 0.0f;
    if (agree(e, &nothing, 1, failed, -1) == 0 && make_communicators(e) == 0) {
        failed = run_all(e, JOB_CREATE) != 0;
        if (agree(e, &nothing, 1, failed, -1) == 0)
            return e;
    }
    snprintf(err, err_len, "%s", e->err);
    destroy(e);
    return NULL;
}

/* Backends ------------------------------------------------------------- */

/* A wrapped backend's options (parallel/wrap.h keeps the wrappers). */
static const dp_options *options_of(const wrapped_backend *w) { return w->options; }

static int wrapped_probe(void *ctx, char *why, size_t why_len)
{
    wrapped_backend *w = ctx;
    /* every backend runs fp32; the wrapper's precisions are the inner's */
    if (!backend_runnable(w->inner, PREC_FP32, why, why_len) ||
        !backend_supports_data_parallel(w->inner, why, why_len))
        return 0;
    /* what the inner backend says of itself, known now that it is loaded */
    w->b.precisions = w->inner->precisions;
    w->b.buffer_space = w->inner->buffer_space; /* buffer() hands out replica 0's */
    w->b.library_info = w->inner->library_info;
    if (options_of(w)->spread_over_gpus && world_size() > 1) {
        snprintf(why, why_len, "uses the GPUs of one process; under mpirun run --backend %s, "
                               "one GPU per rank", w->inner->name);
        return 0;
    }
    if (options_of(w)->spread_over_gpus && devmem_device_count(why, why_len) < 1)
        return 0;
    return 1;
}

static int wrapped_probe_precision(void *ctx, precision p, char *why, size_t why_len)
{
    const wrapped_backend *w = ctx;
    if (crossing_refusal(CROSS_REDUCE, p)) {
        snprintf(why, why_len, "%s", crossing_refusal(CROSS_REDUCE, p));
        return 0;
    }
    return backend_runnable(w->inner, p, why, why_len);
}

static engine *wrapped_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                              size_t err_len)
{
    const wrapped_backend *d = ctx;
    return dp_create(d->inner, options_of(d), w, cfg, err, err_len);
}

/* The coordinator's entries, shared by every wrapped backend and multi-gpu. */
#define DP_ENGINE_ENTRIES                                                                 \
    .destroy = destroy, .error = error, .set_params = set_params, .get_params = get_params, \
    .bind_dataset = bind_dataset, .train_steps = train_steps, .evaluate = evaluate,       \
    .buffer = buffer, .placement = placement, .describe = describe,                       \
    .peak_memory = peak_memory, .peak_gflops = peak_gflops, .memory_use = memory_use_entry

static const backend dp_entries = {
    .probe = wrapped_probe,
    .probe_precision = wrapped_probe_precision,
    .create = wrapped_create,
    DP_ENGINE_ENTRIES,
};

/* The wrapper behind b, or NULL when b is not one. */
static const wrapped_backend *wrapper_of(const backend *b) { return wrapper_from(b, &dp_entries); }

const backend *dp_wrap(const backend *inner, const dp_options *o, const char *name)
{
    return wrap_backend(&dp_entries, inner, o, sizeof *o, name, "data-parallel");
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
    return dp_create(backend_find("cuda"), &multi_gpu_defaults, w, cfg, err, err_len);
}

/* Only once NCCL was loaded by this run: the system record never loads it. */
static void multi_gpu_library_info(char *buf, size_t len)
{
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
    DP_ENGINE_ENTRIES,
    .buffer_space = MEM_DEVICE,
    .library_info = multi_gpu_library_info,
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
