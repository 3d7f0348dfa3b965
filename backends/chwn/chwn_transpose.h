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

/* dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols; the
 * two do not overlap. */
static inline void chwn_transpose(float *dst, size_t ld_dst, const float *src, size_t ld_src,
                                  int rows, int cols)
{
    const int whole_rows = rows / 16 * 16, whole_cols = cols / 16 * 16;
    for (int r0 = 0; r0 < whole_rows; r0 += 16)
        for (int c0 = 0; c0 < whole_cols; c0 += 16) {
            chwn_v16 r[16];
            for (int i = 0; i < 16; i++)
                memcpy(&r[i], src + (size_t)(r0 + i) * ld_src + c0, sizeof r[i]);
            chwn_transpose_step(r, 8);
            chwn_transpose_step(r, 4);
            chwn_transpose_step(r, 2);
            chwn_transpose_step(r, 1);
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
