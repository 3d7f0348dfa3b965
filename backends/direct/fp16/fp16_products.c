/* The direct backend's fp16 product sets (backends/chwn/chwn_products.h):
 * the vfmadd231ph products of fp16.h, fp32 activations and master
 * weights, through the entries the half-precision sets share
 * (half_products.h), and the same products emulated in portable C (the
 * same numbers, many times slower: for measuring the numerics where the
 * CPU lacks the instructions). They are the "avx512_fp16" and "emulated"
 * rows of the fp16 candidates (backends/direct/candidates.h). The engine
 * scales the loss for fp16 (backends/common/loss_scale.h). */
#include "backends/direct/direct_backend.h"
#include "backends/direct/fp16/fp16.h"
#include "backends/direct/fp16/fp16_tiles.h"
#include "backends/direct/fp32/isa.h"
#include "backends/direct/half/half_products.h"

/* fp16.h's direct_fp16_conv_forward and the rest */
static const direct_half_ops fp16_ops = DIRECT_HALF_OPS(direct_fp16);
DIRECT_HALF_SET_ENTRIES(&fp16_ops)

/* Each set tells fp16.c's walks which tiles to run (direct_fp16_emulate)
 * as it enters a pass, so that engines of both sets may take turns in one
 * process. */
static void enter_vector(const chwn_team *t)
{
    direct_fp16_emulate = 0;
    direct_team_enter(t);
}

static void enter_emulated(const chwn_team *t)
{
    direct_fp16_emulate = 1;
    direct_team_enter(t);
}

const chwn_products direct_fp16_products =
    DIRECT_HALF_PRODUCT_SET("direct fp16", ARITHMETIC_FP16, &fp16_ops, enter_vector);

const chwn_products direct_fp16_emulated_products = DIRECT_HALF_PRODUCT_SET(
    "direct fp16 (emulated)", ARITHMETIC_FP16, &fp16_ops, enter_emulated);

/* The "avx512_fp16" row's check: LENET_BENCH_DIRECT_ISA allows AVX-512
 * code (isa.h), and the CPU has AVX512_FP16 (fp16.h). */
int direct_fp16_vector_runs(char *brief, size_t brief_len, char *why, size_t why_len)
{
    return direct_isa_avx512_set_runs("vfmadd231ph products", direct_fp16_supported, "AVX512_FP16",
                                      brief, brief_len, why, why_len);
}
