/* The direct backend as the registry knows it before its module is loaded
 * (part of the program, built or not): its name and summary. It runs
 * libgomp without OpenBLAS: only the OpenMP waiting is set before it
 * loads. */
#include "backends/common/openmp_setup.h"
#include "backends/direct/fp32/isa.h"
#include "backends/registry.h"

#include <stdio.h>
#include <string.h>

#ifndef HAVE_DIRECT
#define HAVE_DIRECT 0
#endif

/* The listing's line: the fp32 tiles this CPU gets and why, then the
 * OpenMP waiting */
static void describe_setup(char *buf, size_t len, int with_reasons)
{
    char why[192], omp[256];
    const char *isa = direct_isa_best(why, sizeof why);
    openmp_setup_describe(omp, sizeof omp, with_reasons);
    snprintf(buf, len, "fp32 tiles %s (%s)%s%s", isa, why, omp[0] ? ", " : "", omp);
}

backend_module direct_registration = BACKEND_MODULE(
    "direct",
    "the project's own register tiles (no library), vector width and tiles chosen per CPU "
    "when it runs (AVX-512, AVX2, generic) + OpenMP loops, fp32; bf16 (vdpbf16ps where "
    "AVX512_BF16 measures faster, else fp32 FMAs on bf16-rounded operands) and fp16 products "
    "(vfmadd231ph, AVX512_FP16, loss-scaled) with fp32 master weights",
    HAVE_DIRECT,
    "OpenMP (omp.h, -fopenmp) not found at build time, or left out with make DIRECT=0",
    openmp_setup_prepare, describe_setup);
