/* Device memory helpers the cuda module lends to the data-parallel code:
 * the device count the multi-gpu backend probes, and the copies of the
 * communicators that stage GPU buffers through host memory. Handed out as
 * the cuda module's "devmem" table; parallel/comm.h has the wrappers that
 * load it. */
#ifndef LB_CUDA_DEVMEM_H
#define LB_CUDA_DEVMEM_H

#include <stddef.h>

typedef struct devmem_table {
    /* Visible CUDA devices; 0 with the driver's reason in why when none. */
    int (*device_count)(char *why, size_t why_len);
    /* n floats between host and device memory on `device`, waiting for the
     * device on both sides (engines run streams of their own). 0, or -1
     * with err. */
    int (*to_host)(float *host, const float *dev, size_t n, int device, char *err,
                   size_t err_len);
    int (*to_device)(float *dev, const float *host, size_t n, int device, char *err,
                     size_t err_len);
} devmem_table;

extern const devmem_table cuda_devmem_table;

#endif
