/* bf16 in plain C, what the instructions do: rounding fp32 to bf16 and
 * back (bf16.h), and the tiles (bf16_tiles.h), the same sums as the
 * vdpbf16ps tiles of bf16_avx512.c in double, so that the packing and the
 * walks of bf16.c can be checked on any CPU (direct_bf16_emulate). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/direct/bf16/bf16.h"
#include "backends/common/bf16_round.h"
#include "backends/direct/bf16/bf16_tiles.h"

/* The one definition (bf16_round.h); the packing of activations uses the
 * instruction, which rounds the same way (as the test checks). */
uint16_t direct_bf16_round(float x) { return (uint16_t)(lb_bf16_round_high(x) >> 16); }

float direct_bf16_value(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline double low_of(uint32_t w) { return direct_bf16_value((uint16_t)w); }
static inline double high_of(uint32_t w) { return direct_bf16_value((uint16_t)(w >> 16)); }

void direct_bf16_pair_tile_plain(int m, int cols, float *const *rows, int add,
                                 const float *init, const uint32_t *a, ptrdiff_t lda,
                                 ptrdiff_t a_step,
                                 const uint32_t *b, const ptrdiff_t *off, int steps)
{
    for (int i = 0; i < m; i++)
        for (int col = 0; col < cols; col++) {
            double sum = init ? init[i] : 0.0;
            for (int s = 0; s < steps; s++) {
                const uint32_t wa = a[i * lda + s * a_step], wb = b[off[s] + col];
                sum += low_of(wa) * low_of(wb) + high_of(wa) * high_of(wb);
            }
            rows[i][col] = add ? rows[i][col] + (float)sum : (float)sum;
        }
}

void direct_bf16_dot_tile_plain(int mk, int nt, float *out, ptrdiff_t out_row,
                                const uint16_t *const *g, const uint16_t *const *x, int nrows,
                                ptrdiff_t g_row, ptrdiff_t x_row, size_t len)
{
    for (int i = 0; i < mk; i++)
        for (int t = 0; t < nt; t++) {
            double sum = 0.0;
            for (int y = 0; y < nrows; y++)
                for (size_t e = 0; e < len; e++)
                    sum += (double)direct_bf16_value(g[i][y * g_row + (ptrdiff_t)e]) *
                           direct_bf16_value(x[t][y * x_row + (ptrdiff_t)e]);
            out[i * out_row + t] = (float)sum;
        }
}

void direct_bf16_dot_tile_f32_plain(int mk, int nt, float *out, ptrdiff_t out_row,
                                    float *sums, const float *const *g,
                                    const uint16_t *const *x, int nrows, ptrdiff_t g_row,
                                    ptrdiff_t x_row, size_t len)
{
    for (int i = 0; sums && i < mk; i++) {
        float part[16] = {0}; /* fp32, as the bias gradients always are */
        for (int y = 0; y < nrows; y++)
            for (size_t e = 0; e < len; e++)
                part[e % 16] += g[i][y * g_row + (ptrdiff_t)e];
        float total = 0.0f;
        for (int l = 0; l < 16; l++)
            total += part[l];
        sums[i * out_row] = total;
    }
    for (int i = 0; i < mk; i++)
        for (int t = 0; t < nt; t++) {
            double sum = 0.0;
            for (int y = 0; y < nrows; y++)
                for (size_t e = 0; e < len; e++)
                    sum += (double)direct_bf16_value(direct_bf16_round(g[i][y * g_row + (ptrdiff_t)e])) *
                           direct_bf16_value(x[t][y * x_row + (ptrdiff_t)e]);
            out[i * out_row + t] = (float)sum;
        }
}

