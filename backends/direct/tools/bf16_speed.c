/* The bf16 products alone against the fp32 direct kernels on LeNet's
 * shapes at batch 128: the best (and median) of N calls of each, as
 * GFLOP/s of the product's own multiply-adds (2 a multiply-add, the same
 * count for both precisions), at each thread count asked for, with the
 * load average before and after (a shared machine makes the best of
 * several the figure to read). With one thread, the best by processor
 * time too (the time the thread ran, which other processes do not
 * lengthen; the best wall time favours short calls, which more often
 * find the core free).
 *
 *   direct-bf16-speed [--repeats N] [--threads 1,2] [--batch B] [--only TEXT]
 *
 * (--only: the products whose names contain TEXT.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <immintrin.h>

#include "backends/direct/bf16/bf16.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/tools/half_speed.h"
#include "backends/direct/tools/speed_tools.h"

typedef struct shapes {
    int B, C, H, W, K, kernel; /* a convolution, or n_in = C, n_out = K */
    int dense;
} shapes;

/* Which product of a layer is timed */
enum pass { FORWARD, BACKWARD_DATA, BACKWARD_PARAMS, DENSE_BACKWARD };

typedef struct buffers {
    float *in, *out, *wb, *d_out, *d_in, *d_wb, *bias, *d_bias, *fp32_scratch;
    void *bf16_scratch, *bf16_weights; /* the weights packed once, as an engine does */
} buffers;

static void run(int bf16, enum pass pass, const shapes *s, buffers *b, int threads)
{
    if (s->dense) {
        if (pass == FORWARD) {
            if (bf16)
                direct_bf16_dense_forward(b->out, b->in, b->bf16_weights, b->bias,
                                          b->bf16_scratch, s->B, s->C, s->K, threads);
            else
                direct_active()->dense_forward(b->out, b->in, b->wb, b->bias, s->B, s->C, s->K,
                                          threads);
        } else if (bf16) {
            direct_bf16_dense_backward(b->d_wb, b->d_bias, b->d_in, b->d_out, b->in,
                                       b->bf16_weights, b->bf16_scratch, s->B, s->C, s->K,
                                       threads);
        } else {
            direct_active()->dense_backward(b->d_wb, b->d_bias, b->d_in, b->d_out, b->in, b->wb,
                                       s->B, s->C, s->K, threads);
        }
        return;
    }
    switch (pass) {
    case FORWARD:
        if (bf16)
            direct_bf16_conv_forward(b->out, b->in, b->wb, b->bf16_weights, b->bf16_scratch,
                                     s->B, s->C, s->H, s->W, s->K, s->kernel, threads);
        else
            direct_active()->conv_forward(b->out, b->in, b->wb, s->B, s->C, s->H, s->W, s->K,
                                     s->kernel, threads);
        break;
    case BACKWARD_DATA:
        if (bf16)
            direct_bf16_conv_backward_data(b->d_in, b->d_out, b->bf16_weights, b->bf16_scratch,
                                           s->B, s->C, s->H, s->W, s->K, s->kernel, threads);
        else
            direct_active()->conv_backward_data(b->d_in, b->d_out, b->wb, b->fp32_scratch, s->B,
                                           s->C, s->H, s->W, s->K, s->kernel, threads);
        break;
    default:
        if (bf16)
            direct_bf16_conv_backward_params(b->d_wb, b->d_out, b->in, b->bf16_scratch, s->B,
                                             s->C, s->H, s->W, s->K, s->kernel, threads);
        else
            direct_active()->conv_backward_params(b->d_wb, b->d_out, b->in, s->B, s->C, s->H, s->W,
                                             s->K, s->kernel, threads);
    }
}

/* The instruction's own rate: 24 independent vdpbf16ps chains on
 * registers, GFLOP/s (64 flops each), best of 500 short runs */
__attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) static double
vdpbf16ps_peak(void)
{
    enum { CHAINS = 24, ROUNDS = 20000 }; /* 0.2 ms: short enough to find the core free */
    double best = 0;
    for (int rep = 0; rep < 500; rep++) {
        __m512 acc[CHAINS];
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_set1_ps((float)c);
        __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x3c003c00);
        __asm__("" : "+v"(a), "+v"(b));
        const double t0 = now();
        for (int r = 0; r < ROUNDS; r++)
#pragma GCC unroll 24
            for (int c = 0; c < CHAINS; c++)
                acc[c] = _mm512_dpbf16_ps(acc[c], (__m512bh)a, (__m512bh)b);
        const double t = now() - t0;
        float sink = 0;
        for (int c = 0; c < CHAINS; c++)
            sink += _mm512_reduce_add_ps(acc[c]);
        __asm__ volatile("" : : "x"(sink));
        const double rate = 64.0 * CHAINS * ROUNDS / t * 1e-9;
        best = rate > best ? rate : best;
    }
    return best;
}

static int by_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int repeats = 20, batch = 128, thread_counts[8] = {1, 2}, n_threads = 2;
    const char *only = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_threads = 0;
            for (char *t = strtok(argv[++i], ","); t && n_threads < 8; t = strtok(NULL, ","))
                thread_counts[n_threads++] = atoi(t);
        } else {
            fprintf(stderr, "usage: %s [--repeats N] [--threads 1,2] [--batch B] [--only TEXT]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeats < 1 || batch < 1 || n_threads < 1) {
        fprintf(stderr, "repeats, batch and thread counts must be positive\n");
        return 2;
    }
    char why[256];
    if (!direct_bf16_supported(why, sizeof why)) {
        printf("bf16 products not run: %s\n", why);
        return 3;
    }
    const int B = batch;
    const shapes conv1 = {B, 1, 28, 28, 20, 5, 0}, conv2 = {B, 20, 12, 12, 50, 5, 0};
    const shapes fc1 = {B, 800, 1, 1, 500, 1, 1}, fc2 = {B, 500, 1, 1, 10, 1, 1};
    const struct {
        const char *name;
        const shapes *s;
        enum pass pass;
    } products[] = {
        {"conv1 forward", &conv1, FORWARD},
        {"conv1 weight gradient", &conv1, BACKWARD_PARAMS},
        {"conv2 forward", &conv2, FORWARD},
        {"conv2 input gradient", &conv2, BACKWARD_DATA},
        {"conv2 weight gradient", &conv2, BACKWARD_PARAMS},
        {"fc1 forward", &fc1, FORWARD},
        {"fc1 backward (both)", &fc1, DENSE_BACKWARD},
        {"fc2 forward", &fc2, FORWARD},
        {"fc2 backward (both)", &fc2, DENSE_BACKWARD},
    };
    const int n_products = (int)(sizeof products / sizeof products[0]);
    load_average("before");
    printf("vdpbf16ps alone, one thread: %.1f GFLOP/s\n", vdpbf16ps_peak());
    printf("best (median) of %d calls, batch %d; GFLOP/s\n", repeats, B);
    printf("%-24s %7s %16s %16s %8s %21s\n", "product", "threads", "fp32", "bf16", "best x",
           "by cpu time: fp32 bf16");
    double *times = malloc(sizeof(double) * repeats);
    for (int ti = 0; ti < n_threads; ti++) {
        const int threads = thread_counts[ti];
        double total[2] = {0, 0};
        for (int p = 0; p < n_products; p++) {
            const shapes *s = products[p].s;
            if (!strstr(products[p].name, only))
                continue;
            const int OH = s->H - s->kernel + 1, OW = s->W - s->kernel + 1;
            const size_t R = (size_t)s->C * s->kernel * s->kernel;
            const size_t n_in = (size_t)s->C * s->H * s->W * s->B;
            const size_t n_out = (size_t)s->K * OH * OW * s->B, n_wb = (size_t)s->K * (R + 1);
            buffers b = {speed_filled(n_in, 1), speed_filled(n_out, 2), speed_filled(n_wb, 3),
                         speed_filled(n_out, 4), speed_filled(n_in, 5), speed_filled(n_wb, 6),
                         speed_filled(s->K, 7), speed_filled(s->K, 8), NULL, NULL, NULL};
            const size_t fp32_floats =
                s->dense ? 0 : direct_conv_scratch_floats(s->B, s->C, s->H, s->W, s->K, s->kernel);
            const size_t bf16_bytes =
                s->dense ? direct_bf16_dense_scratch_bytes(s->B, s->C, s->K)
                         : direct_bf16_conv_scratch_bytes(s->B, s->C, s->H, s->W, s->K, s->kernel);
            b.fp32_scratch = speed_filled(fp32_floats, 9);
            b.bf16_scratch = aligned_alloc(64, (bf16_bytes + 63) / 64 * 64);
            const size_t weight_bytes = s->dense
                                            ? direct_bf16_dense_weight_bytes(s->C, s->K)
                                            : direct_bf16_conv_weight_bytes(s->C, s->K, s->kernel);
            b.bf16_weights = aligned_alloc(64, (weight_bytes + 63) / 64 * 64);
            if (s->dense)
                direct_bf16_pack_dense_weights(b.bf16_weights, b.wb, s->C, s->K, threads);
            else
                direct_bf16_pack_conv_weights(b.bf16_weights, b.wb, s->C, s->K, s->kernel);
            /* multiply-adds of the product (both of a dense backward pass) */
            double flops = 2.0 * (double)n_out * R;
            if (s->dense)
                flops = 2.0 * s->B * s->C * s->K * (products[p].pass == DENSE_BACKWARD ? 2 : 1);
            double best[2], median[2], best_cpu[2] = {INFINITY, INFINITY};
            for (int bf16 = 0; bf16 < 2; bf16++) {
                run(bf16, products[p].pass, s, &b, threads); /* warm the caches and the pages */
                for (int r = 0; r < repeats; r++) {
                    const double t0 = now(), c0 = thread_run_seconds();
                    run(bf16, products[p].pass, s, &b, threads);
                    times[r] = now() - t0;
                    const double c = thread_run_seconds() - c0;
                    best_cpu[bf16] = c < best_cpu[bf16] ? c : best_cpu[bf16];
                }
                qsort(times, repeats, sizeof(double), by_double);
                best[bf16] = times[0], median[bf16] = times[repeats / 2];
                total[bf16] += best[bf16];
            }
            printf("%-24s %7d %7.1f (%6.1f) %7.1f (%6.1f) %7.2fx", products[p].name, threads,
                   flops / best[0] * 1e-9, flops / median[0] * 1e-9, flops / best[1] * 1e-9,
                   flops / median[1] * 1e-9, best[0] / best[1]);
            if (threads == 1)
                printf(" %9.1f %6.1f %5.2fx", flops / best_cpu[0] * 1e-9,
                       flops / best_cpu[1] * 1e-9, best_cpu[0] / best_cpu[1]);
            printf("\n");
            free(b.in), free(b.out), free(b.wb), free(b.d_out), free(b.d_in), free(b.d_wb);
            free(b.bias), free(b.d_bias), free(b.fp32_scratch), free(b.bf16_scratch);
            free(b.bf16_weights);
        }
        printf("%-24s %7d %9.3f ms      %9.3f ms      %7.2fx\n", "all of them (best)", threads,
               total[0] * 1e3, total[1] * 1e3, total[0] / total[1]);
    }
    free(times);
    load_average("after");
    return 0;
}
