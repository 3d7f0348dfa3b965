# The direct backend's fp16 products (backends/direct/fp16/fp16.h): their tests
# (their speed tool is tools/tools.mk's). The objects, and the probe that leaves them out
# (HAVE_DIRECT_FP16), are in module.mk, which links them into the module.
ifeq ($(HAVE_DIRECT_FP16),1)

# Two programs (module.mk's direct_half_tests): conversions, the emulated
# FMA and the chain bound; the products against an fp64 reference
# (emulated on any CPU, AVX512_FP16 against the emulation where the CPU
# has it). They need the products, the CPU reader and the seeded
# generator.
DIRECT_FP16_TEST_OBJS := $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o $(BUILD)/harness/run/init.o
$(eval $(call direct_half_tests,fp16,$(DIRECT_FP16_TEST_OBJS)))
else
SKIPPED += direct_fp16_products:_this_compiler_has_no_-mavx512fp16
endif
