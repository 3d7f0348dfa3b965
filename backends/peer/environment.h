/* The environment a framework peer's process starts in, the same in every
 * run whatever ran before it, so that the PyTorch row's speed does not
 * depend on which rows ran first: the same OpenBLAS kernels as the suite's
 * CPU rows, and the OpenMP waiting that is fastest for the framework's own
 * runtime.
 *
 * PyTorch from a distribution computes its dense layers with the system's
 * OpenBLAS, which on a CPU it does not know may fall back to old kernels
 * (Prescott on an AVX-512 Xeon); the blas backend's kernel choice
 * (backends/blas/kernel_choice.h) is made here even when blas is not in
 * the run, and its core handed to the peer as OPENBLAS_CORETYPE unless the
 * user set one (which the peer then inherits, as blas does). A PyTorch
 * that brings its own BLAS (MKL in a PyPI wheel) says so in its
 * description; the variable is then harmless.
 *
 * OpenMP waiting is not the suite's: the rows' passive default
 * (backends/common/openmp_setup.h, which this process sets in its own
 * environment) is taken out of the peer's, so that its runtime waits as it
 * does by default (spinning, which is what its users get and what runs it
 * fastest); a policy the user set is inherited as every row inherits it. */
#ifndef LB_PEER_ENVIRONMENT_H
#define LB_PEER_ENVIRONMENT_H

#include <stddef.h>

/* Decides once (the kernel choice's child processes run on the first
 * call) and returns the environment for a peer's exec: this process's,
 * with the peer's variables set. Lives as long as the process. */
char *const *peer_environment(void);

/* One line for the row's details and system.json, "OPENBLAS_CORETYPE=Zen
 * (the blas backend's kernels: OpenBLAS's own choice), OpenMP waiting: the
 * framework's own default (...)"; "" before peer_environment() was first
 * called. */
void peer_environment_describe(char *buf, size_t len);

#endif
