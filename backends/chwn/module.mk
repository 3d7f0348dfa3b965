# The CHWN engine (backends/chwn/chwn.h): built once per real type, float
# (foo.o) and double (foo_f64.o), and linked into the modules of the
# backends built over it, which hand it their product sets (blas: float
# and double; direct: float). Read before the other module files (the
# Makefile includes it first), since theirs name these objects.
CHWN_SRCS := $(wildcard backends/chwn/*.c)
CHWN_OBJS_F32 := $(CHWN_SRCS:%.c=$(BUILD)/%.o)
CHWN_OBJS_F64 := $(CHWN_SRCS:%.c=$(BUILD)/%_f64.o)
$(CHWN_OBJS_F32) $(CHWN_OBJS_F64): CFLAGS += -fopenmp
$(CHWN_OBJS_F32) $(CHWN_OBJS_F64): $(BUILD)/build-flags

# The engine's moves between layouts (chwn_transpose.h, the gather) against
# their definitions, float and double builds (tests/test_chwn_layout.c)
TESTS += test_chwn_layout
TEST_OBJS_test_chwn_layout := $(BUILD)/backends/chwn/chwn_layers.o $(BUILD)/backends/chwn/chwn_layers_f64.o
TEST_LIBS_test_chwn_layout := -fopenmp
