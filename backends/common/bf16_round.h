/* Rounding fp32 to bf16, the one definition for every CPU engine (blas's
 * sbgemm operands; the direct tiles' packing and their bf16-on-FMA
 * products): nearest, ties to even, as vdpbf16ps and vcvtneps2bf16 round.
 * NaN stays a quiet NaN of its sign, values past the largest bf16 go to
 * infinity, and subnormal floats go to a zero of their sign, since the
 * bf16 instructions read subnormal operands as zero. Inline and
 * branch-free (selects), so that a loop over it vectorises wherever it is
 * compiled. */
#ifndef LB_BF16_ROUND_H
#define LB_BF16_ROUND_H

#include <stdint.h>
#include <string.h>

/* x's bf16, as the top 16 bits of a word whose low 16 are zero */
static inline uint32_t lb_bf16_round_high(float x)
{
    uint32_t u = 0;
    memcpy(&u, &x, sizeof x);
    const uint32_t magnitude = u & ~0x80000000u;
    const uint32_t nearest = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; /* past: inf */
    const uint32_t quiet_nan = (u & 0xffff0000u) | 0x00400000u;
    const uint32_t signed_zero = u & 0x80000000u;
    return magnitude > 0x7f800000u ? quiet_nan : magnitude < 0x00800000u ? signed_zero : nearest;
}

/* x's bf16, its 16 bits */
static inline uint16_t lb_bf16_bits(float x) { return (uint16_t)(lb_bf16_round_high(x) >> 16); }

/* x rounded to bf16, kept as the float it stands for (exact) */
static inline float lb_bf16_rounded(float x)
{
    const uint32_t high = lb_bf16_round_high(x);
    float rounded = 0;
    memcpy(&rounded, &high, sizeof rounded);
    return rounded;
}

#endif
