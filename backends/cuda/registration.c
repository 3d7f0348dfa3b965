/* The cuda backend as the registry knows it before its module is loaded
 * (part of the program, built or not). */
#include "backends/registry.h"

#ifdef HAVE_CUDA
#define CUDA_BUILT 1
#else
#define CUDA_BUILT 0
#endif

backend_module cuda_registration = {
    .b = {.name = "cuda",
          .summary = "one GPU: cuDNN convolutions, cuBLAS dense layers",
          .built = CUDA_BUILT,
          .not_built_reason = "nvcc, cuDNN or cuBLAS not found at build time, or left out "
                              "with make CUDA=0"},
    .module = "cuda",
};
