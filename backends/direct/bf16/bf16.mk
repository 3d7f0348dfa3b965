# The direct backend's bf16 products (backends/direct/bf16/bf16.h): their
# tests (their speed tool is tools/tools.mk's). The objects, and the probe that leaves them out
# (HAVE_DIRECT_BF16), are in module.mk, which links them into the module.
ifeq ($(HAVE_DIRECT_BF16),1)
# Two programs (module.mk's direct_half_tests): rounding and packing, and
# the products against their references, which need the naive layers and
# the seeded generator.
DIRECT_BF16_TEST_OBJS := $(DIRECT_BF16_OBJS) \
    $(foreach o,naive/conv naive/dense naive/matmul,$(BUILD)/backends/$(o).o) $(BUILD)/harness/run/init.o \
    $(BUILD)/base/cpu.o $(DIRECT_ISA_OBJS)
$(eval $(call direct_half_tests,bf16,$(DIRECT_BF16_TEST_OBJS)))
else
SKIPPED += direct_bf16_products:_this_compiler_has_no_-mavx512bf16
endif
