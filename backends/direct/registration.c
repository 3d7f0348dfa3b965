/* The direct backend as the registry knows it before its module is loaded
 * (part of the program, built or not). It runs libgomp without OpenBLAS:
 * only the OpenMP waiting is set before it loads. */
#include "backends/common/openmp_setup.h"
#include "backends/registry.h"

backend_module direct_registration = {
    .b = {.name = "direct",
          .summary = "the project's own register tiles, chosen per CPU when it runs, fp32 or bf16",
#ifdef HAVE_DIRECT
          .built = 1,
#endif
          .not_built_reason = "OpenMP (omp.h, -fopenmp) not found at build time, or left out "
                              "with make DIRECT=0"},
    .module = "direct",
    .prepare = openmp_setup_prepare,
    .describe_setup = openmp_setup_describe,
};
