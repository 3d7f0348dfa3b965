/* The in-process communicator: members are threads of one process. Each
 * collective publishes every member's host pointer, meets at a barrier,
 * lets each member reduce its own slice of the vector across all members
 * (so the work is shared), and meets again. The sum runs over members in a
 * fixed order, so every member gets bitwise the same result. Device buffers
 * are copied to a host staging buffer first and back afterwards. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

typedef struct inproc_member {
    communicator base; /* first: a member is a communicator */
    inproc_group *group;
    host_staging staging;
    /* Published before the first barrier of a collective, read by the
     * others after it: the host buffer, its length, the weight, success. */
    float *data;
    size_t count;
    float weight;
    int ok;
} inproc_member;

struct inproc_group {
    int size;
    pthread_barrier_t barrier;
    inproc_member *members;
};

static void sync_all(inproc_group *g) { pthread_barrier_wait(&g->barrier); }

static int fail(communicator *c, const char *msg)
{
    snprintf(c->err, sizeof c->err, "in-process communicator, member %d: %s", c->rank, msg);
    return -1;
}

/* Publishes the host pointer for buf (buf itself, or the staging copy of a
 * device buffer) and its length, and returns it. NULL when staging failed:
 * the member still takes part, with no data and not ok. */
static float *publish(inproc_member *m, float *buf, size_t n, int copy_in)
{
    char err[200];
    float *host = staging_in(&m->staging, &m->base, buf, n, copy_in, err, sizeof err);
    if (!host)
        fail(&m->base, err);
    m->data = host;
    m->count = n;
    m->ok = host != NULL;
    return host;
}

static int copy_back(inproc_member *m, float *buf, size_t n)
{
    char err[200];
    if (staging_out(&m->staging, &m->base, buf, n, err, sizeof err) != 0)
        return fail(&m->base, err);
    return 0;
}

/* 1 when every member published n floats successfully. */
static int all_ready(const inproc_group *g, size_t n)
{
    for (int r = 0; r < g->size; r++)
        if (!g->members[r].ok || g->members[r].count != n)
            return 0;
    return 1;
}

static int inproc_allreduce_sum(communicator *c, float *buf, size_t n, float weight)
{
    inproc_member *m = (inproc_member *)c;
    inproc_group *g = m->group;
    const int me = c->rank, size = g->size;
    float *host = publish(m, buf, n, 1);
    m->weight = weight;
    sync_all(g);
    const int ready = all_ready(g, n);
    if (ready) {
        const size_t lo = n * (size_t)me / (size_t)size, hi = n * (size_t)(me + 1) / (size_t)size;
        for (size_t i = lo; i < hi; i++) {
            double s = 0.0;
            for (int r = 0; r < size; r++)
                s += (double)g->members[r].weight * g->members[r].data[i];
            for (int r = 0; r < size; r++)
                g->members[r].data[i] = (float)s;
        }
    }
    sync_all(g);
    if (!host)
        return -1;
    if (!ready)
        return fail(c, "another member failed or gave a different length");
    return copy_back(m, buf, n);
}

static int inproc_broadcast(communicator *c, float *buf, size_t n, int root)
{
    inproc_member *m = (inproc_member *)c;
    inproc_group *g = m->group;
    const int me = c->rank;
    float *host = publish(m, buf, n, me == root);
    m->ok = m->ok && root >= 0 && root < g->size;
    sync_all(g);
    const int ready = all_ready(g, n);
    if (ready && me != root)
        memcpy(host, g->members[root].data, sizeof(float) * n);
    sync_all(g);
    if (!m->ok)
        return host ? fail(c, "broadcast root outside the group") : -1;
    if (!ready)
        return fail(c, "another member failed or gave a different length");
    return me == root ? 0 : copy_back(m, buf, n);
}

static int inproc_barrier(communicator *c)
{
    sync_all(((inproc_member *)c)->group);
    return 0;
}

static void inproc_destroy(communicator *c)
{
    (void)c; /* members belong to their group */
}

static const comm_ops inproc_ops = COMM_OPS(inproc);

inproc_group *inproc_group_create(int size, memory_space space, const int *devices, char *err,
                                  size_t err_len)
{
    if (size < 1) {
        snprintf(err, err_len, "in-process communicator: %d members", size);
        return NULL;
    }
    inproc_group *g = calloc(1, sizeof *g);
    if (!g)
        goto oom;
    g->size = size;
    g->members = calloc((size_t)size, sizeof *g->members);
    if (!g->members)
        goto oom;
    if (pthread_barrier_init(&g->barrier, NULL, (unsigned)size) != 0) {
        snprintf(err, err_len, "in-process communicator: cannot create a barrier of %d", size);
        free(g->members);
        g->members = NULL;
        inproc_group_destroy(g);
        return NULL;
    }
    for (int r = 0; r < size; r++) {
        inproc_member *m = &g->members[r];
        m->group = g;
        m->base = (communicator){
            .ops = &inproc_ops,
            .kind = "in-process",
            .rank = r,
            .size = size,
            .space = space,
            .device = devices ? devices[r] : -1,
        };
    }
    return g;
oom:
    snprintf(err, err_len, "in-process communicator: out of memory");
    if (g) {
        free(g->members);
        g->members = NULL;
    }
    inproc_group_destroy(g);
    return NULL;
}

communicator *inproc_group_member(inproc_group *g, int m)
{
    return m >= 0 && m < g->size ? &g->members[m].base : NULL;
}

void inproc_group_destroy(inproc_group *g)
{
    if (!g)
        return;
    if (g->members) {
        for (int r = 0; r < g->size; r++)
            free(g->members[r].staging.copy);
        pthread_barrier_destroy(&g->barrier);
        free(g->members);
    }
    free(g);
}
