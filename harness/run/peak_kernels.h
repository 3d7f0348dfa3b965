/* The loops the CPU peak probe times (harness/run/peak.h), one per
 * arithmetic the rows compute in, each compiled for its instruction set
 * with a function target attribute and chosen when the program runs from
 * what base/cpu.h says this CPU has: one build runs everywhere, and an
 * arithmetic the CPU lacks has no loop (it is absent from the peaks, not
 * zero). */
#ifndef LB_PEAK_KERNELS_H
#define LB_PEAK_KERNELS_H

#include <stddef.h>

typedef enum peak_arith {
    ARITH_FP64,     /* fp64 FMA */
    ARITH_FP32,     /* fp32 FMA */
    ARITH_BF16_DOT, /* bf16 pairs into fp32 (vdpbf16ps, AVX512_BF16) */
    ARITH_FP16,     /* fp16 FMA (vfmadd231ph, AVX512_FP16) */
    ARITH_AMX_BF16, /* AMX tiles, bf16 into fp32 (tdpbf16ps) */
    ARITH_COUNT
} peak_arith;

/* The operands every loop may read, filled once per thread before it is
 * timed (the fp32 loop is a GEMM's inner kernel over them). */
enum { KERNEL_A_FLOATS = 256 * 6, KERNEL_B_FLOATS = 256 * 32 };

/* Runs reps passes; returns a value that depends on every accumulator. */
typedef float (*peak_loop)(const float *a, const float *b, long reps);

typedef struct peak_kernel {
    peak_loop run;
    double flops_per_pass; /* a multiply-add counts 2 */
    const char *isa;       /* "AVX-512", "AVX2+FMA", "generic vectors", "AMX" */
} peak_kernel;

/* "fp32 FMA", "bf16 dot product (vdpbf16ps)" ... */
const char *peak_arith_name(peak_arith a);
/* "fp32", "bf16-dot" ...: the key in system.json and the rows */
const char *peak_arith_key(peak_arith a);

/* 1 with the loop for a on this CPU in *k; 0 with why it is absent ("this
 * CPU lacks AVX512_FP16", "the kernel did not grant AMX state"). */
int peak_kernel_for(peak_arith a, peak_kernel *k, char *why, size_t why_len);

/* Fills a thread's operands. */
void peak_kernel_operands(float *a, float *b);

#endif
