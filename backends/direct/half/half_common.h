/* What the half-precision products (bf16.c, fp16.c) share beside their
 * packing, tiles and walks (half_walks.h): the question to the CPU,
 * carving their scratch, splitting rows into blocks, the fp32 sums of the
 * bias gradients (and their end for the AVX-512 rounding passes that sum
 * on the way), when a dense product is too small to share between
 * threads, and the switch that gives the AVX-512 dot tiles their shape as
 * constants. */
#ifndef LB_DIRECT_HALF_COMMON_H
#define LB_DIRECT_HALF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* 1 when this CPU has every feature of `features` (cpu_has counts AVX-512
 * only where the operating system saves the registers, XCR0); else 0 with
 * the reason in why: the CPU, what it lacks, and what the products need
 * (`needs`, "bf16 products need AVX512_BF16: ..."). */
static inline int half_cpu_supports(unsigned features, const char *needs, char *why, size_t len)
{
    char missing[128];
    cpu_missing(features, missing, sizeof missing);
    if (!missing[0])
        return 1;
    const char *brand = cpu_this()->brand;
    snprintf(why, len, "this CPU%s%s%s has no %s (%s), or its operating system does not enable it",
             brand[0] ? " (" : "", brand, brand[0] ? ")" : "", missing, needs);
    return 0;
}

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

/* Where block b of `blocks` nearly equal blocks of n rows starts */
static inline int split_at(int n, int blocks, int b) { return (int)((long)n * b / blocks); }

static inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* The last step of sum_floats's order, for the rounding passes that keep
 * its 16 running sums themselves (bf16_fma_round.c, fp16_convert.c): the
 * sums added in lane order. (sum_floats spells the same loop out, which
 * keeps gcc's code for the bias sums as it was.) */
static inline float sum_lanes(const float part[16])
{
    float total = 0.0f;
    for (int l = 0; l < 16; l++)
        total += part[l];
    return total;
}

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

#if defined(__x86_64__) || defined(__i386__)
/* sum_floats's end for AVX-512 runs that keep running sum l in lane l of
 * part (bf16_fma_round.c, fp16_convert.c): the n < 16 elements of rest,
 * past the last whole vector, added to their own lanes under a mask, then
 * the 16 lanes added in lane order, the same floats as sum_floats */
__attribute__((target("avx512f"))) static inline float
sum_lanes_avx512(__m512 part, const float *rest, size_t n)
{
    if (n) {
        const __mmask16 k = (__mmask16)((1u << n) - 1);
        part = _mm512_mask_add_ps(part, k, part, _mm512_maskz_loadu_ps(k, rest));
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, part);
    return sum_lanes(lanes);
}
#endif

/* A dense pass of too few multiply-adds to share between threads: fc2's
 * forward pass (its backward pass, two such products, runs on two) */
static inline int dense_threads(int threads, double multiply_adds)
{
    return multiply_adds < (double)(1 << 20) ? 1 : threads;
}

/* A dot tile's body for every shape mk x nt (1..4 x 1..5), the shape a
 * constant in each: DOT_SHAPES(mk, nt, BODY) with BODY(MK, NT) a call
 * followed by return; ROW_SHAPES likewise for a row tile's m x nv (1..6
 * rows x 1..4 vectors). A larger tile than the registers hold traps. */
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
#define ROW_SHAPE_ROW(BODY, M)                                                                 \
    DOT_SHAPE_CASE(BODY, M, 1) DOT_SHAPE_CASE(BODY, M, 2) DOT_SHAPE_CASE(BODY, M, 3)           \
    DOT_SHAPE_CASE(BODY, M, 4)
#define ROW_SHAPES(m, nv, BODY)                                                                \
    switch ((m) * 8 + (nv)) {                                                                  \
        ROW_SHAPE_ROW(BODY, 1)                                                                 \
        ROW_SHAPE_ROW(BODY, 2)                                                                 \
        ROW_SHAPE_ROW(BODY, 3)                                                                 \
        ROW_SHAPE_ROW(BODY, 4)                                                                 \
        ROW_SHAPE_ROW(BODY, 5)                                                                 \
        ROW_SHAPE_ROW(BODY, 6)                                                                 \
    default:                                                                                   \
        __builtin_trap();                                                                      \
    }

#endif
