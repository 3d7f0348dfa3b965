# The direct backend's bf16 products (backends/direct/bf16/bf16.h): their
# tests (their speed tool is tools/tools.mk's). The objects, and the probe that leaves them out
# (HAVE_DIRECT_BF16), are in module.mk, which links them into the module.
ifeq ($(HAVE_DIRECT_BF16),1)
# Its test needs the naive layers and the seeded generator, none of the
# modules, so it has a rule of its own (the pattern rule waits for every
# module).
# Two programs: rounding and packing, and the products against their
# references.
DIRECT_BF16_TESTS := test_direct_bf16 test_direct_bf16_products
TESTS += $(DIRECT_BF16_TESTS)
DIRECT_BF16_TEST_OBJS := $(DIRECT_BF16_OBJS) \
    $(foreach o,naive/conv naive/dense naive/matmul,$(BUILD)/backends/$(o).o) $(BUILD)/harness/run/init.o \
    $(BUILD)/base/cpu.o $(DIRECT_ISA_OBJS)
$(DIRECT_BF16_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/%: tests/%.c $(DIRECT_BF16_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_BF16_TEST_OBJS) -fopenmp -lm -lcmocka

else
SKIPPED += direct_bf16_products:_this_compiler_has_no_-mavx512bf16
endif
