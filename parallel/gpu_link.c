/* The GPU side of the data-parallel code (comm.h's devmem_*, staging_* and
 * nccl_*), reached through the cuda and nccl modules, which are loaded the
 * first time one of these is called: a CPU-only run never maps the CUDA
 * runtime or NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/devmem.h"
#include "backends/module.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"

/* Why this build has no such module, or NULL when it has one. */
#ifdef HAVE_CUDA
#define CUDA_MISSING NULL
#else
#define CUDA_MISSING \
    "built without CUDA (nvcc, cuDNN or cuBLAS not found at build time, or make CUDA=0)"
#endif
#ifdef HAVE_NCCL
#define NCCL_MISSING NULL
#else
#define NCCL_MISSING "built without NCCL (nccl.h or libnccl not found with CUDA at build time)"
#endif

/* Table `table` of module `name`, or NULL with the reason (`missing`
 * when this build has no such module). */
static const void *optional_table(const char *name, const char *table, const char *missing,
                                  char *why, size_t why_len)
{
    if (missing) {
        snprintf(why, why_len, "%s", missing);
        return NULL;
    }
    return module_table(name, table, why, why_len);
}

static const devmem_table *devmem(char *why, size_t why_len)
{
    return optional_table("cuda", "devmem", CUDA_MISSING, why, why_len);
}

static const nccl_table *nccl(char *why, size_t why_len)
{
    return optional_table("nccl", "nccl", NCCL_MISSING, why, why_len);
}

int devmem_device_count(char *why, size_t why_len)
{
    const devmem_table *t = devmem(why, why_len);
    return t ? t->device_count(why, why_len) : 0;
}

int devmem_to_host(float *host, const float *dev, size_t n, int device, char *err,
                   size_t err_len)
{
    const devmem_table *t = devmem(err, err_len);
    return t ? t->to_host(host, dev, n, device, err, err_len) : -1;
}

int devmem_to_device(float *dev, const float *host, size_t n, int device, char *err,
                     size_t err_len)
{
    const devmem_table *t = devmem(err, err_len);
    return t ? t->to_device(dev, host, n, device, err, err_len) : -1;
}

float *staging_in(host_staging *s, const communicator *c, float *buf, size_t n, int copy_in,
                  char *err, size_t err_len)
{
    if (c->space == MEM_HOST)
        return buf;
    if (s->floats < n) {
        float *p = realloc(s->copy, sizeof(float) * n);
        if (!p) {
            snprintf(err, err_len, "out of memory for the host staging buffer");
            return NULL;
        }
        s->copy = p;
        s->floats = n;
    }
    if (copy_in && devmem_to_host(s->copy, buf, n, c->device, err, err_len) != 0) {
        memset(s->copy, 0, sizeof(float) * n);
        return NULL;
    }
    return s->copy;
}

int staging_out(const host_staging *s, const communicator *c, float *buf, size_t n, char *err,
                size_t err_len)
{
    if (c->space == MEM_HOST)
        return 0;
    return devmem_to_device(buf, s->copy, n, c->device, err, err_len) == 0 ? 0 : -1;
}

int nccl_available(char *why, size_t why_len)
{
    char tmp[256];
    if (!why || !why_len)
        why = tmp, why_len = sizeof tmp;
    const nccl_table *t = nccl(why, why_len);
    return t ? t->available(why, why_len) : 0;
}

void nccl_version_string(char *buf, size_t len)
{
    const nccl_table *t = nccl(buf, len);
    if (t)
        t->version_string(buf, len);
}

int nccl_comms_create_local(int n, const int *devices, communicator **out, int *peer_pairs,
                            char *err, size_t err_len)
{
    *peer_pairs = 0;
    const nccl_table *t = nccl(err, err_len);
    return t ? t->comms_create_local(n, devices, out, peer_pairs, err, err_len) : -1;
}

communicator *nccl_comm_create_rank(int device, int rank, int size, bytes_broadcast_fn bcast,
                                    char *err, size_t err_len)
{
    const nccl_table *t = nccl(err, err_len);
    return t ? t->comm_create_rank(device, rank, size, bcast, err, err_len) : NULL;
}
