/* The direct backend's fp16 products (backends/direct/fp16/fp16.h) against an
 * fp64 reference, for convolutions and dense layers (the conversions, the
 * emulated FMA and the chain bound itself: tests/test_direct_fp16.c;
 * fixtures: tests/direct_fp16_testing.h).
 *
 * The reference is written plainly, from the layers' definitions: each
 * fp32 operand rounded to fp16 by direct_fp16_round (checked against a
 * search in the other program), products and sums in double, which hold
 * every product of two halves exactly. Three data sets a case:
 *   - values k/8, k in [-4, 4]: every product, every chain of 32 and
 *     every fp32 sum of chains is exact, so a product must equal the
 *     reference to the bit; a term lost, doubled or misplaced by the
 *     packing or the walks shows however small it is;
 *   - uniform in [-1, 1), and in [0, 1) (every term positive, so that a
 *     biased rounding or a stagnating sum moves the result by much): each
 *     result is held to the bound of fp16.h for its sum (chains of
 *     DIRECT_FP16_CHAIN, the fp32 additions its chains pass through), and
 *     to the exact sum of the fp32 operands with what rounding both
 *     operands to fp16 may cost on top (|fl(x) - x| <= max(2^-11 |x|,
 *     2^-25) each). The worst use of each bound is printed.
 * Every product runs at the case's threads and at 1 (the same floats),
 * emulated (any CPU) and with AVX512_FP16, which must give the emulation's
 * bits (a visible skip on a CPU without it). */
#include "tests/direct_half_cases.h"
#include "tests/direct_fp16_testing.h"

/* ---------------------------------------------------------------------- */
/* References                                                               */

/* One result's sum in double: over fp16 operands (sum), their sizes, the
 * same over the fp32 operands (sum32), a bound on what rounding the
 * operands costs, the products counted, and the start (a bias) */
typedef struct term_sum {
    double sum, size, sum32, rounding, n, start;
} term_sum;

static void start_at(term_sum *a, double start)
{
    *a = (term_sum){start, 0, start, 0, 0, start};
}

/* An fp32 operand with what the reference needs of it: its fp16 value
 * and what rounding it to fp16 may cost. Made once per operand (operands_of),
 * not once per product it takes part in: rounding is the reference's
 * costliest part, and under the sanitisers by far (a call per term). */
typedef struct operand {
    float f;
    double half, rounding;
} operand;

static operand *operands_of(const float *x, size_t n)
{
    operand *o = malloc((n ? n : 1) * sizeof *o);
    assert_non_null(o);
    for (size_t i = 0; i < n; i++)
        o[i] = (operand){x[i], half_of(x[i]), fmax(U16 * fabsf(x[i]), UNDERFLOW16)};
    return o;
}

static void add_term(term_sum *a, const operand *x, const operand *y)
{
    const double t = x->half * y->half, ex = x->rounding, ey = y->rounding;
    a->sum += t, a->size += fabs(t), a->n++;
    a->sum32 += (double)x->f * y->f;
    a->rounding += ex * fabsf(y->f) + fabsf(x->f) * ey + ex * ey;
}

/* a bias gradient's term: the fp32 value itself */
static void add_value(term_sum *a, float v)
{
    a->sum += v, a->sum32 += v, a->size += fabsf(v), a->n++;
}

/* ref[r][c] = init[r] (0 without init) + sum over k < n of
 * a[r * a_row + k * a_k] * b[k * b_k + c * b_col], r < rows, c < cols: a
 * dense product's terms, whichever operands it multiplies */
static void ref_product(term_sum *ref, int rows, int cols, int n, const float *init,
                        const operand *a, size_t a_row, size_t a_k, const operand *b, size_t b_k,
                        size_t b_col)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            term_sum *t = &ref[(size_t)r * cols + c];
            start_at(t, init ? init[r] : 0);
            for (int k = 0; k < n; k++)
                add_term(t, &a[r * a_row + k * a_k], &b[k * b_k + c * b_col]);
        }
}

static term_sum *sums(size_t n)
{
    term_sum *p = calloc(n ? n : 1, sizeof(term_sum));
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------------------------- */
/* Holding results to the reference                                         */

/* The worst use of each bound so far, printed after each test */
static double worst_to_halves, worst_to_floats;

/* Each result against its sum: equal when the data are exact; else within
 * the bound of fp16.h (chains through `folds` fp32 additions), and within
 * that plus the operands' rounding of the fp32 operands' sum. */
static void hold(const char *what, const float *got, const term_sum *ref, size_t n,
                 double folds, int exact)
{
    const double g16 = gamma_of(DIRECT_FP16_CHAIN, U16), g32 = gamma_of(folds, U32);
    for (size_t i = 0; i < n; i++) {
        const term_sum *r = &ref[i];
        if (exact) {
            if (!((double)got[i] == r->sum))
                fail_msg("%s [%zu]: %.9g, exactly %.9g (exact data)", what, i, (double)got[i],
                         r->sum);
            continue;
        }
        /* + the reference's own double additions */
        const double bound = fp16_bound(DIRECT_FP16_CHAIN, folds, r->size, r->n, r->start) +
                             1e-12 * r->size + 1e-300;
        const double bound32 = bound + r->rounding * (1 + g16) * (1 + g32);
        const double to_halves = fabs(got[i] - r->sum) / bound;
        const double to_floats = fabs(got[i] - r->sum32) / bound32;
        if (!(to_halves <= 1.0) || !(to_floats <= 1.0))
            fail_msg("%s [%zu]: %.9g, exact sum %.9g over the halves (%.3g of the bound), %.9g "
                     "over the floats (%.3g of the bound); terms' sizes %.4g, %g products",
                     what, i, (double)got[i], r->sum, to_halves, r->sum32, to_floats, r->size,
                     r->n);
        worst_to_halves = fmax(worst_to_halves, to_halves);
        worst_to_floats = fmax(worst_to_floats, to_floats);
    }
}

/* Bias gradients: fp32 sums of the fp32 values, 16 running sums of n/16
 * and 16 more additions */
static void hold_fp32_sum(const char *what, float got, const term_sum *ref, int exact)
{
    const double bound = gamma_of(ref->n / 16 + 17, U32) * ref->size + 1e-300;
    if (exact ? !((double)got == ref->sum) : !(fabs(got - ref->sum) <= bound))
        fail_msg("%s: %.9g, exactly %.9g, allowed %.3g", what, (double)got, ref->sum,
                 exact ? 0.0 : bound);
}

static void print_worst(void)
{
    print_message("worst use of the bound: %.4f against the halves' sums, %.4f against the "
                  "floats'\n",
                  worst_to_halves, worst_to_floats);
    worst_to_halves = worst_to_floats = 0;
}

/* Data: 0 signed, 1 positive, 2 exact (k/8, k in [-4, 4]) */
enum { SIGNED, POSITIVE, EXACT, DATA_KINDS };

static void fill_data(float *x, size_t n, rng *r, int data)
{
    if (data != EXACT) {
        fill(x, n, r, data == POSITIVE, 1.0f);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(rng_next(r) % 9) - 4) / 8.0f;
}

/* How the products run: emulated, or with the instructions and then
 * emulated too, which must give the same bits */
typedef struct product_run {
    void (*check)(const void *cases, size_t i, int data, int vector); /* case i */
    const void *cases;
    size_t count;
    int vector;
} product_run;

static int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

/* What a case's run gives: the output, the input gradient, the parameter
 * gradients and (dense) the bias gradient, each poisoned before the run */
typedef struct results {
    float *out, *d_in, *d_params, *d_bias;
    size_t n_out, n_in, n_params, n_bias;
} results;

static float *poisoned(size_t n)
{
    float *x = n ? floats(n) : NULL;
    if (n)
        poison(x, n);
    return x;
}

static results results_of(size_t n_out, size_t n_in, size_t n_params, size_t n_bias)
{
    return (results){poisoned(n_out), poisoned(n_in), poisoned(n_params), poisoned(n_bias),
                     n_out, n_in, n_params, n_bias};
}

static void same_results(results a, results b)
{
    assert_memory_equal(a.out, b.out, sizeof(float) * a.n_out);
    assert_memory_equal(a.d_in, b.d_in, sizeof(float) * a.n_in);
    assert_memory_equal(a.d_params, b.d_params, sizeof(float) * a.n_params);
    if (a.n_bias)
        assert_memory_equal(a.d_bias, b.d_bias, sizeof(float) * a.n_bias);
}

static void free_results(results r) { free(r.out), free(r.d_in), free(r.d_params), free(r.d_bias); }

/* A case's products run over its operands at `threads`, emulated or not */
typedef results run_fn(const void *operands, int threads, int emulate);

/* The results at the case's threads; at 1 thread too for one kind of data
 * (the walks do not depend on it) and, with the instructions, emulated
 * too: the same bits each */
static results agreed_results(run_fn *run, const void *operands, int threads, int data,
                              int vector)
{
    const results got = run(operands, threads, !vector);
    if (data == SIGNED && threads > 1) {
        const results alone = run(operands, 1, !vector);
        same_results(got, alone);
        free_results(alone);
    }
    if (vector) {
        const results emulated = run(operands, threads, 1);
        same_results(got, emulated);
        free_results(emulated);
    }
    return got;
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */


static results run_conv(const void *operands, int threads, int emulate)
{
    const conv_fixture *op = operands;
    const float *in = op->in, *wb = op->wb, *d_out = op->d_out;
    const void *packed = op->packed;
    void *scratch = op->scratch;
    const size_t scratch_bytes = op->scratch_bytes;
    const conv_case cc = op->cc;
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kernel = cc.kernel;
    const int OH = H - kernel + 1, OW = W - kernel + 1, R = C * kernel * kernel;
    results r = results_of((size_t)K * OH * OW * B, (size_t)C * H * W * B, (size_t)K * (R + 1), 0);
    direct_fp16_emulate = emulate;
    spoil(scratch, scratch_bytes);
    direct_fp16_conv_forward(r.out, in, wb, packed, scratch, B, C, H, W, K, kernel, threads);
    spoil(scratch, scratch_bytes);
    direct_fp16_conv_backward_data(r.d_in, d_out, packed, scratch, B, C, H, W, K, kernel,
                                   threads);
    spoil(scratch, scratch_bytes);
    direct_fp16_conv_backward_params(r.d_params, d_out, in, scratch, B, C, H, W, K, kernel,
                                     threads);
    direct_fp16_emulate = 0;
    return r;
}


static void check_conv(conv_case cc, int data, int vector)
{
    const conv_fixture op = conv_fixture_of(
        cc, data, fill_data, spoil, direct_fp16_conv_scratch_bytes, direct_fp16_conv_weight_bytes,
        direct_fp16_pack_conv_weights);
    const results got = agreed_results(run_conv, &op, cc.threads, data, vector);
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kernel = cc.kernel;
    const int OH = op.OH, OW = op.OW, R = op.R;
    const size_t n_in = op.n_in, n_out = op.n_out, n_wb = op.n_wb;
    float *in = op.in, *wb = op.wb, *d_out = op.d_out;

    const size_t most = n_out > n_in ? n_out : n_in;
    term_sum *ref = sums(most > n_wb ? most : n_wb);
    operand *in_ops = operands_of(in, n_in), *wb_ops = operands_of(wb, n_wb);
    operand *d_out_ops = operands_of(d_out, n_out);
    char what[160];
    snprintf(what, sizeof what, "conv forward B=%d C=%d %dx%d K=%d k=%d data %d", B, C, H, W, K,
             kernel, data);
    for (int k = 0; k < K; k++)
        for (int y = 0; y < OH; y++)
            for (int x = 0; x < OW; x++)
                for (int b = 0; b < B; b++) {
                    term_sum *a = &ref[(((size_t)k * OH + y) * OW + x) * B + b];
                    start_at(a, wb[(size_t)k * (R + 1) + R]);
                    for (int c = 0; c < C; c++)
                        for (int ki = 0; ki < kernel; ki++)
                            for (int kj = 0; kj < kernel; kj++)
                                add_term(a,
                                         &wb_ops[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj],
                                         &in_ops[(((size_t)c * H + y + ki) * W + x + kj) * B + b]);
                }
    hold(what, got.out, ref, n_out, ceil_div(R, DIRECT_FP16_CHAIN), data == EXACT);

    snprintf(what, sizeof what, "conv input gradient B=%d C=%d %dx%d K=%d k=%d data %d", B, C,
             H, W, K, kernel, data);
    for (int c = 0; c < C; c++)
        for (int iy = 0; iy < H; iy++)
            for (int ix = 0; ix < W; ix++)
                for (int b = 0; b < B; b++) {
                    term_sum *a = &ref[(((size_t)c * H + iy) * W + ix) * B + b];
                    start_at(a, 0);
                    for (int k = 0; k < K; k++)
                        for (int ki = 0; ki < kernel; ki++)
                            for (int kj = 0; kj < kernel; kj++) {
                                const int oy = iy - ki, ox = ix - kj;
                                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW)
                                    continue;
                                add_term(a,
                                         &wb_ops[(size_t)k * (R + 1) + (c * kernel + ki) * kernel + kj],
                                         &d_out_ops[(((size_t)k * OH + oy) * OW + ox) * B + b]);
                            }
                }
    /* a kernel column's row of the tile: its steps' chains, each added */
    hold(what, got.d_in, ref, n_in, (double)kernel * ceil_div((long)kernel * K, DIRECT_FP16_CHAIN),
         data == EXACT);

    snprintf(what, sizeof what, "conv weight and bias gradients B=%d C=%d %dx%d K=%d k=%d data %d",
             B, C, H, W, K, kernel, data);
    for (int k = 0; k < K; k++)
        for (int t = 0; t <= R; t++) {
            term_sum *a = &ref[(size_t)k * (R + 1) + t];
            start_at(a, 0);
            const int c = t / (kernel * kernel), ki = t / kernel % kernel, kj = t % kernel;
            for (int y = 0; y < OH; y++)
                for (int x = 0; x < OW; x++)
                    for (int b = 0; b < B; b++) {
                        const operand *g = &d_out_ops[(((size_t)k * OH + y) * OW + x) * B + b];
                        if (t == R)
                            add_value(a, g->f);
                        else
                            add_term(a, g,
                                     &in_ops[(((size_t)c * H + y + ki) * W + x + kj) * B + b]);
                    }
        }
    /* a lane's chains: folded (each after one addition of two lanes), then
     * 4 more across the lanes */
    const double lane_folds = ceil_div((long)OH * ceil_div((long)OW * B, FP16_LANES), DIRECT_FP16_CHAIN);
    for (int k = 0; k < K; k++) {
        const size_t at = (size_t)k * (R + 1);
        hold(what, got.d_params + at, ref + at, (size_t)R, lane_folds + 5, data == EXACT);
        hold_fp32_sum(what, got.d_params[at + R], &ref[at + R], data == EXACT);
    }
    free_results(got);
    free(in), free(wb), free(d_out), free(ref), free(op.scratch), free(op.packed);
    free(in_ops), free(wb_ops), free(d_out_ops);
}

/* LeNet's convolutions (workloads/workload.c: conv1 1 -> 20, 28x28; conv2
 * 20 -> 50, 12x12; both 5x5, stride 1, no padding) at batch 128 with the
 * instructions, at 4 emulated (a few ns an emulated FMA); then odd batches,
 * partial tiles and other shapes */
static const conv_case lenet_convs[] = {{128, 1, 28, 28, 20, 5, 2}, {128, 20, 12, 12, 50, 5, 2}};
static const conv_case lenet_convs_small[] = {{4, 1, 28, 28, 20, 5, 2}, {4, 20, 12, 12, 50, 5, 2}};
static const conv_case odd_convs[] = {
    {7, 1, 28, 28, 20, 5, 2},   /* odd batch: runs at odd offsets, partial vectors */
    {3, 20, 12, 12, 50, 5, 2},  /* conv2, odd batch */
    {1, 3, 9, 8, 13, 3, 2},     /* one image; 13 rows of tiles: 3 blocks */
    {5, 4, 10, 11, 7, 7, 1},    /* kernel 7: more columns than a tile's rows */
    {16, 6, 12, 12, 16, 5, 2},  /* 6 -> 16 (LeNet-5 as first published) */
    {3, 2, 6, 6, 3, 1, 2},      /* 1x1 */
    {2, 40, 6, 6, 3, 3, 2},     /* 360 taps: chains of 32 and a partial one */
};

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

/* weight[n_out][n_in] packed as both dense products read it */
static void *packed_dense(const float *w, int n_in, int n_out)
{
    void *packed = scratch_of(direct_fp16_dense_weight_bytes(n_in, n_out));
    direct_fp16_pack_dense_weights(packed, w, n_in, n_out, 1);
    return packed;
}

static results run_dense(const void *operands, int threads, int emulate)
{
    const dense_fixture *op = operands;
    const float *in = op->in, *w = op->w, *bias = op->bias, *d_out = op->d_out;
    void *scratch = op->scratch;
    const size_t scratch_bytes = op->scratch_bytes;
    const int B = op->dc.B, I = op->dc.n_in, O = op->dc.n_out;
    results r = results_of((size_t)O * B, (size_t)I * B, (size_t)O * I, (size_t)O);
    direct_fp16_emulate = emulate;
    void *packed = packed_dense(w, I, O);
    spoil(scratch, scratch_bytes);
    direct_fp16_dense_forward(r.out, in, packed, bias, scratch, B, I, O, threads);
    spoil(scratch, scratch_bytes);
    direct_fp16_dense_backward(r.d_params, r.d_bias, r.d_in, d_out, in, packed, scratch, B, I,
                               O, threads);
    /* without d_in, the same parameter gradients */
    float *dw_alone = floats((size_t)O * I), *db_alone = floats(O);
    spoil(scratch, scratch_bytes);
    direct_fp16_dense_backward(dw_alone, db_alone, NULL, d_out, in, packed, scratch, B, I, O,
                               threads);
    direct_fp16_emulate = 0;
    assert_memory_equal(dw_alone, r.d_params, sizeof(float) * O * I);
    assert_memory_equal(db_alone, r.d_bias, sizeof(float) * O);
    free(dw_alone), free(db_alone), free(packed);
    return r;
}

static void check_dense(dense_case dc, int data, int vector)
{
    const dense_fixture op = dense_fixture_of(dc, data, fill_data, direct_fp16_dense_scratch_bytes);
    const results got = agreed_results(run_dense, &op, dc.threads, data, vector);
    const int B = dc.B, I = dc.n_in, O = dc.n_out;
    const size_t n_in = op.n_in, n_out = op.n_out, n_w = op.n_w;
    float *in = op.in, *w = op.w, *bias = op.bias, *d_out = op.d_out;

    const size_t most = n_w > n_in ? (n_w > n_out ? n_w : n_out) : (n_in > n_out ? n_in : n_out);
    term_sum *ref = sums(most);
    operand *in_ops = operands_of(in, n_in), *w_ops = operands_of(w, n_w);
    operand *d_out_ops = operands_of(d_out, n_out);
    char what[128];
    snprintf(what, sizeof what, "dense forward B=%d %d -> %d data %d", B, I, O, data);
    ref_product(ref, O, B, I, bias, w_ops, I, 1, in_ops, B, 1);
    hold(what, got.out, ref, n_out, ceil_div(I, DIRECT_FP16_CHAIN), data == EXACT);

    snprintf(what, sizeof what, "dense input gradient B=%d %d -> %d data %d", B, I, O, data);
    ref_product(ref, I, B, O, NULL, w_ops, 1, I, d_out_ops, B, 1);
    hold(what, got.d_in, ref, n_in, ceil_div(O, DIRECT_FP16_CHAIN), data == EXACT);

    snprintf(what, sizeof what, "dense weight gradient B=%d %d -> %d data %d", B, I, O, data);
    ref_product(ref, O, I, B, NULL, d_out_ops, B, 1, in_ops, 1, B);
    hold(what, got.d_params, ref, n_w, ceil_div(B, DIRECT_FP16_CHAIN), data == EXACT);

    snprintf(what, sizeof what, "dense bias gradient B=%d %d -> %d data %d", B, I, O, data);
    for (int o = 0; o < O; o++) {
        start_at(&ref[o], 0);
        for (int b = 0; b < B; b++)
            add_value(&ref[o], d_out[(size_t)o * B + b]);
        hold_fp32_sum(what, got.d_bias[o], &ref[o], data == EXACT);
    }
    free_results(got);
    free(in), free(w), free(bias), free(d_out), free(ref), free(op.scratch);
    free(in_ops), free(w_ops), free(d_out_ops);
}

/* LeNet's fc1 (800 -> 500) and fc2 (500 -> 10) at batch 128, the MLP's
 * fc1 (784 -> 100); emulated, at batches 16 and 32; then odd sizes */
static const dense_case lenet_denses[] = {{128, 800, 500, 2}, {128, 500, 10, 2}, {128, 784, 100, 2}};
static const dense_case lenet_denses_small[] = {{16, 800, 500, 2}, {128, 500, 10, 2}, {32, 784, 100, 2}};
static const dense_case odd_denses[] = {
    {33, 801, 70, 2},  /* odd batch and inputs: a partial vector, a partial chain */
    {5, 7, 3, 1},      /* less than a vector anywhere */
    {1, 400, 13, 2},   /* one image */
    {17, 300, 61, 2},  /* blocks of rows and a partial one */
    {130, 64, 70, 2},  /* columns past one strip */
};

/* ---------------------------------------------------------------------- */
/* The runs                                                                 */

static void conv_at(const void *cases, size_t i, int data, int vector)
{
    check_conv(((const conv_case *)cases)[i], data, vector);
}

static void dense_at(const void *cases, size_t i, int data, int vector)
{
    check_dense(((const dense_case *)cases)[i], data, vector);
}

/* Each case of a run with each kind of data */
static void products_match_reference(void **state)
{
    const product_run *run = *state;
    if (run->vector && !instructions_or_skip())
        skip();
    for (size_t i = 0; i < run->count; i++)
        for (int data = 0; data < DATA_KINDS; data++)
            run->check(run->cases, i, data, run->vector);
    print_worst();
}

/* Gradients as small as LeNet's at loss scale 1 (here below 2^-24, the
 * smallest fp16) vanish in fp16: the weight gradient loses about all of
 * its size. Scaled by 2^16 as the engine's loss scale would (and the
 * results divided by it after), they keep the accuracy of normal fp16:
 * the bound of fp16.h without its underflow term, plus the operands'
 * rounding. */
static void loss_scaling_keeps_small_gradients(void **state)
{
    (void)state;
    enum { B = 64, I = 200, O = 30 };
    const float scale = 65536.0f;
    float *in = floats((size_t)I * B), *w = floats((size_t)O * I), *d_out = floats((size_t)O * B);
    float *scaled = floats((size_t)O * B), *dw = floats((size_t)O * I), *db = floats(O);
    rng r = {5};
    fill(in, (size_t)I * B, &r, 0, 1.0f);
    fill(w, (size_t)O * I, &r, 0, 1.0f);
    fill(d_out, (size_t)O * B, &r, 0, 0x1p-24f);
    for (size_t e = 0; e < (size_t)O * B; e++)
        scaled[e] = d_out[e] * scale;
    void *scratch = scratch_of(direct_fp16_dense_scratch_bytes(B, I, O));
    const double g16 = gamma_of(DIRECT_FP16_CHAIN, U16), g32 = gamma_of(ceil_div(B, DIRECT_FP16_CHAIN), U32);
    const double relative = (2 * U16 + U16 * U16) * (1 + g16) * (1 + g32) + g16 + g32 * (1 + g16);
    double worst[2] = {0, 0};
    void *packed = packed_dense(w, I, O);
    direct_fp16_emulate = 1;
    for (int run = 0; run < 2; run++) {
        direct_fp16_dense_backward(dw, db, NULL, run ? scaled : d_out, in, packed, scratch, B, I,
                                   O, 1);
        for (int o = 0; o < O; o++)
            for (int i = 0; i < I; i++) {
                double sum = 0, size = 0;
                for (int b = 0; b < B; b++) {
                    const double t = (double)d_out[o * B + b] * in[i * B + b];
                    sum += t, size += fabs(t);
                }
                const double got = run ? dw[o * I + i] / (double)scale : dw[o * I + i];
                worst[run] = fmax(worst[run], fabs(got - sum) / size);
            }
    }
    direct_fp16_emulate = 0;
    print_message("weight gradient off by up to %.3g of its terms' sizes unscaled, %.3g scaled "
                  "by 2^16 (normal fp16 allows %.3g)\n",
                  worst[0], worst[1], relative);
    assert_true(worst[0] > relative);
    assert_true(worst[1] <= relative);
    free(in), free(w), free(d_out), free(scaled), free(dw), free(db), free(scratch),
        free(packed);
}

/* Where the chains end, seen in the results: a sum whose first product
 * is 32 * 32 = 1024 and every other 0.5 * 0.5. In fp16 1024 + 0.25 rounds
 * back to 1024 (its spacing there is 1), so the first chain keeps only its
 * 1024, and every later chain, starting from 0, sums its quarters exactly:
 * n products give 1024 + (n - DIRECT_FP16_CHAIN) / 4, and any other chain
 * length another number. The weight gradient's dot tile chains each lane
 * over vector steps: 2048 images in 64 steps of 32, the first step's lanes
 * all 1024. */
static float probe_value(int first) { return first ? 32.0f : 0.5f; }

static void chains_are_as_designed(int vector)
{
    enum { N = 100, IMAGES = 2048 };
    const double want = 1024 + (N - DIRECT_FP16_CHAIN) / 4.0;
    const double want_lanes = FP16_LANES * 1024.0 + (IMAGES - FP16_LANES * DIRECT_FP16_CHAIN) / 4.0;
    float *in = floats((size_t)N * IMAGES), *w = floats(N), *d_out = floats(IMAGES);
    float out[FP16_LANES], bias = 0, dw[FP16_LANES * N], db, dwb[2];
    void *scratch = scratch_of(direct_fp16_dense_scratch_bytes(N, N, 1) +
                               direct_fp16_conv_scratch_bytes(IMAGES, 1, 1, 1, 1, 1));
    direct_fp16_emulate = !vector;
    /* forward, a step an input: in[N][32], weight[1][N] */
    for (int i = 0; i < N; i++) {
        w[i] = probe_value(i == 0);
        for (int b = 0; b < FP16_LANES; b++)
            in[i * FP16_LANES + b] = probe_value(i == 0);
    }
    void *packed = packed_dense(w, N, 1);
    direct_fp16_dense_forward(out, in, packed, &bias, scratch, FP16_LANES, N, 1, 1);
    free(packed);
    for (int b = 0; b < FP16_LANES; b++)
        assert_float_equal(out[b], want, 0);
    /* weight gradient, a step an image: in[32][N], d_out[1][N] */
    for (int b = 0; b < N; b++) {
        d_out[b] = probe_value(b == 0);
        for (int i = 0; i < FP16_LANES; i++)
            in[i * N + b] = probe_value(b == 0);
    }
    packed = packed_dense(w, FP16_LANES, 1); /* not read: no input gradient */
    direct_fp16_dense_backward(dw, &db, NULL, d_out, in, packed, scratch, N, FP16_LANES, 1, 1);
    free(packed);
    for (int i = 0; i < FP16_LANES; i++)
        assert_float_equal(dw[i], want, 0);
    /* a 1x1 convolution's weight gradient over 2048 images */
    for (int b = 0; b < IMAGES; b++)
        in[b] = d_out[b] = probe_value(b < FP16_LANES);
    direct_fp16_conv_backward_params(dwb, d_out, in, scratch, IMAGES, 1, 1, 1, 1, 1, 1);
    assert_float_equal(dwb[0], want_lanes, 0);
    direct_fp16_emulate = 0;
    free(in), free(w), free(d_out), free(scratch);
}

static void emulated_chains_are_as_designed(void **state)
{
    (void)state;
    chains_are_as_designed(0);
}

static void avx512_fp16_chains_are_as_designed(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    chains_are_as_designed(1);
}

#define RUN(check, array, vector) {check, array, sizeof array / sizeof array[0], vector}
static const product_run emulated_lenet_convs = RUN(conv_at, lenet_convs_small, 0),
                         emulated_odd_convs = RUN(conv_at, odd_convs, 0),
                         emulated_lenet_denses = RUN(dense_at, lenet_denses_small, 0),
                         emulated_odd_denses = RUN(dense_at, odd_denses, 0),
                         vector_lenet_convs = RUN(conv_at, lenet_convs, 1),
                         vector_odd_convs = RUN(conv_at, odd_convs, 1),
                         vector_lenet_denses = RUN(dense_at, lenet_denses, 1),
                         vector_odd_denses = RUN(dense_at, odd_denses, 1);

TEST_MAIN(CASE_TEST("emulated_odd_denses", products_match_reference, &emulated_odd_denses),
          CASE_TEST("emulated_lenet_denses", products_match_reference, &emulated_lenet_denses),
          CASE_TEST("emulated_odd_convs", products_match_reference, &emulated_odd_convs),
          CASE_TEST("emulated_lenet_convs", products_match_reference, &emulated_lenet_convs),
          cmocka_unit_test(loss_scaling_keeps_small_gradients),
          cmocka_unit_test(emulated_chains_are_as_designed),
          cmocka_unit_test(avx512_fp16_chains_are_as_designed),
          CASE_TEST("avx512_fp16_odd_denses", products_match_reference, &vector_odd_denses),
          CASE_TEST("avx512_fp16_lenet_denses", products_match_reference, &vector_lenet_denses),
          CASE_TEST("avx512_fp16_odd_convs", products_match_reference, &vector_odd_convs),
          CASE_TEST("avx512_fp16_lenet_convs", products_match_reference, &vector_lenet_convs))
