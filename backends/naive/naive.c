/* The naive engine: the reference backend. One thread, plain loops, in
 * fp32 or fp64; every other backend is checked against it, and in fp64 it
 * is the tightest oracle the suite has. The layers' driving is train.c,
 * one source built for both precisions; what is not about layers
 * (buffers, data sets, checks, evaluation and profile bookkeeping) is the
 * shared host engine's. */
#include "backends/naive/naive.h"

#include <stdio.h>
#include <stdlib.h>

/* The buffers are the host engine's (host_alloc_counted), but for the
 * slots' table of them. */
static void destroy(engine *handle)
{
    naive_engine *e = naive_of(handle);
    if (!e)
        return;
    free(e->slot_act);
    host_engine_free(handle);
}

static engine *naive_create(void *ctx, const workload *w, const engine_config *cfg, char *err,
                            size_t err_len)
{
    (void)ctx;
    const int fp64 = cfg && cfg->precision == PREC_FP64;
    naive_engine *e = naive_of(host_engine_create(&naive_backend,
                                                  fp64 ? naive_layers_f64 : naive_layers_f32,
                                                  sizeof *e, w, cfg, NULL, err, err_len));
    if (!e)
        return NULL;
    if ((fp64 ? naive_allocate_f64 : naive_allocate_f32)(e))
        return host_engine_out_of_memory((engine *)e, err, err_len);
    return (engine *)e;
}

static void naive_describe(engine *handle, char *buf, size_t len)
{
    naive_engine *e = naive_of(handle);
    snprintf(buf, len, "%s, 1 thread", precision_name(e->h.cfg.precision));
}

static const engine_ops naive_ops = {HOST_ENGINE_OPS, .destroy = destroy,
                                     .describe = naive_describe};

const backend naive_backend = {
    .name = "naive",
    .summary = "reference: plain C loops, one thread, fp32 or fp64",
    .built = 1,
    .precisions = 1u << PREC_FP32 | 1u << PREC_FP64,
    .probe = host_probe,
    .create = naive_create,
    .ops = &naive_ops,
    .dp = &host_data_parallel,
    .stage = &host_stages,
};
