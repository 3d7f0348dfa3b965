/* The AVX512_FP16 register tiles (fp16_tiles.h). Built with flags of its
 * own (fp16.mk: -mavx512fp16), whatever the target: nothing here runs
 * unless direct_fp16_supported() said yes. fp16_emulated.c does the same
 * arithmetic in the same order in plain C; keep the two in step.
 *
 * Sized for AVX-512's 32 registers:
 *   - row tile: 6 rows x 4 vectors of 32 halves, 24 fp16 accumulators, the
 *     4 vectors of a step loaded once and each row's half broadcast (a
 *     load alone); 24 vfmadd231ph for 10 loads, and 24 independent chains,
 *     enough to hide the instruction's latency (4 cycles, 2 a cycle). A
 *     chain's end widens each accumulator (vcvtph2ps, two halves) and adds
 *     it into the fp32 rows in memory, which the tile keeps in L1: about 7
 *     FMA-port operations an accumulator, once every DIRECT_FP16_CHAIN
 *     steps (22% on top of the products at 32; notes/direct-fp16.md).
 *   - dot tile: 4 output channels x 5 taps, 20 fp16 accumulators; per 32
 *     elements, 4 gradient vectors and 5 input vectors for 20 vfmadd231ph;
 *     a chain's end folds into 20 x 16 fp32 sums that live in memory. */
#include "backends/direct/fp16/fp16_tiles.h"
#include "backends/direct/half/half_common.h"

#include <immintrin.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Keeps v in a register: GCC would otherwise fold the load into every
 * instruction that uses it, one load each. */
ALWAYS_INLINE void pinned(__m512h *v) { __asm__("" : "+v"(*v)); }

ALWAYS_INLINE __m512h halves_at(const uint16_t *p) { return _mm512_castsi512_ph(_mm512_loadu_si512(p)); }

/* a doubled half (fp16_tiles.h) in every lane: vpbroadcastd from memory */
ALWAYS_INLINE __m512h broadcast(uint32_t hh) { return _mm512_castsi512_ph(_mm512_set1_epi32((int)hh)); }

/* The 16 low and the 16 high halves of v, widened (exactly) */
ALWAYS_INLINE __m512 low_floats(__m512h v)
{
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_castph_si512(v)));
}
ALWAYS_INLINE __m512 high_floats(__m512h v)
{
    return _mm512_cvtph_ps(_mm512_extracti64x4_epi64(_mm512_castph_si512(v), 1));
}

/* p[lane] += x[lane] for the lanes of k */
ALWAYS_INLINE void add_into(float *p, __mmask16 k, __m512 x)
{
    _mm512_mask_storeu_ps(p, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, p), x));
}

ALWAYS_INLINE void row_body(const int m, const int nv, int cols, float *const *rows, int add,
                            const float *init, const uint32_t *a, ptrdiff_t lda,
                            ptrdiff_t a_step, const uint16_t *b, const ptrdiff_t *off, int steps,
                            int chain)
{
    /* the lanes of each vector's two halves that hold columns */
    __mmask16 low_mask[FP16_VECS], high_mask[FP16_VECS];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        const int left = cols - FP16_LANES * v, lo = left < 16 ? left : 16;
        const int hi = left - 16 < 0 ? 0 : left - 16 < 16 ? left - 16 : 16;
        low_mask[v] = (__mmask16)((1u << lo) - 1);
        high_mask[v] = (__mmask16)((1u << hi) - 1);
    }
    /* without add, the first chain's fold stores start + its value
     * (fp32, as adding it to the stored start would) and the rows are not
     * stored first: a store and a load less a vector, which on a short sum
     * (conv1's 25 taps: one chain a call) is a tenth of the call */
    if (!add && steps <= 0)
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const __m512 start = _mm512_set1_ps(init ? init[i] : 0.0f);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                _mm512_mask_storeu_ps(rows[i] + FP16_LANES * v, low_mask[v], start);
                _mm512_mask_storeu_ps(rows[i] + FP16_LANES * v + 16, high_mask[v], start);
            }
        }
    const uint32_t *w_at = a; /* step s's halves */
    for (int s0 = 0; s0 < steps; s0 += chain) {
        const int s1 = steps - s0 < chain ? steps : s0 + chain;
        __m512h acc[FP16_ROWS][FP16_VECS];
#pragma GCC unroll 8
        for (int i = 0; i < m; i++)
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[i][v] = _mm512_setzero_ph();
        for (int s = s0; s < s1; s++, w_at += a_step) {
            const uint16_t *run = b + off[s];
            __m512h x[FP16_VECS];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                x[v] = halves_at(run + FP16_LANES * v);
                pinned(&x[v]);
            }
#pragma GCC unroll 8
            for (int i = 0; i < m; i++) {
                const __m512h w = broadcast(w_at[i * lda]);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    acc[i][v] = _mm512_fmadd_ph(w, x[v], acc[i][v]);
            }
        }
        if (!add && s0 == 0)
#pragma GCC unroll 8
            for (int i = 0; i < m; i++) {
                const __m512 start = _mm512_set1_ps(init ? init[i] : 0.0f);
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) {
                    _mm512_mask_storeu_ps(rows[i] + FP16_LANES * v, low_mask[v],
                                          _mm512_add_ps(start, low_floats(acc[i][v])));
                    _mm512_mask_storeu_ps(rows[i] + FP16_LANES * v + 16, high_mask[v],
                                          _mm512_add_ps(start, high_floats(acc[i][v])));
                }
            }
        else
#pragma GCC unroll 8
            for (int i = 0; i < m; i++)
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++) {
                    add_into(rows[i] + FP16_LANES * v, low_mask[v], low_floats(acc[i][v]));
                    add_into(rows[i] + FP16_LANES * v + 16, high_mask[v], high_floats(acc[i][v]));
                }
    }
}

void direct_fp16_row_tile_avx512(int m, int cols, float *const *rows, int add,
                                 const float *init, const uint32_t *a, ptrdiff_t lda,
                                 ptrdiff_t a_step, const uint16_t *b, const ptrdiff_t *off,
                                 int steps, int chain)
{
#define ROW_BODY(M, NV) row_body(M, NV, cols, rows, add, init, a, lda, a_step, b, off, steps, chain)
    ROW_SHAPES(m, (cols + FP16_LANES - 1) / FP16_LANES, ROW_BODY)
#undef ROW_BODY
}

/* The 16 sums added as fp16_tiles.h says: + 8, + 4, + 2, + 1 lanes on */
ALWAYS_INLINE float lanes_total(__m512 v)
{
    const __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

ALWAYS_INLINE void dot_step(const int mk, const int nt, __m512h acc[FP16_DOT_ROWS][FP16_DOT_COLS],
                            const uint16_t *const *g, const uint16_t *const *x, ptrdiff_t g_at,
                            ptrdiff_t x_at, __mmask32 k)
{
    __m512h e[FP16_DOT_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
        e[i] = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(k, g[i] + g_at));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        __m512h s = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(k, x[t] + x_at));
        pinned(&s); /* one load for every channel */
#pragma GCC unroll 4
        for (int i = 0; i < mk; i++)
            acc[i][t] = _mm512_fmadd_ph(e[i], s, acc[i][t]);
    }
}

ALWAYS_INLINE void dot_fold(const int mk, const int nt, __m512h acc[FP16_DOT_ROWS][FP16_DOT_COLS],
                            __m512 sum[FP16_DOT_ROWS][FP16_DOT_COLS])
{
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            sum[i][t] = _mm512_add_ps(
                sum[i][t], _mm512_add_ps(low_floats(acc[i][t]), high_floats(acc[i][t])));
            acc[i][t] = _mm512_setzero_ph();
        }
}

ALWAYS_INLINE void dot_body(const int mk, const int nt, float *out, ptrdiff_t out_row,
                            const uint16_t *const *g, const uint16_t *const *x, int nrows,
                            ptrdiff_t g_row, ptrdiff_t x_row, size_t len, int chain)
{
    __m512h acc[FP16_DOT_ROWS][FP16_DOT_COLS];
    __m512 sum[FP16_DOT_ROWS][FP16_DOT_COLS];
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            acc[i][t] = _mm512_setzero_ph();
            sum[i][t] = _mm512_setzero_ps();
        }
    const size_t whole = len / FP16_LANES * FP16_LANES;
    const __mmask32 rest = (__mmask32)((1ull << (len - whole)) - 1);
    int in_chain = 0;
    for (int y = 0; y < nrows; y++) {
        const ptrdiff_t g_at = y * g_row, x_at = y * x_row;
        for (size_t j = 0; j < whole; j += FP16_LANES) {
            dot_step(mk, nt, acc, g, x, g_at + (ptrdiff_t)j, x_at + (ptrdiff_t)j, (__mmask32)~0u);
            if (++in_chain == chain) {
                dot_fold(mk, nt, acc, sum);
                in_chain = 0;
            }
        }
        if (rest) { /* the elements past the last whole vector, the others read as 0 */
            dot_step(mk, nt, acc, g, x, g_at + (ptrdiff_t)whole, x_at + (ptrdiff_t)whole, rest);
            if (++in_chain == chain) {
                dot_fold(mk, nt, acc, sum);
                in_chain = 0;
            }
        }
    }
    if (in_chain)
        dot_fold(mk, nt, acc, sum);
#pragma GCC unroll 4
    for (int i = 0; i < mk; i++)
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            out[i * out_row + t] = lanes_total(sum[i][t]);
}

void direct_fp16_dot_tile_avx512(int mk, int nt, float *out, ptrdiff_t out_row,
                                 const uint16_t *const *g, const uint16_t *const *x, int nrows,
                                 ptrdiff_t g_row, ptrdiff_t x_row, size_t len, int chain)
{
#define DOT_BODY(MK, NT) dot_body(MK, NT, out, out_row, g, x, nrows, g_row, x_row, len, chain)
    DOT_SHAPES(mk, nt, DOT_BODY)
#undef DOT_BODY
}
