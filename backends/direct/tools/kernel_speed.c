/* The direct fp32 products (direct.h) alone, at LeNet's shapes as the
 * engine calls them (the convolutions a group of 32 images at a time, the
 * dense layers over the batch of 128), one thread, as GFLOP/s (2 a
 * multiply-add) and as a share of the fp32 FMA peak the same program
 * measures: independent vector accumulators of vfmadd231ps (24 zmm, or 12
 * ymm of AVX2's 16 registers) on the widest vectors this CPU runs.
 *
 * Every build of the kernels this CPU runs is timed, the builds taking
 * turns call by call (a shared machine's load then falls on all of them
 * alike), each timed call after an untimed one of its own (the caches as
 * that product leaves them, whichever build came before); each figure is
 * the median of the calls' processor time (the time the thread ran,
 * which other processes do not lengthen), with the best beside it. The
 * last line adds the products up as one training step of 128 images
 * takes them.
 *
 *   direct-kernel-speed [--rounds N] [--isa A,B] [--only TEXT] [--group G] [--batch B]
 *
 * (--isa: the builds to time, LENET_BENCH_DIRECT_ISA's names; --only: the
 * products whose names contain TEXT.) Exit 2 for bad usage. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/direct/fp32/direct.h"
#include "backends/direct/tools/speed_tools.h"
#include "base/cpu.h"
#include "base/fma_chains.h"

/* The fastest of 300 short trials of CHAINS independent FMA chains on
 * registers (base/fma_chains.h), as GFLOP/s */
enum { PEAK_ROUNDS = 20000, PEAK_TRIALS = 300 };
#define FMA_ACC_FIRST_512(acc, a, b) _mm512_fmadd_ps(a, acc, b)
#define FMA_ACC_FIRST_256(acc, a, b) _mm256_fmadd_ps(a, acc, b)
FMA_CHAIN_TRIAL(zmm_trial, "avx512f", __m512, _mm512_set1_ps, __m512, _mm512_set1_ps(0.999f),
                _mm512_set1_ps(1e-3f), FMA_ACC_FIRST_512, 24, PEAK_ROUNDS)
FMA_CHAIN_TRIAL(ymm_trial, "avx2,fma", __m256, _mm256_set1_ps, __m256, _mm256_set1_ps(0.999f),
                _mm256_set1_ps(1e-3f), FMA_ACC_FIRST_256, 12, PEAK_ROUNDS)
static double zmm_peak(void)
{
    return fma_chain_best_gflops(zmm_trial, PEAK_TRIALS, 32.0 * 24 * PEAK_ROUNDS);
}
static double ymm_peak(void)
{
    return fma_chain_best_gflops(ymm_trial, PEAK_TRIALS, 16.0 * 12 * PEAK_ROUNDS);
}

/* The fp32 FMA peak of one thread and the vectors it was measured on */
static double fma_peak(const char **what)
{
    if (cpu_has(CPU_AVX512F)) {
        *what = "24 zmm accumulators of vfmadd231ps";
        return zmm_peak();
    }
    if (cpu_has(CPU_AVX2 | CPU_FMA)) {
        *what = "12 ymm accumulators of vfmadd231ps";
        return ymm_peak();
    }
    *what = "no FMA on this CPU";
    return 0;
}

typedef struct shapes {
    int B, C, H, W, K, kernel; /* a convolution, or n_in = C, n_out = K */
    int dense;
} shapes;

/* (DENSE_WEIGHTS: a dense backward pass without the input gradient, a
 * part of DENSE_BACKWARD that a step does not count twice) */
enum pass { FORWARD, INPUT_GRADIENT, WEIGHT_GRADIENT, DENSE_BACKWARD, DENSE_WEIGHTS };

typedef struct product {
    const char *name;
    shapes s;
    enum pass pass;
} product;

typedef struct buffers {
    float *in, *out, *wb, *d_out, *d_in, *d_wb, *bias, *d_bias, *scratch;
} buffers;

static void run(const direct_kernels *k, const product *p, buffers *b)
{
    const shapes *s = &p->s;
    switch (p->pass) {
    case FORWARD:
        if (s->dense)
            k->dense_forward(b->out, b->in, b->wb, b->bias, s->B, s->C, s->K, 1);
        else
            k->conv_forward(b->out, b->in, b->wb, s->B, s->C, s->H, s->W, s->K, s->kernel, 1);
        break;
    case INPUT_GRADIENT:
        k->conv_backward_data(b->d_in, b->d_out, b->wb, b->scratch, s->B, s->C, s->H, s->W, s->K,
                              s->kernel, 1);
        break;
    case WEIGHT_GRADIENT:
        k->conv_backward_params(b->d_wb, b->d_out, b->in, s->B, s->C, s->H, s->W, s->K, s->kernel,
                                1);
        break;
    case DENSE_BACKWARD:
    case DENSE_WEIGHTS:
        k->dense_backward(b->d_wb, b->d_bias, p->pass == DENSE_BACKWARD ? b->d_in : NULL, b->d_out,
                          b->in, b->wb, s->B, s->C, s->K, 1);
    }
}

static buffers allocate(const shapes *s)
{
    const int OH = s->H - s->kernel + 1, OW = s->W - s->kernel + 1;
    const size_t R = (size_t)s->C * s->kernel * s->kernel;
    const size_t n_in = (size_t)s->C * s->H * s->W * s->B;
    const size_t n_out = (size_t)s->K * OH * OW * s->B, n_wb = (size_t)s->K * (R + 1);
    const size_t scratch =
        s->dense ? 0 : direct_conv_scratch_floats(s->B, s->C, s->H, s->W, s->K, s->kernel);
    return (buffers){speed_filled(n_in, 1),  speed_filled(n_out, 2), speed_filled(n_wb, 3),
                     speed_filled(n_out, 4), speed_filled(n_in, 5),  speed_filled(n_wb, 6),
                     speed_filled(s->K, 7),  speed_filled(s->K, 8),  speed_filled(scratch, 9)};
}

static void release(buffers *b)
{
    float *all[] = {b->in,   b->out,  b->wb,     b->d_out,  b->d_in,
                    b->d_wb, b->bias, b->d_bias, b->scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* multiply-adds of the product, times 2 (both products of a dense backward pass) */
static double flops_of(const product *p)
{
    const shapes *s = &p->s;
    if (s->dense)
        return 2.0 * s->B * s->C * s->K * (p->pass == DENSE_BACKWARD ? 2 : 1);
    const double OH = s->H - s->kernel + 1, OW = s->W - s->kernel + 1;
    return 2.0 * s->K * OH * OW * s->B * s->C * s->kernel * s->kernel;
}

static int by_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--rounds N] [--isa A,B] [--only TEXT] [--group G] [--batch B]\n",
            argv0);
    return 2;
}

enum { MAX_BUILDS = 8, MAX_PRODUCTS = 10 };

int main(int argc, char **argv)
{
    int rounds = 30, group = 32, batch = 128;
    const char *only = "";
    char *isas = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage(argv[0]);
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--group"))
            group = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[++i];
        else if (!strcmp(argv[i], "--isa"))
            isas = argv[++i];
        else
            return usage(argv[0]);
    }
    if (rounds < 1 || group < 1 || batch < 1) {
        fprintf(stderr, "direct-kernel-speed: rounds, group and batch must be positive\n");
        return 2;
    }
    const direct_kernels *builds[MAX_BUILDS];
    int n_builds = 0;
    if (isas) {
        for (char *t = strtok(isas, ","); t; t = strtok(NULL, ",")) {
            const direct_kernels *k = direct_kernels_find(t);
            if (!k || n_builds == MAX_BUILDS) {
                fprintf(stderr, "direct-kernel-speed: no build of the kernels called %s\n", t);
                return 2;
            }
            if (!k->cpu_runs()) {
                fprintf(stderr, "direct-kernel-speed: this CPU cannot run %s\n", t);
                return 3;
            }
            builds[n_builds++] = k;
        }
    } else
        for (int i = 0; i < direct_kernels_count() && n_builds < MAX_BUILDS; i++)
            if (direct_kernels_at(i)->cpu_runs())
                builds[n_builds++] = direct_kernels_at(i);

    const product all[MAX_PRODUCTS] = {
        {"conv1 forward", {group, 1, 28, 28, 20, 5, 0}, FORWARD},
        {"conv1 weight gradient", {group, 1, 28, 28, 20, 5, 0}, WEIGHT_GRADIENT},
        {"conv2 forward", {group, 20, 12, 12, 50, 5, 0}, FORWARD},
        {"conv2 input gradient", {group, 20, 12, 12, 50, 5, 0}, INPUT_GRADIENT},
        {"conv2 weight gradient", {group, 20, 12, 12, 50, 5, 0}, WEIGHT_GRADIENT},
        {"fc1 forward", {batch, 800, 1, 1, 500, 1, 1}, FORWARD},
        {"fc1 backward (both)", {batch, 800, 1, 1, 500, 1, 1}, DENSE_BACKWARD},
        {"fc1 weight gradient", {batch, 800, 1, 1, 500, 1, 1}, DENSE_WEIGHTS},
        {"fc2 forward", {batch, 500, 1, 1, 10, 1, 1}, FORWARD},
        {"fc2 backward (both)", {batch, 500, 1, 1, 10, 1, 1}, DENSE_BACKWARD},
    };
    product products[MAX_PRODUCTS];
    buffers bufs[MAX_PRODUCTS];
    int n_products = 0;
    for (int p = 0; p < MAX_PRODUCTS; p++)
        if (strstr(all[p].name, only))
            products[n_products++] = all[p];
    for (int p = 0; p < n_products; p++)
        bufs[p] = allocate(&products[p].s);

    const cpu_info *cpu = cpu_this();
    const char *peak_what;
    const double peak = fma_peak(&peak_what);
    printf("CPU: %s (%s family %d model %d, L1d %d KiB)\n", cpu->brand, cpu->vendor, cpu->family,
           cpu->model, cpu_l1d_bytes(0) / 1024);
    printf("fp32 FMA peak, one thread: %.1f GFLOP/s (%s, best by processor time)\n", peak,
           peak_what);
    printf("one thread; convolutions %d images a call, dense layers %d; median (best) of %d "
           "calls by processor time, the builds taking turns\n",
           group, batch, rounds);

    /* seconds[build][product][round] */
    double *seconds = malloc(sizeof(double) * n_builds * n_products * rounds);
    if (!seconds)
        return 1;
    for (int p = 0; p < n_products; p++)
        for (int k = 0; k < n_builds; k++)
            run(builds[k], &products[p], &bufs[p]); /* warm the caches and the pages */
    /* each timed call right after an untimed one of the same build, so
     * that no build finds the caches as another product left them */
    for (int r = 0; r < rounds; r++)
        for (int p = 0; p < n_products; p++)
            for (int k = 0; k < n_builds; k++) {
                run(builds[k], &products[p], &bufs[p]);
                const double t0 = thread_run_seconds();
                run(builds[k], &products[p], &bufs[p]);
                seconds[((size_t)k * n_products + p) * rounds + r] = thread_run_seconds() - t0;
            }

    printf("%-22s", "GFLOP/s (% of peak)");
    for (int k = 0; k < n_builds; k++)
        printf(" %24s", builds[k]->isa);
    printf("\n");
    double step[MAX_BUILDS] = {0}, step_flops = 0;
    for (int p = 0; p < n_products; p++) {
        const double flops = flops_of(&products[p]);
        /* calls of this product in a step of `batch` images */
        const double calls = products[p].pass == DENSE_WEIGHTS ? 0.0
                             : products[p].s.dense             ? 1.0
                                                               : (double)batch / group;
        step_flops += calls * flops;
        printf("%-22s", products[p].name);
        for (int k = 0; k < n_builds; k++) {
            double *t = seconds + ((size_t)k * n_products + p) * rounds;
            qsort(t, rounds, sizeof(double), by_double);
            const double median = t[rounds / 2], rate = flops / median * 1e-9;
            step[k] += calls * median;
            printf(" %7.1f (%4.1f%%) (%6.1f)", rate, peak > 0 ? 100 * rate / peak : NAN,
                   flops / t[0] * 1e-9);
        }
        printf("\n");
    }
    if (!only[0]) { /* a step takes every product */
        printf("%-22s", "products of a step");
        for (int k = 0; k < n_builds; k++) {
            const double rate = step_flops / step[k] * 1e-9;
            printf(" %6.3f ms %5.1f (%4.1f%%)", step[k] * 1e3, rate,
                   peak > 0 ? 100 * rate / peak : NAN);
        }
        printf("\n");
    }
    for (int k = 0; k < n_builds; k++)
        printf("%s: %s\n", builds[k]->isa, builds[k]->description);
    free(seconds);
    for (int p = 0; p < n_products; p++)
        release(&bufs[p]);
    return 0;
}
