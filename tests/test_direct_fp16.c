/* The fp16 products' arithmetic (backends/direct/fp16/fp16.h, fp16_tiles.h):
 * the conversions against a nearest value found by search, and each
 * instruction set's runs against the plain ones bit for bit; the emulated
 * FMA against the exact a * b + c rounded once (binary128 holds it
 * exactly), with the sums that double rounding would get wrong among the
 * cases; the chain bound of fp16.h, which holds for the designed chain and
 * breaks for a longer one; and the CPU check. The products themselves:
 * tests/test_direct_fp16_products.c. */
#include "tests/direct_fp16_testing.h"

#include "backends/direct/half/half_common.h"

/* ---------------------------------------------------------------------- */
/* A nearest fp16 found another way                                         */

/* What a half stands for, from the format's definition */
static double defined_value(uint16_t h)
{
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double v = exponent ? ldexp(1024 + mantissa, exponent - 25) : ldexp(mantissa, -24);
    return (h & 0x8000u) ? -v : v;
}

/* The nearest half to x (not NaN), ties to the even one: the non-negative
 * finite halves 0 .. 0x7bff grow with their bits, so a bisection finds the
 * two around |x|; from 65520 (halfway to 2^16) on, infinity. Exact zero
 * takes the sign IEEE addition gives (negative only when both parts of the
 * sum are). */
static uint16_t nearest_half(__float128 x, int negative_zero)
{
    const uint16_t sign = x < 0 ? 0x8000u : 0;
    const __float128 ax = x < 0 ? -x : x;
    if (ax == 0)
        return negative_zero ? 0x8000u : 0;
    if (ax >= (__float128)65520)
        return sign | 0x7c00u;
    int lo = 0, hi = 0x7bff;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if ((__float128)defined_value((uint16_t)mid) <= ax)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == 0x7bff)
        return sign | 0x7bffu;
    const __float128 d_below = ax - defined_value((uint16_t)lo);
    const __float128 d_above = defined_value((uint16_t)(lo + 1)) - ax;
    const int up = d_above < d_below || (d_above == d_below && (lo & 1));
    return (uint16_t)(sign | (lo + up));
}

/* ---------------------------------------------------------------------- */
/* Conversions                                                              */

static void rounding_is_nearest_even(void **state)
{
    (void)state;
    const struct {
        float x;
        uint16_t h;
    } known[] = {
        {1.0f, 0x3c00},       {-2.5f, 0xc100},           {0.0f, 0x0000},
        {-0.0f, 0x8000},      {65504.0f, 0x7bff},        {65519.99f, 0x7bff},
        {65520.0f, 0x7c00},   {-65520.0f, 0xfc00},       {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},  {FLT_MAX, 0x7c00},         {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000},   {0x1.000002p-25f, 0x0001}, {0x3p-25f, 0x0002},
        {0x1p-14f, 0x0400},   {0x1.ffcp-15f, 0x0400},    {0x1.002p0f, 0x3c00},
        {0x1.006p0f, 0x3c02}, {0x1.002002p0f, 0x3c01},   {FLT_MIN, 0x0000},
        {from_bits(0x00000001u), 0x0000}, {from_bits(0x80000001u), 0x8000},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (direct_fp16_round(known[i].x) != known[i].h)
            fail_msg("round(%a) = 0x%04x, not 0x%04x", (double)known[i].x,
                     direct_fp16_round(known[i].x), known[i].h);
    /* NaN stays NaN, quiet, sign and the top of the payload kept */
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u, 0xffc02000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        const uint16_t h = direct_fp16_round(from_bits(nans[i]));
        assert_int_equal(h, (nans[i] >> 16 & 0x8000u) | 0x7e00u | (nans[i] >> 13 & 0x3ffu));
        assert_true(isnan(direct_fp16_value(h)));
    }
    /* every half's value from the definition, and back */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float v = direct_fp16_value((uint16_t)h);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
            assert_true(isnan(v));
            continue;
        }
        if ((h & 0x7fffu) == 0x7c00u)
            assert_true(isinf(v) && (v < 0) == (h >> 15));
        else if ((double)v != defined_value((uint16_t)h))
            fail_msg("value(0x%04x) = %a, not %a", h, (double)v, defined_value((uint16_t)h));
        assert_int_equal(direct_fp16_round(v), h);
    }
    /* two million floats from the range fp16 covers and past it, a
     * quarter of them on or beside a tie (low 13 bits 0x1000 +- 1) */
    rng r = {4242};
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        u = (u & 0x807fffffu) | (uint32_t)(96 + (int)(rng_next(&r) % 50)) << 23;
        if (i % 4 == 0)
            u = (u & ~0x1fffu) | (0x0fffu + (uint32_t)(rng_next(&r) % 3));
        const float x = from_bits(u);
        const uint16_t want = nearest_half((__float128)x, signbit(x));
        if (direct_fp16_round(x) != want)
            fail_msg("round(%a) = 0x%04x, nearest 0x%04x", (double)x, direct_fp16_round(x), want);
    }
}

/* Floats of every kind: random bits (NaNs, infinities, subnormal floats
 * among them), values in fp16's range, ties */
static float *conversion_inputs(size_t n)
{
    float *x = floats(n);
    rng r = {99};
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        if (i % 3 == 1)
            u = (u & 0x807fffffu) | (uint32_t)(96 + (int)(rng_next(&r) % 50)) << 23;
        if (i % 3 == 2)
            u = (u & 0x8fffe000u) | 0x1000u | (uint32_t)(98 + (int)(rng_next(&r) % 46)) << 23;
        x[i] = from_bits(u);
    }
    return x;
}

/* One instruction set's runs against the plain ones, bit for bit: every
 * half widened, and a million floats rounded at scales 1, 2^10 and 0.3,
 * at lengths that leave every size of tail */
static void runs_match_plain(fp16_round_run_fn *round_run, fp16_value_run_fn *value_run)
{
    enum { HALVES = 0x10000, N = 1 << 20 };
    uint16_t *all = malloc(sizeof(uint16_t) * HALVES), *got16 = malloc(sizeof(uint16_t) * N);
    uint16_t *want16 = malloc(sizeof(uint16_t) * N);
    float *got = floats(HALVES), *want = floats(HALVES), *x = conversion_inputs(N);
    assert_true(all && got16 && want16);
    for (uint32_t h = 0; h < HALVES; h++)
        all[h] = (uint16_t)h;
    for (size_t start = 0; start < 17; start += 5) {
        value_run(got + start, all + start, HALVES - 2 * start, 1.0f);
        direct_fp16_value_run_plain(want + start, all + start, HALVES - 2 * start, 1.0f);
        assert_memory_equal(got, want, sizeof(float) * HALVES);
    }
    value_run(got, all, HALVES, 0x1p-10f);
    direct_fp16_value_run_plain(want, all, HALVES, 0x1p-10f);
    assert_memory_equal(got, want, sizeof(float) * HALVES);
    const float scales[] = {1.0f, 1024.0f, 0.3f};
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
        for (size_t tail = 0; tail < 17; tail += 3) {
            memset(got16, 0, sizeof(uint16_t) * N);
            memset(want16, 0, sizeof(uint16_t) * N);
            round_run(got16, x, N - tail, scales[s]);
            direct_fp16_round_run_plain(want16, x, N - tail, scales[s]);
            for (size_t i = 0; i < N; i++)
                if (got16[i] != want16[i])
                    fail_msg("scale %g: round(%a) = 0x%04x, plainly 0x%04x", (double)scales[s],
                             (double)x[i], got16[i], want16[i]);
        }
    free(all), free(got16), free(want16), free(got), free(want), free(x);
}

static void f16c_runs_match_plain(void **state)
{
    (void)state;
    char missing[64];
    if (!cpu_has(CPU_F16C)) {
        print_message("skipped: this CPU has no %s\n", cpu_missing(CPU_F16C, missing, sizeof missing));
        skip();
    }
    runs_match_plain(direct_fp16_round_run_f16c, direct_fp16_value_run_f16c);
}

static void avx512_runs_match_plain(void **state)
{
    (void)state;
    char missing[64];
    if (!cpu_has(CPU_AVX512F)) {
        print_message("skipped: this CPU has no %s\n",
                      cpu_missing(CPU_AVX512F, missing, sizeof missing));
        skip();
    }
    runs_match_plain(direct_fp16_round_run_avx512, direct_fp16_value_run_avx512);
    /* and the choice the products use */
    runs_match_plain(direct_fp16_round_run, direct_fp16_value_run);
}

/* The fused passes of the products: planes rounded with their bias sums
 * (direct_fp16_round_sums: the halves of the plain run, the sums
 * sum_floats's bit for bit), and weights rounded and doubled in one pass
 * (direct_fp16_round_doubled_run), at lengths that leave every tail, over
 * 1 and 2 threads */
static void fused_passes_match_separate(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *x = conversion_inputs(N), *finite = floats(N);
    /* fp16's range, no NaN for the sums: the random bits (i % 3 == 0)
     * replaced by half a neighbour in range (the one before, at the end) */
    for (size_t i = 0; i < N; i++)
        finite[i] = i % 3 != 0 ? x[i] : x[i + 1 < N ? i + 1 : i - 2] * 0.5f;
    uint16_t *got = malloc(sizeof(uint16_t) * N), *want = malloc(sizeof(uint16_t) * N);
    uint32_t *words = malloc(sizeof(uint32_t) * N);
    float sums[8 * 2];
    assert_true(got && want && words);
    for (size_t plane = 1; plane < 3000; plane = plane * 3 + 1)
        for (int threads = 1; threads <= 2; threads++) {
            const int K = 5;
            direct_fp16_round_sums(got, finite, plane, K, sums, 2, threads);
            direct_fp16_round_run_plain(want, finite, plane * K, 1.0f);
            assert_memory_equal(got, want, sizeof(uint16_t) * plane * K);
            for (int k = 0; k < K; k++) {
                const float sum = sum_floats(finite + k * plane, plane);
                if (memcmp(&sums[2 * k], &sum, sizeof sum))
                    fail_msg("plane %zu, channel %d: sum %a, sum_floats %a", plane, k,
                             (double)sums[2 * k], (double)sum);
            }
        }
    for (size_t tail = 0; tail < 17; tail += 3) {
        direct_fp16_round_doubled_run(words, x, N - tail);
        direct_fp16_round_run_plain(want, x, N - tail, 1.0f);
        for (size_t i = 0; i < N - tail; i++)
            if (words[i] != direct_fp16_double(want[i]))
                fail_msg("round_doubled(%a) = 0x%08x, want 0x%08x", (double)x[i], words[i],
                         direct_fp16_double(want[i]));
    }
    free(x), free(finite), free(got), free(want), free(words);
}

/* The rounding with a transposition (the dense weight gradient's input):
 * every element rounded as the plain function rounds it, in its
 * transposed place, and zeros past the rows; shapes with and without
 * whole 16 x 16 blocks, on one thread and two. */
static void round_transposed_matches_plain(void **state)
{
    (void)state;
    enum { MOST = 200 };
    float *x = conversion_inputs(MOST * MOST);
    uint16_t *got = malloc(sizeof(uint16_t) * MOST * (MOST + 40));
    assert_non_null(got);
    const int shapes[][2] = {{1, 1}, {16, 16}, {37, 50}, {128, 10}, {500, 128}, {33, 200}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int threads = 1; threads <= 2; threads++) {
            const int rows = shapes[s][0] < MOST ? shapes[s][0] : MOST, cols = shapes[s][1];
            const size_t ld_src = (size_t)cols + 3, ld_dst = (size_t)rows + 21;
            memset(got, 0xff, sizeof(uint16_t) * MOST * (MOST + 40));
            direct_fp16_round_transposed(got, ld_dst, x, ld_src, rows, cols, threads);
            for (int c = 0; c < cols; c++)
                for (size_t r = 0; r < ld_dst; r++) {
                    const uint16_t want =
                        r < (size_t)rows ? direct_fp16_round(x[r * ld_src + c]) : 0;
                    if (got[c * ld_dst + r] != want)
                        fail_msg("%dx%d, threads %d: [%d][%zu] = 0x%04x, want 0x%04x", rows,
                                 cols, threads, c, r, got[c * ld_dst + r], want);
                }
        }
    free(x), free(got);
}

/* ---------------------------------------------------------------------- */
/* The emulated FMA                                                         */

/* a half of random sign with exponent field in [lo, hi] */
static uint16_t random_half(rng *r, int lo, int hi)
{
    const uint32_t e = (uint32_t)(lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1)));
    return (uint16_t)((rng_next(r) & 0x8000u) | e << 10 | (rng_next(r) & 0x3ffu));
}

/* A product a * b that is exactly a midpoint of fp16: an odd 12-bit
 * integer N = d * q split between the two significands */
static int midpoint_product(rng *r, uint16_t *a, uint16_t *b)
{
    const int N = 2049 + 2 * (int)(rng_next(r) % 1023);
    for (int d = 3; d < 64; d += 2)
        if (N % d == 0) {
            const int q = N / d, shift_a = (int)(rng_next(r) % 6), shift_b = (int)(rng_next(r) % 6);
            const float fa = ldexpf((float)d, -shift_a), fb = ldexpf((float)q, -6 - shift_b);
            *a = direct_fp16_round(fa), *b = direct_fp16_round(fb);
            /* exact: d < 64 and q < 2048 fit in 11 bits */
            return direct_fp16_value(*a) == fa && direct_fp16_value(*b) == fb;
        }
    return 0;
}

static void emulated_fma_rounds_once(void **state)
{
    (void)state;
    rng r = {7};
    long cases = 0, double_rounding_wrong = 0;
    for (int i = 0; i < 600000; i++) {
        uint16_t a, b, c;
        switch (i % 4) {
        case 0: /* anything finite, subnormals too */
            a = random_half(&r, 0, 30), b = random_half(&r, 0, 30), c = random_half(&r, 0, 30);
            break;
        case 1: /* magnitudes near each other: cancellation */
            a = random_half(&r, 12, 18), b = random_half(&r, 12, 18), c = random_half(&r, 10, 20);
            break;
        case 2: /* a sum near a midpoint: c is the midpoint minus the product, rounded */
            a = random_half(&r, 8, 22), b = random_half(&r, 8, 22);
            {
                const uint16_t m = random_half(&r, 5, 25);
                const double mid = defined_value(m) + copysign(ldexp(1.0, ((m >> 10) & 31) - 26), defined_value(m));
                c = direct_fp16_round((float)(mid - (double)direct_fp16_value(a) * direct_fp16_value(b)));
            }
            break;
        default: /* a product on a midpoint, and a little added: double rounding's trap */
            if (!midpoint_product(&r, &a, &b))
                continue;
            c = (uint16_t)((rng_next(&r) & 0x8000u) | (1 + rng_next(&r) % 3));
            break;
        }
        const double p = (double)direct_fp16_value(a) * direct_fp16_value(b); /* exact */
        const double vc = direct_fp16_value(c);
        const uint16_t want = nearest_half((__float128)p + (__float128)vc, signbit(p) && signbit(vc));
        const uint16_t got = direct_fp16_fma(a, b, c);
        if (got != want)
            fail_msg("fma(0x%04x, 0x%04x, 0x%04x) = 0x%04x, exactly rounded 0x%04x", a, b, c, got, want);
        /* the sum rounded to fp32 first, then to fp16 */
        double_rounding_wrong += direct_fp16_round((float)p + (float)vc) != want;
        cases++;
    }
    print_message("%ld FMAs exact; rounding through fp32 would have got %ld wrong\n", cases,
                  double_rounding_wrong);
    /* the cases include those where one rounding matters */
    assert_true(double_rounding_wrong > 0);
}

/* ---------------------------------------------------------------------- */
/* The chain bound                                                          */

/* The worst error of the emulated row tile over `steps` products, each
 * output against the bound of fp16.h for the designed chain: at most 1
 * when the tile chains as designed. */
static double worst_against_design(int chain, int positive)
{
    enum { STEPS = 2048, ROWS = 2, COLS = 64 };
    const size_t ld = COLS + FP16_LANES;
    uint32_t *a = calloc((size_t)ROWS * STEPS, sizeof(uint32_t));
    uint16_t *b = calloc((size_t)STEPS * ld, sizeof(uint16_t));
    ptrdiff_t *off = calloc(STEPS, sizeof(ptrdiff_t));
    float *x = floats((size_t)STEPS * ld), *out = floats((size_t)ROWS * COLS);
    assert_true(a && b && off);
    rng r = {(uint64_t)(11 + positive)};
    fill(x, (size_t)STEPS * ld, &r, positive, 1.0f);
    direct_fp16_round_run_plain(b, x, (size_t)STEPS * ld, 1.0f);
    fill(x, (size_t)ROWS * STEPS, &r, positive, 1.0f);
    for (size_t i = 0; i < (size_t)ROWS * STEPS; i++)
        a[i] = direct_fp16_double(direct_fp16_round(x[i]));
    for (int s = 0; s < STEPS; s++)
        off[s] = (ptrdiff_t)s * (ptrdiff_t)ld;
    float *rows[ROWS] = {out, out + COLS};
    direct_fp16_row_tile_emulated(ROWS, COLS, rows, 0, NULL, a, STEPS, 1, b, off, STEPS, chain);
    double worst = 0;
    for (int i = 0; i < ROWS; i++)
        for (int col = 0; col < COLS; col++) {
            double sum = 0, size = 0;
            for (int s = 0; s < STEPS; s++) {
                const double t = (double)direct_fp16_value((uint16_t)a[i * STEPS + s]) *
                                 direct_fp16_value(b[s * ld + (size_t)col]);
                sum += t, size += fabs(t);
            }
            const double folds = (STEPS + DIRECT_FP16_CHAIN - 1) / DIRECT_FP16_CHAIN;
            const double ratio = fabs(rows[i][col] - sum) /
                                 fp16_bound(DIRECT_FP16_CHAIN, folds, size, STEPS, 0);
            worst = ratio > worst ? ratio : worst;
        }
    free(a), free(b), free(off), free(x), free(out);
    return worst;
}

static void longer_chains_break_the_bound(void **state)
{
    (void)state;
    for (int positive = 0; positive < 2; positive++) {
        const double designed = worst_against_design(DIRECT_FP16_CHAIN, positive);
        const double longer = worst_against_design(8 * DIRECT_FP16_CHAIN, positive);
        const double whole = worst_against_design(2048, positive);
        print_message("%s data, 2048 products: chains of %d use %.3f of the bound, of %d %.3f, "
                      "one chain %.3f\n",
                      positive ? "positive" : "signed", DIRECT_FP16_CHAIN, designed,
                      8 * DIRECT_FP16_CHAIN, longer, whole);
        assert_true(designed <= 1.0);
        if (positive) /* a long chain of positive terms stagnates: far past it */
            assert_true(whole > 1.0);
    }
}

/* ---------------------------------------------------------------------- */
/* The CPU check                                                            */

static void refused_with_the_missing_feature(void **state)
{
    (void)state;
    char why[512], missing[128];
    const int ok = direct_fp16_supported(why, sizeof why);
    assert_int_equal(ok, cpu_has(CPU_AVX512 | CPU_AVX512_FP16));
    if (ok)
        return;
    cpu_missing(CPU_AVX512 | CPU_AVX512_FP16, missing, sizeof missing);
    print_message("refused here: %s\n", why);
    assert_non_null(strstr(why, missing));
    assert_non_null(strstr(why, "AVX512_FP16"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rounding_is_nearest_even),
        cmocka_unit_test(f16c_runs_match_plain),
        cmocka_unit_test(avx512_runs_match_plain),
        cmocka_unit_test(fused_passes_match_separate),
        cmocka_unit_test(round_transposed_matches_plain),
        cmocka_unit_test(emulated_fma_rounds_once),
        cmocka_unit_test(longer_chains_break_the_bound),
        cmocka_unit_test(refused_with_the_missing_feature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
