/* What the data-parallel coordinator's files share: data_parallel.c (the
 * contract's entries, the wrapped backends, multi-gpu) and
 * data_parallel_replicas.c (the job each replica's thread runs, and making
 * the replicas: devices and communicators). */
#ifndef LB_PARALLEL_DATA_PARALLEL_IMPL_H
#define LB_PARALLEL_DATA_PARALLEL_IMPL_H

#include "parallel/data_parallel.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/module.h"
#include "backends/registry.h"
#include "base/errmsg.h"
#include "parallel/comm.h"
#include "parallel/workers.h"
#include "parallel/world.h"
#include "parallel/wrap.h"

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

/* The coordinator's engine; the contract's handle is converted by dp_of. */
typedef struct dp_engine dp_engine;
struct dp_engine {
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
    char describe_buf[BACKEND_DETAILS_MAX];

    long steps_done;     /* global steps trained since set_params */
    long since_average;  /* global steps since the parameters were last averaged */
    char err[512];
};

static inline dp_engine *dp_of(engine *e) { return (dp_engine *)e; }

/* parallel/data_parallel.c */
/* "reason" into the engine's error text; -1 */
#define dp_fail(e, ...) errmsg_fail((e)->err, sizeof (e)->err, __VA_ARGS__)

/* parallel/data_parallel_replicas.c */
void dp_run_job(void *ctx, int l);
int dp_run_all(dp_engine *e, job_kind job);
int dp_agree(dp_engine *e, float *v, int n, int failed, long step);
int dp_end_job_if_ranks(dp_engine *e);
dp_engine *dp_create(const backend *inner, const dp_options *o, const workload *w,
                     const engine_config *cfg, char *err, size_t err_len);
void dp_destroy(dp_engine *e);

#endif
