/* The process world and the MPI communicator. This is the only file that
 * includes mpi.h; it is compiled with mpicc's flags when mpicc is found,
 * and as a world of one process otherwise. */
#include "parallel/world.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

int world_launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
           getenv("PMIX_RANK") != NULL;
}

#ifdef HAVE_MPI
#include <mpi.h>

static int started, rank_, size_ = 1, local_rank_, local_size_ = 1;

int world_mpi_built(void) { return 1; }

int world_init(char *err, size_t err_len)
{
    (void)err, (void)err_len;
    if (started || !world_launched_by_mpirun())
        return 0;
    int provided = 0;
    /* Only the thread that called world_init makes MPI calls. */
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    /* the processes of this machine, to share its cores and GPUs */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    return 0;
}

int world_rank(void) { return rank_; }
int world_size(void) { return size_; }
int world_local_rank(void) { return local_rank_; }
int world_local_size(void) { return local_size_; }

void world_finalize(void)
{
    int finalized = 0;
    if (started && (MPI_Finalized(&finalized), !finalized))
        MPI_Finalize();
}

void world_abort(int code)
{
    if (started)
        MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int world_broadcast_bytes(void *buf, size_t n, int root)
{
    if (!started)
        return root == 0 ? 0 : -1;
    return MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* MPI counts are ints. */
static int fits(size_t n) { return n <= (size_t)INT_MAX; }

int world_send_bytes(const void *buf, size_t n, int to)
{
    return started && fits(n) &&
                   MPI_Send(buf, (int)n, MPI_BYTE, to, 0, MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

int world_recv_bytes(void *buf, size_t n, int from)
{
    return started && fits(n) &&
                   MPI_Recv(buf, (int)n, MPI_BYTE, from, 0, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE) == MPI_SUCCESS
               ? 0
               : -1;
}

int world_allgather_bytes(const void *mine, size_t n, void *all)
{
    return started && fits(n) &&
                   MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE,
                                 MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

int world_allreduce_floats(float *buf, size_t n)
{
    return started && fits(n) &&
                   MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

void world_mpi_version(char *buf, size_t len)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(lib, &n);
    /* "Open MPI v4.1.4, package: ..." -> up to the first comma */
    char *comma = strchr(lib, ',');
    if (comma)
        *comma = '\0';
    snprintf(buf, len, "%s", lib);
}

/* The MPI communicator ---------------------------------------------------- */

typedef struct mpi_member {
    communicator base; /* first: a member is a communicator */
    MPI_Comm comm;
    host_staging staging;
} mpi_member;

static int mpi_fail(communicator *c, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    snprintf(c->err, sizeof c->err, "MPI communicator, rank %d: %s: %s", c->rank, what, msg);
    return -1;
}

/* Host memory holding buf's values (buf itself for host buffers). NULL
 * when staging failed; after a failed copy the staging holds zeros, which
 * keep the exchange going while the caller reports the failure. */
static float *host_view(mpi_member *m, float *buf, size_t n, int copy_in)
{
    char err[200];
    float *host = staging_in(&m->staging, &m->base, buf, n, copy_in, err, sizeof err);
    if (!host)
        snprintf(m->base.err, sizeof m->base.err, "MPI communicator: %s", err);
    return host;
}

static int host_done(mpi_member *m, float *buf, size_t n)
{
    char err[200];
    if (staging_out(&m->staging, &m->base, buf, n, err, sizeof err) != 0) {
        snprintf(m->base.err, sizeof m->base.err, "MPI communicator: %s", err);
        return -1;
    }
    return 0;
}

/* MPI counts are ints: large vectors go in pieces. */
#define MPI_PIECE ((size_t)1 << 30)

/* With no memory to stage into, this rank cannot take part in the
 * collective; ending the job beats leaving the other ranks waiting. */
static void abort_job(mpi_member *m)
{
    fprintf(stderr, "bench: rank %d: %s; ending the job\n", m->base.rank, m->base.err);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int mpi_allreduce_sum(communicator *c, float *buf, size_t n, float weight)
{
    mpi_member *m = (mpi_member *)c;
    float *host = host_view(m, buf, n, 1);
    float *data = host ? host : m->staging.floats >= n ? m->staging.copy : NULL;
    if (!data) {
        abort_job(m);
        return -1;
    }
    if (weight != 1.0f)
        for (size_t i = 0; i < n; i++)
            data[i] *= weight;
    for (size_t off = 0; off < n; off += MPI_PIECE) {
        size_t k = n - off < MPI_PIECE ? n - off : MPI_PIECE;
        int rc = MPI_Allreduce(MPI_IN_PLACE, data + off, (int)k, MPI_FLOAT, MPI_SUM, m->comm);
        if (rc != MPI_SUCCESS)
            return mpi_fail(c, rc, "MPI_Allreduce");
    }
    if (!host)
        return -1;
    return host_done(m, buf, n);
}

static int mpi_broadcast(communicator *c, float *buf, size_t n, int root)
{
    mpi_member *m = (mpi_member *)c;
    float *host = host_view(m, buf, n, c->rank == root);
    float *data = host ? host : m->staging.floats >= n ? m->staging.copy : NULL;
    if (!data) {
        abort_job(m);
        return -1;
    }
    for (size_t off = 0; off < n; off += MPI_PIECE) {
        size_t k = n - off < MPI_PIECE ? n - off : MPI_PIECE;
        int rc = MPI_Bcast(data + off, (int)k, MPI_FLOAT, root, m->comm);
        if (rc != MPI_SUCCESS)
            return mpi_fail(c, rc, "MPI_Bcast");
    }
    if (!host)
        return -1;
    return c->rank == root ? 0 : host_done(m, buf, n);
}

static int mpi_barrier(communicator *c)
{
    int rc = MPI_Barrier(((mpi_member *)c)->comm);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc, "MPI_Barrier");
}

static void mpi_destroy(communicator *c)
{
    mpi_member *m = (mpi_member *)c;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    free(m->staging.copy);
    free(m);
}

static const comm_ops mpi_ops = COMM_OPS(mpi);

communicator *mpi_comm_create(memory_space space, int device, char *err, size_t err_len)
{
    if (!started) {
        snprintf(err, err_len, "MPI communicator: not started by mpirun");
        return NULL;
    }
    mpi_member *m = comm_member_alloc(sizeof *m, &mpi_ops, "MPI", rank_, size_, space, device,
                                      err, err_len);
    if (!m)
        return NULL;
    /* its own context, so its messages never meet anyone else's */
    MPI_Comm_dup(MPI_COMM_WORLD, &m->comm);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    return &m->base;
}

#else

static const char no_mpi[] = "built without MPI (mpicc not found at build time)";

int world_mpi_built(void) { return 0; }

int world_init(char *err, size_t err_len)
{
    if (!world_launched_by_mpirun())
        return 0;
    /* A copy per rank would train alone and each write its own results. */
    snprintf(err, err_len, "started by mpirun, but this bench was %s; rebuild with Open MPI "
                           "installed (apt-get install libopenmpi-dev)", no_mpi);
    return -1;
}

int world_rank(void) { return 0; }
int world_size(void) { return 1; }
int world_local_rank(void) { return 0; }
int world_local_size(void) { return 1; }
void world_finalize(void) {}
void world_abort(int code) { exit(code); }

int world_broadcast_bytes(void *buf, size_t n, int root)
{
    (void)buf, (void)n;
    return root == 0 ? 0 : -1;
}

int world_send_bytes(const void *buf, size_t n, int to)
{
    (void)buf, (void)n, (void)to;
    return -1;
}

int world_recv_bytes(void *buf, size_t n, int from)
{
    (void)buf, (void)n, (void)from;
    return -1;
}

int world_allgather_bytes(const void *mine, size_t n, void *all)
{
    (void)mine, (void)n, (void)all;
    return -1;
}

int world_allreduce_floats(float *buf, size_t n)
{
    (void)buf, (void)n;
    return -1;
}

void world_mpi_version(char *buf, size_t len) { snprintf(buf, len, "%s", no_mpi); }

communicator *mpi_comm_create(memory_space space, int device, char *err, size_t err_len)
{
    (void)space, (void)device;
    snprintf(err, err_len, "MPI communicator: %s", no_mpi);
    return NULL;
}

#endif
