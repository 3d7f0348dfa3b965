/* The fp16 products alone on LeNet's shapes at batch 128, and the row tile
 * alone at several chain lengths (what the fp32 folds cost: chains of
 * `steps` fold once), as GFLOP/s of the multiply-adds (2 each): the best
 * and the median of N calls, with the load average before and after (on
 * a shared machine read the best of several). Not a test.
 *
 *   direct-fp16-speed [--repeats N] [--threads T] [--chains 16,32,64]
 *                     [--emulate]
 *
 * Needs AVX512_FP16; --emulate runs the portable emulation instead (to
 * try the tool on any CPU: its speeds say nothing of the instructions').
 * Compare with the fp32 column of direct-bf16-speed on the same machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/direct/fp16/fp16.h"
#include "backends/direct/tools/half_speed.h"
#include "backends/direct/tools/speed_tools.h"
#include "backends/direct/fp16/fp16_tiles.h"

static int by_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One product's arguments: a convolution (C > 0) or a dense layer */
typedef struct product {
    const char *name;
    int C, H, W, K, kernel; /* convolution */
    int n_in, n_out;        /* dense */
    int pass;               /* 0 forward, 1 input gradient, 2 weight gradient (dense: 1 both) */
} product;

static const product lenet[] = {
    {"conv1 forward", 1, 28, 28, 20, 5, 0, 0, 0},  {"conv1 weight gradient", 1, 28, 28, 20, 5, 0, 0, 2},
    {"conv2 forward", 20, 12, 12, 50, 5, 0, 0, 0}, {"conv2 input gradient", 20, 12, 12, 50, 5, 0, 0, 1},
    {"conv2 weight gradient", 20, 12, 12, 50, 5, 0, 0, 2},
    {"fc1 forward", 0, 0, 0, 0, 0, 800, 500, 0},   {"fc1 backward", 0, 0, 0, 0, 0, 800, 500, 1},
    {"fc2 forward", 0, 0, 0, 0, 0, 500, 10, 0},    {"fc2 backward", 0, 0, 0, 0, 0, 500, 10, 1},
};

/* The multiply-adds of one call */
static double multiply_adds(const product *p, int B)
{
    if (!p->C)
        return (double)B * p->n_in * p->n_out * (p->pass ? 2 : 1);
    const double OH = p->H - p->kernel + 1, OW = p->W - p->kernel + 1;
    return (double)B * p->K * OH * OW * p->C * p->kernel * p->kernel;
}

static void report(const char *name, double *seconds, int repeats, double flops)
{
    qsort(seconds, (size_t)repeats, sizeof(double), by_double);
    printf("%-34s best %7.1f  median %7.1f GFLOP/s\n", name, flops / seconds[0] * 1e-9,
           flops / seconds[repeats / 2] * 1e-9);
}

static void time_product(const product *p, int B, int threads, int repeats, double *seconds)
{
    const int C = p->C ? p->C : 1, H = p->H, W = p->W, K = p->K, k = p->kernel;
    const size_t n_in = p->C ? (size_t)C * H * W * B : (size_t)p->n_in * B;
    const size_t n_out = p->C ? (size_t)K * (H - k + 1) * (W - k + 1) * B : (size_t)p->n_out * B;
    const size_t n_w = p->C ? (size_t)K * (C * k * k + 1) : (size_t)p->n_out * p->n_in;
    float *in = speed_filled(n_in, 1), *out = speed_filled(n_out, 2), *w = speed_filled(n_w, 3);
    float *d_in = speed_filled(n_in, 4), *dw = speed_filled(n_w, 5), *bias = speed_filled(p->n_out + 1, 6);
    const size_t scratch_bytes = p->C ? direct_fp16_conv_scratch_bytes(B, C, H, W, K, k)
                                      : direct_fp16_dense_scratch_bytes(B, p->n_in, p->n_out);
    void *scratch = buffer(scratch_bytes);
    /* the weights packed once, as an engine does */
    void *packed = buffer(p->C ? direct_fp16_conv_weight_bytes(C, K, k)
                               : direct_fp16_dense_weight_bytes(p->n_in, p->n_out));
    if (p->C)
        direct_fp16_pack_conv_weights(packed, w, C, K, k);
    else
        direct_fp16_pack_dense_weights(packed, w, p->n_in, p->n_out, threads);
    for (int r = -1; r < repeats; r++) { /* one call to warm up */
        const double start = now();
        if (p->C && p->pass == 0)
            direct_fp16_conv_forward(out, in, w, packed, scratch, B, C, H, W, K, k, threads);
        else if (p->C && p->pass == 1)
            direct_fp16_conv_backward_data(d_in, out, packed, scratch, B, C, H, W, K, k, threads);
        else if (p->C)
            direct_fp16_conv_backward_params(dw, out, in, scratch, B, C, H, W, K, k, threads);
        else if (p->pass == 0)
            direct_fp16_dense_forward(out, in, packed, bias, scratch, B, p->n_in, p->n_out,
                                      threads);
        else
            direct_fp16_dense_backward(dw, bias, d_in, out, in, packed, scratch, B, p->n_in,
                                       p->n_out, threads);
        if (r >= 0)
            seconds[r] = now() - start;
    }
    free(in), free(out), free(w), free(d_in), free(dw), free(bias), free(scratch), free(packed);
}

/* The row tile alone, 6 rows x 128 columns over 512 steps whose runs stay
 * in L1, at one chain length */
static void time_tile(int chain, int repeats, double *seconds)
{
    enum { STEPS = 512, LD = FP16_COLS + FP16_LANES, CALLS = 200 };
    uint32_t *a = buffer(sizeof(uint32_t) * FP16_ROWS * STEPS);
    uint16_t *b = buffer(sizeof(uint16_t) * 8 * LD);
    float *out = buffer(sizeof(float) * FP16_ROWS * FP16_COLS), *rows[FP16_ROWS];
    ptrdiff_t *off = buffer(sizeof(ptrdiff_t) * STEPS);
    for (int s = 0; s < STEPS; s++)
        off[s] = (ptrdiff_t)(s % 8) * LD; /* 8 runs, read over and over */
    for (int i = 0; i < FP16_ROWS * STEPS; i++)
        a[i] = direct_fp16_double(0x2e66); /* 0.1 */
    for (int i = 0; i < 8 * LD; i++)
        b[i] = 0x2e66;
    for (int i = 0; i < FP16_ROWS; i++)
        rows[i] = out + i * FP16_COLS;
    fp16_row_tile_fn *tile =
        direct_fp16_emulate ? direct_fp16_row_tile_emulated : direct_fp16_row_tile_avx512;
    for (int r = -1; r < repeats; r++) {
        const double start = now();
        for (int c = 0; c < CALLS; c++)
            tile(FP16_ROWS, FP16_COLS, rows, 0, NULL, a, STEPS, 1, b, off, STEPS, chain);
        if (r >= 0)
            seconds[r] = (now() - start) / CALLS;
    }
    free(a), free(b), free(out), free(off);
}

static int usage(void)
{
    fprintf(stderr, "usage: direct-fp16-speed [--repeats N] [--threads T] [--chains 16,32,64] "
                    "[--emulate]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int repeats = 20, threads = 1;
    const char *chains = "16,32,64,512";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--emulate"))
            direct_fp16_emulate = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--chains"))
            chains = argv[++i];
        else
            return usage();
    }
    if (repeats < 1 || threads < 1)
        return usage();
    char why[512];
    if (!direct_fp16_emulate && !direct_fp16_supported(why, sizeof why)) {
        fprintf(stderr, "direct-fp16-speed: %s\n", why);
        return 2;
    }
    double *seconds = buffer(sizeof(double) * (size_t)repeats);
    load_average("before");
    printf("%s, batch 128, %d thread(s), chains of %d\n",
           direct_fp16_emulate ? "emulated" : "AVX512_FP16", threads, DIRECT_FP16_CHAIN);
    for (size_t i = 0; i < sizeof lenet / sizeof lenet[0]; i++) {
        time_product(&lenet[i], 128, threads, repeats, seconds);
        report(lenet[i].name, seconds, repeats, 2 * multiply_adds(&lenet[i], 128));
    }
    for (const char *c = chains; *c;) {
        char *end;
        const long chain = strtol(c, &end, 10);
        if (end == c || chain < 1)
            return usage();
        time_tile((int)chain, repeats, seconds);
        char name[64];
        snprintf(name, sizeof name, "row tile alone, chains of %ld", chain);
        report(name, seconds, repeats, 2.0 * FP16_ROWS * FP16_COLS * 512);
        c = *end == ',' ? end + 1 : end;
    }
    load_average("after");
    free(seconds);
    return 0;
}
