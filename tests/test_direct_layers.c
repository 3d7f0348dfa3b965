/* tests/test_blas_layers.c over the direct engine: its layers against the
 * naive ones, once per build of the kernels this CPU runs. */
#define LB_LAYERS_DIRECT 1
#include "tests/test_blas_layers.c"
