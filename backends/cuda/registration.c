/* The cuda backend as the registry knows it before its module is loaded
 * (part of the program, built or not). */
#include "backends/registry.h"

backend_module cuda_registration = {
    .b = {.name = "cuda",
          .summary = "one GPU: cuDNN convolutions, cuBLAS dense layers",
#ifdef HAVE_CUDA
          .built = 1,
#endif
          .not_built_reason = "nvcc, cuDNN or cuBLAS not found at build time, or left out "
                              "with make CUDA=0"},
    .module = "cuda",
};
