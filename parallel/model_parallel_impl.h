/* What the model-parallel coordinator's files share: model_parallel.c (the
 * contract's entries, creation, the wrapped backends), model_cuts.c (where
 * the by-layers split cuts) and model_schedule.c (the workers' programs:
 * sync, the pieces of a step, moving activations, by layers and within
 * layers). */
#ifndef LB_PARALLEL_MODEL_PARALLEL_IMPL_H
#define LB_PARALLEL_MODEL_PARALLEL_IMPL_H

#include "parallel/model_parallel.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/common/elementwise.h"
#include "backends/registry.h"
#include "base/errmsg.h"
#include "parallel/comm.h"
#include "parallel/prefetch.h"
#include "parallel/workers.h"
#include "parallel/world.h"
#include "parallel/wrap.h"

typedef enum job_kind {
    JOB_CREATE,
    JOB_DESTROY,
    JOB_SET_PARAMS,
    JOB_GET_PARAMS,
    JOB_STEP,     /* forward and backward of every micro-batch, no update */
    JOB_FORWARD,  /* forward only, for evaluation */
    JOB_UPDATE,   /* each stage applies its gradients */
    JOB_GATHER_GRADS,  /* the stages' gradients into the whole vector */
    JOB_SCATTER_UPDATE, /* the whole vector's gradients back, then the update */
    JOB_DESCRIBE,
} job_kind;

/* One engine: a stage of the network (by layers) or one worker's share of
 * a segment (within layers). */
typedef struct stage {
    workload w;
    engine *e;
    float *params;      /* w.param_count: staging between the engine and the whole vector */
    int device;         /* GPU engines: the worker's device */
    size_t out_size;    /* floats per image of its output */
    size_t out_offset;  /* within layers: where its share starts in the gathered output */
} stage;

typedef struct worker_state {
    int rc;
    char err[384];
    /* within layers: this worker's share of an output, of its gradient, and
     * its partial sum of an input gradient (micro-batch x largest size) */
    float *share_out, *share_dout, *part_din;
} worker_state;

/* The coordinator's engine; the contract's handle is converted by mp_of. */
typedef struct mp_engine mp_engine;
struct mp_engine {
    const backend *inner;
    mp_options opt;
    workload w;
    engine_config cfg, inner_cfg;
    int workers;
    int segments; /* by layers: one per worker; within layers: one per layer with parameters */
    int parts;    /* shares of each segment: 1 by layers, `workers` within layers */
    int cut[WORKLOAD_MAX_LAYERS + 1]; /* segment s is layers [cut[s], cut[s + 1]) */
    stage st[WORKLOAD_MAX_LAYERS][MP_MAX_WORKERS]; /* [segment][part] */
    int micro_cap; /* images per micro-batch the stage engines hold */

    /* boundary s: the input of segment s (s = 0: the images), its floats
     * per image, and per micro-batch the activations and their gradient */
    size_t size[WORKLOAD_MAX_LAYERS + 1];
    float *act[WORKLOAD_MAX_LAYERS + 1][MP_MAX_MICRO_BATCHES];
    float *grad[WORKLOAD_MAX_LAYERS + 1][MP_MAX_MICRO_BATCHES];
    size_t exchange_bytes[MP_MAX_WORKERS]; /* of those, what each worker needs */

    worker_state ws[MP_MAX_WORKERS];
    /* Across MPI ranks (under mpirun) each rank is one worker, `first_local`
     * its index, and activations travel as messages; in one process every
     * worker is local and they share the buffers above. */
    int distributed, first_local, local_workers;
    int gpus; /* GPU engines: devices visible, over which the workers spread */
    float *gathered; /* across ranks, within layers: every rank's share, padded */
    worker_team *team;
    pthread_mutex_t lock;
    pthread_cond_t moved;
    pthread_barrier_t barrier;
    int sync_ready;
    int fwd_done[WORKLOAD_MAX_LAYERS + 1], bwd_done[WORKLOAD_MAX_LAYERS + 1];
    int failed;

    float *grads; /* param_count: the whole network's gradient, for hybrid training */
    const dataset *train, *test;

    /* the current job */
    job_kind job;
    const float *params_in;
    float *params_out;
    const dataset *data;
    const int32_t *indices; /* NULL: images first .. first + batch */
    const float *prepared;  /* the batch's pixels from the input pipeline, or NULL */
    int first, batch;
    int micro, mb_start[MP_MAX_MICRO_BATCHES], mb_count[MP_MAX_MICRO_BATCHES];
    int *labels;        /* batch_size */
    double *image_loss; /* batch_size */
    float grad_scale;
    char describe_buf[BACKEND_DETAILS_MAX];

    char err[512];
};

static inline mp_engine *mp_of(engine *e) { return (mp_engine *)e; }

/* parallel/model_parallel.c */
/* "reason" into the engine's error text; -1 */
#define mp_fail(e, ...) errmsg_fail((e)->err, sizeof (e)->err, __VA_ARGS__)

/* parallel/model_schedule.c */
size_t mp_boundary_bytes(const mp_engine *e, int s, int m);
int mp_worker_stages(mp_engine *e, int i, stage **out);
int mp_run_all(mp_engine *e, job_kind job);

#endif
