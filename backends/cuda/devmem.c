/* Device memory helpers (devmem.h), part of the cuda module. */
#include "backends/cuda/devmem.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

/* Fills err with the failed call, its error and where; evaluates to -1. */
#define CUDA_FAIL(rc, what)                                                              \
    (snprintf(err, err_len, "%s: %s (%s:%d)", what, cudaGetErrorString(rc), __FILE__,     \
              __LINE__),                                                                 \
     -1)

static int device_count(char *why, size_t why_len)
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

static int to_host(float *host, const float *dev, size_t n, int device, char *err,
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

static int to_device(float *dev, const float *host, size_t n, int device, char *err,
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

const devmem_table cuda_devmem_table = {
    .device_count = device_count,
    .to_host = to_host,
    .to_device = to_device,
};
