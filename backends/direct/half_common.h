/* What the half-precision products (bf16.c, fp16.c) share beside their
 * packing and tiles: carving their scratch, splitting rows into blocks,
 * the fp32 sums of the bias gradients, when a dense product is too small
 * to share between threads, and the switch that gives the AVX-512 dot
 * tiles their shape as constants. */
#ifndef LB_DIRECT_HALF_COMMON_H
#define LB_DIRECT_HALF_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Carves 64-byte aligned pieces out of scratch (or, from a NULL base, only
 * counts them). */
typedef struct carver {
    char *base;
    size_t used;
} carver;

static inline void *carve(carver *c, size_t bytes)
{
    c->used = (c->used + 63) / 64 * 64;
    void *p = c->base ? c->base + c->used : NULL;
    c->used += bytes;
    return p;
}

/* The weight gradient's scratch, the same in every 16-bit format: the
 * convolution's input and output gradient rounded, in their own layouts. */
typedef struct conv_params_parts {
    uint16_t *input, *grad;
} conv_params_parts;

static inline conv_params_parts params_parts(carver *c, int B, int C, int H, int W, int K,
                                             int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1;
    conv_params_parts p;
    p.input = carve(c, sizeof(uint16_t) * C * H * W * B);
    p.grad = carve(c, sizeof(uint16_t) * K * OH * OW * B);
    return p;
}

/* The most that any of three carvers counted: one scratch serves the
 * three passes of a convolution in turn. */
static inline size_t carved_most(const carver *a, const carver *b, const carver *c)
{
    const size_t most = a->used > b->used ? a->used : b->used;
    return most > c->used ? most : c->used;
}

/* Where block b of `blocks` nearly equal blocks of n rows starts */
static inline int split_at(int n, int blocks, int b) { return (int)((long)n * b / blocks); }

static inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* fp32 sum of x[0..n), 16 running sums (an order fixed by n alone) */
static inline float sum_floats(const float *x, size_t n)
{
    float part[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            part[l] += x[i + l];
    for (; i < n; i++)
        part[i % 16] += x[i];
    float total = 0.0f;
    for (int l = 0; l < 16; l++)
        total += part[l];
    return total;
}

/* A product too small to share between threads (fc2's) */
static inline int dense_threads(int threads, int B, int n_in, int n_out)
{
    return (double)B * n_in * n_out < (double)(1 << 20) ? 1 : threads;
}

/* A dot tile's body for every shape mk x nt (1..4 x 1..5), the shape a
 * constant in each: DOT_SHAPES(mk, nt, BODY) with BODY(MK, NT) a call
 * followed by return. */
#define DOT_SHAPE_CASE(BODY, MK, NT)                                                           \
    case (MK) * 8 + (NT):                                                                      \
        BODY(MK, NT);                                                                          \
        return;
#define DOT_SHAPE_ROW(BODY, MK)                                                                \
    DOT_SHAPE_CASE(BODY, MK, 1) DOT_SHAPE_CASE(BODY, MK, 2) DOT_SHAPE_CASE(BODY, MK, 3)        \
    DOT_SHAPE_CASE(BODY, MK, 4) DOT_SHAPE_CASE(BODY, MK, 5)
#define DOT_SHAPES(mk, nt, BODY)                                                               \
    switch ((mk) * 8 + (nt)) {                                                                 \
        DOT_SHAPE_ROW(BODY, 1)                                                                 \
        DOT_SHAPE_ROW(BODY, 2)                                                                 \
        DOT_SHAPE_ROW(BODY, 3)                                                                 \
        DOT_SHAPE_ROW(BODY, 4)                                                                 \
    default:                                                                                   \
        __builtin_trap();                                                                      \
    }

#endif
