#include "harness/run/agree.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "parallel/world.h"

/* Enough for every option below with the longest lists. */
enum { DESCRIPTION_LEN = 4096 };

static size_t put(char *buf, size_t len, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t put(char *buf, size_t len, size_t used, const char *fmt, ...)
{
    if (used >= len)
        return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

static size_t put_ints(char *buf, size_t len, size_t used, const char *option, const int *v,
                       int n)
{
    used = put(buf, len, used, "%s ", option);
    for (int i = 0; i < n; i++)
        used = put(buf, len, used, "%s%d", i ? "," : "", v[i]);
    return put(buf, len, used, "\n");
}

size_t agree_describe(const run_config *cfg, char *buf, size_t len)
{
    static const char *const optimizers[] = {"sgd", "nesterov", "adam"};
    const optimizer_config *o = &cfg->engine.opt;
    size_t u = 0;
    if (len)
        buf[0] = 0;
    u = put(buf, len, u, "--backend ");
    for (int i = 0; i < cfg->n_backends; i++)
        u = put(buf, len, u, "%s%s", i ? "," : "", cfg->backends[i]->name);
    u = put(buf, len, u, "\n--workload %s\n--epochs %d\n", cfg->work.name, cfg->epochs);
    u = put(buf, len, u, "--limit %d\n--test-limit %d\n", cfg->limit, cfg->test_limit);
    u = put(buf, len, u, "--no-shuffle %s\n--seed %" PRIu64 "\n", cfg->shuffle ? "no" : "yes",
            cfg->seed);
    u = put_ints(buf, len, u, "--batch-size", cfg->batch_sizes, cfg->n_batch_sizes);
    u = put(buf, len, u, "--precision ");
    for (int i = 0; i < cfg->n_precisions; i++)
        u = put(buf, len, u, "%s%s", i ? "," : "", precision_name(cfg->precisions[i]));
    u = put(buf, len, u, "\n--optimizer %s\n--lr %.9g\n--momentum %.9g\n--weight-decay %.9g\n",
            optimizers[o->kind], o->lr, o->momentum, o->weight_decay);
    u = put(buf, len, u, "--threads %d\n--cuda-graph %d\n--data-on-device %d\n",
            cfg->engine.threads, cfg->engine.cuda_graph, cfg->engine.data_on_device);
    u = put_ints(buf, len, u, "--replicas", cfg->replicas, cfg->n_replicas);
    u = put(buf, len, u, "--gpus %d\n--averaging-frequency %d\n--average-optimizer-state %d\n",
            cfg->gpus, cfg->averaging_frequency, cfg->average_optimizer_state);
    u = put(buf, len, u, "--parallel %s%s%s\n", cfg->model_parallel ? "model" : "",
            cfg->model_parallel && cfg->hybrid_parallel ? "," : "",
            cfg->hybrid_parallel ? "hybrid" : "");
    u = put(buf, len, u, "--split ");
    for (int i = 0; i < cfg->n_splits; i++)
        u = put(buf, len, u, "%s%s", i ? "," : "", cfg->splits[i] ? "filters" : "layers");
    u = put(buf, len, u, "\n--workers %d\n--groups %d\n", cfg->workers, cfg->groups);
    u = put_ints(buf, len, u, "--micro-batches", cfg->micro_batches, cfg->n_micro_batches);
    u = put_ints(buf, len, u, "--prefetch", cfg->prefetch, cfg->n_prefetch);
    u = put(buf, len, u, "--repeat %d\n--profile-layers %d\n--no-peak %d\n", cfg->repeat,
            cfg->profile_layers, cfg->no_peak);
    u = put(buf, len, u, "--target-accuracy %.9g\n--init-params %s\n", cfg->target_accuracy,
            cfg->init_params[0] ? "given" : "none");
    u = put(buf, len, u, "--save-params %s\n--step-losses %s\n",
            cfg->save_params[0] ? "given" : "none", cfg->step_losses[0] ? "given" : "none");
    return u < len ? u : len ? len - 1 : 0;
}

/* The line of text that starts at p, without its newline, into out. */
static void line_at(const char *p, char *out, size_t len)
{
    size_t n = strcspn(p, "\n");
    snprintf(out, len, "%.*s", (int)n, p);
}

/* The first line where a and b differ, as the option and both values. */
static void first_difference(const char *a, const char *b, char *option, char *va, char *vb,
                             size_t len)
{
    while (*a || *b) {
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        if (na != nb || memcmp(a, b, na)) {
            char la[512], lb[512];
            line_at(a, la, sizeof la);
            line_at(b, lb, sizeof lb);
            size_t opt = strcspn(la, " ");
            snprintf(option, len, "%.*s", (int)opt, la);
            snprintf(va, len, "%s", la[opt] ? la + opt + 1 : "");
            snprintf(vb, len, "%s", strchr(lb, ' ') ? strchr(lb, ' ') + 1 : "");
            return;
        }
        a += na + (a[na] == '\n');
        b += nb + (b[nb] == '\n');
    }
    snprintf(option, len, "?");
    va[0] = vb[0] = 0;
}

int agree_on_config(const run_config *cfg)
{
    const int size = world_size();
    if (size <= 1)
        return 0;
    char *mine = xcalloc(1, DESCRIPTION_LEN);
    char *all = xcalloc((size_t)size, DESCRIPTION_LEN);
    agree_describe(cfg, mine, DESCRIPTION_LEN);
    int rc = 0;
    if (world_allgather_bytes(mine, DESCRIPTION_LEN, all) != 0) {
        fprintf(stderr, "bench: rank %d: cannot compare the ranks' configurations\n",
                world_rank());
        rc = 2;
    }
    for (int r = 1; r < size && rc == 0; r++) {
        const char *root = all, *other = all + (size_t)r * DESCRIPTION_LEN;
        if (!strcmp(root, other))
            continue;
        char option[512], va[512], vb[512];
        first_difference(root, other, option, va, vb, sizeof option);
        if (world_rank() == 0)
            fprintf(stderr, "bench: the ranks were given different configurations: %s is %s "
                    "on rank 0 and %s on rank %d\n", option, va, vb, r);
        rc = 2;
    }
    free(mine);
    free(all);
    return rc;
}

/* FNV-1a, 64 bits, continued from h. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint64_t dataset_sum(uint64_t h, const dataset *d)
{
    if (!d->images || d->count <= 0)
        return h;
    h = fnv1a(h, &d->count, sizeof d->count);
    h = fnv1a(h, d->images, (size_t)d->count * d->rows * d->cols);
    return fnv1a(h, d->labels, (size_t)d->count);
}

int agree_on_inputs(int rc, const dataset *train, const dataset *test, const float *params,
                    size_t n_params)
{
    const int size = world_size();
    if (size <= 1)
        return rc;
    typedef struct {
        int32_t rc;
        uint32_t pad;
        uint64_t data_sum, params_sum;
    } inputs;
    inputs mine = {.rc = rc};
    if (rc == 0) {
        mine.data_sum = dataset_sum(dataset_sum(14695981039346656037ull, train), test);
        mine.params_sum = fnv1a(14695981039346656037ull, params, sizeof(float) * n_params);
    }
    inputs *all = xcalloc((size_t)size, sizeof *all);
    if (world_allgather_bytes(&mine, sizeof mine, all) != 0) {
        fprintf(stderr, "bench: rank %d: cannot compare the ranks' inputs\n", world_rank());
        free(all);
        return rc ? rc : 2;
    }
    int common = 0;
    for (int r = 0; r < size && !common; r++)
        common = all[r].rc;
    for (int r = 1; r < size && !common; r++) {
        const char *what = all[r].data_sum != all[0].data_sum       ? "training and test data"
                           : all[r].params_sum != all[0].params_sum ? "initial parameters"
                                                                    : NULL;
        if (!what)
            continue;
        if (world_rank() == 0)
            fprintf(stderr, "bench: rank 0 and rank %d read different %s (checksums %016" PRIx64
                    " and %016" PRIx64 "; check --data and --init-params on every machine)\n",
                    r, what,
                    all[r].data_sum != all[0].data_sum ? all[0].data_sum : all[0].params_sum,
                    all[r].data_sum != all[0].data_sum ? all[r].data_sum : all[r].params_sum);
        common = 2;
    }
    free(all);
    return common;
}

int agree_on_runnable(int n, int *runnable, char *const *reason, size_t reason_len)
{
    const int size = world_size();
    if (size <= 1 || n <= 0)
        return 0;
    /* per configuration: the runnable flag, then the reason */
    const size_t entry = sizeof(int32_t) + reason_len, per_rank = entry * (size_t)n;
    unsigned char *mine = xcalloc(1, per_rank), *all = xcalloc((size_t)size, per_rank);
    for (int i = 0; i < n; i++) {
        int32_t ok = runnable[i] != 0;
        memcpy(mine + entry * i, &ok, sizeof ok);
        snprintf((char *)mine + entry * i + sizeof ok, reason_len, "%s", reason[i]);
    }
    int rc = 0;
    if (world_allgather_bytes(mine, per_rank, all) != 0) {
        fprintf(stderr, "bench: rank %d: cannot compare what the ranks can run\n", world_rank());
        rc = 2;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        int refused_by = -1, any_can = 0;
        for (int r = 0; r < size; r++) {
            int32_t ok;
            memcpy(&ok, all + per_rank * r + entry * i, sizeof ok);
            any_can |= ok != 0;
            if (!ok && refused_by < 0)
                refused_by = r;
        }
        if (refused_by < 0)
            continue;
        const char *why = (const char *)all + per_rank * refused_by + entry * i + sizeof(int32_t);
        char said[1024];
        if (any_can)
            snprintf(said, sizeof said, "rank %d: %.*s", refused_by, (int)reason_len, why);
        else
            snprintf(said, sizeof said, "%.*s", (int)reason_len, why);
        runnable[i] = 0;
        snprintf(reason[i], reason_len, "%s", said);
    }
    free(mine);
    free(all);
    return rc;
}

int agree_on_root(int value)
{
    if (world_size() <= 1)
        return value;
    int32_t v = value;
    return world_broadcast_bytes(&v, sizeof v, 0) == 0 ? v : -1;
}

int agree_on_stop(int signal, int *chunk)
{
    const int size = world_size();
    if (size <= 1)
        return signal;
    typedef struct {
        int32_t signal, chunk;
    } stop;
    stop mine = {.signal = signal, .chunk = chunk ? *chunk : 0};
    stop *all = xcalloc((size_t)size, sizeof *all);
    int agreed = signal;
    if (world_allgather_bytes(&mine, sizeof mine, all) == 0) {
        agreed = 0;
        for (int r = 0; r < size && !agreed; r++)
            agreed = all[r].signal;
        if (chunk)
            *chunk = all[0].chunk;
    }
    free(all);
    return agreed;
}
