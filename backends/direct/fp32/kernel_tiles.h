/* The register tiles kernels.c builds its convolutions and dense products
 * from (backends/direct/fp32/kernels.c): the build's vector type and tile
 * shape, the vector helpers, and row_tile, a block of rows summed over a
 * walk of taps. Only kernels.c includes this, once per instruction set
 * (module.mk): everything here is static, compiled with that build's
 * flags, so each build has its own copy fitted to its registers. */
#ifndef LENET_BENCH_DIRECT_KERNEL_TILES_H
#define LENET_BENCH_DIRECT_KERNEL_TILES_H

#include <stddef.h>
#include <string.h>

/* Floats per vector: the build's register width. (-DLB_DIRECT_VL=16 in a
 * build for AVX2 runs the AVX-512 build's logic on pairs of registers.) */
#ifndef LB_DIRECT_VL
#if defined(__AVX512F__)
#define LB_DIRECT_VL 16
#elif defined(__AVX__)
#define LB_DIRECT_VL 8
#else
#define LB_DIRECT_VL 4
#endif
#endif
enum { VL = LB_DIRECT_VL };
typedef float vec __attribute__((vector_size(VL * sizeof(float))));

/* Whether a vector is one register of the target, for the intrinsics */
#if LB_DIRECT_VL == 16 && defined(__AVX512F__)
#define VEC_IS_ZMM 1
#elif LB_DIRECT_VL == 8 && defined(__AVX__)
#define VEC_IS_YMM 1
#elif LB_DIRECT_VL == 4 && defined(__SSE2__)
#define VEC_IS_XMM 1
#endif
#if defined(VEC_IS_ZMM) || defined(VEC_IS_YMM) || defined(VEC_IS_XMM)
#include <immintrin.h>
#endif

/* A forward or input-gradient tile: MR rows of NV vectors (at most 12 by
 * 4), MR x NV accumulators plus NV loaded vectors and a broadcast. */
#ifndef LB_DIRECT_MR
#define LB_DIRECT_MR 6
#endif
#ifndef LB_DIRECT_NV
#define LB_DIRECT_NV 2
#endif
enum { MR = LB_DIRECT_MR, NV = LB_DIRECT_NV, NR = NV * VL };
/* A weight-gradient tile: WK output channels by WT taps (at most 5 by 8),
 * WK x WT accumulators plus WK loaded vectors and one more. */
#ifndef LB_DIRECT_WK
#define LB_DIRECT_WK 2
#endif
#ifndef LB_DIRECT_WT
#define LB_DIRECT_WT 5
#endif
enum { WK = LB_DIRECT_WK, WT = LB_DIRECT_WT };
/* the sizes tile() and weight_block() have cases for */
#if !(LB_DIRECT_MR == 5 || LB_DIRECT_MR == 6 || LB_DIRECT_MR == 8 || LB_DIRECT_MR == 10 ||       \
      LB_DIRECT_MR == 12) ||                                                                   \
    !(LB_DIRECT_NV >= 2 && LB_DIRECT_NV <= 4) || !(LB_DIRECT_WK == 2 || LB_DIRECT_WK == 4 ||     \
                                                  LB_DIRECT_WK == 5) ||                        \
    !(LB_DIRECT_WT == 5 || LB_DIRECT_WT == 6 || LB_DIRECT_WT == 8)
#error "tile shape: MR 5, 6, 8, 10 or 12; NV 2 to 4; WK 2, 4 or 5; WT 5, 6 or 8"
#endif
/* 1: a row's vectors split into column tiles of nearly equal widths (16
 * vectors as 3+3+3+3+2+2, not 5 x 3 + 1), and a convolution's output
 * channels into weight-gradient blocks of nearly equal counts: no tile of
 * one vector or one channel, whose few accumulators and many loads per
 * FMA leave a second FMA port idle. 0: full tiles, then what is left. */
#ifndef LB_DIRECT_EVEN
#define LB_DIRECT_EVEN 0
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* A loop unrolled whole (its count is a constant where it is inlined), so
 * that its arrays of vectors become registers: GCC's pragma, or clang's,
 * which does not read GCC's. */
#define UNROLL_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define UNROLL(n) UNROLL_PRAGMA(clang loop unroll(full))
#else
#define UNROLL(n) UNROLL_PRAGMA(GCC unroll n)
#endif
/* A tile's loop over its taps kept as written: clang would otherwise
 * vectorise or interleave it again on top of the tile's own vectors, and
 * a tile of one row then parks its vectors on the stack */
#if defined(__clang__)
#define TAPS_AS_WRITTEN UNROLL_PRAGMA(clang loop unroll(disable) vectorize(disable) interleave(disable))
#else
#define TAPS_AS_WRITTEN
#endif

/* Unaligned loads and stores; with AVX as the intrinsics, which GCC emits
 * whole (tuned for Zen 1 it splits a plain 256-bit store in two). */
ALWAYS_INLINE vec load(const float *p)
{
#ifdef VEC_IS_YMM
    return (vec)_mm256_loadu_ps(p);
#else
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

ALWAYS_INLINE void store(float *p, vec v)
{
#ifdef VEC_IS_YMM
    _mm256_storeu_ps(p, (__m256)v);
#else
    memcpy(p, &v, sizeof v);
#endif
}

/* x in every lane: one broadcast (GCC built the loop below lane by lane,
 * 16 masked broadcasts for each of a tile's rows before its first tap) */
ALWAYS_INLINE vec splat(float x)
{
#if defined(VEC_IS_ZMM)
    return (vec)_mm512_set1_ps(x);
#elif defined(VEC_IS_YMM)
    return (vec)_mm256_set1_ps(x);
#elif defined(VEC_IS_XMM)
    return (vec)_mm_set1_ps(x);
#else
    vec v;
    for (int i = 0; i < VL; i++)
        v[i] = x;
    return v;
#endif
}

/* *p in every lane, loaded as one broadcast (GCC otherwise builds some
 * splats of a loaded float from two instructions) */
ALWAYS_INLINE vec splat_at(const float *p)
{
#if defined(VEC_IS_ZMM)
    return (vec)_mm512_set1_ps(*p);
#elif defined(VEC_IS_YMM)
    return (vec)_mm256_broadcast_ss(p);
#elif defined(VEC_IS_XMM)
    return (vec)_mm_load1_ps(p);
#else
    return splat(*p);
#endif
}

/* The lanes of v summed as a tree: the upper half added to the lower,
 * then again on the half, down to one lane (16 lanes: 4 additions and 4
 * shuffles, where one lane at a time took 15 of each and kept the shuffle
 * port, an FMA port on Intel's two-port cores, busy). The same order in
 * every build of one vector width. */
ALWAYS_INLINE float sum_lanes(vec v)
{
#if defined(VEC_IS_ZMM)
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256((__m512)v),
                                    _mm512_extractf32x8_ps((__m512)v, 1));
#define SUM_LANES_FROM_8 1
#elif defined(VEC_IS_YMM)
    const __m256 h8 = (__m256)v;
#define SUM_LANES_FROM_8 1
#endif
#ifdef SUM_LANES_FROM_8
#undef SUM_LANES_FROM_8
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
#elif defined(VEC_IS_XMM)
    const __m128 h4 = (__m128)v;
#endif
#if defined(VEC_IS_ZMM) || defined(VEC_IS_YMM) || defined(VEC_IS_XMM)
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    const __m128 h1 = _mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1));
    return _mm_cvtss_f32(h1);
#else
    float lane[VL];
UNROLL(16)
    for (int i = 0; i < VL; i++)
        lane[i] = v[i];
    for (int half = VL / 2; half >= 1; half /= 2)
        for (int i = 0; i < half; i++)
            lane[i] += lane[i + half];
    return lane[0];
#endif
}

#if defined(VEC_IS_ZMM)
/* The lanes of 16 vectors summed together, each in sum_lanes's tree (the
 * same pairs added, the same floats): 30 shuffles and 15 additions where
 * 16 sum_lanes take 64 of each on the shuffle port. out[i] gets v[i]'s. */
ALWAYS_INLINE void sum_lanes_16(const vec v[16], float out[16])
{
    __m512 h8[8], h4[4], h2[2];
    /* each pair's halves added: 8 lanes of each of the two */
UNROLL(8)
    for (int k = 0; k < 8; k++) {
        const __m512 a = (__m512)v[2 * k], b = (__m512)v[2 * k + 1];
        h8[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    /* then their quarters: 4 lanes of each of four */
UNROLL(4)
    for (int k = 0; k < 4; k++)
        h4[k] = _mm512_add_ps(_mm512_shuffle_f32x4(h8[2 * k], h8[2 * k + 1], 0x88),
                              _mm512_shuffle_f32x4(h8[2 * k], h8[2 * k + 1], 0xdd));
    /* then within each quarter: 2 lanes of each of eight, 1 of each */
UNROLL(2)
    for (int k = 0; k < 2; k++)
        h2[k] = _mm512_add_ps(_mm512_shuffle_ps(h4[2 * k], h4[2 * k + 1], 0x44),
                              _mm512_shuffle_ps(h4[2 * k], h4[2 * k + 1], 0xee));
    const __m512 h1 = _mm512_add_ps(_mm512_shuffle_ps(h2[0], h2[1], 0x88),
                                    _mm512_shuffle_ps(h2[0], h2[1], 0xdd));
    float lanes[16];
    _mm512_storeu_ps(lanes, h1);
    /* v[i]'s sum is in lane (i % 4) * 4 + i / 4 */
UNROLL(16)
    for (int i = 0; i < 16; i++)
        out[i] = lanes[i % 4 * 4 + i / 4];
}
#endif

/* x[0..n) summed a vector at a time (a bias's gradient) */
static float sum_run(const float *x, size_t n)
{
    vec total = splat(0.0f);
    float tail = 0.0f;
    size_t j = 0;
    for (; j + VL <= n; j += VL)
        total += load(x + j);
    for (; j < n; j++)
        tail += x[j];
    return sum_lanes(total) + tail;
}

/* Keeps v in a register from here: GCC would otherwise fold a loaded
 * vector into every FMA that uses it, a load each. (Without AVX a vector
 * spans several registers and there is nothing to pin.) */
ALWAYS_INLINE void in_register(vec *v)
{
#if defined(VEC_IS_ZMM)
    __asm__("" : "+v"(*v));
#elif defined(VEC_IS_YMM) || defined(VEC_IS_XMM)
    __asm__("" : "+x"(*v));
#else
    (void)v;
#endif
}

/* The taps a tile sums over: a walk of three nested levels, each with its
 * count, the step of the runs (b) and the step of the weights (a) from one
 * value of that level to the next. */
typedef struct walk {
    int count[3];
    ptrdiff_t b_step[3], a_step[3];
} walk;

/* What a tile does with rows[]: stores its sums, adds them to what is
 * there, or resumes sums it stored there (each lane's chain of FMAs goes
 * on where it stopped: the same floats as one chain over all the taps). */
enum { TILE_STORE = 0, TILE_ADD = 1, TILE_RESUME = 2 };

/* rows[i] (i < m, at most MR) gets, for columns [0, width), the sum over
 * the walk's taps of a_tap[i * a_row] * b_tap[column], plus init[i] (or
 * 0), stored (add == TILE_STORE) or added to what is there (TILE_ADD); or
 * the sums go on from what is there (TILE_RESUME). width is nv vectors, or
 * one column for nv == 0. m and nv are constants where this is inlined,
 * so the accumulators live in registers. */
ALWAYS_INLINE void row_tile(const int m, const int nv, float *const *rows, int add,
                            const float *init, const float *a, ptrdiff_t a_row,
                            const float *b, const walk *wk)
{
    const int lanes = nv ? nv : 1;
    vec acc[MR][NV];
    float one[MR];
UNROLL(8)
    for (int i = 0; i < m; i++) {
        one[i] = add == TILE_RESUME ? rows[i][0] : init ? init[i] : 0.0f;
UNROLL(4)
        for (int v = 0; v < lanes; v++)
            acc[i][v] = add == TILE_RESUME && nv ? load(rows[i] + v * VL) : splat(one[i]);
    }
    const walk w = *wk; /* a copy the stores below cannot change */
    for (int u0 = 0; u0 < w.count[0]; u0++)
        for (int u1 = 0; u1 < w.count[1]; u1++) {
            const float *s = b + u0 * w.b_step[0] + u1 * w.b_step[1];
            const float *t = a + u0 * w.a_step[0] + u1 * w.a_step[1];
            TAPS_AS_WRITTEN
            for (int u2 = 0; u2 < w.count[2]; u2++, s += w.b_step[2], t += w.a_step[2]) {
                if (!nv) {
                    const float x = *s;
UNROLL(8)
                    for (int i = 0; i < m; i++)
                        one[i] += t[i * a_row] * x;
                    continue;
                }
                vec x[NV];
UNROLL(4)
                for (int v = 0; v < nv; v++) {
                    x[v] = load(s + v * VL);
#if defined(__clang__)
                    in_register(&x[v]); /* (clang parks a lone one on the stack) */
#endif
                }
UNROLL(8)
                for (int i = 0; i < m; i++) {
                    const vec wt = splat_at(t + i * a_row);
UNROLL(4)
                    for (int v = 0; v < nv; v++)
                        acc[i][v] += wt * x[v];
                }
            }
        }
UNROLL(8)
    for (int i = 0; i < m; i++) {
        if (!nv) {
            rows[i][0] = add == TILE_ADD ? rows[i][0] + one[i] : one[i];
            continue;
        }
UNROLL(4)
        for (int v = 0; v < nv; v++)
            store(rows[i] + v * VL,
                  add == TILE_ADD ? load(rows[i] + v * VL) + acc[i][v] : acc[i][v]);
    }
}

/* Where block b of `blocks` nearly equal blocks of n rows starts: ceil(n /
 * MR) blocks of at most MR rows each, none much smaller than the others
 * (a block of few rows has few accumulators to hide the FMA latency). */
static int block_start(int n, int blocks, int b) { return (int)((long)n * b / blocks); }

/* row_tile with m and nv constants: one function for each shape, out of
 * line, so that each hot loop has the general registers to itself (every
 * shape inlined into one function ran GCC out of them: its loops reloaded
 * pointers from the stack and from vector registers, on the FMA ports;
 * scripts/check-spills holds the loops to it). */
typedef void tile_fn(float *const *rows, int add, const float *init, const float *a,
                     ptrdiff_t a_row, const float *b, const walk *wk);
#define TILE_SHAPE(M, NVEC)                                                                  \
    static __attribute__((noinline)) void tile_##M##x##NVEC(                                 \
        float *const *rows, int add, const float *init, const float *a, ptrdiff_t a_row,     \
        const float *b, const walk *wk)                                                      \
    {                                                                                        \
        row_tile(M, NVEC, rows, add, init, a, a_row, b, wk);                                 \
    }
#if LB_DIRECT_NV >= 4
#define TILE_SHAPES(M)                                                                       \
    TILE_SHAPE(M, 0) TILE_SHAPE(M, 1) TILE_SHAPE(M, 2) TILE_SHAPE(M, 3) TILE_SHAPE(M, 4)
#define TILE_ROW(M) {tile_##M##x0, tile_##M##x1, tile_##M##x2, tile_##M##x3, tile_##M##x4}
#elif LB_DIRECT_NV >= 3
#define TILE_SHAPES(M) TILE_SHAPE(M, 0) TILE_SHAPE(M, 1) TILE_SHAPE(M, 2) TILE_SHAPE(M, 3)
#define TILE_ROW(M) {tile_##M##x0, tile_##M##x1, tile_##M##x2, tile_##M##x3}
#else
#define TILE_SHAPES(M) TILE_SHAPE(M, 0) TILE_SHAPE(M, 1) TILE_SHAPE(M, 2)
#define TILE_ROW(M) {tile_##M##x0, tile_##M##x1, tile_##M##x2}
#endif
TILE_SHAPES(1)
TILE_SHAPES(2)
TILE_SHAPES(3)
TILE_SHAPES(4)
TILE_SHAPES(5)
#if LB_DIRECT_MR >= 6
TILE_SHAPES(6)
#endif
#if LB_DIRECT_MR >= 8
TILE_SHAPES(7)
TILE_SHAPES(8)
#endif
#if LB_DIRECT_MR >= 10
TILE_SHAPES(9)
TILE_SHAPES(10)
#endif
#if LB_DIRECT_MR >= 12
TILE_SHAPES(11)
TILE_SHAPES(12)
#endif

/* tiles[m - 1][nv]: the function of each shape */
static tile_fn *const tiles[MR][NV + 1] = {
    TILE_ROW(1), TILE_ROW(2), TILE_ROW(3), TILE_ROW(4), TILE_ROW(5),
#if LB_DIRECT_MR >= 6
    TILE_ROW(6),
#endif
#if LB_DIRECT_MR >= 8
    TILE_ROW(7), TILE_ROW(8),
#endif
#if LB_DIRECT_MR >= 10
    TILE_ROW(9), TILE_ROW(10),
#endif
#if LB_DIRECT_MR >= 12
    TILE_ROW(11), TILE_ROW(12),
#endif
};
#undef TILE_ROW
#undef TILE_SHAPES
#undef TILE_SHAPE

/* A tile of m rows (1 to MR) by nv vectors (0 to NV) */
static inline void tile(int m, int nv, float *const *rows, int add, const float *init,
                        const float *a, ptrdiff_t a_row, const float *b, const walk *wk)
{
    tiles[m - 1][nv](rows, add, init, a, a_row, b, wk);
}

/* The column tiles of a row `width` wide: NR columns at a time, then one
 * vector, then single columns. Returns the vectors of the tile at column j
 * (0 for a single column) and sets *cols to its width. */
static int tile_at(size_t j, size_t width, int *cols)
{
#if LB_DIRECT_EVEN
    /* the whole vectors left in as few tiles as NV allows, nearly equal */
    const size_t left = (width - j) / VL, tiles = (left + NV - 1) / NV;
    const int nv = left ? (int)((left + tiles - 1) / tiles) : 0;
#else
    const int nv = j + NR <= width ? NV : j + VL <= width ? 1 : 0;
#endif
    *cols = nv ? nv * VL : 1;
    return nv;
}

#endif
