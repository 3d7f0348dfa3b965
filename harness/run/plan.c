#include "harness/run/plan.h"

#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "base/alloc.h"
#include "parallel/comm.h"
#include "parallel/model_parallel.h"
#include "parallel/world.h"

static dp_options options_for(const run_config *cfg, int replicas, int spread)
{
    dp_options o = {
        .replicas = replicas,
        .averaging_frequency = cfg->averaging_frequency,
        .average_optimizer_state = cfg->average_optimizer_state,
        .spread_over_gpus = spread,
    };
    return o;
}

/* A backend the run trains, with the replicas asked of it. */
typedef struct planned {
    const backend *b;
    int replicas;
} planned;

static int add(planned *out, int *n, int max, const backend *b, int replicas, char *err,
               size_t err_len)
{
    if (!b) {
        snprintf(err, err_len, "too many data-parallel configurations in one run");
        return -1;
    }
    if (*n == max) {
        snprintf(err, err_len, "too many backend, --replicas and --parallel combinations (at most %d)", max);
        return -1;
    }
    out[(*n)++] = (planned){b, replicas};
    return 0;
}

/* The model-parallel and hybrid configurations of backend b that
 * --parallel asks for, appended to out[*n] (at most max): for each split,
 * micro-batch count and prefetch depth, b split over --workers (model; under
 * mpirun one worker per rank), and --groups data-parallel groups of
 * --workers / --groups (hybrid). 0, or -1 with err. */
static int plan_model_parallel(const run_config *cfg, const backend *b, planned *out, int *n,
                               int max, char *err, size_t err_len)
{
    if (backend_is_peer(b) || dp_base_name(b))
        return 0; /* framework peers and multi-gpu have no stages */
    /* under mpirun: one worker per rank */
    const int workers = world_size() > 1 ? world_size() : cfg->workers;
    for (int mode = 0; mode < 2; mode++) {
        const int hybrid = mode == 1;
        if (!(hybrid ? cfg->hybrid_parallel : cfg->model_parallel))
            continue;
        for (int s = 0; s < cfg->n_splits; s++)
            for (int m = 0; m < cfg->n_micro_batches; m++)
                for (int k = 0; k < cfg->n_prefetch; k++) {
                    const mp_options o = {
                        .split = cfg->splits[s],
                        .workers = hybrid ? workers / cfg->groups : workers,
                        .micro_batches = cfg->micro_batches[m],
                        .prefetch = cfg->prefetch[k],
                    };
                    char name[64];
                    int used = snprintf(name, sizeof name, "%s-%s-%dw", b->name,
                                        mp_split_name(o.split), o.workers);
                    if (o.micro_batches > 1)
                        used += snprintf(name + used, sizeof name - (size_t)used, "-%dmb",
                                         o.micro_batches);
                    if (o.prefetch > 0)
                        snprintf(name + used, sizeof name - (size_t)used, "-pf%d", o.prefetch);
                    const backend *mp = mp_wrap(b, &o, name);
                    if (hybrid && mp) {
                        dp_options d = options_for(cfg, cfg->groups, 0);
                        mp = dp_wrap(mp, &d, name);
                    }
                    if (add(out, n, max, mp, hybrid ? cfg->groups : 1, err, err_len))
                        return -1;
                }
    }
    return 0;
}

/* What each requested backend becomes, in order, into out (at most max):
 * see plan_configurations. Returns the count, or -1 with err. */
static int expand_backends(const run_config *cfg, planned *out, int max, char *err,
                           size_t err_len)
{
    if (world_size() > 1 && (cfg->n_replicas > 1 || cfg->replicas[0] != 1)) {
        snprintf(err, err_len, "under mpirun every rank is one replica: leave out --replicas "
                               "and choose the count with mpirun -np N");
        return -1;
    }
    if (world_size() > 1 && cfg->model_parallel && cfg->workers_given &&
        cfg->workers != world_size()) {
        snprintf(err, err_len, "under mpirun every rank is one model-parallel worker: --workers "
                 "%d is not the %d ranks; leave --workers out or run mpirun -np %d",
                 cfg->workers, world_size(), cfg->workers);
        return -1;
    }
    if (world_size() > 1 && cfg->hybrid_parallel) {
        snprintf(err, err_len, "--parallel hybrid runs its groups in one process; under mpirun "
                               "use --parallel model (one worker per rank) or data parallelism");
        return -1;
    }
    int count = 0;
    for (int i = 0; i < cfg->n_backends; i++) {
        const backend *b = cfg->backends[i];
        const int multi_gpu = b == &multi_gpu_backend;
        int rc = 0;
        if (world_size() > 1) {
            dp_options o = options_for(cfg, 1, 0);
            rc = add(out, &count, max, multi_gpu ? b : dp_wrap(b, &o, NULL), world_size(), err,
                     err_len);
            if (rc == 0)
                rc = plan_model_parallel(cfg, b, out, &count, max, err, err_len);
        } else if (multi_gpu) {
            /* the registry's entry when nothing can wrap cuda (not built) */
            const char *base = dp_base_name(b);
            const backend *inner = NULL;
            for (int k = 0; k < backend_count(); k++)
                if (!strcmp(backend_at(k)->name, base))
                    inner = backend_at(k);
            dp_options o = options_for(cfg, cfg->gpus, 1);
            rc = add(out, &count, max, inner && inner->built ? dp_wrap(inner, &o, b->name) : b,
                     cfg->gpus > 0 ? cfg->gpus : 1, err, err_len);
        } else {
            for (int r = 0; r < cfg->n_replicas && rc == 0; r++) {
                dp_options o = options_for(cfg, cfg->replicas[r], 0);
                rc = add(out, &count, max, cfg->replicas[r] > 1 ? dp_wrap(b, &o, NULL) : b,
                         cfg->replicas[r], err, err_len);
            }
            if (rc == 0)
                rc = plan_model_parallel(cfg, b, out, &count, max, err, err_len);
        }
        if (rc)
            return -1;
    }
    return count;
}

const backend *plan_reference(void) { return backend_count() > 0 ? backend_at(0) : NULL; }

/* The reference or its data-parallel wrapping */
static int is_reference(const backend *b)
{
    const backend *base = dp_inner(b) ? dp_inner(b) : b;
    return base == plan_reference();
}

int plan_configurations(const run_config *cfg, configuration *out, int max, char *err,
                        size_t err_len)
{
    planned *wanted = xcalloc((size_t)max, sizeof *wanted);
    int n_wanted = expand_backends(cfg, wanted, max, err, err_len);
    long total = (long)n_wanted * cfg->n_precisions * cfg->n_batch_sizes;
    if (n_wanted >= 0 && total > max) {
        snprintf(err, err_len, "%ld configurations (backends x --replicas and --parallel x "
                 "--precision x --batch-size) are more than the %d one run takes", total, max);
        n_wanted = -1;
    }
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_wanted; i++) {
            if (is_reference(wanted[i].b) != (pass == 0))
                continue;
            for (int p = 0; p < cfg->n_precisions; p++)
                for (int k = 0; k < cfg->n_batch_sizes; k++) {
                    configuration *c = &out[n++];
                    c->b = wanted[i].b;
                    c->replicas = wanted[i].replicas;
                    c->prec = cfg->precisions[p];
                    c->batch_size = cfg->batch_sizes[k];
                    c->reason[0] = 0;
                    c->runnable = backend_runnable(c->b, c->prec, c->reason, sizeof c->reason);
                }
        }
    free(wanted);
    return n_wanted < 0 ? -1 : n;
}

void dp_print_support(FILE *f)
{
    char line[512], why[256];
    int users = 0;
    size_t used = (size_t)snprintf(line, sizeof line, "data-parallel (--replicas N, threads):");
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (b->built && b != &multi_gpu_backend && backend_supports_data_parallel(b, why, sizeof why) &&
            used < sizeof line)
            used += (size_t)snprintf(line + used, sizeof line - used, "%s %s",
                                     users++ ? "," : "", b->name);
    }
    fprintf(f, "%s%s\n", line, users ? "" : " no backend offers it");
    users = 0;
    used = (size_t)snprintf(line, sizeof line, "model-parallel and hybrid (--parallel model,hybrid):");
    for (int i = 0; i < backend_count(); i++) {
        const backend *b = backend_at(i);
        if (b->built && !backend_is_peer(b) && !dp_base_name(b) && b->stage &&
            used < sizeof line)
            used += (size_t)snprintf(line + used, sizeof line - used, "%s %s",
                                     users++ ? "," : "", b->name);
    }
    fprintf(f, "%s%s; across machines: mpirun -np N ./bench --parallel model (one worker "
               "per rank)\n", line, users ? "" : " no backend offers it");
    if (world_mpi_built()) {
        char version[128];
        world_mpi_version(version, sizeof version);
        fprintf(f, "data-parallel over MPI: mpirun -np N ./bench ... (one replica per rank; %s)\n",
                version);
    } else {
        world_mpi_version(why, sizeof why);
        fprintf(f, "data-parallel over MPI: not available: %s\n", why);
    }
    if (nccl_available(why, sizeof why)) {
        nccl_version_string(why, sizeof why);
        fprintf(f, "NCCL gradient all-reduce: %s\n", why);
    } else {
        fprintf(f, "NCCL gradient all-reduce: not available: %s\n", why);
    }
}
