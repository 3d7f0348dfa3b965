/* The direct backend: the CHWN engine (backends/chwn/chwn.h) with the
 * project's own products, the fp32 register tiles (direct.h,
 * fp32_products.c) and the bf16 products (bf16.h, bf16_products.c). */
#ifndef LB_DIRECT_BACKEND_H
#define LB_DIRECT_BACKEND_H

#include "backends/chwn/chwn.h"
#include "backends/engine.h"

extern const backend direct_backend;

/* The product sets (backends/chwn/chwn_products.h). The bf16 one is built
 * only when the compiler has the AVX512_BF16 instructions (HAVE_DIRECT_BF16,
 * module.mk), and runs only where direct_bf16_supported says so. */
extern const struct chwn_products_f32 direct_fp32_products, direct_bf16_products;

/* What every direct set shares: no library threads to set (the loops
 * name their counts), and stride-1 convolutions only. */
void direct_team_enter(const chwn_team *t);
const char *direct_refuses_conv(int kernel, int stride);

#endif
