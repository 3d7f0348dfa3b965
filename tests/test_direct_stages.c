/* tests/test_blas_stages.c over the direct engine: its model-parallel
 * stages, once per build of the kernels this CPU runs. */
#define LB_LAYERS_DIRECT 1
#include "tests/test_blas_stages.c"
