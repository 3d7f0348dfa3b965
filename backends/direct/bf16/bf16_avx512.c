/* The vdpbf16ps register tiles (bf16_tiles.h). Built with AVX-512 flags of
 * its own (bf16.mk), whatever the target: nothing here runs unless
 * direct_bf16_supported() said yes.
 *
 * Sized for AVX-512's 32 registers:
 *   - pair tile: 6 rows x 4 vectors of 16 columns, 24 accumulators, the 4
 *     column vectors of a step loaded once and each row's weight pair
 *     broadcast from memory; 24 vdpbf16ps for 4 loads and 6 broadcasts, and
 *     24 independent sums, enough to hide the instruction's latency.
 *   - dot tile: 4 output channels x 5 taps, 20 accumulators; per 32
 *     elements, 4 gradient vectors and 5 input vectors for 20 vdpbf16ps. */
#include "backends/direct/bf16/bf16_tiles.h"
#include "backends/direct/half/half_common.h"

#include <immintrin.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Keeps v in a register: GCC would otherwise fold the load into every
 * instruction that uses it, one load each. */
ALWAYS_INLINE void pinned(__m512i *v) { __asm__("" : "+v"(*v)); }

ALWAYS_INLINE __m512 dot2(__m512 acc, __m512i a, __m512i b)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

ALWAYS_INLINE void pair_body(const int m, const int nv, int cols, float *const *rows, int add,
                             const float *init, const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step,
                             const uint32_t *b, const ptrdiff_t *off, int steps)
{
    __m512 acc[PAIR_ROWS][PAIR_VECS];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[i][v] = init ? _mm512_set1_ps(init[i]) : _mm512_setzero_ps();
    const uint32_t *w_at = a; /* step s's weights */
    for (int s = 0; s < steps; s++, w_at += a_step) {
        const uint32_t *run = b + off[s];
        __m512i x[PAIR_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            x[v] = _mm512_loadu_si512(run + 16 * v);
            pinned(&x[v]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const __m512i w = _mm512_set1_epi32((int)w_at[i * lda]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[i][v] = dot2(acc[i][v], w, x[v]);
        }
    }
    const int last_cols = cols - 16 * (nv - 1);
    const __mmask16 last = last_cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << last_cols) - 1);
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *p = rows[i] + 16 * v;
            const __mmask16 k = v == nv - 1 ? last : (__mmask16)0xffff;
            __m512 r = acc[i][v];
            if (add)
                r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, p), r);
            _mm512_mask_storeu_ps(p, k, r);
        }
}

void direct_bf16_pair_tile_avx512(int m, int cols, float *const *rows, int add,
                                  const float *init, const uint32_t *a, ptrdiff_t lda, ptrdiff_t a_step,
                                  const uint32_t *b, const ptrdiff_t *off, int steps)
{
#define PAIR_BODY(M, NV) pair_body(M, NV, cols, rows, add, init, a, lda, a_step, b, off, steps)
    ROW_SHAPES(m, (cols + 15) / 16, PAIR_BODY)
#undef PAIR_BODY
}

/* 32 elements of g from element `at` on: bf16 as they are, or fp32
 * rounded (the first 16 in the low half, as consecutive bf16 lie), added
 * to *sum in fp32 when sum is set. f32 and sum are constants where this
 * is inlined. */
ALWAYS_INLINE __m512i g_vector(const int f32, const int sum, __m512 *total, const void *g,
                               ptrdiff_t at, __mmask32 k)
{
    if (!f32)
        return _mm512_maskz_loadu_epi16(k, (const uint16_t *)g + at);
    const float *p = (const float *)g + at;
    const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)k, p);
    const __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(k >> 16), p + 16);
    if (sum)
        *total = _mm512_add_ps(*total, _mm512_add_ps(lo, hi));
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

ALWAYS_INLINE void dot_step(const int f32, const int sum, const int mk, const int nt,
                            __m512 acc[DOT_ROWS][DOT_COLS], __m512 *totals,
                            const void *const *g, const uint16_t *const *x, ptrdiff_t g_at,
                            ptrdiff_t x_at, __mmask32 k)
{
    __m512i e[DOT_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
        e[i] = g_vector(f32, sum, &totals[i], g[i], g_at, k);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        __m512i s = _mm512_maskz_loadu_epi16(k, x[t] + x_at);
        pinned(&s); /* one load for every channel */
#pragma GCC unroll 4
        for (int i = 0; i < mk; i++)
            acc[i][t] = dot2(acc[i][t], e[i], s);
    }
}

ALWAYS_INLINE void dot_body(const int f32, const int sum, const int mk, const int nt,
                            float *out, ptrdiff_t out_row, float *sums, const void *const *g,
                            const uint16_t *const *x, int nrows, ptrdiff_t g_row,
                            ptrdiff_t x_row, size_t len)
{
    __m512 acc[DOT_ROWS][DOT_COLS], totals[DOT_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
        totals[i] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            acc[i][t] = _mm512_setzero_ps();
    const size_t whole = len / 32 * 32;
    const __mmask32 rest = (__mmask32)((1ull << (len - whole)) - 1);
    for (int y = 0; y < nrows; y++) {
        const ptrdiff_t g_at = y * g_row, x_at = y * x_row;
        for (size_t j = 0; j < whole; j += 32)
            dot_step(f32, sum, mk, nt, acc, totals, g, x, g_at + (ptrdiff_t)j,
                     x_at + (ptrdiff_t)j, (__mmask32)~0u);
        if (rest) /* the elements past the last whole vector, the others read as 0 */
            dot_step(f32, sum, mk, nt, acc, totals, g, x, g_at + (ptrdiff_t)whole,
                     x_at + (ptrdiff_t)whole, rest);
    }
    if (sum)
#pragma GCC unroll 4
        for (int i = 0; i < mk; i++)
            sums[i * out_row] = _mm512_reduce_add_ps(totals[i]);
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            out[i * out_row + t] = _mm512_reduce_add_ps(acc[i][t]);
}

/* dot_body with mk and nt constants in each case */
ALWAYS_INLINE void dot_tile(const int f32, const int sum, int mk, int nt, float *out,
                            ptrdiff_t out_row, float *sums, const void *const *g,
                            const uint16_t *const *x, int nrows, ptrdiff_t g_row,
                            ptrdiff_t x_row, size_t len)
{
#define DOT_BODY(MK, NT)                                                                       \
    dot_body(f32, sum, MK, NT, out, out_row, sums, g, x, nrows, g_row, x_row, len)
    DOT_SHAPES(mk, nt, DOT_BODY)
#undef DOT_BODY
}

void direct_bf16_dot_tile_avx512(int mk, int nt, float *out, ptrdiff_t out_row,
                                 const uint16_t *const *g, const uint16_t *const *x, int nrows,
                                 ptrdiff_t g_row, ptrdiff_t x_row, size_t len)
{
    dot_tile(0, 0, mk, nt, out, out_row, NULL, (const void *const *)g, x, nrows, g_row, x_row,
             len);
}

void direct_bf16_dot_tile_f32_avx512(int mk, int nt, float *out, ptrdiff_t out_row,
                                     float *sums, const float *const *g,
                                     const uint16_t *const *x, int nrows, ptrdiff_t g_row,
                                     ptrdiff_t x_row, size_t len)
{
    if (sums)
        dot_tile(1, 1, mk, nt, out, out_row, sums, (const void *const *)g, x, nrows, g_row,
                 x_row, len);
    else
        dot_tile(1, 0, mk, nt, out, out_row, NULL, (const void *const *)g, x, nrows, g_row,
                 x_row, len);
}

void direct_bf16_round_run_avx512(uint16_t *dst, const float *src, size_t n)
{
    size_t e = 0;
    for (; e + 16 <= n; e += 16)
        _mm256_storeu_si256((__m256i *)(dst + e),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + e)));
    if (e < n) {
        const __mmask16 k = (__mmask16)((1u << (n - e)) - 1);
        _mm256_mask_storeu_epi16(dst + e, k,
                                 (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(k, src + e)));
    }
}

/* 16 pairs: each half rounded, widened to 32 bits, the second shifted up */
ALWAYS_INLINE __m512i pairs_of(__m512 lo, __m512 hi)
{
    const __m512i low = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(lo));
    const __m512i high = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(hi));
    return _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
}

void direct_bf16_pair_runs_avx512(uint32_t *dst, const float *lo, const float *hi, size_t n)
{
    size_t e = 0;
    for (; e + 16 <= n; e += 16)
        _mm512_storeu_si512(dst + e, pairs_of(_mm512_loadu_ps(lo + e),
                                              hi ? _mm512_loadu_ps(hi + e) : _mm512_setzero_ps()));
    if (e < n) {
        const __mmask16 k = (__mmask16)((1u << (n - e)) - 1);
        _mm512_mask_storeu_epi32(dst + e, k,
                                 pairs_of(_mm512_maskz_loadu_ps(k, lo + e),
                                          hi ? _mm512_maskz_loadu_ps(k, hi + e) : _mm512_setzero_ps()));
    }
}
