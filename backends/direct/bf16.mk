# The direct backend's bf16 products (backends/direct/bf16.h): the
# vdpbf16ps tiles built with AVX-512 flags of their own, after the build's
# -march, so that the object builds on any x86-64 machine whose compiler
# knows the instructions; whether they run is decided at run time
# (direct_bf16_supported). A compiler without -mavx512bf16 leaves them out.
DIRECT_BF16_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512bf16
HAVE_DIRECT_BF16 := $(call probe,$(H)include <immintrin.h>\n__m512 f(__m512 a,__m512bh b){return _mm512_dpbf16_ps(a,b,b);}\nint main(void){return 0;}\n,$(DIRECT_BF16_FLAGS))
ifeq ($(HAVE_DIRECT_BF16),1)
DIRECT_BF16_OBJS := $(BUILD)/backends/direct/bf16.o $(BUILD)/backends/direct/bf16_avx512.o
$(DIRECT_BF16_OBJS): CFLAGS += -fopenmp
$(BUILD)/backends/direct/bf16_avx512.o: CFLAGS += $(DIRECT_BF16_FLAGS)
$(DIRECT_BF16_OBJS): $(BUILD)/build-flags

# Its test needs the naive layers and the seeded generator, none of the
# modules, so it has a rule of its own (the pattern rule waits for every
# module).
TESTS += test_direct_bf16
DIRECT_BF16_TEST_OBJS := $(DIRECT_BF16_OBJS) \
    $(foreach o,naive/conv naive/dense naive/matmul,$(BUILD)/backends/$(o).o) $(BUILD)/harness/run/init.o
$(BUILD)/tests/test_direct_bf16: tests/test_direct_bf16.c $(DIRECT_BF16_TEST_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_BF16_TEST_OBJS) -fopenmp -lm -lcmocka

# The products alone against the fp32 direct kernels this CPU runs
# (backends/direct/dispatch.c), GFLOP/s (not a test: make direct-bf16-speed
# ARGS='--threads 2 --repeats 20').
.PHONY: direct-bf16-speed
DIRECT_FP32_OBJS := $(BUILD)/backends/direct/dispatch.o $(DIRECT_KERNEL_OBJS)
$(BUILD)/direct-bf16-speed: backends/direct/bf16_speed.c $(DIRECT_BF16_OBJS) $(DIRECT_FP32_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_FP32_OBJS) $(DIRECT_BF16_OBJS) \
	    -fopenmp -lm
direct-bf16-speed: $(BUILD)/direct-bf16-speed
	$(BUILD)/direct-bf16-speed $(ARGS)
else
SKIPPED += direct_bf16_products:_this_compiler_has_no_-mavx512bf16
endif
