/* Which build of the direct kernels runs (direct.h): the best one this CPU
 * runs and whose tiles fit its cores, asked of base/cpu.h when the program
 * runs, or the one LENET_BENCH_DIRECT_ISA names (isa.h: its names and
 * rules). */
#include "backends/direct/fp32/direct.h"
#include "backends/direct/fp32/isa.h"
#include "base/cpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the builds module.mk lists (DIRECT_ISAS), best first, each kernels.c
 * built with -DLB_DIRECT_ISA=<name> as direct_kernels_<name> */
#define DECLARE(isa) extern const direct_kernels direct_kernels_##isa;
LB_DIRECT_ISAS(DECLARE)
#undef DECLARE
#define BUILD(isa) &direct_kernels_##isa,
static const direct_kernels *const builds[] = {LB_DIRECT_ISAS(BUILD)};
#undef BUILD
enum { BUILDS = sizeof builds / sizeof builds[0] };

int direct_kernels_count(void) { return BUILDS; }

const direct_kernels *direct_kernels_at(int i) { return i >= 0 && i < BUILDS ? builds[i] : NULL; }

const direct_kernels *direct_kernels_find(const char *isa)
{
    for (int i = 0; i < BUILDS; i++)
        if (strcmp(builds[i]->isa, isa) == 0)
            return builds[i];
    return NULL;
}

/* A build fitted to cores with two 512-bit FMA ports is the best only on
 * such a core; it runs (and can be forced) on any AVX-512 CPU. */
static int fits_here(const direct_kernels *k)
{
    return k->cpu_runs() && (k->fma_ports < 2 || direct_fma_ports_here(NULL, 0) >= 2);
}

static const direct_kernels *best_here(void)
{
    for (int i = 0; i < BUILDS; i++)
        if (fits_here(builds[i]))
            return builds[i];
    return builds[BUILDS - 1]; /* the generic build runs anywhere */
}

/* Set by direct_choose; the layers read it inside their parallel loops. */
static _Atomic(const direct_kernels *) active;

const direct_kernels *direct_choose(char *err, size_t err_len)
{
    const char *forced = direct_isa_forced();
    const direct_kernels *k = NULL;
    if (forced) {
        k = direct_kernels_find(forced);
        if (!k) {
            /* (the harness refuses such a value before it gets here) */
            if (!direct_isa_check(err, err_len))
                snprintf(err, err_len, "LENET_BENCH_DIRECT_ISA=%s: not built here", forced);
            return NULL;
        }
        if (!k->cpu_runs()) {
            snprintf(err, err_len, "LENET_BENCH_DIRECT_ISA=%s: this CPU cannot run it (%s)",
                     forced, k->description);
            return NULL;
        }
    } else
        k = best_here();
    atomic_store(&active, k);
    return k;
}

const direct_kernels *direct_active(void)
{
    const direct_kernels *k = atomic_load(&active);
    if (!k) {
        k = best_here();
        atomic_store(&active, k);
    }
    return k;
}

int direct_conv_suits(int kernel, int stride)
{
    (void)kernel;
    return stride == 1;
}

size_t direct_conv_scratch_floats(int B, int C, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    /* the weights transposed (to a whole cache line), the output
     * gradient's rows padded, and a column tile's sums for each (channel,
     * kj) pair (direct.h) */
    return direct_line_floats((size_t)K * C * kernel * kernel) +
           (size_t)OH * K * ((size_t)OW * B + DIRECT_ROW_PAD) +
           (size_t)C * kernel * DIRECT_PAIR_SUM_FLOATS;
}
