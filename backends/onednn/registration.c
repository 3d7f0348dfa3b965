/* The onednn backend as the registry knows it before its module is loaded
 * (part of the program, built or not). oneDNN's threads are libgomp's,
 * which reads OMP_WAIT_POLICY once when it starts, whichever module maps it
 * first: the process's OpenMP setup is made before onednn loads too, and
 * its rows say how the threads wait. */
#include "backends/common/openmp_setup.h"
#include "backends/registry.h"

#ifndef HAVE_ONEDNN
#define HAVE_ONEDNN 0
#endif

backend_module onednn_registration = BACKEND_MODULE(
    "onednn",
    "oneDNN primitives for every layer, layouts of the library's choosing, fp32 or bf16",
    HAVE_ONEDNN,
    "oneDNN (dnnl.h, libdnnl) or OpenMP not found at build time, or left out with make "
    "ONEDNN=0",
    openmp_setup_prepare, openmp_setup_describe);
