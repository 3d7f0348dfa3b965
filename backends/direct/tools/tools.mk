# The direct backend's speed programs (backends/direct/tools/), not tests:
# each product set timed alone at LeNet's shapes. They link the objects
# module.mk, bf16/bf16.mk and fp16/fp16.mk name, read before this file.
ifeq ($(HAVE_DIRECT),1)
# Each build of the fp32 products this CPU runs, timed alone at LeNet's
# shapes against the FMA peak it measures (not a test: make
# direct-kernel-speed ARGS='--rounds 50 --isa avx512_2fma,avx512').
.PHONY: direct-kernel-speed
DIRECT_SPEED_OBJS := $(BUILD)/backends/direct/fp32/dispatch.o $(DIRECT_KERNEL_OBJS) $(BUILD)/base/cpu.o \
    $(DIRECT_ISA_OBJS)
$(BUILD)/direct-kernel-speed: backends/direct/tools/kernel_speed.c $(DIRECT_SPEED_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_SPEED_OBJS) -fopenmp -lm
direct-kernel-speed: $(BUILD)/direct-kernel-speed
	$(BUILD)/direct-kernel-speed $(ARGS)

# The three bf16 sets' products (vdpbf16ps, fp32 FMAs on bf16-rounded
# operands, fp32) side by side (make direct-bf16-fma-speed ARGS='--rounds 50')
.PHONY: direct-bf16-fma-speed
$(BUILD)/direct-bf16-fma-speed: backends/direct/tools/bf16_fma_speed.c $(DIRECT_SETS_OBJS) \
    $(BUILD)/base/cpu.o $(DIRECT_ISA_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DIRECT_SETS_FLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_SETS_OBJS) \
	    $(BUILD)/base/cpu.o $(DIRECT_ISA_OBJS) -fopenmp -lm
direct-bf16-fma-speed: $(BUILD)/direct-bf16-fma-speed
	$(BUILD)/direct-bf16-fma-speed $(ARGS)

ifeq ($(HAVE_DIRECT_BF16),1)
# The products alone against the fp32 direct kernels this CPU runs
# (backends/direct/fp32/dispatch.c), GFLOP/s (not a test: make direct-bf16-speed
# ARGS='--threads 2 --repeats 20').
.PHONY: direct-bf16-speed
DIRECT_FP32_OBJS := $(DIRECT_SPEED_OBJS)
$(BUILD)/direct-bf16-speed: backends/direct/tools/bf16_speed.c $(DIRECT_BF16_OBJS) $(DIRECT_FP32_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_FP32_OBJS) $(DIRECT_BF16_OBJS) \
	    -fopenmp -lm
direct-bf16-speed: $(BUILD)/direct-bf16-speed
	$(BUILD)/direct-bf16-speed $(ARGS)
endif

ifeq ($(HAVE_DIRECT_FP16),1)
# The products alone on LeNet's shapes and the row tile at several chain
# lengths, GFLOP/s (not a test: make direct-fp16-speed ARGS='--threads 2').
.PHONY: direct-fp16-speed
$(BUILD)/direct-fp16-speed: backends/direct/tools/fp16_speed.c $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(LDFLAGS) -o $@ $< $(DIRECT_FP16_OBJS) $(BUILD)/base/cpu.o -fopenmp -lm
direct-fp16-speed: $(BUILD)/direct-fp16-speed
	$(BUILD)/direct-fp16-speed $(ARGS)
endif
endif
