/* The direct backend's bf16 product set (backends/chwn/chwn_products.h):
 * the vdpbf16ps products of bf16.h, fp32 activations and master weights,
 * through the entries the half-precision sets share (half_products.h).
 * The "dot" row of the bf16 candidates (backends/direct/candidates.h). */
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_products.h"

/* bf16.h's direct_bf16_conv_forward and the rest */
static const direct_half_ops bf16_ops = DIRECT_HALF_OPS(direct_bf16);
DIRECT_HALF_SET_ENTRIES(&bf16_ops)

const chwn_products direct_bf16_products =
    DIRECT_HALF_PRODUCT_SET("direct bf16", ARITHMETIC_BF16_DOT, &bf16_ops, direct_team_enter);
