/* The Mann-Whitney U test of harness/common/stats.c, which bench compare
 * runs on the per-epoch samples, against values worked by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness/common/stats.h"

/* scipy's documentation example (Conover): mannwhitneyu(males, females,
 * method="asymptotic") gives U1 = 17, p = 0.11134688653314041. By hand:
 * ranks of the males 5,7,3,9,8 sum to 32, U = 32 - 15 = 17, mu = 10,
 * sigma = sqrt(5*4*10/12) = 4.0825, z = (17 - 10 - 0.5) / sigma = 1.5922. */
static void test_u_scipy_example(void **state)
{
    (void)state;
    const double males[] = {19, 22, 16, 29, 24}, females[] = {20, 11, 17, 12};
    u_test r = mann_whitney_u(males, 5, females, 4);
    assert_float_equal(r.u, 17.0, 1e-12);
    assert_float_equal(r.z, 1.5922, 1e-4);
    assert_float_equal(r.p, 0.11134688653314041, 1e-12);
    /* the other way round: U2 = 20 - 17, same p, z negative */
    u_test s = mann_whitney_u(females, 4, males, 5);
    assert_float_equal(s.u, 3.0, 1e-12);
    assert_float_equal(s.p, r.p, 1e-15);
    assert_true(s.z < 0);
}

/* Fully separated: U = 0, mu = 12.5, sigma = sqrt(25*11/12) = 4.7871,
 * z = 12 / 4.7871 = 2.5067, p = erfc(z / sqrt 2) = 0.0121858. */
static void test_u_separated(void **state)
{
    (void)state;
    const double x[] = {1, 2, 3, 4, 5}, y[] = {6, 7, 8, 9, 10};
    u_test r = mann_whitney_u(x, 5, y, 5);
    assert_float_equal(r.u, 0.0, 1e-12);
    assert_float_equal(r.p, 0.012185780355344818, 1e-12);
    assert_float_equal(mann_whitney_min_p(5, 5), r.p, 1e-15);
}

/* Ties: x = 1 2 2 3, y = 2 3 4 5. Sorted 1x 2x 2x 2y 3x 3y 4y 5y; the 2s
 * share rank 3, the 3s rank 5.5. R_x = 1 + 3 + 3 + 5.5 = 12.5, U = 2.5,
 * mu = 8; tie term (27 - 3) + (8 - 2) = 30, variance = 16/12 * (9 - 30/56)
 * = 11.285714, z = (5.5 - 0.5) / 3.359422 = 1.488351, p = 0.1366582. */
static void test_u_ties(void **state)
{
    (void)state;
    const double x[] = {1, 2, 2, 3}, y[] = {2, 3, 4, 5};
    u_test r = mann_whitney_u(x, 4, y, 4);
    assert_float_equal(r.u, 2.5, 1e-12);
    assert_float_equal(r.z, -1.4883513944689681, 1e-9);
    assert_float_equal(r.p, 0.13665824773814753, 1e-9);
}

static void test_u_degenerate(void **state)
{
    (void)state;
    const double same[] = {3, 3, 3}, other[] = {3, 3};
    assert_float_equal(mann_whitney_u(same, 3, other, 2).p, 1.0, 0); /* all tied */
    assert_float_equal(mann_whitney_u(same, 0, other, 2).p, 1.0, 0); /* empty side */
    /* identical samples: U = mu, no evidence */
    const double a[] = {1, 2, 3, 4};
    assert_float_equal(mann_whitney_u(a, 4, a, 4).p, 1.0, 1e-12);
}

/* The smallest reachable p decides whether the test is worth running. */
static void test_u_min_p(void **state)
{
    (void)state;
    assert_true(mann_whitney_min_p(3, 3) > 0.05);  /* 0.0809 */
    assert_true(mann_whitney_min_p(3, 4) > 0.05);  /* 0.0518 */
    assert_true(mann_whitney_min_p(4, 4) < 0.05);  /* 0.0304 */
    assert_true(mann_whitney_min_p(3, 5) < 0.05);  /* 0.0369 */
    assert_float_equal(mann_whitney_min_p(9, 9), 0.0004122948020616911, 1e-12);
    assert_float_equal(mann_whitney_min_p(0, 9), 1.0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u_scipy_example),
        cmocka_unit_test(test_u_separated),
        cmocka_unit_test(test_u_ties),
        cmocka_unit_test(test_u_degenerate),
        cmocka_unit_test(test_u_min_p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
