/* What the cuda test program's parts share (tests/test_cuda.c and the
 * files it includes): the backends, zeroed floats, whether a GPU can run
 * the engine, a configuration, and a GPU engine with a tiny data set. */
#ifndef LB_TESTS_CUDA_TESTING_H
#define LB_TESTS_CUDA_TESTING_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backends/engine.h"
#include "backends/registry.h"
#include "base/alloc.h"
#include "harness/run/init.h"
#include "tests/testing.h"
#include "workloads/workload.h"

static inline const backend *cuda(void)
{
    const backend *b = backend_find("cuda");
    assert_non_null(b);
    assert_true(b->built);
    return b;
}

static inline const backend *naive(void)
{
    const backend *b = backend_find("naive");
    assert_non_null(b);
    return b;
}

/* n zeroed floats (at least one); out of memory ends the program. */
static inline float *floats(size_t n) { return xcalloc(n ? n : 1, sizeof(float)); }

static inline int gpu_present(char *why, size_t len)
{
    return backend_runnable(cuda(), PREC_FP32, why, len);
}

/* Skips the calling test (visibly) when no GPU can run it. */
static inline void need_gpu(void)
{
    char why[512] = "";
    if (!gpu_present(why, sizeof why)) {
        print_message("no GPU: %s\n", why);
        skip();
    }
}

static inline engine_config make_config(int batch, optimizer_kind kind, precision prec)
{
    engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.batch_size = batch;
    cfg.opt = (optimizer_config){kind, kind == OPT_ADAM ? 0.001f : 0.01f, 0.9f, 5e-4f, 0.9f, 0.999f,
                                 1e-8f};
    cfg.threads = 1;
    cfg.precision = prec;
    cfg.cuda_graph = 1;
    cfg.data_on_device = 1;
    return cfg;
}

/* A GPU engine on its own with a tiny set. */
typedef struct rig {
    workload w;
    engine *e;
    synth_set data;
    float *init;
} rig;

static inline void rig_up(rig *g, const char *wname, const engine_config *cfg)
{
    assert_int_equal(workload_get(wname, &g->w), 0);
    char err[512] = "";
    g->e = backend_create(cuda(), &g->w, cfg, err, sizeof err);
    if (!g->e)
        fail_msg("create: %s", err);
    assert_int_equal(synth_make(&g->data, 64, 28, 28, 10, 801), 0);
    g->init = floats(g->w.param_count);
    init_params(&g->w, 802, g->init);
    assert_int_equal(cuda()->ops->set_params(g->e, g->init), 0);
    assert_int_equal(cuda()->ops->bind_dataset(g->e, &g->data.d, &g->data.d), 0);
}

static inline void rig_down(rig *g)
{
    cuda()->ops->destroy(g->e);
    synth_free(&g->data);
    free(g->init);
}

#endif
