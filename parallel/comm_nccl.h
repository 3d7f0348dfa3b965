/* The NCCL communicator lives in a module of its own (nccl.so, built when
 * nccl.h and libnccl are found): a machine whose NCCL is missing or broken
 * loses only NCCL reductions. This is the table that module hands out; the
 * nccl_* functions of comm.h load it on first use. */
#ifndef LB_COMM_NCCL_H
#define LB_COMM_NCCL_H

#include "parallel/comm.h"

typedef struct nccl_table {
    int (*available)(char *why, size_t why_len);
    void (*version_string)(char *buf, size_t len);
    int (*comms_create_local)(int n, const int *devices, communicator **out, int *peer_pairs,
                              char *err, size_t err_len);
    communicator *(*comm_create_rank)(int device, int rank, int size, bytes_broadcast_fn bcast,
                                      char *err, size_t err_len);
} nccl_table;

#endif
