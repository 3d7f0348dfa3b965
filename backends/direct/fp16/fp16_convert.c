/* fp32 <-> fp16 (fp16.h, fp16_tiles.h): the plain functions, and runs with
 * F16C (vcvtps2ph / vcvtph2ps on 8 values) or AVX-512 (on 16) where
 * base/cpu.h says the CPU has them. Each vector function carries its own
 * target attribute, so the file builds for any x86-64 target and the
 * rest of it uses nothing the build's target lacks. All three give the
 * same bits (tests/test_direct_fp16.c checks every fp16 and many floats). */
#include <string.h>

#include "backends/chwn/chwn_transpose.h"
#include "backends/direct/fp16/fp16.h"
#include "backends/direct/fp16/fp16_tiles.h"
#include "backends/direct/half/half_common.h"
#include "base/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FP16_X86 1
#endif

uint16_t direct_fp16_round(float x)
{
    const uint32_t u = fp16_bits_of(x), sign = (u >> 16) & 0x8000u, magnitude = u & 0x7fffffffu;
    if (magnitude > 0x7f800000u) /* NaN: quiet, the top of its payload kept */
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= 0x477ff000u) /* from 65520 (halfway to 2^16) on, and infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude >= 0x38800000u) { /* normal: exponent rebiased (127 - 15 = 112), 13 bits cut */
        const uint32_t r = magnitude - 0x38000000u;
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    /* below 2^-14 fp16 counts in steps of 2^-24, which is the spacing of
     * floats in [0.5, 1): adding 0.5 rounds to a step, ties to even, and
     * the step count is what the addition leaves in the low bits (1024,
     * the smallest normal, where it rounds up to 2^-14) */
    return (uint16_t)(sign | (fp16_bits_of(fp16_float_of(magnitude) + 0.5f) - 0x3f000000u));
}

float direct_fp16_value(uint16_t h) { return direct_fp16_value_inline(h); }

void direct_fp16_round_run_plain(uint16_t *dst, const float *src, size_t n, float scale)
{
    for (size_t e = 0; e < n; e++)
        dst[e] = direct_fp16_round(src[e] * scale);
}

void direct_fp16_value_run_plain(float *dst, const uint16_t *src, size_t n, float scale)
{
    for (size_t e = 0; e < n; e++)
        dst[e] = direct_fp16_value(src[e]) * scale;
}

/* The conversion runs of one instruction set, ROUND (dst[e] = round(src[e]
 * * scale)) and VALUE (dst[e] = value(src[e]) * scale): WIDTH values at a
 * time with its intrinsics (HALVES the vector of WIDTH halves), the last
 * ones by ROUND_REST and the plain value run. Where the build has no x86
 * vectors, the plain runs stand in (never chosen: cpu_has says no). */
#ifdef FP16_X86
#define CONVERSION_RUNS(ROUND, VALUE, TARGET, WIDTH, HALVES, LOAD, STORE, LOAD_HALVES,           \
                        STORE_HALVES, SET1, MUL, TO_HALVES, TO_FLOATS, ROUND_REST)               \
    __attribute__((target(TARGET))) void ROUND(uint16_t *dst, const float *src, size_t n,       \
                                               float scale)                                     \
    {                                                                                          \
        size_t e = 0;                                                                          \
        for (; e + (WIDTH) <= n; e += (WIDTH))                                                 \
            STORE_HALVES((HALVES *)(dst + e),                                                  \
                         TO_HALVES(MUL(LOAD(src + e), SET1(scale)), NEAREST));                 \
        ROUND_REST(dst + e, src + e, n - e, scale);                                            \
    }                                                                                          \
    __attribute__((target(TARGET))) void VALUE(float *dst, const uint16_t *src, size_t n,       \
                                               float scale)                                     \
    {                                                                                          \
        size_t e = 0;                                                                          \
        for (; e + (WIDTH) <= n; e += (WIDTH))                                                 \
            STORE(dst + e, MUL(TO_FLOATS(LOAD_HALVES((const HALVES *)(src + e))), SET1(scale))); \
        direct_fp16_value_run_plain(dst + e, src + e, n - e, scale);                           \
    }
enum { NEAREST = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };

/* AVX-512's last values under a mask: the same bits as the plain function,
 * without its branches */
__attribute__((target("avx512f"))) static void
round_rest_avx512(uint16_t *dst, const float *src, size_t n, float scale)
{
    if (!n)
        return;
    const __mmask16 k = (__mmask16)((1u << n) - 1);
    const __m256i h = _mm512_cvtps_ph(
        _mm512_mul_ps(_mm512_maskz_loadu_ps(k, src), _mm512_set1_ps(scale)), NEAREST);
    uint16_t rest[16];
    _mm256_storeu_si256((__m256i *)rest, h);
    memcpy(dst, rest, sizeof(uint16_t) * n);
}
#else
#define CONVERSION_RUNS(ROUND, VALUE, ...)                                                     \
    void ROUND(uint16_t *dst, const float *src, size_t n, float scale)                         \
    {                                                                                          \
        direct_fp16_round_run_plain(dst, src, n, scale);                                       \
    }                                                                                          \
    void VALUE(float *dst, const uint16_t *src, size_t n, float scale)                         \
    {                                                                                          \
        direct_fp16_value_run_plain(dst, src, n, scale);                                       \
    }
#endif

/* F16C: 8 at a time */
CONVERSION_RUNS(direct_fp16_round_run_f16c, direct_fp16_value_run_f16c, "avx,f16c", 8, __m128i,
                _mm256_loadu_ps, _mm256_storeu_ps, _mm_loadu_si128, _mm_storeu_si128,
                _mm256_set1_ps, _mm256_mul_ps, _mm256_cvtps_ph, _mm256_cvtph_ps,
                direct_fp16_round_run_plain)

/* AVX-512: 16 at a time */
CONVERSION_RUNS(direct_fp16_round_run_avx512, direct_fp16_value_run_avx512, "avx512f", 16,
                __m256i, _mm512_loadu_ps, _mm512_storeu_ps, _mm256_loadu_si256,
                _mm256_storeu_si256, _mm512_set1_ps, _mm512_mul_ps, _mm512_cvtps_ph,
                _mm512_cvtph_ps, round_rest_avx512)

/* One plane rounded and summed (direct_fp16_round_sums): the plain
 * functions, and AVX-512's, 16 a step. The sum keeps sum_floats's order
 * (half_common.h): 16 running sums, lane l taking elements l, l + 16, ...,
 * the last short vector's elements their own lanes, then the 16 added in
 * lane order; the vector's lane l is that running sum, the same floats. */
static float round_sum_plain(uint16_t *dst, const float *src, size_t n)
{
    float part[16] = {0};
    for (size_t e = 0; e < n; e++) {
        part[e % 16] += src[e];
        dst[e] = direct_fp16_round(src[e]);
    }
    return sum_lanes(part);
}

#ifdef FP16_X86
__attribute__((target("avx512f"))) static float round_sum_avx512(uint16_t *dst,
                                                                 const float *src, size_t n)
{
    __m512 part = _mm512_setzero_ps();
    size_t e = 0;
    for (; e + 16 <= n; e += 16) {
        const __m512 x = _mm512_loadu_ps(src + e);
        _mm256_storeu_si256((__m256i *)(dst + e), _mm512_cvtps_ph(x, NEAREST));
        part = _mm512_add_ps(part, x);
    }
    const float total = sum_lanes_avx512(part, src + e, n - e);
    round_rest_avx512(dst + e, src + e, n - e, 1.0f);
    return total;
}
#endif

/* dst[e] = round(src[e]) twice in a word (direct_fp16_double), the row
 * tile's broadcast operand: AVX-512 widens the 16 halves of a conversion
 * to words and copies each into its high half, in the one pass */
static void round_doubled_plain(uint32_t *dst, const float *src, size_t n)
{
    for (size_t e = 0; e < n; e++)
        dst[e] = direct_fp16_double(direct_fp16_round(src[e]));
}

#ifdef FP16_X86
__attribute__((target("avx512f"))) static void round_doubled_avx512(uint32_t *dst,
                                                                    const float *src, size_t n)
{
    size_t e = 0;
    for (; e + 16 <= n; e += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(_mm512_loadu_ps(src + e), NEAREST));
        _mm512_storeu_si512(dst + e, _mm512_or_si512(w, _mm512_slli_epi32(w, 16)));
    }
    round_doubled_plain(dst + e, src + e, n - e);
}
#endif

/* dst[c][r] = round(src[r][c]) for r in [r0, r1), c in [c0, c1): one
 * element at a time */
static void round_transposed_plain(uint16_t *dst, size_t ld_dst, const float *src,
                                   size_t ld_src, int r0, int r1, int c0, int c1)
{
    for (int c = c0; c < c1; c++)
        for (int r = r0; r < r1; r++)
            dst[(size_t)c * ld_dst + r] = direct_fp16_round(src[(size_t)r * ld_src + c]);
}

#ifdef FP16_X86
/* The same over whole 16 x 16 blocks, transposed in registers as the CHWN
 * engine's transposes are (chwn_transpose.h), each column rounded by one
 * vcvtps2ph and stored as 16 halves; the rest of the rows and columns one
 * at a time. */
__attribute__((target("avx512f"))) static void round_transposed_avx512(
    uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src, int r0, int r1, int c0, int c1)
{
    const int r16 = r0 + (r1 - r0) / 16 * 16, c16 = c0 + (c1 - c0) / 16 * 16;
    for (int r = r0; r < r16; r += 16)
        for (int c = c0; c < c16; c += 16) {
            chwn_v16 column[16];
            chwn_transpose_block(column, src + (size_t)r * ld_src + c, ld_src);
            for (int j = 0; j < 16; j++)
                _mm256_storeu_si256((__m256i *)(dst + (size_t)(c + j) * ld_dst + r),
                                    _mm512_cvtps_ph((__m512)column[j], NEAREST));
        }
    round_transposed_plain(dst, ld_dst, src, ld_src, r16, r1, c0, c1);
    round_transposed_plain(dst, ld_dst, src, ld_src, r0, r16, c16, c1);
}
#endif

void direct_fp16_round_transposed(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src,
                                  int rows, int cols, int threads)
{
    enum { BLOCK = 64 }; /* columns a piece: 64 rows of dst, written whole */
    const int pieces = (cols + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && pieces > 1)
    for (int i = 0; i < pieces; i++) {
        const int c0 = i * BLOCK, c1 = cols - c0 < BLOCK ? cols : c0 + BLOCK;
#ifdef FP16_X86
        if (cpu_has(CPU_AVX512F))
            round_transposed_avx512(dst, ld_dst, src, ld_src, 0, rows, c0, c1);
        else
#endif
            round_transposed_plain(dst, ld_dst, src, ld_src, 0, rows, c0, c1);
        for (int c = c0; c < c1; c++)
            memset(dst + (size_t)c * ld_dst + rows, 0, sizeof(uint16_t) * (ld_dst - (size_t)rows));
    }
}

void direct_fp16_round_doubled_run(uint32_t *dst, const float *src, size_t n)
{
#ifdef FP16_X86
    if (cpu_has(CPU_AVX512F)) {
        round_doubled_avx512(dst, src, n);
        return;
    }
#endif
    round_doubled_plain(dst, src, n);
}

void direct_fp16_round_sums(uint16_t *dst, const float *src, size_t plane, int K, float *sums,
                            size_t sums_stride, int threads)
{
    float (*run)(uint16_t *, const float *, size_t) = round_sum_plain;
#ifdef FP16_X86
    if (cpu_has(CPU_AVX512F))
        run = round_sum_avx512;
#endif
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && K > 1)
    for (int k = 0; k < K; k++)
        sums[(size_t)k * sums_stride] =
            run(dst + (size_t)k * plane, src + (size_t)k * plane, plane);
}

void direct_fp16_round_run(uint16_t *dst, const float *src, size_t n, float scale)
{
    fp16_round_run_fn *run = cpu_has(CPU_AVX512F) ? direct_fp16_round_run_avx512
                             : cpu_has(CPU_F16C)  ? direct_fp16_round_run_f16c
                                                  : direct_fp16_round_run_plain;
    run(dst, src, n, scale);
}

void direct_fp16_value_run(float *dst, const uint16_t *src, size_t n, float scale)
{
    fp16_value_run_fn *run = cpu_has(CPU_AVX512F) ? direct_fp16_value_run_avx512
                             : cpu_has(CPU_F16C)  ? direct_fp16_value_run_f16c
                                                  : direct_fp16_value_run_plain;
    run(dst, src, n, scale);
}
