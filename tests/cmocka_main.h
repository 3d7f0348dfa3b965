/* A cmocka program's includes (cmocka.h wants the four before it) and its
 * main: TEST_MAIN(cmocka_unit_test(a), cmocka_unit_test(b), ...) runs the
 * tests given as one group; the exit status counts the failures. */
#ifndef LB_TESTS_CMOCKA_MAIN_H
#define LB_TESTS_CMOCKA_MAIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define TEST_MAIN(...)                                                                         \
    int main(void)                                                                             \
    {                                                                                          \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                       \
        return cmocka_run_group_tests(tests, NULL, NULL);                                      \
    }

#endif
