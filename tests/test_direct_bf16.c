/* The direct backend's bf16 products (backends/direct/bf16/bf16.h), their
 * rounding (against a nearest value found in double, and the instruction
 * against the function), their packing into pairs along each sum, and the
 * CPU check that says whether they run. The products themselves against
 * their references are tests/test_direct_bf16_products.c's (fixtures:
 * tests/direct_bf16_testing.h). */
#include "tests/direct_bf16_testing.h"

/* ---------------------------------------------------------------------- */
/* Rounding                                                                 */

/* The nearest bf16 to a normal finite x found another way: the two bf16
 * around it by truncation, compared in double, ties to the even one. */
static uint16_t nearest_by_search(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
    if ((u & 0xffffu) == 0)
        return down;
    const double below = direct_bf16_value(down);
    /* past the largest bf16, rounding up means infinity, taken where the
     * next value would lie (2^128), as round-to-nearest treats overflow */
    const double above = (up & 0x7fffu) == 0x7f80u ? copysign(ldexp(1.0, 128), x)
                                                    : direct_bf16_value(up);
    const double d_below = fabs((double)x - below), d_above = fabs(above - (double)x);
    if (d_below < d_above)
        return down;
    if (d_above < d_below)
        return up;
    return (down & 1) ? up : down;
}

static void rounding_is_nearest_even(void **state)
{
    (void)state;
    /* exact values stay */
    assert_int_equal(direct_bf16_round(1.0f), 0x3f80);
    assert_int_equal(direct_bf16_round(-2.5f), 0xc020);
    assert_int_equal(direct_bf16_round(0.0f), 0x0000);
    assert_int_equal(direct_bf16_round(-0.0f), 0x8000);
    /* ties: halfway between two bf16 goes to the even one */
    assert_int_equal(direct_bf16_round(from_bits(0x3f808000u)), 0x3f80); /* 1 + 2^-8 */
    assert_int_equal(direct_bf16_round(from_bits(0x3f818000u)), 0x3f82);
    assert_int_equal(direct_bf16_round(from_bits(0xbf808000u)), 0xbf80);
    assert_int_equal(direct_bf16_round(from_bits(0xbf818000u)), 0xbf82);
    /* either side of a tie */
    assert_int_equal(direct_bf16_round(from_bits(0x3f807fffu)), 0x3f80);
    assert_int_equal(direct_bf16_round(from_bits(0x3f808001u)), 0x3f81);
    /* a carry into the exponent */
    assert_int_equal(direct_bf16_round(from_bits(0x3fffc000u)), 0x4000);
    /* infinities stay; past the largest bf16 goes to infinity */
    assert_int_equal(direct_bf16_round(INFINITY), 0x7f80);
    assert_int_equal(direct_bf16_round(-INFINITY), 0xff80);
    assert_int_equal(direct_bf16_round(FLT_MAX), 0x7f80);
    assert_int_equal(direct_bf16_round(-FLT_MAX), 0xff80);
    assert_int_equal(direct_bf16_round(from_bits(0x7f7f7fffu)), 0x7f7f);
    /* NaN stays NaN, quiet, sign kept, even where rounding up would carry
     * it into infinity (0x7f800001) or flip its sign (0x7fffffff) */
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u, 0xffc00000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        const uint16_t h = direct_bf16_round(from_bits(nans[i]));
        assert_true(isnan(direct_bf16_value(h)));
        assert_true((h & 0x40u) != 0);
        assert_int_equal(h >> 15, nans[i] >> 31);
    }
    /* subnormal floats: a zero of their sign (the instruction reads them so) */
    assert_int_equal(direct_bf16_round(from_bits(0x00000001u)), 0x0000);
    assert_int_equal(direct_bf16_round(from_bits(0x007fffffu)), 0x0000);
    assert_int_equal(direct_bf16_round(from_bits(0x807fffffu)), 0x8000);
    assert_int_equal(direct_bf16_round(FLT_MIN), 0x0080);
    /* and a million normal floats (every pattern of the low half among
     * them many times) against the search */
    rng r = {2718};
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        if (i % 4 == 0) /* ties and near-ties are rare among random bits */
            u = (u & 0xffff0000u) | (i % 8 == 0 ? 0x8000u : 0x7fffu + (u & 2));
        const uint32_t exponent = (u >> 23) & 0xffu;
        if (exponent == 0 || exponent == 0xff)
            continue;
        const float x = from_bits(u);
        if (direct_bf16_round(x) != nearest_by_search(x))
            fail_msg("%a (0x%08x): 0x%04x, the nearest is 0x%04x", (double)x, u,
                     direct_bf16_round(x), nearest_by_search(x));
    }
}

/* ---------------------------------------------------------------------- */
/* Packing                                                                  */

static uint32_t expected_pair(float first, float second)
{
    return (uint32_t)direct_bf16_round(first) | (uint32_t)direct_bf16_round(second) << 16;
}

/* (noipa: specialised for one case, GCC warns of a branch that case never takes) */
__attribute__((noipa)) static void check_conv_packing(int B, int C, int H, int W)
{
    const size_t n = (size_t)C * H * W * B, words = direct_bf16_conv_input_words(B, C, H, W);
    float *in = floats(n);
    rng r = {(uint64_t)(B * 100 + C)};
    fill(in, n, &r, 0);
    uint32_t *packed = malloc(sizeof(uint32_t) * words);
    assert_non_null(packed);
    memset(packed, 0xa5, sizeof(uint32_t) * words);
    direct_bf16_pack_conv_input(packed, in, B, C, H, W, 2);
    const size_t row = (size_t)W * B, plane = (size_t)H * row;
    const int by_channels = direct_bf16_conv_pairs_channels(C);
    assert_int_equal(by_channels, C % 2 == 0);
    const int groups = by_channels ? C / 2 : C;
    for (int g = 0; g < groups; g++)
        for (int h = 0; h < H; h++)
            for (int x = 0; x < W; x++)
                for (int b = 0; b < B; b++) {
                    const size_t e = (size_t)x * B + b;
                    const float first = by_channels ? in[2 * g * plane + h * row + e]
                                                    : in[g * plane + h * row + e];
                    const float second = by_channels ? in[(2 * g + 1) * plane + h * row + e]
                                         : x + 1 < W ? in[g * plane + h * row + e + B]
                                                     : 0.0f;
                    assert_int_equal(packed[g * plane + h * row + e], expected_pair(first, second));
                }
    for (size_t i = (size_t)groups * plane; i < words; i++)
        assert_int_equal(packed[i], 0); /* what a last vector reads past the end */
    free(in);
    free(packed);
}

static void check_packing(void)
{
    check_conv_packing(3, 4, 5, 6); /* channels paired */
    check_conv_packing(5, 3, 4, 7); /* columns paired */
    check_conv_packing(2, 1, 3, 1); /* one column: every partner 0 */
    check_conv_packing(20, 2, 3, 3); /* whole vectors and a masked rest */
    /* rows paired, odd count, padded columns */
    const int n = 5, cols = 7, ld = 16;
    float x[5 * 7];
    rng r = {9};
    fill(x, (size_t)n * cols, &r, 0);
    uint32_t rows[3 * 16];
    memset(rows, 0xa5, sizeof rows);
    direct_bf16_pack_row_pairs(rows, ld, x, n, cols, 1);
    for (int q = 0; q < 3; q++)
        for (int c = 0; c < ld; c++) {
            const uint32_t want = c >= cols ? 0
                                  : 2 * q + 1 < n ? expected_pair(x[2 * q * cols + c], x[(2 * q + 1) * cols + c])
                                                  : expected_pair(x[2 * q * cols + c], 0.0f);
            assert_int_equal(rows[q * ld + c], want);
        }
    /* columns paired, odd count, a row stride past the row */
    float y[3 * 9];
    fill(y, 27, &r, 0);
    uint32_t cols_packed[3 * 4];
    memset(cols_packed, 0xa5, sizeof cols_packed);
    direct_bf16_pack_col_pairs(cols_packed, y, 9, 3, 7, 1);
    for (int rr = 0; rr < 3; rr++)
        for (int q = 0; q < 4; q++) {
            const float second = 2 * q + 1 < 7 ? y[rr * 9 + 2 * q + 1] : 0.0f;
            assert_int_equal(cols_packed[rr * 4 + q], expected_pair(y[rr * 9 + 2 * q], second));
        }
}

/* The packing rounds plainly when emulating, else with vcvtneps2bf16:
 * both are checked */
static void packing_pairs_along_the_sums(void **state)
{
    (void)state;
    direct_bf16_emulate = 1;
    check_packing();
    direct_bf16_emulate = 0;
    if (!instructions_or_skip())
        skip();
    check_packing();
}

/* vcvtneps2bf16, as the packing uses it, rounds as direct_bf16_round:
 * special values, ties, and random bit patterns of every class */
static void instruction_rounds_as_the_function(void **state)
{
    (void)state;
    if (!instructions_or_skip())
        skip();
    enum { N = 1 << 16 };
    float *x = floats(2 * N);
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
                                0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f807fffu, 0x3f808001u,
                                0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0xffc00001u, 0x3fffc000u};
    const size_t n_special = sizeof special / sizeof special[0];
    rng r = {31415};
    for (size_t i = 0; i < 2 * (size_t)N; i++) {
        uint32_t u = (uint32_t)rng_next(&r);
        if (i < n_special)
            u = special[i];
        else if (i % 3 == 0) /* ties and their neighbours */
            u = (u & 0xffff0000u) | (0x7fffu + (uint32_t)(i % 5 == 0) + (u & 1));
        x[i] = from_bits(u);
    }
    uint32_t *packed = malloc(sizeof(uint32_t) * N);
    assert_non_null(packed);
    direct_bf16_pack_row_pairs(packed, N, x, 2, N, 1);
    for (size_t i = 0; i < (size_t)N; i++)
        if (packed[i] != expected_pair(x[i], x[N + i])) {
            uint32_t lo, hi;
            memcpy(&lo, &x[i], sizeof lo);
            memcpy(&hi, &x[N + i], sizeof hi);
            fail_msg("0x%08x and 0x%08x: packed 0x%08x, rounded 0x%08x", lo, hi, packed[i],
                     expected_pair(x[i], x[N + i]));
        }
    free(packed);
    free(x);
}

static void support_is_reported(void **state)
{
    (void)state;
    char why[256] = "";
    const int yes = direct_bf16_supported(why, sizeof why);
    __builtin_cpu_init();
    assert_int_equal(yes, __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
                              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"));
    if (!yes) /* the reason names what is missing */
        assert_non_null(strstr(why, "has no "));
    char tiny[8];
    direct_bf16_supported(tiny, sizeof tiny); /* a short buffer is cut, not overrun */
    assert_true(strlen(tiny) < sizeof tiny);
}

TEST_MAIN(cmocka_unit_test(rounding_is_nearest_even),
          cmocka_unit_test(packing_pairs_along_the_sums),
          cmocka_unit_test(instruction_rounds_as_the_function),
          cmocka_unit_test(support_is_reported))
