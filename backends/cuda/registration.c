/* The cuda backend as the registry knows it before its module is loaded
 * (part of the program, built or not). */
#include "backends/registry.h"

#ifndef HAVE_CUDA
#define HAVE_CUDA 0
#endif

backend_module cuda_registration = BACKEND_MODULE(
    "cuda", "one GPU: cuDNN convolutions, cuBLAS dense layers", HAVE_CUDA,
    "nvcc, cuDNN or cuBLAS not found at build time, or left out with make CUDA=0", NULL, NULL);
