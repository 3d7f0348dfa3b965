# harness/: its sources are picked up by LIB_SRCS (harness/*.c less main.c);
# this adds its tests.
TESTS += test_idx test_paramfile
TESTS += test_compare
TEST_SCRIPTS += tests/test_compare.sh
TESTS += test_report
TEST_SCRIPTS += tests/test_plot.sh
