# The naive backend's sources are picked up by LIB_SRCS; this adds its tests.
TESTS += test_naive
