#include "harness/run/label.h"

#include <stdio.h>

#include "harness/run/run_impl.h"
#include "parallel/world.h"

void config_label_of(const char *backend, int replicas, int ranks, const char *precision,
                     int batch_size, unsigned label_axes, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", backend);
    if (replicas > 1 && used < len)
        used += (size_t)snprintf(buf + used, len - used, "-x%d", replicas);
    if (ranks > 1 && used < len)
        used += (size_t)snprintf(buf + used, len - used, "-%dranks", ranks);
    if ((label_axes & LABEL_PRECISION) && used < len)
        used += (size_t)snprintf(buf + used, len - used, "-%s", precision ? precision : "");
    if ((label_axes & LABEL_BATCH) && used < len)
        snprintf(buf + used, len - used, "-b%d", batch_size);
}

void config_label(const row_key *k, char *buf, size_t len)
{
    config_label_of(k->backend, k->replicas, k->ranks, k->precision, k->batch_size,
                    k->label_axes, buf, len);
}

row_key run_row_key(const run_state *s, const configuration *c, const attempt *a)
{
    const run_config *cfg = s->cfg;
    row_key k = {
        .backend = c->b->name,
        .workload = cfg->work.name,
        .precision = precision_name(c->prec),
        .threads = a->threads,
        .devices = a->devices,
        .replicas = a->replicas,
        .ranks = world_size(),
        .batch_size = c->batch_size,
        .optimizer = optimizer_name(cfg->engine.opt.kind),
        .label_axes = s->label_axes,
    };
    return k;
}
