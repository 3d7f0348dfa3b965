/* Every backend this program knows, built or not, in the order they run
 * under --backend all. A backend compiled out still appears, so --list can
 * say why it is missing. */
#include <string.h>

#include "backends/engine.h"
#include "parallel/coordinator.h" /* multi_gpu_backend */

extern const backend naive_backend;
#ifdef HAVE_BLAS
extern const backend blas_backend;
#else
static const backend blas_backend = {
    .name = "blas",
    .summary = "OpenBLAS GEMMs + OpenMP loops",
    .not_built_reason = "OpenBLAS (cblas.h, -lopenblas) or OpenMP not found at build time",
};
#endif
#ifdef HAVE_CUDA
extern const backend cuda_backend;
#else
static const backend cuda_backend = {
    .name = "cuda",
    .summary = "one GPU: cuDNN convolutions, cuBLAS dense layers",
    .not_built_reason = "nvcc, cuDNN or cuBLAS not found at build time",
};
#endif

static const backend *const registry[] = {
    &naive_backend,
    &blas_backend,
    &cuda_backend,
    &multi_gpu_backend,
};

int backend_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

const backend *backend_at(int i) { return registry[i]; }

const backend *backend_find(const char *name)
{
    for (int i = 0; i < backend_count(); i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}
