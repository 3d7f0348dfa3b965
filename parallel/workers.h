/* A fixed team of threads, one per replica: replica i's engine is created,
 * driven and destroyed on thread i, so a GPU engine always finds the device
 * it made current. A team of one runs on the caller's thread (MPI calls
 * then stay on the thread that initialised MPI). */
#ifndef LB_WORKERS_H
#define LB_WORKERS_H

#include <stddef.h>

typedef struct worker_team worker_team;
typedef void (*worker_fn)(void *ctx, int index);

/* NULL on failure, with err. */
worker_team *worker_team_create(int n, char *err, size_t err_len);
/* Runs fn(ctx, i) on thread i for every i in 0..n-1, and waits for all. */
void worker_team_run(worker_team *t, worker_fn fn, void *ctx);
void worker_team_destroy(worker_team *t);

#endif
