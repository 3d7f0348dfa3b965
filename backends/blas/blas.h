/* The blas backend: the CHWN engine (backends/chwn/chwn.h) with OpenBLAS's
 * GEMMs as its products (gemm_products.c), and what its tests and the CPU
 * benchmark reach for beyond the engine contract. */
#ifndef LB_BLAS_H
#define LB_BLAS_H

#include <stddef.h>

#include "backends/blas/kernel_choice.h"
#include "backends/chwn/chwn.h"
#include "backends/engine.h"

extern const backend blas_backend;

/* The product sets (backends/chwn/chwn_products.h): sgemm (fp32), sbgemm
 * (bf16 operands, fp32 everything else; bf16.h) and dgemm (fp64). */
extern const struct chwn_products_f32 blas_sgemm_products, blas_sbgemm_products;
extern const struct chwn_products_f64 blas_dgemm_products;

/* The sets' `enter`: makes OpenBLAS's thread count what the team needs
 * (its threads when it splits the GEMMs, else 1). */
void blas_team_enter(const chwn_team *t);

/* The module's "kernel_probe" table (blas_probe.c). */
extern const blas_kernel_probe blas_kernel_probe_table;

/* "OpenBLAS 0.3.21 Prescott (openmp)": version, kernels chosen at load
 * time, and threading of the library this program runs with. */
void blas_library_info(char *buf, size_t len);

#endif
