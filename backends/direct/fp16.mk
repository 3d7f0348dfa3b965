# The direct backend's fp16 products (backends/direct/fp16.h) and their
# tests. The AVX512_FP16 tiles are built with flags of their own, after the
# build's -march, so that the object builds on any x86-64 machine whose
# compiler knows the instructions (gcc 12 and later); whether they run is
# decided at run time (direct_fp16_supported, from base/cpu.h). The
# emulated tiles are built with -ffp-contract=off: their exact FMA relies
# on additions that are not fused. A compiler without -mavx512fp16 leaves
# the products out. Not yet linked into the direct module: the CHWN
# engine's table of product sets takes them (notes/direct-fp16.md).
DIRECT_FP16_FLAGS := -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx512fp16
HAVE_DIRECT_FP16 := $(call probe,$(H)include <immintrin.h>\n__m512h f(__m512h a,__m512h b){return _mm512_fmadd_ph(a,b,a);}\nint main(void){return 0;}\n,$(DIRECT_FP16_FLAGS))
ifeq ($(HAVE_DIRECT_FP16),1)
DIRECT_FP16_OBJS := $(foreach f,fp16 fp16_convert fp16_emulated fp16_avx512,$(BUILD)/backends/direct/$(f).o)
$(DIRECT_FP16_OBJS): CFLAGS += -fopenmp
$(BUILD)/backends/direct/fp16_avx512.o: CFLAGS += $(DIRECT_FP16_FLAGS)
$(BUILD)/backends/direct/fp16_emulated.o: CFLAGS += -ffp-contract=off
$(DIRECT_FP16_OBJS): $(BUILD)/build-flags

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

# The products alone on LeNet's shapes and the row tile at several chain
# lengths, GFLOP/s (not a test: make direct-fp16-speed ARGS='--threads 2').
.PHONY: direct-fp16-speed
$(BUILD)/direct-fp16-speed: backends/direct/fp16_speed.c $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o -fopenmp -lm
direct-fp16-speed: $(BUILD)/direct-fp16-speed
	$(BUILD)/direct-fp16-speed $(ARGS)
else
SKIPPED += direct_fp16_products:_this_compiler_has_no_-mavx512fp16
endif
