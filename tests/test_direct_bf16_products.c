/* The direct backend's bf16 products (backends/direct/bf16/bf16.h) against
 * their references, for convolutions and dense layers (their rounding and
 * packing: tests/test_direct_bf16.c; fixtures: tests/direct_bf16_testing.h).
 *
 * The reference here is written plainly: each fp32 operand rounded to
 * bf16 by its own rounding function (checked first, against a nearest
 * value found in double), products and sums in double. Every product of
 * two bf16 is exact in fp32 (8 + 8 significant bits), so the kernels and
 * the reference differ only by the kernels' fp32 additions: a term that
 * passes through d of them is off by at most ((1 + 2^-24)^d - 1) of its
 * size, so a result is within d * 2^-24 * (1 + 1e-3) of the sum of its
 * terms' sizes (d = the longest chain of additions in that kernel, stated
 * with each check). Bias gradients are fp32 sums of the fp32 gradient, the
 * same argument. Against the naive fp32 layers the bound adds what
 * rounding both operands to bf16 costs, at most 2^-7 (1 + 2^-6) of each
 * term's size, and naive's own chain of n additions.
 *
 * The checks run twice: with the vdpbf16ps tiles (skipped, with the
 * reason, on a CPU without AVX512_BF16) and with the plain C tiles that
 * read the same packed operands (any CPU), so that the packing and the
 * walks are checked everywhere. Data: uniform in [-1, 1), and uniform in
 * [0, 1) too, where every term is positive and so a lost term or a biased
 * rounding moves the sum by its whole size. */
#include "tests/direct_half_cases.h"
#include "tests/direct_bf16_testing.h"
#include "tests/layouts.h"

/* ---------------------------------------------------------------------- */
/* References (CHWN, as the products)                                       */

/* out[K][OH][OW][B] and the sum of its terms' sizes */
static void ref_conv_forward(double *out, double *size, const double *in, const double *wb,
                             const float *wb_fp32, int B, int C, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    for (int k = 0; k < K; k++)
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++)
                for (int b = 0; b < B; b++) {
                    const double bias = wb_fp32[(size_t)k * (R + 1) + R];
                    double sum = bias, s = fabs(bias);
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < kernel; ki++)
                            for (int kj = 0; kj < kernel; kj++) {
                                const double t =
                                    wb[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj] *
                                    in[(((size_t)c * H + y + ki) * W + x + kj) * B + b];
                                sum += t, s += fabs(t);
                            }
                    const size_t o = (((size_t)k * OH + y) * OW + x) * B + b;
                    out[o] = sum, size[o] = s;
                }
}

static void ref_conv_backward_data(double *d_in, double *size, const double *d_out,
                                   const double *wb, int B, int C, int H, int W, int K, int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    memset(d_in, 0, sizeof(double) * C * H * W * B);
    memset(size, 0, sizeof(double) * C * H * W * B);
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++)
            for (int ki = 0; ki < kernel; ki++)
                for (int kj = 0; kj < kernel; kj++) {
                    const double w = wb[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj];
                    for (int y = 0; y < OH; y++)
                        for (int x = 0; x < OW; x++)
                            for (int b = 0; b < B; b++) {
                                const double t =
                                    w * d_out[(((size_t)k * OH + y) * OW + x) * B + b];
                                const size_t i = (((size_t)c * H + y + ki) * W + x + kj) * B + b;
                                d_in[i] += t, size[i] += fabs(t);
                            }
                }
}

static void ref_conv_backward_params(double *dwb, double *size, const double *d_out,
                                     const float *d_out_fp32, const double *in, int B, int C, int H, int W, int K,
                                     int kernel)
{
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    for (int k = 0; k < K; k++)
        for (int r = 0; r <= R; r++) {
            const int c = r / (kernel * kernel), ki = r / kernel % kernel, kj = r % kernel;
            double sum = 0, s = 0;
            for (int y = 0; y < OH; y++)
                for (int x = 0; x < OW; x++)
                    for (int b = 0; b < B; b++) {
                        const size_t o = (((size_t)k * OH + y) * OW + x) * B + b;
                        /* the bias's gradient: the fp32 gradient itself */
                        const double t =
                            r == R ? d_out_fp32[o]
                                   : d_out[o] * in[(((size_t)c * H + y + ki) * W + x + kj) * B + b];
                        sum += t, s += fabs(t);
                    }
            dwb[(size_t)k * (R + 1) + r] = sum, size[(size_t)k * (R + 1) + r] = s;
        }
}

/* ref[r][c] = init[r] (0 without init) + sum over k < n of
 * a[r * a_row + k * a_k] * b[k * b_k + c * b_col], r < rows, c < cols, and
 * size the sum of the terms' sizes: a dense product, whichever operands
 * it multiplies */
static void ref_product(double *ref, double *size, int rows, int cols, int n, const float *init,
                        const double *a, size_t a_row, size_t a_k, const double *b, size_t b_k,
                        size_t b_col)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double sum = init ? init[r] : 0, s = fabs(sum);
            for (int k = 0; k < n; k++) {
                const double t = a[r * a_row + k * a_k] * b[k * b_k + c * b_col];
                sum += t, s += fabs(t);
            }
            ref[(size_t)r * cols + c] = sum, size[(size_t)r * cols + c] = s;
        }
}

/* ---------------------------------------------------------------------- */
/* Holding results to the reference                                         */

/* |got - ref| <= chain * 2^-24 (1 + 1e-3) * size (+ a hair for products
 * that underflow), with the worst case named */
static void hold(const char *what, const float *got, const double *ref, const double *size,
                 size_t n, double chain)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double allowed = chain * U32 * 1.001 * size[i] + 1e-30;
        const double ratio = fabs((double)got[i] - ref[i]) / allowed;
        if (!(ratio <= worst)) /* NaN counts as worst */
            worst = ratio, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s [%zu]: %.9g, reference %.9g, terms' sizes sum to %.4g: off by %.3g of "
                 "the %.3g allowed (%g additions in a chain)",
                 what, at, (double)got[at], ref[at], size[at],
                 fabs((double)got[at] - ref[at]) / size[at], chain * U32 * 1.001, chain);
}

/* Against naive fp32 (converted to CHWN): the bf16 rounding of each
 * operand, the kernel's chain, and naive's n additions. */
static void hold_to_fp32(const char *what, const float *got, const float *fp32,
                         const double *size, size_t n, double chain, double naive_chain)
{
    const double per_size = ldexp(1.0, -7) * (1 + ldexp(1.0, -6)) +
                            (chain + naive_chain) * U32 * 1.001 * (1 + ldexp(1.0, -6));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double ratio = fabs((double)got[i] - fp32[i]) / (per_size * size[i] + 1e-30);
        if (!(ratio <= worst))
            worst = ratio, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s [%zu] against fp32: %.9g, naive %.9g, terms' sizes %.4g: off by %.3g "
                 "of the %.3g allowed",
                 what, at, (double)got[at], (double)fp32[at], size[at],
                 fabs((double)got[at] - fp32[at]) / size[at], per_size);
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */


static void check_conv(conv_case cc, int positive)
{
    /* weights packed once, read by both passes of both runs */
    const conv_fixture f = conv_fixture_of(
        cc, positive, fill, spoil, direct_bf16_conv_scratch_bytes, direct_bf16_conv_weight_bytes,
        direct_bf16_pack_conv_weights);
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kernel = cc.kernel;
    const int OH = f.OH, OW = f.OW, R = f.R;
    const size_t n_in = f.n_in, n_out = f.n_out, n_wb = f.n_wb, scratch_bytes = f.scratch_bytes;
    float *in = f.in, *wb = f.wb, *d_out = f.d_out;
    void *scratch = f.scratch, *packed = f.packed;
    float *out[2], *d_in[2], *dwb[2];
    for (int run = 0; run < 2; run++) { /* at cc.threads, then at 1: the same floats */
        const int threads = run ? 1 : cc.threads;
        out[run] = floats(n_out), d_in[run] = floats(n_in), dwb[run] = floats(n_wb);
        poison(out[run], n_out), poison(d_in[run], n_in), poison(dwb[run], n_wb);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_forward(out[run], in, wb, packed, scratch, B, C, H, W, K, kernel,
                                 threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_backward_data(d_in[run], d_out, packed, scratch, B, C, H, W, K, kernel,
                                       threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_conv_backward_params(dwb[run], d_out, in, scratch, B, C, H, W, K, kernel,
                                         threads);
    }
    assert_memory_equal(out[0], out[1], sizeof(float) * n_out);
    assert_memory_equal(d_in[0], d_in[1], sizeof(float) * n_in);
    assert_memory_equal(dwb[0], dwb[1], sizeof(float) * n_wb);

    /* chains: forward, bias then 2 additions a step, a step a pair of taps
     * (at most C * k * ceil(k / 2) + ... <= R + C * k steps' worth);
     * input gradient, 2 a step over up to k * ceil(K / 2) steps, then one
     * addition into d_in per kernel column; weight gradient, 2 a step over
     * OH * ceil(OW * B / 32) steps and 4 across the lanes; bias gradient,
     * 16 running sums of n / 16 each, then 16 more */
    const double chain_fwd = R + C * kernel + 2;
    const double chain_data = (double)kernel * (K + 1) + kernel + 2;
    const double chain_w = 2.0 * OH * ((OW * B + 31) / 32) + 4;
    const double chain_bias = (double)OH * OW * B / 16 + 18;
    double *ref = doubles(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    double *size = doubles(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    char what[160];
    snprintf(what, sizeof what, "conv forward B=%d C=%d %dx%d K=%d k=%d", B, C, H, W, K, kernel);
    double *in_r = rounded(in, n_in), *wb_r = rounded(wb, n_wb), *d_out_r = rounded(d_out, n_out);
    ref_conv_forward(ref, size, in_r, wb_r, wb, B, C, H, W, K, kernel);
    hold(what, out[0], ref, size, n_out, chain_fwd);

    /* naive fp32, NCHW */
    float *in_n = floats(n_in), *d_out_n = floats(n_out), *w_n = floats((size_t)K * R);
    float *bias_n = floats(K), *got_n = floats(n_out > n_in ? n_out : n_in);
    float *fp32 = floats(n_out > n_in ? (n_out > n_wb ? n_out : n_wb) : (n_in > n_wb ? n_in : n_wb));
    to_nchw(in_n, in, B, C, H * W);
    to_nchw(d_out_n, d_out, B, K, OH * OW);
    for (int k = 0; k < K; k++) {
        memcpy(w_n + (size_t)k * R, wb + (size_t)k * (R + 1), sizeof(float) * R);
        bias_n[k] = wb[(size_t)k * (R + 1) + R];
    }
    float *naive_scratch = floats(conv_scratch_count(C, H, W, kernel, 1));
    conv_forward(got_n, in_n, w_n, bias_n, B, C, H, W, K, kernel, 1, naive_scratch);
    to_chwn(fp32, got_n, B, K, OH * OW);
    hold_to_fp32(what, out[0], fp32, size, n_out, chain_fwd, R + 1);

    snprintf(what, sizeof what, "conv input gradient B=%d C=%d %dx%d K=%d k=%d", B, C, H, W, K,
             kernel);
    ref_conv_backward_data(ref, size, d_out_r, wb_r, B, C, H, W, K, kernel);
    hold(what, d_in[0], ref, size, n_in, chain_data);
    conv_backward_data(got_n, d_out_n, w_n, B, C, H, W, K, kernel, 1, naive_scratch);
    to_chwn(fp32, got_n, B, C, H * W);
    hold_to_fp32(what, d_in[0], fp32, size, n_in, chain_data, (double)K * kernel * kernel);

    snprintf(what, sizeof what, "conv weight and bias gradients B=%d C=%d %dx%d K=%d k=%d", B,
             C, H, W, K, kernel);
    ref_conv_backward_params(ref, size, d_out_r, d_out, in_r, B, C, H, W, K, kernel);
    for (int k = 0; k < K; k++) { /* the biases' chain is another */
        const size_t at = (size_t)k * (R + 1);
        hold(what, dwb[0] + at, ref + at, size + at, R, chain_w);
        hold(what, dwb[0] + at + R, ref + at + R, size + at + R, 1, chain_bias);
    }
    float *dw_n = floats((size_t)K * R), *db_n = floats(K);
    memset(dw_n, 0, sizeof(float) * K * R);
    memset(db_n, 0, sizeof(float) * K);
    conv_backward_weights(dw_n, d_out_n, in_n, B, C, H, W, K, kernel, 1, naive_scratch);
    conv_backward_bias(db_n, d_out_n, B, K, OH, OW);
    for (int k = 0; k < K; k++) {
        memcpy(fp32 + (size_t)k * (R + 1), dw_n + (size_t)k * R, sizeof(float) * R);
        fp32[(size_t)k * (R + 1) + R] = db_n[k];
    }
    hold_to_fp32(what, dwb[0], fp32, size, n_wb, chain_w > chain_bias ? chain_w : chain_bias,
                 (double)OH * OW * B);

    float *all[] = {in,   wb,     d_out,  out[0], out[1],  d_in[0], d_in[1], dwb[0], dwb[1],
                    in_n, d_out_n, w_n,   bias_n, got_n,   fp32,    naive_scratch, dw_n, db_n};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(ref), free(size), free(scratch), free(packed), free(in_r), free(wb_r), free(d_out_r);
}

/* LeNet's (workloads/workload.c: conv1 1 -> 20, 28x28; conv2 20 -> 50,
 * 12x12; both 5x5, stride 1, no padding; batch 128), then odd batches,
 * partial tiles and the other pairings. */
static const conv_case lenet_convs[] = {
    {128, 1, 28, 28, 20, 5, 2},  /* conv1: columns paired, 15 steps for 25 taps */
    {128, 20, 12, 12, 50, 5, 2}, /* conv2: channels paired */
};
static const conv_case odd_convs[] = {
    {7, 1, 28, 28, 20, 5, 2},  /* odd batch: runs at odd offsets, partial vectors */
    {33, 20, 12, 12, 50, 5, 2}, /* conv2, odd batch */
    {1, 3, 9, 8, 13, 3, 2},    /* one image; odd channels >1; 13 rows of tiles */
    {5, 4, 10, 11, 7, 7, 1},   /* kernel 7: more columns than a tile's rows */
    {16, 6, 12, 12, 16, 5, 2}, /* 6 -> 16 (LeNet-5 as first published) */
    {3, 2, 6, 6, 3, 1, 2},     /* 1x1, odd output channels (a zero partner) */
};

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* weight[n_out][n_in] packed as both dense products read it */
static void *packed_dense(const float *w, int n_in, int n_out)
{
    void *packed = scratch_of(direct_bf16_dense_weight_bytes(n_in, n_out));
    direct_bf16_pack_dense_weights(packed, w, n_in, n_out, 1);
    return packed;
}

static void check_dense(dense_case dc, int positive)
{
    const dense_fixture f = dense_fixture_of(dc, positive, fill, direct_bf16_dense_scratch_bytes);
    const int B = dc.B, I = dc.n_in, O = dc.n_out;
    const size_t n_in = f.n_in, n_out = f.n_out, n_w = f.n_w, scratch_bytes = f.scratch_bytes;
    float *in = f.in, *w = f.w, *bias = f.bias, *d_out = f.d_out;
    void *scratch = f.scratch;
    float *out[2], *d_in[2], *dw[2], *db[2];
    void *packed = packed_dense(w, I, O);
    for (int run = 0; run < 2; run++) {
        const int threads = run ? 1 : dc.threads;
        out[run] = floats(n_out), d_in[run] = floats(n_in), dw[run] = floats(n_w);
        db[run] = floats(O);
        poison(out[run], n_out), poison(d_in[run], n_in), poison(dw[run], n_w);
        poison(db[run], O);
        spoil(scratch, scratch_bytes);
        direct_bf16_dense_forward(out[run], in, packed, bias, scratch, B, I, O, threads);
        spoil(scratch, scratch_bytes);
        direct_bf16_dense_backward(dw[run], db[run], d_in[run], d_out, in, packed, scratch, B, I,
                                   O, threads);
    }
    assert_memory_equal(out[0], out[1], sizeof(float) * n_out);
    assert_memory_equal(d_in[0], d_in[1], sizeof(float) * n_in);
    assert_memory_equal(dw[0], dw[1], sizeof(float) * n_w);
    assert_memory_equal(db[0], db[1], sizeof(float) * O);
    /* without d_in, the same parameter gradients */
    float *dw_alone = floats(n_w), *db_alone = floats(O);
    direct_bf16_dense_backward(dw_alone, db_alone, NULL, d_out, in, packed, scratch, B, I, O,
                               dc.threads);
    free(packed);
    assert_memory_equal(dw_alone, dw[0], sizeof(float) * n_w);
    assert_memory_equal(db_alone, db[0], sizeof(float) * O);

    const size_t most = n_w > n_in ? (n_w > n_out ? n_w : n_out) : (n_in > n_out ? n_in : n_out);
    double *ref = doubles(most), *size = doubles(most);
    float *fp32 = floats(most);
    /* naive fp32, [B][features] */
    float *in_n = floats(n_in), *d_out_n = floats(n_out), *got_n = floats(most);
    float *naive_scratch = floats(dense_scratch_count(B, I, O));
    to_nchw(in_n, in, B, I, 1);
    to_nchw(d_out_n, d_out, B, O, 1);
    char what[128];
    double *in_r = rounded(in, n_in), *w_r = rounded(w, n_w), *d_out_r = rounded(d_out, n_out);

    /* forward: bias, then 2 additions a pair of inputs */
    snprintf(what, sizeof what, "dense forward B=%d %d -> %d", B, I, O);
    ref_product(ref, size, O, B, I, bias, w_r, I, 1, in_r, B, 1);
    const double chain_fwd = 2.0 * ((I + 1) / 2) + 1;
    hold(what, out[0], ref, size, n_out, chain_fwd);
    dense_forward(got_n, in_n, w, bias, B, I, O, naive_scratch);
    to_chwn(fp32, got_n, B, O, 1);
    hold_to_fp32(what, out[0], fp32, size, n_out, chain_fwd, I + 1);

    /* input gradient: 2 additions a pair of outputs */
    snprintf(what, sizeof what, "dense input gradient B=%d %d -> %d", B, I, O);
    ref_product(ref, size, I, B, O, NULL, w_r, 1, I, d_out_r, B, 1);
    const double chain_data = 2.0 * ((O + 1) / 2);
    hold(what, d_in[0], ref, size, n_in, chain_data);
    dense_backward_data(got_n, d_out_n, w, B, I, O);
    to_chwn(fp32, got_n, B, I, 1);
    hold_to_fp32(what, d_in[0], fp32, size, n_in, chain_data, O);

    /* weight gradient: 2 additions a pair of images */
    snprintf(what, sizeof what, "dense weight gradient B=%d %d -> %d", B, I, O);
    ref_product(ref, size, O, I, B, NULL, d_out_r, B, 1, in_r, 1, B);
    const double chain_w = 2.0 * ((B + 1) / 2);
    hold(what, dw[0], ref, size, n_w, chain_w);
    memset(got_n, 0, sizeof(float) * n_w);
    dense_backward_weights(got_n, d_out_n, in_n, B, I, O);
    hold_to_fp32(what, dw[0], got_n, size, n_w, chain_w, B);

    /* bias gradient: fp32 sums of the fp32 gradient, 16 running sums */
    snprintf(what, sizeof what, "dense bias gradient B=%d %d -> %d", B, I, O);
    for (int o = 0; o < O; o++) {
        double sum = 0, s = 0;
        for (int b = 0; b < B; b++)
            sum += d_out[(size_t)o * B + b], s += fabs(d_out[(size_t)o * B + b]);
        ref[o] = sum, size[o] = s;
    }
    hold(what, db[0], ref, size, O, B / 16.0 + 18);

    float *all[] = {in,    w,     bias,   d_out,  out[0],   out[1], d_in[0],  d_in[1],
                    dw[0], dw[1], db[0],  db[1],  dw_alone, db_alone, fp32,   in_n,
                    d_out_n, got_n, naive_scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(ref), free(size), free(scratch), free(in_r), free(w_r), free(d_out_r);
}

/* LeNet's fc1 (800 -> 500) and fc2 (500 -> 10) at batch 128, the MLP's
 * fc1 (784 -> 100), then odd sizes */
static const dense_case lenet_denses[] = {
    {128, 800, 500, 2},
    {128, 500, 10, 2},
    {128, 784, 100, 2},
};
static const dense_case odd_denses[] = {
    {33, 801, 500, 2}, /* odd batch and inputs: zero partners; a partial strip */
    {5, 7, 3, 1},      /* less than a vector anywhere */
    {1, 400, 13, 2},   /* one image */
    {17, 300, 601, 2}, /* odd outputs: a zero partner in the input gradient */
    {130, 64, 70, 2},  /* columns past two strips */
};

/* ---------------------------------------------------------------------- */
/* The runs                                                                 */

/* Case sets of one product, each case checked with data in [-1, 1) and in
 * [0, 1), with the vdpbf16ps tiles (a visible skip where they cannot run)
 * or, emulating, with the plain ones. */
typedef struct case_set {
    const void *cases;
    size_t count;
} case_set;
typedef struct product_run {
    void (*check)(const void *cases, size_t i, int positive);
    case_set sets[2]; /* the second's count 0 when there is one */
    int emulate;
} product_run;

static void check_conv_at(const void *cases, size_t i, int positive)
{
    check_conv(((const conv_case *)cases)[i], positive);
}

static void check_dense_at(const void *cases, size_t i, int positive)
{
    check_dense(((const dense_case *)cases)[i], positive);
}

#define CASES(array) {array, sizeof array / sizeof array[0]}
static const product_run lenet_convs_run = {check_conv_at, {CASES(lenet_convs)}, 0},
                         odd_convs_run = {check_conv_at, {CASES(odd_convs)}, 0},
                         plain_convs_run = {check_conv_at, {CASES(odd_convs)}, 1},
                         lenet_denses_run = {check_dense_at, {CASES(lenet_denses)}, 0},
                         odd_denses_run = {check_dense_at, {CASES(odd_denses)}, 0},
                         plain_denses_run = {check_dense_at,
                                             {CASES(lenet_denses), CASES(odd_denses)}, 1};

static void products_match_reference(void **state)
{
    const product_run *run = *state;
    if (!run->emulate && !instructions_or_skip())
        skip();
    direct_bf16_emulate = run->emulate;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < run->sets[s].count; i++)
            for (int positive = 0; positive < 2; positive++)
                run->check(run->sets[s].cases, i, positive);
    direct_bf16_emulate = 0;
}

TEST_MAIN(CASE_TEST("plain_tiles_denses_match_reference", products_match_reference,
                    &plain_denses_run),
          CASE_TEST("plain_tiles_convs_match_reference", products_match_reference,
                    &plain_convs_run),
          CASE_TEST("lenet_denses_match_reference", products_match_reference, &lenet_denses_run),
          CASE_TEST("odd_denses_match_reference", products_match_reference, &odd_denses_run),
          CASE_TEST("lenet_convs_match_reference", products_match_reference, &lenet_convs_run),
          CASE_TEST("odd_convs_match_reference", products_match_reference, &odd_convs_run))
