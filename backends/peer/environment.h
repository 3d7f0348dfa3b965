/* The environment a framework peer's process starts in: the same OpenBLAS
 * kernels and OpenMP waiting as the suite's CPU rows, in every run, so that
 * the PyTorch row's speed does not depend on which rows ran before it.
 *
 * PyTorch from a distribution computes its dense layers with the system's
 * OpenBLAS, which on a CPU it does not know may fall back to old kernels
 * (Prescott on an AVX-512 Xeon); the blas backend's kernel choice
 * (backends/blas/kernel_choice.h) is made here even when blas is not in
 * the run, and its core handed to the peer as OPENBLAS_CORETYPE unless the
 * user set one (which the peer then inherits, as blas does). The OpenMP
 * waiting policy (backends/common/openmp_setup.h) is the rows' too. A
 * PyTorch that brings its own BLAS (MKL in a PyPI wheel) says so in its
 * description; the variables are then harmless. */
#ifndef LB_PEER_ENVIRONMENT_H
#define LB_PEER_ENVIRONMENT_H

#include <stddef.h>

/* Decides once (the kernel choice's child processes run on the first
 * call) and returns the environment for a peer's exec: this process's,
 * with the peer's variables set. Lives as long as the process. */
char *const *peer_environment(void);

/* One line for the row's details and system.json, "OPENBLAS_CORETYPE=Zen
 * (the blas backend's kernels: OpenBLAS's own choice), OMP_WAIT_POLICY=
 * passive (default), GOMP_SPINCOUNT=30000 (default)"; "" before
 * peer_environment() was first called. */
void peer_environment_describe(char *buf, size_t len);

#endif
