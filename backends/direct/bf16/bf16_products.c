/* The direct backend's bf16 product set (backends/chwn/chwn_products.h):
 * the vdpbf16ps products of bf16.h, fp32 activations and master weights,
 * through the entries the half-precision sets share (half_products.h). */
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_products.h"

DIRECT_HALF_PRODUCTS(bf16, ARITHMETIC_BF16_DOT);
