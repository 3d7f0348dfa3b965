/* Communicators: how data-parallel replicas combine their buffers. One small
 * interface, three real implementations:
 *
 *   in-process  replicas in threads of one process sharing memory (a
 *               pthreads barrier and a sliced reduction); device buffers are
 *               staged through host memory, so several replicas may share
 *               one GPU;
 *   MPI         one replica per rank, MPI_Allreduce over MPI_COMM_WORLD;
 *               device buffers are staged through host memory;
 *   NCCL        one replica per GPU, device buffers reduced by NCCL, either
 *               all GPUs of one process (ncclCommInitAll) or one GPU per MPI
 *               rank (unique id broadcast by rank 0).
 *
 * Every member of a communicator calls the same collectives in the same
 * order with the same element counts. A collective that fails on one member
 * still completes the exchange (with zeros where data was missing), so no
 * member is left waiting; each member then reports the failure. */
#ifndef LB_COMM_H
#define LB_COMM_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/engine.h"

typedef struct communicator communicator;

typedef struct comm_ops {
    /* buf = sum over members m of weight_m * buf_m, on every member. */
    int (*allreduce_sum)(communicator *c, float *buf, size_t n, float weight);
    /* buf = root's buf, on every member. */
    int (*broadcast)(communicator *c, float *buf, size_t n, int root);
    int (*barrier)(communicator *c);
    void (*destroy)(communicator *c);
} comm_ops;

/* An implementation's table, from its functions <prefix>_allreduce_sum,
 * <prefix>_broadcast, <prefix>_barrier and <prefix>_destroy. */
#define COMM_OPS(prefix)                                                                           \
    {                                                                                              \
        .allreduce_sum = prefix##_allreduce_sum, .broadcast = prefix##_broadcast,                  \
        .barrier = prefix##_barrier, .destroy = prefix##_destroy                                   \
    }

/* Each implementation embeds this as its first member. */
struct communicator {
    const comm_ops *ops;
    const char *kind;   /* "in-process", "MPI", "NCCL" */
    int rank, size;
    memory_space space; /* where the buffers handed to it live */
    int device;         /* MEM_DEVICE: the CUDA device of this member's buffers */
    char err[256];
};

/* A member: `bytes` of its implementation's struct (the communicator
 * first), zeroed, its communicator filled in. NULL with "<kind>
 * communicator: out of memory" in err. */
static inline void *comm_member_alloc(size_t bytes, const comm_ops *ops, const char *kind,
                                      int rank, int size, memory_space space, int device,
                                      char *err, size_t err_len)
{
    communicator *c = calloc(1, bytes);
    if (!c) {
        snprintf(err, err_len, "%s communicator: out of memory", kind);
        return NULL;
    }
    *c = (communicator){
        .ops = ops, .kind = kind, .rank = rank, .size = size, .space = space, .device = device,
    };
    return c;
}

static inline int comm_allreduce_sum(communicator *c, float *buf, size_t n, float weight)
{
    return c->ops->allreduce_sum(c, buf, n, weight);
}
static inline int comm_broadcast(communicator *c, float *buf, size_t n, int root)
{
    return c->ops->broadcast(c, buf, n, root);
}
static inline int comm_barrier(communicator *c) { return c->ops->barrier(c); }
static inline void comm_destroy(communicator *c)
{
    if (c)
        c->ops->destroy(c);
}
static inline const char *comm_error(const communicator *c) { return c->err; }

/* In-process ------------------------------------------------------------ */

typedef struct inproc_group inproc_group;

/* A group of `size` members whose buffers live in `space`; devices[m] is
 * member m's CUDA device (NULL for host buffers). NULL on failure, with err. */
inproc_group *inproc_group_create(int size, memory_space space, const int *devices, char *err,
                                  size_t err_len);
/* Member m's handle, owned by the group; each member's thread uses its own. */
communicator *inproc_group_member(inproc_group *g, int m);
void inproc_group_destroy(inproc_group *g);

/* MPI (parallel/world_mpi.c) -------------------------------------------- */

/* A communicator over every rank of MPI_COMM_WORLD (after world_init).
 * Device buffers on `device` are staged through host memory. */
communicator *mpi_comm_create(memory_space space, int device, char *err, size_t err_len);

/* NCCL (parallel/comm_nccl.c) ------------------------------------------- */

/* 1 when NCCL support was built in; else 0 with the reason. */
int nccl_available(char *why, size_t why_len);
/* "NCCL 2.x.y" or the reason it is missing. */
void nccl_version_string(char *buf, size_t len);

/* Communicators over the n GPUs devices[0..n) of this process, one per
 * device (distinct devices), out[i] for devices[i]. Enables peer access
 * between every pair that allows it first (*peer_pairs counts them).
 * 0, or -1 with err. */
int nccl_comms_create_local(int n, const int *devices, communicator **out, int *peer_pairs,
                            char *err, size_t err_len);

/* Copies n bytes from `root` to every process (MPI_Bcast). */
typedef int (*bytes_broadcast_fn)(void *buf, size_t n, int root);
/* One member per process: rank `rank` of `size`, its buffers on `device`;
 * rank 0's unique id reaches the others through `bcast`. */
communicator *nccl_comm_create_rank(int device, int rank, int size, bytes_broadcast_fn bcast,
                                    char *err, size_t err_len);

/* Device memory helpers (parallel/gpu_link.c), for staging -------------- */

/* Visible CUDA devices; 0 with the driver's reason in why when none (or
 * when CUDA support was not built). */
int devmem_device_count(char *why, size_t why_len);
int devmem_to_host(float *host, const float *dev, size_t n, int device, char *err,
                   size_t err_len);
int devmem_to_device(float *dev, const float *host, size_t n, int device, char *err,
                     size_t err_len);

/* A member's buffers as host memory, for the communicators that combine
 * host memory (in-process, MPI): a host buffer is used as it is, a device
 * buffer through a host copy that grows as needed (free `copy` at the end). */
typedef struct host_staging {
    float *copy;
    size_t floats;
} host_staging;

/* Host memory for member c's buffer buf of n floats, with the device values
 * copied in when copy_in. NULL with err when that fails; after a failed copy
 * the staging holds zeros, so the member can still take part. */
float *staging_in(host_staging *s, const communicator *c, float *buf, size_t n, int copy_in,
                  char *err, size_t err_len);
/* Copies the staged values back into a device buffer (a host buffer needs
 * nothing). 0, or -1 with err. */
int staging_out(const host_staging *s, const communicator *c, float *buf, size_t n, char *err,
                size_t err_len);

#endif
