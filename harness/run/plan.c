#include "harness/run/plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/registry.h"
#include "parallel/comm.h"
#include "parallel/model_parallel.h"
#include "parallel/world.h"

int dp_parse_replicas(const char *list, int *out, int max, int *n)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        /* strtol takes a leading space or '+': a list as written may not */
        if (errno || end == p || (*end && *end != ',') || v < 1 || v > DP_MAX_REPLICAS ||
            !(*p >= '0' && *p <= '9')) {
            fprintf(stderr, "bench: --replicas expects a comma list of whole numbers in 1..%d, "
                            "got '%s'\n", DP_MAX_REPLICAS, list);
            return 2;
        }
        int seen = 0;
        for (int i = 0; i < *n; i++)
            seen |= out[i] == v;
        if (!seen) {
            if (*n == max) {
                fprintf(stderr, "bench: --replicas takes at most %d counts, got '%s'\n", max,
                        list);
                return 2;
            }
            /* insertion keeps the list ascending */
            int i = (*n)++;
            for (; i > 0 && out[i - 1] > v; i--)
                out[i] = out[i - 1];
            out[i] = (int)v;
        }
        if (!*end)
            return 0;
        p = end + 1;
    }
}

/* The item of a comma list that starts at p, copied into item; NULL at
 * the end of the list, else where the next item starts (after its comma). A
 * list ending in a comma yields an empty last item. */
static const char *next_item(const char *p, char *item, size_t len, int *more)
{
    size_t n = strcspn(p, ",");
    snprintf(item, len, "%.*s", (int)(n < len ? n : len - 1), p);
    *more = p[n] == ',';
    return p + n + (*more ? 1 : 0);
}

/* Adds v (written as `item`) to out[0..*n), in ascending place when
 * `sorted`; a repeat or a full list is refused. 0, or 2 after the message. */
static int add_value(const char *flag, const char *list, const char *item, int v, int *out,
                     int max, int *n, int sorted)
{
    for (int i = 0; i < *n; i++)
        if (out[i] == v) {
            fprintf(stderr, "bench: %s lists %s twice in '%s'\n", flag, item, list);
            return 2;
        }
    if (*n == max) {
        fprintf(stderr, "bench: %s takes at most %d values, got '%s'\n", flag, max, list);
        return 2;
    }
    int i = (*n)++;
    for (; sorted && i > 0 && out[i - 1] > v; i--)
        out[i] = out[i - 1];
    out[i] = v;
    return 0;
}

int plan_parse_counts(const char *flag, const char *list, int lo, int hi, int *out, int max,
                      int *n)
{
    *n = 0;
    const char *p = list;
    int more = 1;
    while (more) {
        char item[32], *end;
        p = next_item(p, item, sizeof item, &more);
        errno = 0;
        long v = strtol(item, &end, 10);
        /* strtol takes a leading space or '+': a list as written may not */
        if (errno || end == item || *end || v < lo || v > hi ||
            !(item[0] == '-' || (item[0] >= '0' && item[0] <= '9'))) {
            fprintf(stderr, "bench: %s expects a comma list of whole numbers in %d..%d, got '%s'\n",
                    flag, lo, hi, list);
            return 2;
        }
        if (add_value(flag, list, item, (int)v, out, max, n, 1))
            return 2;
    }
    return 0;
}

int plan_parse_batch_sizes(const char *list, int *out, int max, int *n)
{
    return plan_parse_counts("--batch-size", list, 1, PLAN_MAX_BATCH, out, max, n);
}

int plan_parse_names(const char *flag, const char *what, const char *list,
                     const char *const *names, int count, int *out, int max, int *n)
{
    char choices[128] = "";
    size_t used = 0;
    for (int k = 0; k < count && used < sizeof choices; k++)
        used += (size_t)snprintf(choices + used, sizeof choices - used, "%s%s", k ? ", " : "",
                                 names[k]);
    *n = 0;
    const char *p = list;
    int more = 1;
    while (more) {
        char item[32];
        p = next_item(p, item, sizeof item, &more);
        int found = -1;
        for (int k = 0; k < count; k++)
            if (!strcmp(item, names[k]))
                found = k;
        if (!item[0]) {
            fprintf(stderr, "bench: %s '%s' has an empty item; choose from: %s\n", flag, list,
                    choices);
            return 2;
        }
        if (found < 0) {
            fprintf(stderr, "bench: unknown %s '%s'; choose one of: %s\n", what, item, choices);
            return 2;
        }
        if (add_value(flag, list, item, found, out, max, n, 0))
            return 2;
    }
    return 0;
}

int plan_parse_precisions(const char *list, precision *out, int max, int *n)
{
    const char *names[PRECISION_COUNT];
    int got[PRECISION_COUNT];
    for (int k = 0; k < PRECISION_COUNT; k++)
        names[k] = precision_name((precision)k);
    if (plan_parse_names("--precision", "precision", list, names, PRECISION_COUNT, got,
                         max < PRECISION_COUNT ? max : PRECISION_COUNT, n))
        return 2;
    for (int i = 0; i < *n; i++)
        out[i] = (precision)got[i];
    return 0;
}

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

static int add(const backend **out, int *n, int max, const backend *b, char *err, size_t err_len)
{
    if (!b) {
        snprintf(err, err_len, "too many data-parallel configurations in one run");
        return -1;
    }
    if (*n == max) {
        snprintf(err, err_len, "too many backend, --replicas and --parallel combinations (at most %d)", max);
        return -1;
    }
    out[(*n)++] = b;
    return 0;
}

int dp_expand_backends(const run_config *cfg, const backend *const *in, int n,
                       const backend **out, int max, char *err, size_t err_len)
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
    for (int i = 0; i < n; i++) {
        const backend *b = in[i];
        const int multi_gpu = b == &multi_gpu_backend;
        int rc = 0;
        if (world_size() > 1) {
            dp_options o = options_for(cfg, 1, 0);
            rc = add(out, &count, max, multi_gpu ? b : dp_wrap(b, &o, NULL), err, err_len);
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
            rc = add(out, &count, max,
                     inner && inner->built ? dp_wrap(inner, &o, b->name) : b, err, err_len);
        } else {
            for (int r = 0; r < cfg->n_replicas && rc == 0; r++) {
                dp_options o = options_for(cfg, cfg->replicas[r], 0);
                rc = add(out, &count, max, cfg->replicas[r] > 1 ? dp_wrap(b, &o, NULL) : b,
                         err, err_len);
            }
            if (rc == 0)
                rc = plan_model_parallel(cfg, b, out, &count, max, err, err_len);
        }
        if (rc)
            return -1;
    }
    return count;
}

int plan_model_parallel(const run_config *cfg, const backend *b, const backend **out, int *n,
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
                    if (add(out, n, max, mp, err, err_len))
                        return -1;
                }
    }
    return 0;
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
