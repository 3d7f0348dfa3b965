/* The process world: one process, or one MPI rank of several.
 *
 * MPI starts only when this process was launched by mpirun (Open MPI sets
 * OMPI_COMM_WORLD_SIZE; PMI launchers set PMI_SIZE): a plain ./bench never
 * initialises MPI, so nothing about MPI is needed to run it. */
#ifndef LB_WORLD_H
#define LB_WORLD_H

#include <stddef.h>

/* 1 when MPI support was built in. */
int world_mpi_built(void);
/* 1 when the environment says mpirun started this process. */
int world_launched_by_mpirun(void);

/* Starts MPI when launched by mpirun. 0, or -1 with err (e.g. started by
 * mpirun but built without MPI). Safe to call more than once. */
int world_init(char *err, size_t err_len);
int world_rank(void);       /* 0 in a plain process */
int world_size(void);       /* 1 in a plain process */
int world_local_rank(void); /* rank among the processes of this machine */
int world_local_size(void);
void world_finalize(void);
/* Ends every rank of the job (MPI_Abort); exit(code) in a plain process. */
void world_abort(int code);
/* Copies n bytes from `root` to every rank; 0 or -1. */
int world_broadcast_bytes(void *buf, size_t n, int root);
/* For the model-parallel coordinator across ranks: n bytes to rank `to`,
 * from rank `from`; every rank's n bytes into all (size x n bytes, rank
 * order); the element-wise sum of every rank's n floats, in place. 0 or -1
 * (-1 in a plain process, where there is no one to talk to). */
int world_send_bytes(const void *buf, size_t n, int to);
int world_recv_bytes(void *buf, size_t n, int from);
int world_allgather_bytes(const void *mine, size_t n, void *all);
int world_allreduce_floats(float *buf, size_t n);
/* "Open MPI v4.1.4" or why there is no MPI. */
void world_mpi_version(char *buf, size_t len);

#endif
