/* The direct backend's product sets side by side on LeNet's shapes, one
 * thread: fp32 (fp32_products.c), bf16 on fp32 FMAs (bf16_fma_products.c)
 * and bf16 on vdpbf16ps (bf16_products.c, where this CPU runs it). Each
 * product is called through its set's table as the engine calls it (the
 * convolutions 32 images a call, the dense layers 128), the sets taking
 * turns call by call, each timed call after an untimed one of its own;
 * the best of N by the thread's processor time, which other processes on
 * a shared machine do not lengthen. GFLOP/s of the product's multiply-adds
 * (2 flops each, the same count for every set), each bf16 set's rate over
 * fp32's, and a training step's products at batch 128 (the convolutions
 * four calls each). Not part of the backend.
 *
 *   direct-bf16-fma-speed [--rounds N] [--only TEXT]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/chwn/chwn_products.h"
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/bf16/bf16_fma.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/tools/speed_tools.h"

enum { GROUP = 32, BATCH = 128 };

typedef struct product {
    const char *name;
    int C, H, W, K, kernel; /* a convolution's, or a dense layer's n_in = C, n_out = K */
    int dense, pass;        /* pass: 0 forward, 1 input gradient, 2 weight gradient (dense: both) */
} product;

/* Operands of one product, and the set's scratch and packed weights */
typedef struct operands {
    float *in, *out, *weights, *d_out, *d_in, *d_weights, *bias, *d_bias, *scratch;
} operands;

static void call(const chwn_products *set, const product *p, operands *o)
{
    const chwn_team team = {.threads = 1};
    const int B = p->dense ? BATCH : GROUP;
    if (p->dense) {
        if (p->pass == 0)
            set->forward_dense(set, o->out, o->in, o->weights, o->bias, o->scratch, B, p->C, p->K,
                               &team);
        else
            set->backward_dense(set, o->d_weights, o->d_bias, o->d_in, o->d_out, o->in,
                                o->weights, o->scratch, B, p->C, p->K, &team);
    } else if (p->pass == 0)
        set->forward_conv(set, o->out, o->in, o->weights, o->scratch, B, p->C, p->H, p->W, p->K,
                          p->kernel, 1, 1);
    else if (p->pass == 1)
        set->backward_conv_data(set, o->d_in, o->d_out, o->weights, o->scratch, B, p->C, p->H,
                                p->W, p->K, p->kernel, 1, 1);
    else
        set->backward_conv_params(set, o->d_weights, o->d_out, o->in, o->scratch, B, p->C, p->H,
                                  p->W, p->K, p->kernel, 1, 1);
}

static operands operands_for(const chwn_products *set, const product *p)
{
    const int B = p->dense ? BATCH : GROUP, OH = p->H - p->kernel + 1, OW = p->W - p->kernel + 1;
    const size_t R = (size_t)p->C * p->kernel * p->kernel;
    const size_t n_in = (size_t)p->C * p->H * p->W * B, n_out = (size_t)p->K * OH * OW * B;
    const size_t n_w = p->dense ? (size_t)p->K * p->C : (size_t)p->K * (R + 1);
    const size_t packed =
        !p->dense && set->conv_packed_floats ? set->conv_packed_floats(p->C, p->K, p->kernel) : 0;
    const size_t scratch = p->dense ? set->dense_scratch_floats(B, p->C, p->K)
                                    : set->conv_scratch_floats(set, B, p->C, p->H, p->W, p->K,
                                                               p->kernel, 1);
    operands o = {speed_filled(n_in, 1),       speed_filled(n_out, 2), speed_filled(n_w + packed, 3),
                  speed_filled(n_out, 4),      speed_filled(n_in, 5),  speed_filled(n_w, 6),
                  speed_filled(p->K, 7),       speed_filled(p->K, 8),  speed_filled(scratch + 1, 9)};
    if (packed && set->conv_pack_weights)
        set->conv_pack_weights(o.weights, p->C, p->K, p->kernel);
    if (p->dense && set->dense_pack_weights) {
        /* the dense products read the set's packed copy, made once a pass
         * as the conv weights' (untimed, as theirs) */
        const chwn_team team = {.threads = 1};
        float *dense_packed = speed_filled(set->dense_packed_floats(p->C, p->K), 3);
        set->dense_pack_weights(dense_packed, o.weights, p->C, p->K, &team);
        free(o.weights);
        o.weights = dense_packed;
    }
    return o;
}

static void free_operands(operands *o)
{
    float *all[] = {o->in,        o->out,  o->weights, o->d_out,  o->d_in,
                    o->d_weights, o->bias, o->d_bias,  o->scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

int main(int argc, char **argv)
{
    int rounds = 30;
    const char *only = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--rounds N] [--only TEXT]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1) {
        fprintf(stderr, "--rounds must be positive\n");
        return 2;
    }
    char why[256];
    if (!direct_choose(why, sizeof why)) {
        fprintf(stderr, "%s\n", why);
        return 2;
    }
    const chwn_products *sets[3] = {&direct_fp32_products, &direct_bf16_fma_products, NULL};
#ifdef HAVE_DIRECT_BF16
    if (direct_bf16_supported(why, sizeof why))
        sets[2] = &direct_bf16_products;
    else
        printf("vdpbf16ps not run: %s\n", why);
#else
    printf("vdpbf16ps not run: no bf16 products in this build\n");
#endif
    const int n_sets = sets[2] ? 3 : 2;
    printf("fp32 tiles: %s (%s); vdpbf16ps over FMA flops, measured: %.2f\n",
           direct_active()->isa, direct_active()->description, direct_bf16_dot_over_fma());
    const product products[] = {
        {"conv1 forward", 1, 28, 28, 20, 5, 0, 0},
        {"conv1 weight gradient", 1, 28, 28, 20, 5, 0, 2},
        {"conv2 forward", 20, 12, 12, 50, 5, 0, 0},
        {"conv2 input gradient", 20, 12, 12, 50, 5, 0, 1},
        {"conv2 weight gradient", 20, 12, 12, 50, 5, 0, 2},
        {"fc1 forward", 800, 1, 1, 500, 1, 1, 0},
        {"fc1 backward (both)", 800, 1, 1, 500, 1, 1, 1},
        {"fc2 forward", 500, 1, 1, 10, 1, 1, 0},
        {"fc2 backward (both)", 500, 1, 1, 10, 1, 1, 1},
    };
    printf("best of %d calls by processor time, one thread; GFLOP/s (x fp32's rate)\n", rounds);
    printf("%-24s %8s %16s %16s\n", "product", "fp32", "bf16 FMAs", "bf16 vdpbf16ps");
    double step[3] = {0, 0, 0};
    for (size_t pi = 0; pi < sizeof products / sizeof products[0]; pi++) {
        const product *p = &products[pi];
        if (!strstr(p->name, only))
            continue;
        operands o[3];
        for (int s = 0; s < n_sets; s++)
            o[s] = operands_for(sets[s], p);
        double best[3] = {INFINITY, INFINITY, INFINITY};
        for (int r = 0; r < rounds; r++)
            for (int s = 0; s < n_sets; s++) {
                call(sets[s], p, &o[s]); /* untimed: its caches */
                const double t0 = thread_run_seconds();
                call(sets[s], p, &o[s]);
                const double t = thread_run_seconds() - t0;
                best[s] = t < best[s] ? t : best[s];
            }
        const int OH = p->H - p->kernel + 1, OW = p->W - p->kernel + 1;
        const double flops = p->dense ? 2.0 * BATCH * p->C * p->K * (p->pass ? 2 : 1)
                                      : 2.0 * p->K * OH * OW * GROUP * p->C * p->kernel * p->kernel;
        printf("%-24s %8.1f", p->name, flops / best[0] * 1e-9);
        for (int s = 1; s < n_sets; s++)
            printf(" %7.1f (%5.2fx)", flops / best[s] * 1e-9, best[0] / best[s]);
        printf("\n");
        for (int s = 0; s < n_sets; s++) {
            step[s] += best[s] * (p->dense ? 1 : BATCH / GROUP);
            free_operands(&o[s]);
        }
    }
    printf("%-24s %5.3f ms", "a step's products", step[0] * 1e3);
    for (int s = 1; s < n_sets; s++)
        printf(" %6.3f ms (%5.2fx)", step[s] * 1e3, step[0] / step[s]);
    printf("\n");
    return 0;
}
