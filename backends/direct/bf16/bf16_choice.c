/* What the choice among the bf16 candidates (backends/direct/candidates.h)
 * asks of the vdpbf16ps products (bf16_fma.h): whether they run here, and
 * their rate against the fp32 FMAs, measured once a process. The
 * measurement: 24 independent 512-bit chains of each
 * instruction on registers (enough to cover a 6-cycle latency at two a
 * cycle), the two taking turns in short trials of about 10 and 20
 * microseconds, the best of each by the thread's processor time: a trial
 * that another thread or an interrupt slowed loses to one that ran alone,
 * and a core's clock, which AVX-512 may lower, is the same for both once
 * the first untimed trials have run. */
#include "backends/direct/bf16/bf16_fma.h"

#include <pthread.h>
#include <stdio.h>

#include "backends/direct/bf16/bf16.h"
#include "backends/direct/fp32/isa.h"
#include "base/clock.h"
#include "base/cpu.h"
#include "base/fma_chains.h"

#ifdef HAVE_DIRECT_BF16
#include <immintrin.h>

enum { CHAINS = 24, ROUNDS = 4000, TRIALS = 16 };

/* Seconds of one trial of each (base/fma_chains.h): the chains start
 * from values whose sums stay far from overflow. */
#define DOT_STEP(acc, a, b) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
#define FMA_STEP(acc, a, b) _mm512_fmadd_ps(a, b, acc)
FMA_CHAIN_TRIAL(dot_trial, "avx512f,avx512bf16", __m512, _mm512_set1_ps, __m512i,
                _mm512_set1_epi32(0x3a833a83), /* bf16 pairs of 1e-3 */
                _mm512_set1_epi32(0x3a833a83), DOT_STEP, CHAINS, ROUNDS)
FMA_CHAIN_TRIAL(fma_trial, "avx512f", __m512, _mm512_set1_ps, __m512, _mm512_set1_ps(1e-3f),
                _mm512_set1_ps(1e-3f), FMA_STEP, CHAINS, ROUNDS)

static double dot_over_fma;

static void measure(void)
{
    if (!cpu_has(CPU_AVX512F | CPU_AVX512_BF16))
        return;
    double dot, fma;
    best_of_alternating(dot_trial, fma_trial, TRIALS, &dot, &fma);
    /* 64 flops a vdpbf16ps (16 lanes, two products), 32 a vfmadd231ps */
    dot_over_fma = 64.0 / dot / (32.0 / fma);
}

double direct_bf16_dot_over_fma(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, measure);
    return dot_over_fma;
}

int direct_bf16_dot_runs(char *brief, size_t brief_len, char *why, size_t why_len)
{
    return direct_isa_avx512_set_runs("vdpbf16ps products", direct_bf16_supported, "AVX512_BF16",
                                      brief, brief_len, why, why_len);
}
#else
double direct_bf16_dot_over_fma(void) { return 0; }

/* (its row's set is NULL in such a build: the choice never asks) */
int direct_bf16_dot_runs(char *brief, size_t brief_len, char *why, size_t why_len)
{
    snprintf(brief, brief_len, "no vdpbf16ps products in this build");
    snprintf(why, why_len,
             "vdpbf16ps products left out of this build (the compiler has no -mavx512bf16)");
    return 0;
}
#endif
