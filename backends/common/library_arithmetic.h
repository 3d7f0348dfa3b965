/* The arithmetic a library's bf16 products run on when it takes the
 * fastest this CPU grants (oneDNN, and PyTorch's CPU convolutions and
 * matrix products through it): AMX tiles where the process is granted
 * them, else the bf16 dot product (the harness holds a CPU without it to
 * fp32 FMAs). */
#ifndef LB_LIBRARY_ARITHMETIC_H
#define LB_LIBRARY_ARITHMETIC_H

#include "backends/engine.h"
#include "base/cpu.h"

static inline const char *library_bf16_arithmetic(void)
{
    char why[128];
    if (cpu_has(CPU_AMX_TILE | CPU_AMX_BF16) && cpu_amx_granted(why, sizeof why))
        return ARITHMETIC_AMX_BF16;
    return ARITHMETIC_BF16_DOT;
}

#endif
