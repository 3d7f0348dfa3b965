/* The NCCL communicator: gradients reduced on the GPUs. Either every GPU of
 * this process (ncclCommInitAll, peer access enabled first wherever the
 * hardware allows, as DL4J's allowCrossDeviceAccess) or one GPU per MPI rank
 * (rank 0's unique id broadcast over MPI, then ncclCommInitRank).
 *
 * The engines run their own streams, which this file cannot see, so each
 * collective first waits for the device to finish the engine's work, runs
 * on this member's stream, and waits for that stream before returning: the
 * result is ready for the engine's next call. Per-member weights use NCCL's
 * pre-multiplied sum, so no extra kernel scales the buffer. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/module.h"
#include "parallel/comm_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

typedef struct nccl_member {
    communicator base; /* first: a member is a communicator */
    ncclComm_t comm;
    cudaStream_t stream;
    float *scratch; /* one float on the device, for the barrier */
} nccl_member;

#define FAIL_CUDA(c, rc, what)                                                           \
    (snprintf((c)->err, sizeof (c)->err, "NCCL communicator, member %d: %s: %s (%s:%d)", \
              (c)->rank, what, cudaGetErrorString(rc), __FILE__, __LINE__),              \
     -1)
#define FAIL_NCCL(c, m, rc, what)                                                        \
    (snprintf((c)->err, sizeof (c)->err, "NCCL communicator, member %d: %s: %s %s (%s:%d)", \
              (c)->rank, what, ncclGetErrorString(rc),                                   \
              (m)->comm ? ncclGetLastError((m)->comm) : "", __FILE__, __LINE__),         \
     -1)

/* Makes this member's device current and waits for the engine's work. */
static int enter(nccl_member *m)
{
    communicator *c = &m->base;
    cudaError_t rc = cudaSetDevice(c->device);
    if (rc != cudaSuccess)
        return FAIL_CUDA(c, rc, "cudaSetDevice");
    rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess)
        return FAIL_CUDA(c, rc, "cudaDeviceSynchronize before the collective");
    return 0;
}

static int leave(nccl_member *m)
{
    communicator *c = &m->base;
    cudaError_t rc = cudaStreamSynchronize(m->stream);
    if (rc != cudaSuccess)
        return FAIL_CUDA(c, rc, "cudaStreamSynchronize after the collective");
    return 0;
}

static int nccl_allreduce_sum(communicator *c, float *buf, size_t n, float weight)
{
    nccl_member *m = (nccl_member *)c;
    if (enter(m))
        return -1;
    ncclRedOp_t op = ncclSum;
    ncclResult_t rc = ncclSuccess;
    if (weight != 1.0f) {
        rc = ncclRedOpCreatePreMulSum(&op, &weight, ncclFloat, ncclScalarHostImmediate, m->comm);
        if (rc != ncclSuccess)
            return FAIL_NCCL(c, m, rc, "ncclRedOpCreatePreMulSum");
    }
    rc = ncclAllReduce(buf, buf, n, ncclFloat, op, m->comm, m->stream);
    if (op != ncclSum)
        ncclRedOpDestroy(op, m->comm);
    if (rc != ncclSuccess)
        return FAIL_NCCL(c, m, rc, "ncclAllReduce");
    return leave(m);
}

static int nccl_broadcast(communicator *c, float *buf, size_t n, int root)
{
    nccl_member *m = (nccl_member *)c;
    if (enter(m))
        return -1;
    ncclResult_t rc = ncclBroadcast(buf, buf, n, ncclFloat, root, m->comm, m->stream);
    if (rc != ncclSuccess)
        return FAIL_NCCL(c, m, rc, "ncclBroadcast");
    return leave(m);
}

static int nccl_barrier(communicator *c)
{
    nccl_member *m = (nccl_member *)c;
    return nccl_allreduce_sum(c, m->scratch, 1, 1.0f);
}

static void nccl_destroy(communicator *c)
{
    nccl_member *m = (nccl_member *)c;
    if (cudaSetDevice(c->device) == cudaSuccess) {
        if (m->comm)
            ncclCommDestroy(m->comm);
        if (m->stream)
            cudaStreamDestroy(m->stream);
        if (m->scratch)
            cudaFree(m->scratch);
    }
    free(m);
}

static const comm_ops nccl_ops = COMM_OPS(nccl);

static int available(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    return 1;
}

static void version_string(char *buf, size_t len)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, len, "NCCL (version unknown)");
        return;
    }
    /* where it was loaded from: CUDA_HOME, NCCL_HOME or a Python wheel */
    Dl_info at;
    char dir[160] = "?";
    if (dladdr((const void *)ncclGetVersion, &at) && at.dli_fname && strrchr(at.dli_fname, '/'))
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(at.dli_fname, '/') - at.dli_fname),
                 at.dli_fname);
    /* since 2.9 the code is major*10000 + minor*100 + patch */
    snprintf(buf, len, "NCCL %d.%d.%d (%s)", v / 10000, v / 100 % 100, v % 100, dir);
}

/* A member for `device` with its stream and scratch; comm set by the caller. */
static nccl_member *member_new(int device, int rank, int size, char *err, size_t err_len)
{
    nccl_member *m = comm_member_alloc(sizeof *m, &nccl_ops, "NCCL", rank, size, MEM_DEVICE,
                                       device, err, err_len);
    if (!m)
        return NULL;
    communicator *c = &m->base;
    cudaError_t rc = cudaSetDevice(device);
    if (rc == cudaSuccess)
        rc = cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking);
    if (rc == cudaSuccess)
        rc = cudaMalloc((void **)&m->scratch, sizeof(float));
    if (rc == cudaSuccess)
        rc = cudaMemset(m->scratch, 0, sizeof(float));
    if (rc != cudaSuccess) {
        (void)FAIL_CUDA(c, rc, "creating the stream and scratch");
        snprintf(err, err_len, "%s", c->err);
        nccl_destroy(c);
        return NULL;
    }
    return m;
}

static int comms_create_local(int n, const int *devices, communicator **out, int *peer_pairs,
                            char *err, size_t err_len)
{
    *peer_pairs = 0;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        for (int j = 0; j < i; j++)
            if (devices[i] == devices[j]) {
                snprintf(err, err_len, "NCCL needs distinct GPUs; device %d is listed twice",
                         devices[i]);
                return -1;
            }
    }
    /* Peer access: direct GPU-to-GPU copies where the topology allows. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int can = 0;
            if (i == j || cudaDeviceCanAccessPeer(&can, devices[i], devices[j]) != cudaSuccess ||
                !can)
                continue;
            if (cudaSetDevice(devices[i]) != cudaSuccess)
                continue;
            cudaError_t rc = cudaDeviceEnablePeerAccess(devices[j], 0);
            if (rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled)
                ++*peer_pairs;
            cudaGetLastError(); /* an already-enabled pair is not an error */
        }
    ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
    if (!comms) {
        snprintf(err, err_len, "NCCL communicator: out of memory");
        return -1;
    }
    ncclResult_t rc = ncclCommInitAll(comms, n, devices);
    if (rc != ncclSuccess) {
        snprintf(err, err_len, "ncclCommInitAll over %d GPUs: %s (%s:%d)", n,
                 ncclGetErrorString(rc), __FILE__, __LINE__);
        free(comms);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        nccl_member *m = member_new(devices[i], i, n, err, err_len);
        if (!m) {
            for (int j = 0; j < n; j++) {
                if (out[j])
                    comm_destroy(out[j]);
                else
                    ncclCommDestroy(comms[j]);
                out[j] = NULL;
            }
            free(comms);
            return -1;
        }
        m->comm = comms[i];
        out[i] = &m->base;
    }
    free(comms);
    return 0;
}

static communicator *comm_create_rank(int device, int rank, int size, bytes_broadcast_fn bcast,
                                    char *err, size_t err_len)
{
    /* rank 0 sends the id, or ok = 0 when it has none, so no rank waits for
     * a clique that will never form */
    struct {
        int ok;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    if (rank == 0) {
        ncclResult_t rc = ncclGetUniqueId(&msg.id);
        msg.ok = rc == ncclSuccess;
        if (!msg.ok)
            snprintf(err, err_len, "ncclGetUniqueId: %s", ncclGetErrorString(rc));
    }
    if (bcast(&msg, sizeof msg, 0) != 0) {
        snprintf(err, err_len, "NCCL communicator: broadcasting the unique id failed");
        return NULL;
    }
    if (!msg.ok) {
        if (rank != 0)
            snprintf(err, err_len, "NCCL communicator: rank 0 could not make a unique id");
        return NULL;
    }
    ncclUniqueId id = msg.id;
    nccl_member *m = member_new(device, rank, size, err, err_len);
    if (!m)
        return NULL;
    ncclResult_t rc = ncclCommInitRank(&m->comm, size, id, rank);
    if (rc != ncclSuccess) {
        snprintf(err, err_len, "ncclCommInitRank (rank %d of %d, device %d): %s", rank, size,
                 device, ncclGetErrorString(rc));
        m->comm = NULL;
        nccl_destroy(&m->base);
        return NULL;
    }
    return &m->base;
}

static const nccl_table table = {
    .available = available,
    .version_string = version_string,
    .comms_create_local = comms_create_local,
    .comm_create_rank = comm_create_rank,
};

/* The nccl module's one table. */
LB_MODULE_TABLES({"nccl", &table})
