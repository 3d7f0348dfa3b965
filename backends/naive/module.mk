# The naive backend's sources are picked up by LIB_SRCS; its layers and
# their driving are built for float and for double (backends/common/real.h).
REAL_TWICE += $(filter-out backends/naive/naive.c,$(wildcard backends/naive/*.c))
TESTS += test_naive test_naive_layers
