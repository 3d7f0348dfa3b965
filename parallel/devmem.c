/* Device memory helpers for the communicators that stage GPU buffers through
 * host memory, and the device count the multi-gpu backend probes. Built
 * against the CUDA runtime when the CUDA backend is built; otherwise every
 * call explains that there is no CUDA support. */
#include <stdio.h>

#include "parallel/comm.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

/* Fills err with the failed call, its error and where; evaluates to -1. */
#define CUDA_FAIL(rc, what)                                                              \
    (snprintf(err, err_len, "%s: %s (%s:%d)", what, cudaGetErrorString(rc), __FILE__,     \
              __LINE__),                                                                 \
     -1)

int devmem_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        snprintf(why, why_len, "no usable CUDA device: cudaGetDeviceCount: %s",
                 cudaGetErrorString(rc));
        cudaGetLastError(); /* clear it, so later calls start clean */
        return 0;
    }
    if (n == 0)
        snprintf(why, why_len, "no CUDA device visible");
    return n;
}

int devmem_to_host(float *host, const float *dev, size_t n, int device, char *err,
                   size_t err_len)
{
    cudaError_t rc = cudaSetDevice(device);
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaSetDevice");
    /* the engine may have written dev on a stream of its own that the
     * legacy stream does not wait for */
    rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaDeviceSynchronize before copying to the host");
    rc = cudaMemcpy(host, dev, sizeof(float) * n, cudaMemcpyDeviceToHost);
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaMemcpy device to host");
    return 0;
}

int devmem_to_device(float *dev, const float *host, size_t n, int device, char *err,
                     size_t err_len)
{
    cudaError_t rc = cudaSetDevice(device);
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaSetDevice");
    rc = cudaMemcpy(dev, host, sizeof(float) * n, cudaMemcpyHostToDevice);
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaMemcpy host to device");
    /* from pageable memory the copy may still be in flight, and the
     * engine's next work may run on a stream that does not wait for it */
    rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess)
        return CUDA_FAIL(rc, "cudaDeviceSynchronize after copying to the device");
    return 0;
}

#else

static const char no_cuda[] = "built without CUDA (nvcc, cuDNN or cuBLAS not found at build time)";

int devmem_device_count(char *why, size_t why_len)
{
    snprintf(why, why_len, "%s", no_cuda);
    return 0;
}

int devmem_to_host(float *host, const float *dev, size_t n, int device, char *err,
                   size_t err_len)
{
    (void)host, (void)dev, (void)n, (void)device;
    snprintf(err, err_len, "%s", no_cuda);
    return -1;
}

int devmem_to_device(float *dev, const float *host, size_t n, int device, char *err,
                     size_t err_len)
{
    (void)host, (void)dev, (void)n, (void)device;
    snprintf(err, err_len, "%s", no_cuda);
    return -1;
}

#endif
