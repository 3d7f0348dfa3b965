/* The grammar of numbers and lists (harness/run/options.h) that every flag
 * of ./bench and its subcommands, and the tools' CSV check, read by. */
#include "harness/run/options.h"
#include "tests/cmocka_main.h"

static void test_whole_numbers(void **state)
{
    (void)state;
    static const char *const good[] = {"0", "7", "-3", "010", "9223372036854775807"};
    static const long long value[] = {0, 7, -3, 10, 9223372036854775807LL};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        long long v = -1;
        assert_int_equal(number_read_whole(good[i], &v), 0);
        assert_true(v == value[i]);
    }
    static const char *const bad[] = {"", "-", "+1", " 1", "1 ", "1.5", "1e3", "0x10", "1,2",
                                      "--1", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        long long v;
        assert_int_equal(number_read_whole(bad[i], &v), -1);
    }
    long long v;
    assert_int_equal(number_read_whole("9223372036854775808", &v), -2);
}

static void test_numbers(void **state)
{
    (void)state;
    static const char *const good[] = {"0", "1.", ".5", "-2.5", "5e-4", "1E+2", "1e-320"};
    static const double value[] = {0, 1, 0.5, -2.5, 5e-4, 100, 1e-320};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        double v = -1;
        assert_int_equal(number_read(good[i], &v), 0);
        assert_true(v == value[i]);
    }
    static const char *const bad[] = {"", ".", "-", "e5", "1e", "1e+", "+1", " 1", "1.2.3",
                                      "0x1p3", "inf", "-inf", "nan", "NaN", "infinity", "1,5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v;
        assert_int_equal(number_read(bad[i], &v), -1);
    }
    double v;
    assert_int_equal(number_read("1e999", &v), -2);
}

/* A value is checked as it is stored: 1e-300 is 0 as a float. */
static void test_ranges(void **state)
{
    (void)state;
    double d;
    long long w;
    assert_int_equal(option_real(NULL, "--lr", "1e-300", 0, 1e6, NUMBER_ABOVE_LO, &d), 0);
    assert_int_equal(
        option_real(NULL, "--lr", "1e-300", 0, 1e6, NUMBER_ABOVE_LO | NUMBER_IN_FLOAT, &d), 2);
    assert_int_equal(option_real(NULL, "--lr", "0", 0, 1e6, NUMBER_ABOVE_LO, &d), 2);
    assert_int_equal(option_number(NULL, "--decay", "0", 0, 1, &d), 0);
    assert_int_equal(option_real(NULL, "--decay", "1e-320", 0, 1, NUMBER_IN_FLOAT, &d), 0);
    assert_int_equal(option_whole(NULL, "--seed", "9007199254740992", 0, 1LL << 53, &w), 0);
    assert_int_equal(option_whole(NULL, "--seed", "9007199254740993", 0, 1LL << 53, &w), 2);
    assert_int_equal(option_whole(NULL, "--seed", "1.5", 0, 1LL << 53, &w), 2);
}

static void test_lists(void **state)
{
    (void)state;
    int out[4], n;
    assert_int_equal(option_whole_list("count", "--steps", "8,2,4", 1, 8, out, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[2], 8);
    static const char *const bad_counts[] = {"", ",", "2,", ",2", "2,,4", "2,2", "9", "1,2,3,4,5",
                                             "2, 4", "2,+4"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++)
        assert_int_equal(option_whole_list(NULL, "--x", bad_counts[i], 1, 8, out, 4, &n), 2);
    static const char *const names[] = {"layers", "filters"};
    assert_int_equal(option_name_list(NULL, "--split", "split", "filters,layers", names, 2, out,
                                      2, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 1); /* in the order given */
    assert_int_equal(out[1], 0);
    static const char *const bad_names[] = {"", "layers,", "layers,,filters", "layers,layers",
                                            "rows", "Layers"};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++)
        assert_int_equal(
            option_name_list(NULL, "--split", "split", bad_names[i], names, 2, out, 2, &n), 2);
}

TEST_MAIN(cmocka_unit_test(test_whole_numbers), cmocka_unit_test(test_numbers),
          cmocka_unit_test(test_ranges), cmocka_unit_test(test_lists))
