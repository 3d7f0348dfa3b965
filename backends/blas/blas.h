/* The blas backend beyond the engine contract: what its tests and the CPU
 * benchmark reach for. */
#ifndef LB_BLAS_H
#define LB_BLAS_H

#include "backends/blas/blas_layers.h"
#include "backends/blas/kernel_choice.h"
#include "backends/engine.h"

extern const backend blas_backend;
/* The same engine with the direct kernels (backends/direct/direct.h). */
extern const backend direct_backend;

/* The module's "kernel_probe" table (blas_probe.c). */
extern const blas_kernel_probe blas_kernel_probe_table;

/* Chooses who splits the GEMMs (blas_layers.h) for an engine of the blas
 * backend; BLAS_SPLIT_OWN is the default. Meant for tests and measurements.
 * (In the direct build BLAS_SPLIT_LIBRARY leaves the products to the
 * kernels' own threads, the conv stage's groups being the whole batch.) */
#if defined(LB_REAL_DIRECT) || defined(LB_LAYERS_DIRECT)
#define blas_engine_set_split direct_engine_set_split
#endif
void blas_engine_set_split(engine *e, blas_split split);

/* "OpenBLAS 0.3.21 Prescott (openmp)": version, kernels chosen at load
 * time, and threading of the library this program runs with. */
void blas_library_info(char *buf, size_t len);

#endif
