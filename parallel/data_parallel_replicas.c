/* The data-parallel replicas: the job each one's thread runs, and making
 * them (the devices they run on, the communicators between them) and
 * ending them. */
#include "parallel/data_parallel_impl.h"

/* The job each worker runs --------------------------------------------- */

static void set_rep_error(replica *r, const backend *b, const char *what)
{
    snprintf(r->err, sizeof r->err, "replica %d: %s: %s", r->global, what,
             r->e ? b->ops->error(r->e) : "no engine");
    r->rc = -1;
}

void dp_run_job(void *ctx, int l)
{
    dp_engine *e = ctx;
    replica *r = &e->rep[l];
    const backend *b = e->inner;
    size_t n = 0;
    r->rc = 0;
    r->err[0] = '\0';
    switch (e->job) {
    case JOB_CREATE:
        r->e = member_create(b, &e->w, &e->inner_cfg, r->device, "replica", r->global, r->err,
                             sizeof r->err);
        if (!r->e)
            r->rc = -1;
        break;
    case JOB_DESTROY:
        member_destroy(b, &r->e);
        break;
    case JOB_SET_PARAMS:
        if (b->ops->set_params(r->e, e->params_in) != 0)
            set_rep_error(r, b, "set_params");
        break;
    case JOB_BIND:
        if (b->ops->bind_dataset(r->e, e->train, e->test) != 0)
            set_rep_error(r, b, "bind_dataset");
        break;
    case JOB_GRADIENTS: {
        int start, count;
        share_of(e->batch, e->total, r->global, &start, &count);
        r->has_work = count > 0;
        /* an empty slice still computes on one image, weighted 0 below, so
         * its gradient buffer holds finite numbers for the reduction */
        if (b->dp->compute_gradients(r->e, e->indices + (count ? start : 0), count ? count : 1,
                                 &r->loss) != 0)
            set_rep_error(r, b, "compute_gradients");
        break;
    }
    case JOB_REDUCE_UPDATE: {
        int start, count;
        share_of(e->batch, e->total, r->global, &start, &count);
        float *grads = b->dp->buffer(r->e, BUF_GRADS, &n);
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
        if (r->rc == 0 && b->dp->apply_update(r->e, 1.0f) != 0)
            set_rep_error(r, b, "apply_update");
        break;
    }
    case JOB_TRAIN_OWN: {
        /* this replica's batch in the round, if the group holds it */
        const long t = e->round_first + r->global;
        r->has_work = t >= e->group_lo && t < e->group_hi;
        if (r->has_work &&
            b->ops->train_steps(r->e, e->indices + (size_t)(t - e->group_lo) * e->batch,
                                e->batch, 1, &r->loss) != 0)
            set_rep_error(r, b, "train_steps");
        break;
    }
    case JOB_AVERAGE: {
        const engine_buffer which[2] = {BUF_PARAMS, BUF_OPT_STATE};
        const int buffers = e->opt.average_optimizer_state ? 2 : 1;
        for (int k = 0; k < buffers; k++) {
            float *buf = b->dp->buffer(r->e, which[k], &n);
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
        if (l == 0 && b->ops->evaluate(r->e, e->eval_limit, e->eval_out) != 0)
            set_rep_error(r, b, "evaluate");
        break;
    case JOB_GET_PARAMS:
        if (l == 0 && b->ops->get_params(r->e, e->params_out) != 0)
            set_rep_error(r, b, "get_params");
        break;
    case JOB_DESCRIBE:
        if (l == 0)
            backend_describe(b, r->e, e->describe_buf, sizeof e->describe_buf);
        break;
    }
}

/* Runs `job` on every local replica; 0, or -1 with the first error. */
int dp_run_all(dp_engine *e, job_kind job)
{
    e->job = job;
    worker_team_run(e->team, dp_run_job, e);
    for (int l = 0; l < e->local; l++)
        if (e->rep[l].rc)
            return dp_fail(e, "%s", e->rep[l].err);
    return 0;
}

/* Across ranks: sums v[0..n) and tells whether any rank failed (failed is
 * this rank's flag). Every rank calls it at the same points. 0 when all
 * succeeded; -1 (with a message) otherwise. */
int dp_agree(dp_engine *e, float *v, int n, int failed, long step)
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
            return dp_fail(e, "data-parallel: another rank failed to start (see its message)");
        return dp_fail(e, "data-parallel: another rank failed at step %ld (see its message)",
                       step + 1);
    }
    return failed ? -1 : 0;
}

/* A failure after a collective began on this rank alone cannot be agreed
 * on any more: with several ranks, end the job instead of leaving the
 * others waiting. */
int dp_end_job_if_ranks(dp_engine *e)
{
    if (e->ranks > 1) {
        fprintf(stderr, "bench: rank %d: %s; ending the job\n", world_rank(), e->err);
        world_abort(1);
    }
    return -1;
}

/* Creation --------------------------------------------------------------- */

/* Picks each replica's device and the communicator kind. */
static int plan_devices(dp_engine *e, const engine_config *cfg)
{
    const int on_device = e->inner->dp->buffer_space == MEM_DEVICE;
    int devices = 0;
    char why[256] = "";
    if (on_device && (e->opt.spread_over_gpus || e->ranks > 1)) {
        devices = devmem_device_count(why, sizeof why);
        if (devices < 1)
            return dp_fail(e, "data-parallel: %s", why);
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

static int make_communicators(dp_engine *e)
{
    char err[256] = "";
    const memory_space space = e->inner->dp->buffer_space;
    if (e->ranks > 1) {
        replica *r = &e->rep[0];
        /* NCCL wants a GPU of its own per rank: if ranks share GPUs
         * anywhere, every rank reduces through MPI instead */
        float shared = space == MEM_DEVICE && world_local_size() > e->gpus_visible;
        if (dp_agree(e, &shared, 1, 0, -1) != 0)
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
            return dp_fail(e, "data-parallel: %s", err);
        for (int l = 0; l < e->local; l++)
            e->rep[l].comm = comms[l];
        snprintf(e->comm_desc, sizeof e->comm_desc, "NCCL over %d GPUs, peer access on %d pairs",
                 e->local, e->peer_pairs);
        return 0;
    }
    e->group = inproc_group_create(e->local, space, devices, err, sizeof err);
    if (!e->group)
        return dp_fail(e, "data-parallel: %s", err);
    for (int l = 0; l < e->local; l++)
        e->rep[l].comm = inproc_group_member(e->group, l);
    snprintf(e->comm_desc, sizeof e->comm_desc, "in-process all-reduce over %d threads%s",
             e->local, space == MEM_DEVICE ? ", staged through host memory" : "");
    return 0;
}

dp_engine *dp_create(const backend *inner, const dp_options *o, const workload *w,
                     const engine_config *cfg, char *err, size_t err_len)
{
    if (!backend_supports_data_parallel(inner, err, err_len))
        return NULL;
    dp_engine *e;
    COORDINATOR_NEW(e, "data-parallel", inner, o, w, cfg, err, err_len);
    if (!e)
        return NULL;
    char why[256];
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
        failed = dp_fail(e, "data-parallel: %s", why);
    float nothing = 0.0f;
    if (dp_agree(e, &nothing, 1, failed, -1) == 0 && make_communicators(e) == 0) {
        failed = dp_run_all(e, JOB_CREATE) != 0;
        if (dp_agree(e, &nothing, 1, failed, -1) == 0)
            return e;
    }
    snprintf(err, err_len, "%s", e->err);
    dp_destroy(e);
    return NULL;
}

/* Ends the replicas' engines and threads and the communicators between
 * them: what dp_create made. */
void dp_destroy(dp_engine *e)
{
    if (!e)
        return;
    if (e->team)
        dp_run_all(e, JOB_DESTROY);
    for (int l = 0; l < e->local; l++)
        if (!e->group)
            comm_destroy(e->rep[l].comm);
    inproc_group_destroy(e->group);
    comm_destroy(e->proc);
    worker_team_destroy(e->team);
    free(e);
}
