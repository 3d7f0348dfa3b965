/* The direct backend from the inside: tests/test_blas.c's checks of the
 * CHWN engine's threads, contract and bf16, run over the direct backend
 * (the CHWN engine with the direct product sets, its layers reached by
 * LB_LAYERS_DIRECT) and run once per build of the kernels this CPU runs,
 * each forced with LENET_BENCH_DIRECT_ISA; and the forcing itself (a set
 * the CPU lacks or an unknown name refused with the reason). Its layers
 * are tests/test_direct_layers.c's, its stages tests/test_direct_stages.c's. */
#define LB_LAYERS_DIRECT 1
#include "tests/test_blas.c"
