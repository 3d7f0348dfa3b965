/* The direct backend: the CHWN engine (backends/chwn/chwn.h) with the
 * project's own products, the fp32 register tiles (direct.h,
 * fp32_products.c), the bf16 products (bf16.h, bf16_products.c, or the
 * fp32 tiles on bf16-rounded operands: bf16_fma.h, bf16_fma_products.c)
 * and the fp16 products (fp16.h, fp16_products.c), the half sets chosen
 * from their precision's candidates (candidates.h, choice.c). */
#ifndef LB_DIRECT_BACKEND_H
#define LB_DIRECT_BACKEND_H

#include "backends/chwn/chwn.h"
#include "backends/engine.h"

extern const backend direct_backend;

/* The product sets (backends/chwn/chwn_products.h), each a row of its
 * precision's candidates (candidates.h) but fp32's. The bf16 one is built
 * only when the compiler has the AVX512_BF16 instructions
 * (HAVE_DIRECT_BF16, module.mk); the two fp16 ones, vfmadd231ph and its
 * emulation, with AVX512_FP16 (HAVE_DIRECT_FP16). Where they run is their
 * rows' to say; tests reach the emulated fp16 set through the module's
 * "direct_fp16_emulate" table (an int: set, fp16 engines use it). */
extern const struct chwn_products_f32 direct_fp32_products, direct_bf16_products,
    direct_fp16_products, direct_fp16_emulated_products;
/* bf16 on the fp32 tiles, every build: fp32 FMAs on operands rounded to
 * bf16 (bf16/bf16_fma.h) */
extern const struct chwn_products_f32 direct_bf16_fma_products;

/* The "avx512_fp16" row's check (fp16/fp16_products.c): 1 when the
 * vfmadd231ph products run here, else 0, a short reason and the whole. */
int direct_fp16_vector_runs(char *brief, size_t brief_len, char *why, size_t why_len);

/* What every direct set shares: no library threads to set (the loops
 * name their counts), and stride-1 convolutions only. */
void direct_team_enter(const chwn_team *t);
const char *direct_refuses_conv(int kernel, int stride);

/* The entries of a direct set, from the static functions of its file
 * (conv_forward, ..., dense_backward): 32 images a group, since the tiles
 * read the input in place and want rows (OW x images) long enough for
 * their column tiles (on a Zen 1 core 32 ran 5% faster per step than 16
 * and 3% faster than 64, batch 128, 1 and 2 threads). */
#define DIRECT_PRODUCT_ENTRIES                                                                 \
    .group_images = 32, .enter = direct_team_enter, .refuses_conv = direct_refuses_conv,       \
    .conv_scratch_floats = conv_scratch_floats, .forward_conv = conv_forward,                  \
    .backward_conv_params = conv_backward_params, .backward_conv_data = conv_backward_data,    \
    .dense_scratch_floats = dense_scratch_floats, .forward_dense = dense_forward,              \
    .backward_dense = dense_backward

#endif
