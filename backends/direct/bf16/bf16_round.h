/* Rounding fp32 to bf16, the one definition (direct_bf16_round, bf16.h,
 * returns it): inline and branch-free (selects), so that a loop over it
 * vectorises wherever it is compiled (the FMA products' rounding pass,
 * bf16_fma_round.c). Nearest, ties to even, as vdpbf16ps and
 * vcvtneps2bf16 round: NaN stays a quiet NaN of its sign, values past the
 * largest bf16 go to infinity, subnormal floats (which the instructions
 * read as zero) to a zero of their sign. */
#ifndef LB_DIRECT_BF16_ROUND_H
#define LB_DIRECT_BF16_ROUND_H

#include <stdint.h>
#include <string.h>

/* x's bf16, as the top 16 bits of a word whose low 16 are zero */
static inline uint32_t direct_bf16_round_high(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t magnitude = u & 0x7fffffffu;
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* ties to even; to inf */
    r = magnitude > 0x7f800000u ? (u & 0xffff0000u) | 0x00400000u : r; /* NaN: quiet */
    r = magnitude < 0x00800000u ? u & 0x80000000u : r; /* subnormal: signed zero */
    return r;
}

/* x rounded to bf16, kept as the float it stands for (exact) */
static inline float direct_bf16_rounded(float x)
{
    const uint32_t r = direct_bf16_round_high(x);
    float y;
    memcpy(&y, &r, sizeof y);
    return y;
}

#endif
