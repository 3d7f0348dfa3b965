/* A product set of the CHWN engine: the table through which the engine
 * computes every product of a training step (convolution forward, weight
 * gradient, input gradient; dense forward and backward), and what the set
 * needs from the engine around it. The engine is compiled once per real
 * type (backends/common/real.h) and picks a set when it is created; the
 * set is called once per product (a group's convolution, a dense layer),
 * never per element. The sets today:
 *
 *   blas_sgemm_products   OpenBLAS sgemm over unfolded chunks     (blas/)
 *   blas_dgemm_products   the same with dgemm, for the double engine
 *   blas_sbgemm_products  the same with cblas_sbgemm on bf16 operands
 *   direct_fp32_products  the register tiles of direct.h         (direct/)
 *   direct_bf16_products  the vdpbf16ps products of direct/bf16/bf16.h
 *   direct_bf16_fma_products  the fp32 tiles on bf16-rounded operands
 *   direct_fp16_products  the vfmadd231ph products of direct/fp16/fp16.h
 *
 * Adding one (AMX tiles, say) means defining one more
 * `const chwn_products` in the folder of the backend that offers it and
 * handing it to chwn_create_f32 (chwn.h) from that backend's create: the
 * engine is not compiled again.
 *
 * The contract every entry keeps, with the layout of chwn_layers.h:
 *   - activations CHWN, [C][H][W][B], images innermost; a dense layer's
 *     [features][B];
 *   - a convolution's weights come as weight_bias[K][R + 1], R = C*k*k,
 *     each output channel's weights in (c, ki, kj) order and then its bias
 *     (the engine joins them, chwn_join_weight_bias); its weight gradient
 *     goes to d_weight_bias in the same form, the bias gradient last;
 *   - a dense layer's weight is [n_out][n_in], its bias [n_out];
 *   - outputs are overwritten, never added to;
 *   - `threads` OpenMP threads (1 when the engine already runs the call
 *     inside its own parallel region, one group per thread); the same
 *     floats for any count;
 *   - `scratch` is the engine's, 64-byte aligned, of the size the set's
 *     own *_scratch_floats entry asked for; buffers never overlap.
 * Reduced-precision sets (bf16, fp16) keep fp32 activations, gradients and
 * master weights: they round and pack their operands themselves, in
 * scratch or in the packed copy of the weights (conv_packed_floats).
 *
 * Optional entries are NULL: refuses_conv, take_failure, and
 * conv_packed_floats with conv_pack_weights (both or neither), and
 * dense_packed_floats with dense_pack_weights, and backward_conv. The
 * products are named forward_conv, backward_conv_params, ...: the naive
 * layers' header renames conv_forward and its kin by macro, and a test
 * includes both.
 *
 * Written over `real`: a float program sees chwn_products (the type
 * chwn_products_f32), the double engine's build chwn_products_f64, whose
 * one set is dgemm's. */
#ifndef LB_CHWN_PRODUCTS_H
#define LB_CHWN_PRODUCTS_H

#include <stddef.h>

#include "backends/chwn/chwn.h"
#include "backends/common/real.h"

/* chwn_products.loss_scaling */
enum { CHWN_LOSS_SCALING_OF_PRECISION, CHWN_LOSS_SCALED, CHWN_NOT_LOSS_SCALED };

/* The struct's tag is the build's: struct chwn_products_f32 or
 * struct chwn_products_f64 (chwn.h names both). */
#define chwn_products REAL_NAME(chwn_products_f32, chwn_products_f64)
typedef struct chwn_products chwn_products;

struct chwn_products {
    /* What the set is, for messages and tests: "sgemm", "direct bf16". */
    const char *name;
    /* The arithmetic its products run on, as the CPU peaks name it
     * (ARITHMETIC_FP32 ..., backends/engine.h): the row's GFLOP/s are held
     * to that peak. */
    const char *arithmetic;
    /* Images per group in the conv stage when the engine shares out the
     * work: a group's activations stay in a core's caches from one layer
     * to the next. GEMMs want 16 (a group's unfolded conv2 input, 2 MiB at
     * 16, stays in cache; one efficient sgemm per layer); the direct tiles
     * read the input in place and want rows (OW x images) long enough for
     * their column tiles: 32 (on a Zen 1 core 5% faster per step than 16,
     * 3% than 64, batch 128, 1 and 2 threads). */
    int group_images;
    /* 1 when the convolutions need scratch only for the input gradient
     * (the direct fp32 tiles read the input in place in the other two
     * passes): the engine then gives the first layer of a whole network,
     * which passes back no input gradient, none. */
    int conv_scratch_for_input_gradient_only;
    /* Whether the engine scales the loss for these products (dynamic loss
     * scaling, backends/common/loss_scale.h): CHWN_LOSS_SCALED or
     * CHWN_NOT_LOSS_SCALED; a set that leaves it 0 is scaled as its
     * precision's row says (precision_of: fp16 is). */
    int loss_scaling;
    /* The set's own data (the GEMM it calls), for its entries; NULL when
     * it has none. */
    const void *ctx;

    /* Called on entry to the engine from the thread that drives it, with
     * the engine's team (chwn.h): a library with threads of its own is
     * told how many to use for calls outside the engine's parallel
     * regions. */
    void (*enter)(const chwn_team *team);
    /* NULL, or why a convolution of this kernel and stride cannot be
     * computed ("strided convolutions are not supported (...)"); the
     * engine refuses such a workload at create. NULL entry: any. */
    const char *(*refuses_conv)(int kernel, int stride);
    /* Optional (NULL: never fails): 1 when a product since the last call
     * could not run (a bf16 copy of its operands out of memory), clearing
     * it; the engine then fails the pass. */
    int (*take_failure)(void);

    /* Convolutions of B images in[C][H][W][B] -> out[K][OH][OW][B]. */
    /* Scratch (reals) a pass over B images needs; the three passes take
     * turns with it. */
    size_t (*conv_scratch_floats)(const chwn_products *set, int B, int C, int H, int W, int K,
                                  int kernel, int stride);
    /* Optional (NULL: none): reals the set keeps after weight_bias's
     * [K][R + 1], a copy of the weights packed as its products read them,
     * written by conv_pack_weights each time the engine joins the weights
     * (once a pass, before any group reads them). */
    size_t (*conv_packed_floats)(int C, int K, int kernel);
    void (*conv_pack_weights)(real *weight_bias, int C, int K, int kernel);
    void (*forward_conv)(const chwn_products *set, real *out, const real *in,
                         const real *weight_bias, real *scratch, int B, int C, int H, int W,
                         int K, int kernel, int stride, int threads);
    /* d_weight_bias[K][R + 1]: the weight and bias gradients of these B
     * images. */
    void (*backward_conv_params)(const chwn_products *set, real *d_weight_bias,
                                 const real *d_out, const real *in, real *scratch, int B, int C,
                                 int H, int W, int K, int kernel, int stride, int threads);
    /* d_in[C][H][W][B] from d_out[K][OH][OW][B]. */
    void (*backward_conv_data)(const chwn_products *set, real *d_in, const real *d_out,
                               const real *weight_bias, real *scratch, int B, int C, int H,
                               int W, int K, int kernel, int stride, int threads);

    /* Optional (NULL: the two above, one after the other): both gradients
     * of a convolution in one call, for a set that shares work between
     * them (rounding d_out once). */
    void (*backward_conv)(const chwn_products *set, real *d_weight_bias, real *d_in,
                          const real *d_out, const real *in, const real *weight_bias,
                          real *scratch, int B, int C, int H, int W, int K, int kernel,
                          int stride, int threads);

    /* Dense layers over the whole batch, shared out as the team says
     * (chwn.h): out[n_out][B] = weight x in[n_in][B] + bias; backward:
     * d_weight = d_out x in^T, d_bias = row sums of d_out, and d_in =
     * weight^T x d_out unless d_in is NULL. */
    size_t (*dense_scratch_floats)(int B, int n_in, int n_out);
    /* Optional (NULL: none), both or neither: reals the set keeps of a
     * dense layer's weights packed as its products read them, written by
     * dense_pack_weights from weight[n_out][n_in] when the engine joins
     * the weights (once a pass, before any product reads them, as
     * conv_pack_weights). Both dense products are then handed the packed
     * copy as `weight`: a forward and a backward pass read one packing. */
    size_t (*dense_packed_floats)(int n_in, int n_out);
    void (*dense_pack_weights)(real *packed, const real *weight, int n_in, int n_out,
                               const chwn_team *team);
    void (*forward_dense)(const chwn_products *set, real *out, const real *in,
                          const real *weight, const real *bias, real *scratch, int B, int n_in,
                          int n_out, const chwn_team *team);
    void (*backward_dense)(const chwn_products *set, real *d_weight, real *d_bias, real *d_in,
                           const real *d_out, const real *in, const real *weight,
                           real *scratch, int B, int n_in, int n_out, const chwn_team *team);
};

#endif
