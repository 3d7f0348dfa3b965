/* The direct backend's products: fp32 convolutions (stride 1) and dense
 * layers computed with register tiles of the project's own (kernels.c says
 * how) instead of a library: no unfolded copy of a convolution's input (26
 * times the images for conv1, 25 times conv2's input), and no GEMM whose
 * operands a library packs, zeroes and transposes around a product of
 * LeNet's small shapes. The engine around them (CHWN layers, groups of
 * images, threads) is backends/chwn/, which calls these kernels through
 * the direct fp32 product set (fp32_products.c).
 *
 * kernels.c is compiled once per instruction set, each build with its own
 * vector width and tile shape and one exported table (direct_kernels_avx512,
 * _avx512_2fma with tiles for cores with two 512-bit FMA ports, _avx2,
 * _generic); which one runs is chosen when the program runs, from
 * base/cpu.h, never from where it was built (dispatch.c).
 * LENET_BENCH_DIRECT_ISA forces one (isa.h: its rules); a forced set the
 * CPU lacks is refused with the reason.
 *
 * Layout and conventions as backends/chwn/chwn_products.h: CHWN, stride 1,
 * weight_bias [K][R + 1] with each channel's bias last; outputs
 * overwritten; `threads` OpenMP threads (1 inside a parallel region), the
 * same floats for any count.
 *
 * The bf16 products (bf16.h, AVX512_BF16) come with this header; the
 * direct bf16 product set (bf16_products.c) calls them. */
#ifndef LB_DIRECT_H
#define LB_DIRECT_H

#include <stddef.h>

#include "backends/direct/bf16/bf16.h"

typedef struct direct_kernels {
    /* "avx512_2fma", "avx512", "avx2", "generic": LENET_BENCH_DIRECT_ISA's values */
    const char *isa;
    const char *description; /* "AVX-512, 16-float vectors, 8x3-vector tiles" */
    int vector_floats;
    /* 1 when this CPU (and its OS) can run these kernels */
    int (*cpu_runs)(void);
    /* 2: tiles fitted to cores with two 512-bit FMA ports, the best only
     * where direct_fma_ports_512 (isa.h) says so; 0: fit for any core */
    int fma_ports;

    /* out[K][OH][OW][B] from in[C][H][W][B]. */
    void (*conv_forward)(float *out, const float *in, const float *weight_bias, int B, int C,
                         int H, int W, int K, int kernel, int threads);
    /* d_weight_bias[K][R + 1] from d_out[K][OH][OW][B] and in[C][H][W][B]. */
    void (*conv_backward_params)(float *d_weight_bias, const float *d_out, const float *in,
                                 int B, int C, int H, int W, int K, int kernel, int threads);
    /* The same weight gradients, the biases' places d_weight_bias[k][R]
     * left as they are: for a caller that sums the biases itself (bf16 on
     * FMAs sums the unrounded d_out as it rounds it). */
    void (*conv_backward_weights)(float *d_weight_bias, const float *d_out, const float *in,
                                  int B, int C, int H, int W, int K, int kernel, int threads);
    /* d_in[C][H][W][B] from d_out[K][OH][OW][B]; scratch holds
     * direct_conv_scratch_floats() floats. */
    void (*conv_backward_data)(float *d_in, const float *d_out, const float *weight_bias,
                               float *scratch, int B, int C, int H, int W, int K, int kernel,
                               int threads);

    /* Dense layers, [features][B] activations, weight[n_out][n_in] (the
     * workload's layout): out = weight x in + bias; and the backward pass,
     * d_weight, d_bias and (unless NULL) d_in; no scratch (the input is
     * transposed a strip at a time, on the stack). */
    void (*dense_forward)(float *out, const float *in, const float *weight, const float *bias,
                          int B, int n_in, int n_out, int threads);
    void (*dense_backward)(float *d_weight, float *d_bias, float *d_in, const float *d_out,
                           const float *in, const float *weight, int B, int n_in, int n_out,
                           int threads);
} direct_kernels;

/* Every build of kernels.c, best first. */
int direct_kernels_count(void);
const direct_kernels *direct_kernels_at(int i);
const direct_kernels *direct_kernels_find(const char *isa);

/* The kernels this process runs: LENET_BENCH_DIRECT_ISA's when set (NULL
 * and the reason in err when unknown or the CPU lacks it), else the best
 * this CPU runs. Makes them the ones direct_active() returns. */
const direct_kernels *direct_choose(char *err, size_t err_len);
/* The kernels last chosen (the best this CPU runs before any choice). */
const direct_kernels *direct_active(void);

/* Floats between the output gradient's rows as the input gradient reads
 * them: 16 more than a row, so that the rows of a tile's taps do not fall
 * on a few sets of the L1 cache (a row of LeNet's is a power of two bytes
 * long). */
enum { DIRECT_ROW_PAD = 16 };

/* The input gradient's scratch, laid out by kernels.c and sized by
 * direct_conv_scratch_floats from these two: each part starts on a cache
 * line (conv2's 25,000 weights left the output gradient's rows half a line
 * off, every vector load of them split over two lines), and a column
 * tile's sums for each (channel, kj) pair take DIRECT_PAIR_SUM_FLOATS, the
 * widest column tile of any build (4 vectors of 16). */
enum { DIRECT_PAIR_SUM_FLOATS = 64 };
static inline size_t direct_line_floats(size_t n) { return (n + 15) / 16 * 16; }

/* 1 when a convolution of this kernel and stride is computed here: every
 * stride-1 convolution. */
int direct_conv_suits(int kernel, int stride);
/* Scratch floats of the input gradient (the same for every build of the
 * kernels). */
size_t direct_conv_scratch_floats(int B, int C, int H, int W, int K, int kernel);

#endif
