/* The direct backend's fp16 product set (backends/chwn/chwn_products.h):
 * the vfmadd231ph products of fp16.h (or their emulation, when
 * direct_fp16_emulate is set), fp32 activations and master weights, through
 * the entries the half-precision sets share (half_products.h). The engine
 * scales the loss for fp16 (backends/common/loss_scale.h). */
#include "backends/direct/fp16/fp16.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_products.h"

DIRECT_HALF_PRODUCTS(fp16, ARITHMETIC_FP16);
