#include "parallel/workers.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "parallel/world.h"

typedef struct worker {
    worker_team *team;
    int index;
    pthread_t thread;
} worker;

struct worker_team {
    int n, started;
    worker *workers;
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    long generation; /* bumped for every job; workers run each one once */
    int pending;     /* workers still running the current job */
    int quit;
    worker_fn fn;
    void *ctx;
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    worker_team *t = w->team;
    long seen = 0;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        while (t->generation == seen && !t->quit)
            pthread_cond_wait(&t->go, &t->lock);
        if (t->quit) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        seen = t->generation;
        worker_fn fn = t->fn;
        void *ctx = t->ctx;
        pthread_mutex_unlock(&t->lock);

        fn(ctx, w->index);

        pthread_mutex_lock(&t->lock);
        if (--t->pending == 0)
            pthread_cond_signal(&t->done);
        pthread_mutex_unlock(&t->lock);
    }
}

worker_team *worker_team_create(int n, char *err, size_t err_len)
{
    worker_team *t = calloc(1, sizeof *t);
    if (!t || n < 1) {
        snprintf(err, err_len, n < 1 ? "a team needs at least one worker" : "out of memory");
        free(t);
        return NULL;
    }
    t->n = n;
    if (n == 1)
        return t; /* runs on the caller's thread */
    t->workers = calloc((size_t)n, sizeof *t->workers);
    if (!t->workers) {
        snprintf(err, err_len, "out of memory for %d worker threads", n);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    for (int i = 0; i < n; i++) {
        t->workers[i] = (worker){.team = t, .index = i};
        if (pthread_create(&t->workers[i].thread, NULL, worker_main, &t->workers[i]) != 0) {
            snprintf(err, err_len, "cannot start worker thread %d of %d", i + 1, n);
            worker_team_destroy(t);
            return NULL;
        }
        t->started++;
    }
    return t;
}

void worker_team_run(worker_team *t, worker_fn fn, void *ctx)
{
    if (t->n == 1) {
        fn(ctx, 0);
        return;
    }
    pthread_mutex_lock(&t->lock);
    t->fn = fn;
    t->ctx = ctx;
    t->pending = t->n;
    t->generation++;
    pthread_cond_broadcast(&t->go);
    while (t->pending > 0)
        pthread_cond_wait(&t->done, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

void worker_team_destroy(worker_team *t)
{
    if (!t)
        return;
    if (t->workers) {
        pthread_mutex_lock(&t->lock);
        t->quit = 1;
        pthread_cond_broadcast(&t->go);
        pthread_mutex_unlock(&t->lock);
        for (int i = 0; i < t->started; i++)
            pthread_join(t->workers[i].thread, NULL);
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->go);
        pthread_cond_destroy(&t->done);
        free(t->workers);
    }
    free(t);
}

void share_of(int total, int parts, int i, int *start, int *count)
{
    const int base = total / parts, extra = total % parts;
    *count = base + (i < extra);
    *start = i * base + (i < extra ? i : extra);
}

int threads_per_worker(int local)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int avail = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    if (avail >= online && world_size() > 1)
        avail /= world_local_size();
    avail /= local;
    return avail > 0 ? avail : 1;
}
