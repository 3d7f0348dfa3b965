/* The direct backend's bf16 on fp32 FMAs (backends/direct/bf16/bf16_fma.h):
 * its rounding pass, its products against a reference in double and
 * against the vdpbf16ps products, its bias gradients, and the choice
 * between the two sets.
 *
 * Why the bounds are what they are. Both sets multiply the same operands,
 * each rounded to bf16 once, and a product of two bf16 values is exact in
 * fp32 (8 + 8 significant bits; the data here keeps products far above
 * fp32's smallest normal). So a result differs from the same sum in
 * double only by its fp32 additions: in any order, any grouping, and with
 * any padding by exact zeros (which adds exactly), each term passes through
 * at most n - 1 roundings for n terms, so the result is within
 * (n - 1) 2^-24 / (1 - (n - 1) 2^-24) of the sum of the terms' sizes; with
 * n terms counted (the bias one of them) and a factor 1.001 that covers
 * the denominator for n up to 16,000. Two results that each keep that
 * bound are within twice it of each other (vdpbf16ps adds its two products
 * into the lane one after the other, two roundings: the same count). An
 * operand left unrounded moves a term by up to 2^-9 of its size, and a
 * sum of n such terms by about 2^-9 / sqrt(n) of the sizes' sum, 16 times
 * the bound at n = 800 (fc1), more for shorter sums: such a fault fails.
 * The FMA set's bias gradients are no such sum: it adds the unrounded
 * output gradient as bf16.c mostly does (half_common.h's sum_floats), so
 * they must be the very floats of that sum, and not those of the rounded
 * gradient's; against the vdpbf16ps set (conv1's bias gradients summed in
 * its tiles, in another order) they are held as the products are.
 *
 * The FMA set runs once over every build of the fp32 tiles this CPU runs
 * (LENET_BENCH_DIRECT_ISA forced in turn), at 2 threads and at 1 (the
 * same floats). Data uniform in [-1, 1) and in [0, 1) (every term
 * positive: a lost term moves a sum by its whole size). */
#include "tests/direct_bf16_testing.h"

#include "backends/chwn/chwn_products.h"
#include "backends/direct/candidates.h"
#include "backends/direct/bf16/bf16.h"
#include "backends/direct/bf16/bf16_fma.h"
#include "backends/direct/fp32/direct.h"
#include "backends/direct/direct_backend.h"
#include "backends/direct/half/half_common.h"
#include "backends/direct/fp32/isa.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Forces build `isa` of the fp32 tiles ("" for the best), as the engine's
 * create does; 0 when this CPU does not run it. */
static int use_isa(const char *isa)
{
    char why[256];
    setenv("LENET_BENCH_DIRECT_ISA", isa, 1);
    return direct_choose(why, sizeof why) != NULL;
}

/* ---------------------------------------------------------------------- */
/* The rounding pass                                                        */

/* The awkward values: ties either way, one ulp of bf16 around them,
 * subnormals, the smallest normal, NaNs quiet and signalling, infinities,
 * the largest float (to infinity) and the largest that stays finite, and
 * then random bit patterns, which cover every exponent. */
static const uint32_t awkward[] = {
    0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0xbf808000, 0xbf818000, /* ties */
    0x00000001, 0x807fffff, 0x007fffff, 0x80000001, 0x00800000, 0x80800000, /* subnormal */
    0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345, 0x7fffffff, 0xffffffff, /* NaN */
    0x7f800000, 0xff800000, 0x7f7fffff, 0xff7fffff, 0x7f7f7fff, 0x7f7f8000, /* inf, large */
    0x00000000, 0x80000000, 0x3f800000, 0x4b800000, 0x5f7fffff, 0x00ffffff,
};

static void rounding_pass_is_direct_bf16_round(void **state)
{
    (void)state;
    enum { N = 1 << 16 }; /* pieces over 2 threads, and a tail of 16 - 7 */
    float *src = floats(N + 9), *dst = floats(N + 9);
    rng r = {41};
    for (size_t i = 0; i < N + 9; i++)
        src[i] = from_bits(i < sizeof awkward / sizeof awkward[0] ? awkward[i]
                                                                 : (uint32_t)rng_next(&r));
    int builds = 0;
    for (int b = 0; b < direct_kernels_count(); b++) {
        const char *isa = direct_kernels_at(b)->isa;
        if (!use_isa(isa))
            continue;
        builds++;
        for (int threads = 1; threads <= 2; threads++) {
            poison(dst, N + 9);
            direct_bf16_fma_round(dst, src, N + 9, threads);
            for (size_t i = 0; i < N + 9; i++) {
                const uint32_t want = (uint32_t)direct_bf16_round(src[i]) << 16;
                if (bits_of(dst[i]) != want)
                    fail_msg("%s, %d threads: %08x rounded to %08x, direct_bf16_round %08x", isa,
                             threads, bits_of(src[i]), bits_of(dst[i]), want);
            }
        }
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
    assert_true(builds > 0);
    /* a few by hand, so that the definition itself is held too */
    const uint32_t in[] = {0x3f808000, 0x3f818000, 0x807fffff, 0x7f7fffff, 0xff812345},
                   out[] = {0x3f800000, 0x3f820000, 0x80000000, 0x7f800000, 0xffc10000};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        assert_int_equal((uint32_t)direct_bf16_round(from_bits(in[i])) << 16, out[i]);
    free(src), free(dst);
}

/* ---------------------------------------------------------------------- */
/* Results against a reference                                              */

/* A reference result: each output's sum in double and its terms' sizes */
typedef struct sums {
    double *val, *size;
    size_t n;
    double terms; /* the most terms in one output's sum */
} sums;

static sums sums_of(size_t n, double terms)
{
    return (sums){doubles(n), doubles(n), n, terms};
}

static void add_term(const sums *s, size_t at, double t) { s->val[at] += t, s->size[at] += fabs(t); }

static void free_sums(sums s) { free(s.val), free(s.size); }

/* got[i] (stride apart, `skip` of every `stride` left out: the biases)
 * within `times` times the fp32 bound of ref's sum; other, when not NULL,
 * is held in place of ref */
static void hold(const char *what, const float *got, const sums *ref, const float *other,
                 double times, size_t stride, size_t skip)
{
    const double per_size = times * ref->terms * U32 * 1.001;
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < ref->n; i++) {
        if (stride && i % stride == skip)
            continue;
        const double want = other ? other[i] : ref->val[i];
        const double ratio = fabs(got[i] - want) / (per_size * ref->size[i] + 1e-30);
        if (!(ratio <= worst))
            worst = ratio, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s [%zu]: %.9g against %.9g (%s), terms' sizes %.4g: off by %.3g of them, "
                 "%.3g allowed (%.0f terms)",
                 what, at, got[at], other ? other[at] : ref->val[at],
                 other ? "the vdpbf16ps set" : "double", ref->size[at],
                 fabs(got[at] - (other ? other[at] : ref->val[at])) / ref->size[at], per_size,
                 ref->terms);
}

/* The bias gradients: bit for bit the fp32 sum of the unrounded output
 * gradient, which differs from the rounded one's (so the check can fail) */
static void hold_bias(const char *what, const float *got, size_t stride, const float *d_out,
                      size_t plane, int K)
{
    float *rounded = floats(plane);
    int differ = 0;
    for (int k = 0; k < K; k++) {
        const float want = sum_floats(d_out + (size_t)k * plane, plane);
        if (bits_of(got[(size_t)k * stride]) != bits_of(want))
            fail_msg("%s: bias gradient %d is %.9g, the sum of the unrounded gradient %.9g", what,
                     k, got[(size_t)k * stride], want);
        for (size_t i = 0; i < plane; i++)
            rounded[i] = direct_bf16_value(direct_bf16_round(d_out[(size_t)k * plane + i]));
        differ += bits_of(sum_floats(rounded, plane)) != bits_of(want);
    }
    assert_true(differ > 0);
    free(rounded);
}

static double *rounded_copy(const float *x, size_t n)
{
    double *r = doubles(n);
    for (size_t i = 0; i < n; i++)
        r[i] = direct_bf16_value(direct_bf16_round(x[i]));
    return r;
}

/* ---------------------------------------------------------------------- */
/* Convolutions                                                             */

typedef struct conv_case {
    int B, C, H, W, K, kernel;
} conv_case;

typedef struct conv_results {
    float *out, *d_in, *dwb;
} conv_results;

/* The three passes of `set` as the engine calls them: the weights packed
 * after weight_bias, each pass with scratch spoilt */
static conv_results run_conv(const chwn_products *set, conv_case cc, const float *in,
                             const float *wb, const float *d_out, int threads)
{
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, k = cc.kernel;
    const int OH = H - k + 1, OW = W - k + 1, R = C * k * k;
    const size_t n_in = (size_t)C * H * W * B, n_out = (size_t)K * OH * OW * B;
    const size_t n_wb = (size_t)K * (R + 1);
    const size_t packed = set->conv_packed_floats ? set->conv_packed_floats(C, K, k) : 0;
    float *weights = scratch_of(sizeof(float) * (n_wb + packed));
    memcpy(weights, wb, sizeof(float) * n_wb);
    poison(weights + n_wb, packed);
    if (set->conv_pack_weights)
        set->conv_pack_weights(weights, C, K, k);
    const size_t n_scratch = set->conv_scratch_floats(set, B, C, H, W, K, k, 1);
    float *scratch = scratch_of(sizeof(float) * n_scratch);
    conv_results got = {floats(n_out), floats(n_in), floats(n_wb)};
    poison(got.out, n_out), poison(got.d_in, n_in), poison(got.dwb, n_wb);
    poison(scratch, n_scratch);
    set->forward_conv(set, got.out, in, weights, scratch, B, C, H, W, K, k, 1, threads);
    poison(scratch, n_scratch);
    set->backward_conv_data(set, got.d_in, d_out, weights, scratch, B, C, H, W, K, k, 1, threads);
    poison(scratch, n_scratch);
    set->backward_conv_params(set, got.dwb, d_out, in, scratch, B, C, H, W, K, k, 1, threads);
    free(weights), free(scratch);
    return got;
}

static void free_conv(conv_results r) { free(r.out), free(r.d_in), free(r.dwb); }

/* The three products in double from the rounded operands, in one walk
 * over (k, c, ki, kj, y, x, b) */
static void ref_conv(sums out, sums d_in, sums dwb, const double *in, const double *wb,
                     const double *d_out, const float *wb_fp32, const float *d_out_fp32,
                     conv_case cc)
{
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, kk = cc.kernel;
    const int OH = H - kk + 1, OW = W - kk + 1, R = C * kk * kk;
    for (int k = 0; k < K; k++) {
        const double bias = wb_fp32[(size_t)k * (R + 1) + R]; /* fp32, unrounded */
        for (size_t o = 0; o < (size_t)OH * OW * B; o++) { /* the bias and its gradient */
            add_term(&out, (size_t)k * OH * OW * B + o, bias);
            add_term(&dwb, (size_t)k * (R + 1) + R, d_out_fp32[(size_t)k * OH * OW * B + o]);
        }
        for (int r = 0; r < R; r++) {
            const int c = r / (kk * kk), ki = r / kk % kk, kj = r % kk;
            const double w = wb[(size_t)k * (R + 1) + r];
            for (int y = 0; y < OH; y++)
                for (int x = 0; x < OW; x++)
                    for (int b = 0; b < B; b++) {
                        const size_t i = (((size_t)c * H + y + ki) * W + x + kj) * B + b;
                        const size_t o = (((size_t)k * OH + y) * OW + x) * B + b;
                        add_term(&out, o, w * in[i]);
                        add_term(&d_in, i, w * d_out[o]);
                        add_term(&dwb, (size_t)k * (R + 1) + r, d_out[o] * in[i]);
                    }
        }
    }
}

static void check_conv(conv_case cc, int positive, int dot)
{
    const int B = cc.B, C = cc.C, H = cc.H, W = cc.W, K = cc.K, k = cc.kernel;
    const int OH = H - k + 1, OW = W - k + 1, R = C * k * k;
    const size_t n_in = (size_t)C * H * W * B, n_out = (size_t)K * OH * OW * B;
    const size_t n_wb = (size_t)K * (R + 1), plane = (size_t)OH * OW * B;
    float *in = floats(n_in), *wb = floats(n_wb), *d_out = floats(n_out);
    rng r = {(uint64_t)(B * 7919 + C * 131 + K * 17 + k + positive)};
    fill(in, n_in, &r, positive), fill(wb, n_wb, &r, positive), fill(d_out, n_out, &r, positive);
    double *in_r = rounded_copy(in, n_in), *wb_r = rounded_copy(wb, n_wb);
    double *d_out_r = rounded_copy(d_out, n_out);
    sums out = sums_of(n_out, R + 1), d_in = sums_of(n_in, (double)K * k * k),
         dwb = sums_of(n_wb, (double)plane);
    ref_conv(out, d_in, dwb, in_r, wb_r, d_out_r, wb, d_out, cc);
    char what[192];
    for (int b = 0; !dot && b < direct_kernels_count(); b++) {
        const char *isa = direct_kernels_at(b)->isa;
        if (!use_isa(isa))
            continue;
        const conv_results got = run_conv(&direct_bf16_fma_products, cc, in, wb, d_out, 2),
                           one = run_conv(&direct_bf16_fma_products, cc, in, wb, d_out, 1);
        assert_memory_equal(got.out, one.out, sizeof(float) * n_out);
        assert_memory_equal(got.d_in, one.d_in, sizeof(float) * n_in);
        assert_memory_equal(got.dwb, one.dwb, sizeof(float) * n_wb);
        snprintf(what, sizeof what, "%s conv B=%d C=%d %dx%d K=%d k=%d%s", isa, B, C, H, W, K, k,
                 positive ? " positive" : "");
        hold(what, got.out, &out, NULL, 1, 0, 0);
        hold(what, got.d_in, &d_in, NULL, 1, 0, 0);
        hold(what, got.dwb, &dwb, NULL, 1, (size_t)R + 1, (size_t)R);
        hold_bias(what, got.dwb + R, (size_t)R + 1, d_out, plane, K);
        free_conv(got), free_conv(one);
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
#ifdef HAVE_DIRECT_BF16
    if (dot) {
        use_isa("");
        const conv_results fma = run_conv(&direct_bf16_fma_products, cc, in, wb, d_out, 2),
                           vdp = run_conv(&direct_bf16_products, cc, in, wb, d_out, 2);
        snprintf(what, sizeof what, "conv B=%d C=%d %dx%d K=%d k=%d%s, FMAs against vdpbf16ps",
                 B, C, H, W, K, k, positive ? " positive" : "");
        hold(what, fma.out, &out, vdp.out, 2, 0, 0);
        hold(what, fma.d_in, &d_in, vdp.d_in, 2, 0, 0);
        hold(what, fma.dwb, &dwb, vdp.dwb, 2, 0, 0); /* bias gradients too, in their order */
        free_conv(fma), free_conv(vdp);
    }
#endif
    (void)dot;
    free_sums(out), free_sums(d_in), free_sums(dwb);
    free(in), free(wb), free(d_out), free(in_r), free(wb_r), free(d_out_r);
}

/* ---------------------------------------------------------------------- */
/* Dense layers                                                             */

typedef struct dense_case {
    int B, n_in, n_out;
} dense_case;

typedef struct dense_results {
    float *out, *d_in, *d_w, *d_bias;
} dense_results;

static dense_results run_dense(const chwn_products *set, dense_case dc, const float *in,
                               const float *w, const float *bias, const float *d_out,
                               int threads)
{
    const int B = dc.B, n_in = dc.n_in, n_out = dc.n_out;
    const size_t n_scratch = set->dense_scratch_floats(B, n_in, n_out);
    float *scratch = scratch_of(sizeof(float) * n_scratch);
    const chwn_team team = {.threads = threads};
    dense_results got = {floats((size_t)n_out * B), floats((size_t)n_in * B),
                         floats((size_t)n_out * n_in), floats(n_out)};
    poison(got.out, (size_t)n_out * B), poison(got.d_in, (size_t)n_in * B);
    poison(got.d_w, (size_t)n_out * n_in), poison(got.d_bias, n_out);
    poison(scratch, n_scratch);
    /* the weights as the engine hands them: the set's packed copy, if any */
    const size_t n_packed = set->dense_pack_weights ? set->dense_packed_floats(n_in, n_out) : 0;
    float *packed = n_packed ? scratch_of(sizeof(float) * n_packed) : NULL;
    if (packed) {
        poison(packed, n_packed);
        set->dense_pack_weights(packed, w, n_in, n_out, &team);
    }
    const float *weight = packed ? packed : w;
    set->forward_dense(set, got.out, in, weight, bias, scratch, B, n_in, n_out, &team);
    poison(scratch, n_scratch);
    set->backward_dense(set, got.d_w, got.d_bias, got.d_in, d_out, in, weight, scratch, B, n_in,
                        n_out, &team);
    free(packed);
    free(scratch);
    return got;
}

static void free_dense(dense_results r) { free(r.out), free(r.d_in), free(r.d_w), free(r.d_bias); }

/* The three products in double from the rounded operands, in one walk
 * over (o, i, b) */
static void ref_dense(sums out, sums d_in, sums d_w, sums d_b, const double *in,
                      const double *w, const float *bias, const double *d_out,
                      const float *d_out_fp32, dense_case dc)
{
    const int B = dc.B, n_in = dc.n_in, n_out = dc.n_out;
    for (int o = 0; o < n_out; o++) {
        for (int b = 0; b < B; b++) { /* the bias and its gradient */
            add_term(&out, (size_t)o * B + b, bias[o]);
            add_term(&d_b, (size_t)o, d_out_fp32[(size_t)o * B + b]);
        }
        for (int i = 0; i < n_in; i++) {
            const double wi = w[(size_t)o * n_in + i];
            for (int b = 0; b < B; b++) {
                add_term(&out, (size_t)o * B + b, wi * in[(size_t)i * B + b]);
                add_term(&d_in, (size_t)i * B + b, wi * d_out[(size_t)o * B + b]);
                add_term(&d_w, (size_t)o * n_in + i, d_out[(size_t)o * B + b] * in[(size_t)i * B + b]);
            }
        }
    }
}

static void check_dense(dense_case dc, int positive, int dot)
{
    const int B = dc.B, n_in = dc.n_in, n_out = dc.n_out;
    const size_t nx = (size_t)n_in * B, ny = (size_t)n_out * B, nw = (size_t)n_out * n_in;
    float *in = floats(nx), *w = floats(nw), *bias = floats(n_out), *d_out = floats(ny);
    rng r = {(uint64_t)(B * 31 + n_in * 7 + n_out + positive)};
    fill(in, nx, &r, positive), fill(w, nw, &r, positive), fill(bias, n_out, &r, positive);
    fill(d_out, ny, &r, positive);
    double *in_r = rounded_copy(in, nx), *w_r = rounded_copy(w, nw), *d_out_r = rounded_copy(d_out, ny);
    sums out = sums_of(ny, n_in + 1), d_in = sums_of(nx, n_out), d_w = sums_of(nw, B),
         d_b = sums_of(n_out, B);
    ref_dense(out, d_in, d_w, d_b, in_r, w_r, bias, d_out_r, d_out, dc);
    char what[192];
    for (int b = 0; !dot && b < direct_kernels_count(); b++) {
        const char *isa = direct_kernels_at(b)->isa;
        if (!use_isa(isa))
            continue;
        const dense_results got = run_dense(&direct_bf16_fma_products, dc, in, w, bias, d_out, 2),
                            one = run_dense(&direct_bf16_fma_products, dc, in, w, bias, d_out, 1);
        assert_memory_equal(got.out, one.out, sizeof(float) * ny);
        assert_memory_equal(got.d_in, one.d_in, sizeof(float) * nx);
        assert_memory_equal(got.d_w, one.d_w, sizeof(float) * nw);
        assert_memory_equal(got.d_bias, one.d_bias, sizeof(float) * n_out);
        snprintf(what, sizeof what, "%s dense B=%d %d -> %d%s", isa, B, n_in, n_out,
                 positive ? " positive" : "");
        hold(what, got.out, &out, NULL, 1, 0, 0);
        hold(what, got.d_in, &d_in, NULL, 1, 0, 0);
        hold(what, got.d_w, &d_w, NULL, 1, 0, 0);
        hold_bias(what, got.d_bias, 1, d_out, (size_t)B, n_out);
        free_dense(got), free_dense(one);
    }
    unsetenv("LENET_BENCH_DIRECT_ISA");
#ifdef HAVE_DIRECT_BF16
    if (dot) {
        use_isa("");
        const dense_results fma = run_dense(&direct_bf16_fma_products, dc, in, w, bias, d_out, 2),
                            vdp = run_dense(&direct_bf16_products, dc, in, w, bias, d_out, 2);
        snprintf(what, sizeof what, "dense B=%d %d -> %d%s, FMAs against vdpbf16ps", B, n_in,
                 n_out, positive ? " positive" : "");
        hold(what, fma.out, &out, vdp.out, 2, 0, 0);
        hold(what, fma.d_in, &d_in, vdp.d_in, 2, 0, 0);
        hold(what, fma.d_w, &d_w, vdp.d_w, 2, 0, 0);
        hold(what, fma.d_bias, &d_b, vdp.d_bias, 2, 0, 0);
        free_dense(fma), free_dense(vdp);
    }
#endif
    (void)dot;
    free_sums(out), free_sums(d_in), free_sums(d_w), free_sums(d_b);
    free(in), free(w), free(bias), free(d_out), free(in_r), free(w_r), free(d_out_r);
}

/* ---------------------------------------------------------------------- */
/* The runs                                                                 */

/* LeNet's two convolutions at the engine's 32 images a group and its two
 * dense layers at batch 128; then odd batches, channels and kernels that
 * leave partial tiles. */
static const conv_case convs[] = {
    {32, 1, 28, 28, 20, 5}, {32, 20, 12, 12, 50, 5}, {7, 3, 9, 8, 5, 3}, {33, 2, 6, 7, 9, 2},
};
static const dense_case denses[] = {{128, 800, 500}, {128, 500, 10}, {37, 33, 7}, {5, 3, 1}};

/* 1 when the vdpbf16ps set runs here (the FMA set is held to it); else a
 * visible skip of that part */
static int dot_here(void)
{
#ifdef HAVE_DIRECT_BF16
    char why[256];
    if (direct_bf16_supported(why, sizeof why))
        return 1;
    print_message("the FMA set against vdpbf16ps: skipped: %s\n", why);
#else
    print_message("the FMA set against vdpbf16ps: skipped: no vdpbf16ps products in this "
                  "build\n");
#endif
    return 0;
}

static void convolutions_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        for (int positive = 0; positive <= 1; positive++)
            check_conv(convs[i], positive, 0);
}

static void dense_layers_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof denses / sizeof denses[0]; i++)
        for (int positive = 0; positive <= 1; positive++)
            check_dense(denses[i], positive, 0);
}

static void fma_set_matches_vdpbf16ps_set(void **state)
{
    (void)state;
    if (!dot_here())
        skip();
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        check_conv(convs[i], 0, 1);
    for (size_t i = 0; i < sizeof denses / sizeof denses[0]; i++)
        check_dense(denses[i], 0, 1);
}

/* ---------------------------------------------------------------------- */
/* The choice                                                               */

/* The bf16 table's choice (backends/direct/candidates.h) for this
 * process's environment: 1 and the row, or 0 and the refusal in why */
static int choose(const direct_choice **c, char *why, size_t why_len)
{
    *c = direct_candidates_choose(&direct_bf16_candidates, why, why_len);
    return *c != NULL;
}

static int is_dot(const direct_choice *c) { return strcmp(c->row->name, "dot") == 0; }

static void choice_forced_and_measured(void **state)
{
    (void)state;
    const direct_choice *c;
    char why[256] = "";
    unsetenv("LENET_BENCH_DIRECT_ISA");
    const int dot = dot_here();

    setenv("LENET_BENCH_DIRECT_BF16", "fma", 1);
    assert_int_equal(choose(&c, why, sizeof why), 1);
    assert_int_equal(is_dot(c), 0);
    assert_ptr_equal(c->row->set, &direct_bf16_fma_products);
    assert_non_null(strstr(c->why, "forced by LENET_BENCH_DIRECT_BF16=fma"));

    setenv("LENET_BENCH_DIRECT_BF16", "garbage", 1);
    assert_int_equal(choose(&c, why, sizeof why), 0);
    assert_non_null(strstr(why, "LENET_BENCH_DIRECT_BF16=garbage: not one of fma, dot"));

    setenv("LENET_BENCH_DIRECT_BF16", "dot", 1);
    if (dot) {
        assert_int_equal(choose(&c, why, sizeof why), 1);
        assert_int_equal(is_dot(c), 1);
        assert_non_null(strstr(c->why, "forced by LENET_BENCH_DIRECT_BF16=dot"));
#ifdef HAVE_DIRECT_BF16
        assert_ptr_equal(c->row->set, &direct_bf16_products);
#endif
    } else {
        assert_int_equal(choose(&c, why, sizeof why), 0);
        assert_non_null(strstr(why, "LENET_BENCH_DIRECT_BF16=dot: "));
    }

    /* unset: measured where vdpbf16ps runs, and the details say so */
    unsetenv("LENET_BENCH_DIRECT_BF16");
    assert_int_equal(choose(&c, why, sizeof why), 1);
    const double ratio = direct_bf16_dot_over_fma();
    print_message("chosen: %s (%s); vdpbf16ps over FMA flops: %.2f\n", c->row->set->name,
                  c->why, ratio);
    if (dot) {
        assert_true(ratio > 0.1 && ratio < 10);
        assert_int_equal(is_dot(c), ratio > 1);
        assert_non_null(strstr(c->why, "measured"));
        char figure[32];
        snprintf(figure, sizeof figure, "%.2fx", ratio);
        assert_non_null(strstr(c->why, figure));
    } else {
        assert_int_equal(is_dot(c), 0);
        assert_true(ratio == 0);
    }
    if (!is_dot(c)) {
        assert_ptr_equal(c->row->set, &direct_bf16_fma_products);
        assert_string_equal(c->row->set->arithmetic, "fp32");
    }
    /* made once: the same environment gets the same choice */
    const direct_choice *again;
    const direct_candidate *row = c->row;
    char first_why[sizeof c->why];
    snprintf(first_why, sizeof first_why, "%s", c->why);
    assert_int_equal(choose(&again, why, sizeof why), 1);
    assert_ptr_equal(again->row, row);
    assert_string_equal(again->why, first_why);

    /* a build forced off AVX-512: FMAs over its tiles, vdpbf16ps refused */
#ifdef HAVE_DIRECT_BF16
    const char *brief = "LENET_BENCH_DIRECT_ISA=avx2 keeps it off AVX-512",
               *refusal = "keeps the direct backend off AVX-512";
#else
    const char *brief = "no bf16 products (vdpbf16ps) in this build",
               *refusal = "left out of this build";
#endif
    if (use_isa("avx2")) {
        assert_int_equal(choose(&c, why, sizeof why), 1);
        assert_int_equal(is_dot(c), 0);
        assert_string_equal(direct_active()->isa, "avx2");
        assert_non_null(strstr(c->why, brief));
        setenv("LENET_BENCH_DIRECT_BF16", "dot", 1);
        assert_int_equal(choose(&c, why, sizeof why), 0);
        assert_non_null(strstr(why, refusal));
        unsetenv("LENET_BENCH_DIRECT_BF16");
    } else
        print_message("LENET_BENCH_DIRECT_ISA=avx2 not run here: no avx2 build or CPU\n");
    unsetenv("LENET_BENCH_DIRECT_ISA");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rounding_pass_is_direct_bf16_round),
        cmocka_unit_test(convolutions_match_reference),
        cmocka_unit_test(dense_layers_match_reference),
        cmocka_unit_test(fma_set_matches_vdpbf16ps_set),
        cmocka_unit_test(choice_forced_and_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
