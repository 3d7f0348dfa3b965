/* A float matrix transposed 16 x 16 floats at a time in registers: the
 * CHWN engine's gather of images into [pixels][B], and the direct
 * kernels' transposed operands (fc1's input for its weight gradient, a
 * convolution's weights for its input gradient). Element by element, each
 * float was a load and a store of its own and one of the two strided (fc1's
 * input, 800 x 128: 70 us; 16 x 16 in registers: 7 us, on a Zen 5 core).
 *
 * GCC's generic vectors of 16 floats: one zmm register with AVX-512, two
 * ymm or four xmm registers where the including file is built for less
 * (the same floats, moved). Header only, so that each build of the direct
 * kernels compiles it with its own flags. */
#ifndef LB_CHWN_TRANSPOSE_H
#define LB_CHWN_TRANSPOSE_H

#include <stddef.h>
#include <string.h>

typedef float chwn_v16 __attribute__((vector_size(64)));
typedef int chwn_i16 __attribute__((vector_size(64)));

/* One step of the transpose: in each pair of rows i, i + h (i & h == 0)
 * the off-diagonal h x h blocks change places. After h = 8, 4, 2 and 1
 * the 16 rows are the columns. */
#if defined(__clang__)
/* clang's shuffle takes its lanes as constants: the same two shuffles as
 * below, spelled out for each h */
#define CHWN_PAIRS(a, b, F, S) (r[i] = __builtin_shufflevector(a, b, F), r[i + h] = __builtin_shufflevector(a, b, S))
#define CHWN_LIST(...) __VA_ARGS__
static inline __attribute__((always_inline)) void chwn_transpose_step(chwn_v16 r[16], int h)
{
    for (int i = 0; i < 16; i++)
        if (!(i & h)) {
            const chwn_v16 a = r[i], b = r[i + h];
            switch (h) {
            case 8:
                CHWN_PAIRS(a, b, CHWN_LIST(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                           CHWN_LIST(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
                break;
            case 4:
                CHWN_PAIRS(a, b, CHWN_LIST(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                           CHWN_LIST(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
                break;
            case 2:
                CHWN_PAIRS(a, b, CHWN_LIST(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                           CHWN_LIST(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
                break;
            default:
                CHWN_PAIRS(a, b, CHWN_LIST(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                           CHWN_LIST(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
            }
        }
}
#undef CHWN_LIST
#undef CHWN_PAIRS
#else
static inline __attribute__((always_inline)) void chwn_transpose_step(chwn_v16 r[16], int h)
{
    chwn_i16 first, second;
    for (int j = 0; j < 16; j++) {
        first[j] = j & h ? 16 + j - h : j;
        second[j] = j & h ? 16 + j : j + h;
    }
    for (int i = 0; i < 16; i++)
        if (!(i & h)) {
            const chwn_v16 a = r[i], b = r[i + h];
            r[i] = __builtin_shuffle(a, b, first);
            r[i + h] = __builtin_shuffle(a, b, second);
        }
}
#endif

/* The 16 x 16 block at src (rows ld_src floats apart) loaded and
 * transposed: r[j] is its column j. */
static inline __attribute__((always_inline)) void chwn_transpose_block(chwn_v16 r[16],
                                                                       const float *src,
                                                                       size_t ld_src)
{
    for (int i = 0; i < 16; i++)
        memcpy(&r[i], src + (size_t)i * ld_src, sizeof r[i]);
    chwn_transpose_step(r, 8);
    chwn_transpose_step(r, 4);
    chwn_transpose_step(r, 2);
    chwn_transpose_step(r, 1);
}

/* dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols; the
 * two do not overlap. */
static inline void chwn_transpose(float *dst, size_t ld_dst, const float *src, size_t ld_src,
                                  int rows, int cols)
{
    const int whole_rows = rows / 16 * 16, whole_cols = cols / 16 * 16;
    for (int r0 = 0; r0 < whole_rows; r0 += 16)
        for (int c0 = 0; c0 < whole_cols; c0 += 16) {
            chwn_v16 r[16];
            chwn_transpose_block(r, src + (size_t)r0 * ld_src + c0, ld_src);
            for (int j = 0; j < 16; j++)
                memcpy(dst + (size_t)(c0 + j) * ld_dst + r0, &r[j], sizeof r[j]);
        }
    /* the edges: the columns past the last whole block, then the rows */
    for (int r = 0; r < whole_rows; r++)
        for (int c = whole_cols; c < cols; c++)
            dst[(size_t)c * ld_dst + r] = src[(size_t)r * ld_src + c];
    for (int r = whole_rows; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)c * ld_dst + r] = src[(size_t)r * ld_src + c];
}

#endif
