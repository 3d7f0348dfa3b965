/* The FMA products' rounding pass (bf16_fma.h): the one rounding of
 * backends/common/bf16_round.h over a run, compiled three times, for 512-bit, 256-bit and
 * the build's own vectors, the one matching the fp32 kernels chosen
 * picked when it runs (a run forced off AVX-512 stays off it here too).
 * gcc 12 at -O3 turns each into a loop of 16 (8, 4) floats a step: an
 * add, a shift, a mask and three compares with blends, no branch. */
#include "backends/direct/bf16/bf16_fma.h"

#include <string.h>

#include "backends/common/bf16_round.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/half/half_common.h"
#include "base/cpu.h"

#define ROUND_RUN(NAME, TARGET)                                                                \
    TARGET static void NAME(float *restrict dst, const float *restrict src, size_t n)         \
    {                                                                                          \
        for (size_t i = 0; i < n; i++)                                                         \
            dst[i] = lb_bf16_rounded(src[i]);                                              \
    }
/* The same rounding with the plane's fp32 sum (direct_bf16_fma_round_sums)
 * in sum_floats's order (half_common.h): 16 running sums, lane l taking
 * elements l, l + 16, ..., then the 16 added in lane order */
#define ROUND_SUM_RUN(NAME, TARGET)                                                            \
    TARGET static float NAME(float *restrict dst, const float *restrict src, size_t n)        \
    {                                                                                          \
        float part[16] = {0};                                                                  \
        size_t i = 0;                                                                          \
        for (; i + 16 <= n; i += 16)                                                           \
            for (int l = 0; l < 16; l++) {                                                     \
                part[l] += src[i + l];                                                         \
                dst[i + l] = lb_bf16_rounded(src[i + l]);                                  \
            }                                                                                  \
        for (; i < n; i++) {                                                                   \
            part[i % 16] += src[i];                                                            \
            dst[i] = lb_bf16_rounded(src[i]);                                              \
        }                                                                                      \
        return sum_lanes(part);                                                                \
    }

#if defined(__x86_64__)
ROUND_SUM_RUN(round_sum_avx512, __attribute__((target("avx512f"))))
ROUND_SUM_RUN(round_sum_avx2, __attribute__((target("avx2"))))
#endif
ROUND_SUM_RUN(round_sum_plain, )

#if defined(__x86_64__)
ROUND_RUN(round_run_avx512, __attribute__((target("avx512f"))))
ROUND_RUN(round_run_avx2, __attribute__((target("avx2"))))
#endif
ROUND_RUN(round_run_plain, )

#ifdef HAVE_DIRECT_BF16
#include <immintrin.h>

/* With AVX512_BF16, vcvtneps2bf16 rounds 16 floats in one instruction, the
 * same way (nearest even, NaN quiet, subnormals to signed zero: the tests
 * hold the two together), and two more put each bf16 back in the high
 * half of a float: half the instructions of the loop above. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
round_run_avx512_bf16(float *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    for (; i < n; i++)
        dst[i] = lb_bf16_rounded(src[i]);
}

/* vcvtneps2bf16's rounding with the plane's sum, the sum's lanes those of
 * sum_floats (the last short vector's elements added to their own lanes
 * under a mask) */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static float
round_sum_avx512_bf16(float *restrict dst, const float *restrict src, size_t n)
{
    __m512 part = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        part = _mm512_add_ps(part, x);
    }
    const float total = sum_lanes_avx512(part, src + i, n - i);
    for (; i < n; i++)
        dst[i] = lb_bf16_rounded(src[i]);
    return total;
}
#endif

typedef void round_run_fn(float *restrict dst, const float *restrict src, size_t n);
typedef float round_sum_fn(float *restrict dst, const float *restrict src, size_t n);

/* The runs of the vectors the fp32 kernels run on (a run forced off
 * AVX-512 stays off it here too) */
typedef struct round_runs {
    round_run_fn *run;
    round_sum_fn *sum;
} round_runs;

static round_runs round_runs_here(void)
{
#if defined(__x86_64__)
    const char *isa = direct_active()->isa;
#ifdef HAVE_DIRECT_BF16
    if (strncmp(isa, "avx512", 6) == 0 && cpu_has(CPU_AVX512F | CPU_AVX512BW | CPU_AVX512_BF16))
        return (round_runs){round_run_avx512_bf16, round_sum_avx512_bf16};
#endif
    if (strncmp(isa, "avx512", 6) == 0)
        return (round_runs){round_run_avx512, round_sum_avx512};
    if (strcmp(isa, "avx2") == 0)
        return (round_runs){round_run_avx2, round_sum_avx2};
#endif
    return (round_runs){round_run_plain, round_sum_plain};
}

void direct_bf16_fma_round_sums(float *dst, size_t dst_stride, const float *src, size_t plane,
                                int K, float *sums, size_t sums_stride, int threads)
{
    round_sum_fn *run = round_runs_here().sum;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && K > 1)
    for (int k = 0; k < K; k++)
        sums[(size_t)k * sums_stride] =
            run(dst + (size_t)k * dst_stride, src + (size_t)k * plane, plane);
}

void direct_bf16_fma_round(float *dst, const float *src, size_t n, int threads)
{
    /* pieces of 16 KiB, on cache lines where the buffers are */
    enum { PIECE = 4096 };
    round_run_fn *run = round_runs_here().run;
    const size_t pieces = (n + PIECE - 1) / PIECE;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && pieces > 1)
    for (size_t p = 0; p < pieces; p++)
        run(dst + p * PIECE, src + p * PIECE, n - p * PIECE < PIECE ? n - p * PIECE : PIECE);
}
