/* The blas backend as the registry knows it before its module is loaded
 * (part of the program, built or not): its name and summary, and the
 * kernel choice (kernel_choice.h) that sets OpenBLAS's environment before
 * the library starts. */
#include "backends/blas/kernel_choice.h"
#include "backends/registry.h"

backend_module blas_registration = {
    .b = {.name = "blas",
          .summary = "OpenBLAS GEMMs (convolutions over unfolded inputs) + OpenMP loops, fp32",
#ifdef HAVE_BLAS
          .built = 1,
#endif
          .not_built_reason = "OpenBLAS (cblas.h, libopenblas) or OpenMP not found at build "
                              "time, or left out with make BLAS=0"},
    .module = "blas",
    .prepare = blas_setup_prepare,
    .describe_setup = blas_setup_describe,
};
