/* A core's peak rate of one vector instruction, measured the one way the
 * direct backend's choices (fp32/isa.c: 512-bit against 256-bit FMAs;
 * bf16/bf16_choice.c: vdpbf16ps against vfmadd231ps) and its speed tool
 * (tools/kernel_speed.c) measure it: independent chains of the instruction
 * on registers, enough of them to cover its latency, timed by the
 * thread's processor time (which other processes do not lengthen).
 * The caller brings the vector types and intrinsics (x86-64 only). */
#ifndef LB_BASE_FMA_CHAINS_H
#define LB_BASE_FMA_CHAINS_H

#include "base/clock.h"

/* NAME(void): seconds of ROUNDS rounds of CHAINS chains acc[c] =
 * STEP(acc[c], a, b), the accumulators (VEC) starting at SET1(c) and the
 * operands (OPERAND) at A and B. The operands are hidden from the
 * compiler (asm) so that it cannot fold the chains, and the results kept
 * (asm) so that the loop stays. */
#define FMA_CHAIN_TRIAL(NAME, TARGET, VEC, SET1, OPERAND, A, B, STEP, CHAINS, ROUNDS)              \
    __attribute__((target(TARGET), noinline)) static double NAME(void)                             \
    {                                                                                              \
        VEC acc[CHAINS];                                                                           \
        for (int c = 0; c < CHAINS; c++)                                                           \
            acc[c] = SET1((float)c);                                                               \
        OPERAND a = A, b = B;                                                                      \
        __asm__("" : "+v"(a), "+v"(b));                                                            \
        const double t0 = thread_run_seconds();                                                    \
        for (int r = 0; r < ROUNDS; r++)                                                           \
            _Pragma("GCC unroll 24") for (int c = 0; c < CHAINS; c++) acc[c] = STEP(acc[c], a, b); \
        const double t = thread_run_seconds() - t0;                                                \
        for (int c = 0; c < CHAINS; c++)                                                           \
            __asm__ volatile("" : : "v"(acc[c]));                                                  \
        return t;                                                                                  \
    }

/* GFLOP/s of the fastest of `trials` calls of trial, each doing `flops`
 * (the tools' peaks; a choice compares two trials' seconds instead) */
static inline double fma_chain_best_gflops(double (*trial)(void), int trials, double flops)
{
    double best = 0;
    for (int t = 0; t < trials; t++) {
        const double rate = flops / trial() * 1e-9;
        best = rate > best ? rate : best;
    }
    return best;
}

#endif
