/* The blas backend as the registry knows it before its module is loaded
 * (part of the program, built or not): its name and summary, and the
 * kernel choice (kernel_choice.h) that sets OpenBLAS's environment before
 * the library starts. */
#include "backends/blas/kernel_choice.h"
#include "backends/registry.h"

#ifndef HAVE_BLAS
#define HAVE_BLAS 0
#endif

backend_module blas_registration = BACKEND_MODULE(
    "blas",
    "OpenBLAS GEMMs (convolutions over unfolded inputs, dense layers over the whole batch) + "
    "OpenMP loops, fp32, fp64 or bf16",
    HAVE_BLAS,
    "OpenBLAS (cblas.h, libopenblas) or OpenMP not found at build time, or left out with "
    "make BLAS=0",
    blas_setup_prepare, blas_setup_describe, .refuse = blas_setup_refused);
