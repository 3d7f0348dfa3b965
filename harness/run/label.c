#include "harness/run/label.h"

#include <stdio.h>

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
