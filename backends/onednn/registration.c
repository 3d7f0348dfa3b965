/* The onednn backend as the registry knows it before its module is loaded
 * (part of the program, built or not). oneDNN's threads are libgomp's,
 * which reads OMP_WAIT_POLICY once when it starts, whichever module maps it
 * first: the process's OpenMP setup is made before onednn loads too, and
 * its rows say how the threads wait. */
#include "backends/common/openmp_setup.h"
#include "backends/registry.h"

backend_module onednn_registration = {
    .b = {.name = "onednn",
          .summary = "oneDNN primitives for every layer, layouts of the library's choosing",
#ifdef HAVE_ONEDNN
          .built = 1,
#endif
          .not_built_reason = "oneDNN (dnnl.h, libdnnl) or OpenMP not found at build time, "
                              "or left out with make ONEDNN=0"},
    .module = "onednn",
    .prepare = openmp_setup_prepare,
    .describe_setup = openmp_setup_describe,
};
