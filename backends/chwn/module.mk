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
