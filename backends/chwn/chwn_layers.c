/* The CHWN engine's layers other than its products (chwn_layers.h):
 * moving images in and out of the layout, pooling, ReLU and the loss. */
#include "backends/chwn/chwn_layers.h"

#include <omp.h>
#include <string.h>

#include "backends/chwn/chwn_transpose.h"
#include "backends/common/elementwise.h"

void chwn_gather(real *x, int ld, const uint8_t *images, size_t pixels,
                      const int32_t *idx, int first, int B, int threads)
{
    enum { ROWS = 32 }; /* pixels per chunk: a thread owns these rows of x */
    const int chunks = (int)((pixels + ROWS - 1) / ROWS);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < chunks; c++) {
        const size_t p0 = (size_t)c * ROWS, p1 = p0 + ROWS < pixels ? p0 + ROWS : pixels;
        const int np = (int)(p1 - p0);
        /* 16 images' pixels scaled in a row each, then transposed into
         * their columns of x */
        for (int b0 = 0; b0 < B; b0 += 16) {
            const int nb = B - b0 < 16 ? B - b0 : 16;
            float scaled[16][ROWS];
            for (int i = 0; i < nb; i++) {
                const uint8_t *src = images + (size_t)(idx ? idx[b0 + i] : first + b0 + i) * pixels;
                for (int p = 0; p < np; p++)
                    scaled[i][p] = lb_pixel(src[p0 + p]);
            }
#ifdef LB_REAL_PLAIN
            chwn_transpose(x + p0 * ld + b0, ld, &scaled[0][0], ROWS, nb, np);
#else
            for (int i = 0; i < nb; i++)
                for (int p = 0; p < np; p++)
                    x[(p0 + p) * ld + b0 + i] = scaled[i][p];
#endif
        }
    }
}

/* Every (f, b) of an F x B transpose between x[f * ld + b] and row b of
 * an NCHW batch, running `move` on the caller's `threads`: rows of x in
 * chunks that a thread owns, each chunk's images in turn, so that every
 * NCHW row is read or written in runs of ROWS floats. */
#define CHWN_TRANSPOSE(F, B, move)                                                           \
    do {                                                                                     \
        enum { ROWS = 32 };                                                                  \
        const int chunks = (int)(((F) + ROWS - 1) / ROWS);                                   \
        const int shared_out = threads > 1 && chunks > 1;                                    \
        _Pragma("omp parallel for schedule(static) num_threads(threads) if (shared_out)")    \
        for (int c = 0; c < chunks; c++) {                                                   \
            const size_t f0 = (size_t)c * ROWS, f1 = f0 + ROWS < (F) ? f0 + ROWS : (F);      \
            for (int b = 0; b < (B); b++)                                                    \
                for (size_t f = f0; f < f1; f++)                                             \
                    move;                                                                    \
        }                                                                                    \
    } while (0)

void chwn_from_nchw(real *x, int ld, const float *src, size_t F, int B, int threads)
{
    CHWN_TRANSPOSE(F, B, x[f * ld + b] = (real)src[(size_t)b * F + f]);
}

void chwn_to_nchw(float *dst, const real *x, int ld, size_t F, int B, int threads)
{
    CHWN_TRANSPOSE(F, B, dst[(size_t)b * F + f] = (float)x[f * ld + b]);
}

void chwn_rows_from_group(real *dst, int ld, int b0, const real *src, int F, int B)
{
    for (int f = 0; f < F; f++)
        memcpy(dst + (size_t)f * ld + b0, src + (size_t)f * B, sizeof(real) * B);
}

void chwn_group_from_rows(real *dst, const real *src, int ld, int b0, int F, int B)
{
    for (int f = 0; f < F; f++)
        memcpy(dst + (size_t)f * B, src + (size_t)f * ld + b0, sizeof(real) * B);
}

/* ---------------------------------------------------------------------- */
/* Convolution weights                                                     */

void chwn_join_weight_bias(real *weight_bias, const real *weight, const real *bias, int K,
                           int R)
{
    for (int k = 0; k < K; k++) {
        memcpy(weight_bias + (size_t)k * (R + 1), weight + (size_t)k * R, sizeof(real) * R);
        weight_bias[(size_t)k * (R + 1) + R] = bias[k];
    }
}

/* ---------------------------------------------------------------------- */
/* Max-pool, ReLU                                                          */

/* 2x2 windows, stride 2 (LeNet's): one pass over each window's four rows
 * of B images instead of four, and the same comparisons in the same order.
 * pool1 at batch 128 on one Zen core: forward 1.3 -> 0.5-0.8 ms, backward
 * 6.6 -> 2.0 ms (CPU time, groups of 16 images). */
/* A 2x2 window's images 16 at a time as one vector each (a zmm register
 * with AVX-512), as far as whole vectors go; returns where the loops
 * after them start. The compiler vectorised those loops in 256-bit halves
 * with masked moves, and they were most of a pool's time. The same
 * comparisons and so the same floats and winners. Float only, and only
 * where the build's flags give 512-bit registers: built for AVX2 (make
 * count's x86-64-v3) GCC splits these vectors badly, 10% more
 * instructions in a direct training step; there, and in the double build,
 * these return 0 and the loops after them do every image. Vector selects
 * are written as masks, since C has no `?:` on vectors: a comparison gives
 * -1 (all bits) or 0 per lane. */
#if defined(LB_REAL_PLAIN) && defined(__AVX512F__)
#define POOL_VECTORS 1
#include <immintrin.h>
#else
#define POOL_VECTORS 0
#endif
typedef unsigned char chwn_u8x16 __attribute__((vector_size(16)));

/* (vectors of 64 bytes go through pointers: by value they would change
 * the calling convention between builds with and without AVX-512, and
 * GCC refuses that under -Werror) */
static inline void load16(chwn_v16 *v, const real *p) { memcpy(v, p, sizeof *v); }

/* *out: where *mask, a's bits, else b's */
static inline void select16(chwn_i16 *out, const chwn_i16 *mask, const chwn_v16 *a,
                            const chwn_v16 *b)
{
    *out = (*mask & (chwn_i16)*a) | (~*mask & (chwn_i16)*b);
}

static inline int window_forward16(real *y, unsigned char *won, const real *x0, const real *x1,
                                   int B)
{
    int b = 0;
#if POOL_VECTORS
    for (; b + 16 <= B; b += 16) {
        chwn_v16 a0, a1, a2, a3;
        load16(&a0, x0 + b);
        load16(&a1, x0 + B + b);
        load16(&a2, x1 + b);
        load16(&a3, x1 + B + b);
        chwn_i16 bits;
        const chwn_i16 g1 = a1 > a0;
        select16(&bits, &g1, &a1, &a0);
        const chwn_v16 m1 = (chwn_v16)bits;
        const chwn_i16 g2 = a2 > m1;
        select16(&bits, &g2, &a2, &m1);
        const chwn_v16 m2 = (chwn_v16)bits;
        const chwn_i16 g3 = a3 > m2;
        select16(&bits, &g3, &a3, &m2);
        memcpy(y + b, &bits, sizeof bits);
        const chwn_i16 k2 = (g2 & 2) | (~g2 & g1 & 1), k = (g3 & 3) | (~g3 & k2);
        const chwn_u8x16 bytes = __builtin_convertvector(k, chwn_u8x16);
        memcpy(won + b, &bytes, sizeof bytes);
    }
#else
    (void)y, (void)won, (void)x0, (void)x1, (void)B;
#endif
    return b;
}

static inline int window_backward16(real *d0, real *d1, const real *dy,
                                    const unsigned char *won, int B)
{
    int b = 0;
#if POOL_VECTORS
    for (; b + 16 <= B; b += 16) {
        /* the winners' bytes widened by one vpmovzxbd: GCC 12 made 16
         * extracts and inserts of __builtin_convertvector's, most of the
         * pool's backward pass */
        const chwn_i16 k = (chwn_i16)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(won + b)));
        chwn_v16 dy16;
        load16(&dy16, dy + b);
        const chwn_i16 g = (chwn_i16)dy16;
        const chwn_i16 to0 = g & (k == 0), to1 = g & (k == 1), to2 = g & (k == 2),
                       to3 = g & (k == 3);
        memcpy(d0 + b, &to0, sizeof to0);
        memcpy(d0 + B + b, &to1, sizeof to1);
        memcpy(d1 + b, &to2, sizeof to2);
        memcpy(d1 + B + b, &to3, sizeof to3);
    }
#else
    (void)d0, (void)d1, (void)dy, (void)won, (void)B;
#endif
    return b;
}

static void maxpool2_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                             int H, int W, int threads)
{
    const int OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const real *x0 = in + ((size_t)(c * H + 2 * oy) * W + 2 * ox) * B;
                const real *x1 = x0 + (size_t)W * B;
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                real *y = out + at;
                if (!argmax) {
#pragma omp simd
                    for (int b = 0; b < B; b++) {
                        real m = x0[b];
                        m = x0[B + b] > m ? x0[B + b] : m;
                        m = x1[b] > m ? x1[b] : m;
                        y[b] = x1[B + b] > m ? x1[B + b] : m;
                    }
                    continue;
                }
                unsigned char *won = argmax + at;
                const int b0 = window_forward16(y, won, x0, x1, B);
#pragma omp simd
                for (int b = b0; b < B; b++) { /* strictly larger: the first largest wins */
                    const real a0 = x0[b], a1 = x0[B + b], a2 = x1[b], a3 = x1[B + b];
                    const int g1 = a1 > a0;
                    const real m1 = g1 ? a1 : a0;
                    const int g2 = a2 > m1;
                    const real m2 = g2 ? a2 : m1;
                    const int g3 = a3 > m2;
                    y[b] = g3 ? a3 : m2;
                    /* the winner's place, in arithmetic the vectoriser takes */
                    const int k2 = g2 * 2 + (1 - g2) * g1;
                    won[b] = (unsigned char)(g3 * 3 + (1 - g3) * k2);
                }
            }
}

/* The gradient goes to the first of the window's inputs (row-major order)
 * equal to the output, as the forward pass kept it: the one argmax names
 * when it was recorded, else found again from the input and output. */
static void maxpool2_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                              const real *in, const real *out, int B, int C, int H, int W,
                              int threads)
{
    const int OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++) {
        real *dc = d_in + (size_t)c * H * W * B;
        /* an odd last row or column no window covers */
        for (int y = 0; y < H; y++) {
            const int from = y < OH * 2 ? OW * 2 : 0;
            memset(dc + ((size_t)y * W + from) * B, 0, sizeof(real) * (W - from) * B);
        }
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                const size_t from = ((size_t)(c * H + 2 * oy) * W + 2 * ox) * B;
                real *d0 = d_in + from, *d1 = d0 + (size_t)W * B;
                const real *dy = d_out + at;
                if (argmax) {
                    const unsigned char *won = argmax + at;
                    const int b0 = window_backward16(d0, d1, dy, won, B);
#pragma omp simd
                    for (int b = b0; b < B; b++) {
                        const real g = dy[b];
                        const int k = won[b];
                        d0[b] = k == 0 ? g : 0.0f;
                        d0[B + b] = k == 1 ? g : 0.0f;
                        d1[b] = k == 2 ? g : 0.0f;
                        d1[B + b] = k == 3 ? g : 0.0f;
                    }
                    continue;
                }
                const real *x0 = in + from, *x1 = x0 + (size_t)W * B, *y = out + at;
#pragma omp simd
                for (int b = 0; b < B; b++) {
                    /* every load and store unconditional (&, not &&):
                     * blends, no masked stores */
                    const real m = y[b], g = dy[b];
                    const int q0 = x0[b] == m, q1 = x0[B + b] == m;
                    const int q2 = x1[b] == m, q3 = x1[B + b] == m;
                    const int e1 = q1 & !q0, e2 = q2 & !(q0 | q1), e3 = q3 & !(q0 | q1 | q2);
                    d0[b] = q0 ? g : 0.0f;
                    d0[B + b] = e1 ? g : 0.0f;
                    d1[b] = e2 ? g : 0.0f;
                    d1[B + b] = e3 ? g : 0.0f;
                }
            }
    }
}

void chwn_maxpool_forward(real *out, unsigned char *argmax, const real *in, int B, int C,
                          int H, int W, int kernel, int stride, int threads)
{
    if (chwn_maxpool_records_argmax(kernel, stride)) {
        maxpool2_forward(out, argmax, in, B, C, H, W, threads);
        return;
    }
    const int OH = chwn_out_size(H, kernel, stride), OW = chwn_out_size(W, kernel, stride);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const real *x = in + ((size_t)(c * H + oy * stride) * W + ox * stride) * B;
                real *y = out + ((size_t)(c * OH + oy) * OW + ox) * B;
                memcpy(y, x, sizeof(real) * B);
                for (int ki = 0; ki < kernel; ki++)
                    for (int kj = 0; kj < kernel; kj++) {
                        const real *v = x + ((size_t)ki * W + kj) * B;
                        /* strictly larger, as the naive backend: a max
                         * instruction, and the value of the first largest */
#pragma omp simd
                        for (int b = 0; b < B; b++)
                            y[b] = v[b] > y[b] ? v[b] : y[b];
                    }
            }
}

void chwn_maxpool_backward(real *d_in, const real *d_out, const unsigned char *argmax,
                           const real *in, const real *out, int B, int C, int H, int W,
                           int kernel, int stride, int threads)
{
    if (chwn_maxpool_records_argmax(kernel, stride)) {
        maxpool2_backward(d_in, d_out, argmax, in, out, B, C, H, W, threads);
        return;
    }
    const int OH = chwn_out_size(H, kernel, stride), OW = chwn_out_size(W, kernel, stride);
    /* windows that neither overlap nor leave gaps between them (LeNet's)
     * write each input's gradient once: no zeroing first, no adding */
    const int tiles = stride == kernel;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < C; c++) {
        real *dc = d_in + (size_t)c * H * W * B;
        if (!tiles)
            memset(dc, 0, sizeof(real) * (size_t)H * W * B);
        else /* only the rows and columns past the last window */
            for (int y = 0; y < H; y++) {
                const int from = y < OH * stride ? OW * stride : 0;
                memset(dc + ((size_t)y * W + from) * B, 0, sizeof(real) * (W - from) * B);
            }
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++) {
                const size_t at = ((size_t)(c * OH + oy) * OW + ox) * B;
                const size_t from = ((size_t)(c * H + oy * stride) * W + ox * stride) * B;
                /* images in chunks, each with a flag per image that turns 1
                 * once its gradient has found the input the forward pass
                 * kept: the first one equal to the maximum */
                enum { CHUNK = 64 };
                for (int b0 = 0; b0 < B; b0 += CHUNK) {
                    const int n = B - b0 < CHUNK ? B - b0 : CHUNK;
                    const real *dy = d_out + at + b0, *y = out + at + b0;
                    real taken[CHUNK] = {0};
                    for (int ki = 0; ki < kernel; ki++)
                        for (int kj = 0; kj < kernel; kj++) {
                            const size_t off = from + ((size_t)ki * W + kj) * B + b0;
                            const real *x = in + off;
                            real *dx = d_in + off;
                            if (tiles) {
#pragma omp simd
                                for (int b = 0; b < n; b++) {
                                    const int first = x[b] == y[b] && taken[b] == 0.0f;
                                    dx[b] = first ? dy[b] : 0.0f;
                                    taken[b] = first ? 1.0f : taken[b];
                                }
                                continue;
                            }
#pragma omp simd
                            for (int b = 0; b < n; b++) {
                                const int first = x[b] == y[b] && taken[b] == 0.0f;
                                dx[b] += first ? dy[b] : 0.0f;
                                taken[b] = first ? 1.0f : taken[b];
                            }
                        }
                }
            }
    }
}

/* Below this many floats an elementwise loop is not worth waking threads.
 * (`if (parallel : ...)`: a bare `if` on a combined construct applies to
 * its simd too, and a false one leaves the loop scalar, with a branch per
 * element.) */
enum { PARALLEL_MIN_FLOATS = 1 << 18 };

void chwn_relu_forward(real *out, const real *in, size_t n, int threads)
{
#pragma omp parallel for simd schedule(static)                                                \
    num_threads(threads) if (parallel : threads > 1 && n >= PARALLEL_MIN_FLOATS)
    for (size_t i = 0; i < n; i++)
        out[i] = lb_relu(in[i]);
}

void chwn_relu_backward(real *d_in, const real *d_out, const real *out, size_t n,
                        int threads)
{
#pragma omp parallel for simd schedule(static)                                                \
    num_threads(threads) if (parallel : threads > 1 && n >= PARALLEL_MIN_FLOATS)
    for (size_t i = 0; i < n; i++)
        d_in[i] = lb_relu_backward(out[i], d_out[i]);
}

/* ---------------------------------------------------------------------- */
/* Loss                                                                    */

/* B x classes is a few thousand floats: one thread is quicker than many. */
void chwn_softmax_xent(real *d_logits, real *losses, int *predicted, const real *logits,
                       const int *labels, int B, int classes, real scale, real *rows)
{
    real *by_image = rows, *d_by_image = rows + (size_t)B * classes;
    for (int k = 0; k < classes; k++)
        for (int b = 0; b < B; b++)
            by_image[(size_t)b * classes + k] = logits[(size_t)k * B + b];
    for (int b = 0; b < B; b++) {
        const real *z = by_image + (size_t)b * classes;
        losses[b] = lb_softmax_xent(z, classes, labels[b], scale,
                                    d_logits ? d_by_image + (size_t)b * classes : NULL);
        if (predicted)
            predicted[b] = lb_argmax(z, classes);
    }
    if (d_logits)
        for (int k = 0; k < classes; k++)
            for (int b = 0; b < B; b++)
                d_logits[(size_t)k * B + b] = d_by_image[(size_t)b * classes + k];
}
