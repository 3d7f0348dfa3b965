# The direct backend's fp16 products (backends/direct/fp16/fp16.h): their tests
# (their speed tool is tools/tools.mk's). The objects, and the probe that leaves them out
# (HAVE_DIRECT_FP16), are in module.mk, which links them into the module.
ifeq ($(HAVE_DIRECT_FP16),1)

# Two programs: conversions, the emulated FMA and the chain bound; the
# products against an fp64 reference (emulated on any CPU, AVX512_FP16
# against the emulation where the CPU has it). Their own rule: they need
# the products, the CPU reader and the seeded generator, none of the
# modules.
DIRECT_FP16_TESTS := test_direct_fp16 test_direct_fp16_products
TESTS += $(DIRECT_FP16_TESTS)
DIRECT_FP16_TEST_OBJS := $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o $(BUILD)/harness/run/init.o
$(DIRECT_FP16_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/%: tests/%.c $(DIRECT_FP16_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_FP16_TEST_OBJS) -fopenmp -lm -lcmocka

else
SKIPPED += direct_fp16_products:_this_compiler_has_no_-mavx512fp16
endif
