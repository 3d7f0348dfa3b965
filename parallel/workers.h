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

/* Share i of `total` items cut into `parts` (the first total mod parts
 * shares take one more): its first item and count. */
void share_of(int total, int parts, int i, int *start, int *count);

/* CPU threads each of `local` workers may use when the user left it to
 * us: the cores this process may run on, shared by its workers (and, when
 * mpirun did not bind the ranks, by the ranks of this machine). */
int threads_per_worker(int local);

#endif
