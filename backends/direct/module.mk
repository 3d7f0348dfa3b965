# The direct backend (backends/direct/direct_backend.h): the CHWN engine
# (backends/chwn/module.mk, its float build) with the direct product sets
# (fp32_products.c over the register tiles, bf16_products.c over the bf16
# products), and kernels.c built once per instruction set, as the module
# $(BUILD)/modules/direct.so. It needs OpenMP, not OpenBLAS. DIRECT=0
# leaves it out.
#
# Each build of kernels.c puts its set's -march after the build's own
# (which may be -march=native): the choice among them is made when the
# program runs (dispatch.c), so one build runs its best path on any x86-64.
# The AVX-512 builds have 32 vector registers, hence their larger tiles:
# 8 rows by 3 vectors (24 accumulators) against the 6 by 2 of the others,
# and 6 by 4 in avx512_2fma, the build for cores with two 512-bit FMA
# ports (below). On a
# Zen 4 core shared with other work (load average 8) it trained at 1745
# images/s against 1661 for 6 by 2 on one thread and 1996 against 1990 on
# two (means of 4 and 3 interleaved runs, within the noise); 12 by 2 was
# 30% slower, larger weight-gradient tiles (4x5, 2x8) no faster.
# what the registry knows of the backend, built or not
LIB_SRCS += backends/direct/registration.c
# The builds of the fp32 tiles (fp32/kernels.c), best first: the one list
# of them. isa.c (their names) and dispatch.c (their tables) read it as
# LB_DIRECT_ISAS(X), X(avx512_2fma) X(avx512) ...; each build's flags are
# DIRECT_FLAGS_<name> below.
ifneq ($(findstring x86_64,$(shell $(CC) -dumpmachine)),)
DIRECT_ISAS := avx512_2fma avx512 avx2 generic
else
DIRECT_ISAS := generic
endif
DIRECT_ISA_LIST := '-DLB_DIRECT_ISAS(X)=$(foreach i,$(DIRECT_ISAS),X($(i)))'
$(BUILD)/backends/direct/fp32/isa.o $(BUILD)/backends/direct/fp32/dispatch.o: CFLAGS += $(DIRECT_ISA_LIST)
$(BUILD)/backends/direct/fp32/isa.o $(BUILD)/backends/direct/fp32/dispatch.o: backends/direct/module.mk
# LENET_BENCH_DIRECT_ISA's names and rules (isa.h), and the candidates'
# tables, whose names LENET_BENCH_DIRECT_BF16 and _FP16 take
# (candidates.h): the harness checks the values before anything runs
LIB_SRCS += backends/direct/fp32/isa.c backends/direct/candidates.c
# (both are linked wherever isa.o is)
DIRECT_ISA_OBJS := $(BUILD)/backends/direct/fp32/isa.o $(BUILD)/backends/direct/candidates.o

# The bf16 products (bf16.h): the vdpbf16ps tiles built with AVX-512 flags
# of their own, after the build's -march, so that the object builds on any
# x86-64 machine whose compiler knows the instructions; whether they run is
# decided at run time (direct_bf16_supported). A compiler without
# -mavx512bf16 leaves them out, and the backend's bf16 with them. Here,
# before DIRECT_OBJS, since the module links them (bf16/bf16.mk, read
# later, has their tests, tools/tools.mk their speed tool).
# direct_half_tests P,OBJECTS: the test programs of a half precision's
# products (bf16/bf16.mk, fp16/fp16.mk), tests/test_direct_P.c and
# tests/test_direct_P_products.c, over OBJECTS. A rule of their own: they
# need the products and a few objects, none of the modules (the pattern
# rule waits for every module).
define direct_half_tests
TESTS += test_direct_$(1) test_direct_$(1)_products
$(BUILD)/tests/test_direct_$(1) $(BUILD)/tests/test_direct_$(1)_products: \
    $(BUILD)/tests/%: tests/%.c $(2)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -fopenmp $$(LDFLAGS) -o $$@ $$< $(2) -fopenmp -lm -lcmocka
endef
DIRECT_BF16_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512bf16
HAVE_DIRECT_BF16 := $(call probe,$(H)include <immintrin.h>\n__m512 f(__m512 a,__m512bh b){return _mm512_dpbf16_ps(a,b,b);}\nint main(void){return 0;}\n,$(DIRECT_BF16_FLAGS))
ifeq ($(HAVE_DIRECT_BF16),1)
DIRECT_BF16_OBJS := $(foreach f,bf16 bf16_plain bf16_avx512,$(BUILD)/backends/direct/bf16/$(f).o)
$(DIRECT_BF16_OBJS): CFLAGS += -fopenmp
$(BUILD)/backends/direct/bf16/bf16_avx512.o: CFLAGS += $(DIRECT_BF16_FLAGS)
$(DIRECT_BF16_OBJS): $(BUILD)/build-flags
endif
# The fp16 products (fp16.h) likewise, with AVX512_FP16 (gcc 12 and later);
# the emulated tiles are built with -ffp-contract=off: their exact FMA
# relies on additions that are not fused. fp16/fp16.mk has their tests,
# tools/tools.mk their speed tool.
DIRECT_FP16_FLAGS := -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx512fp16
HAVE_DIRECT_FP16 := $(call probe,$(H)include <immintrin.h>\n__m512h f(__m512h a,__m512h b){return _mm512_fmadd_ph(a,b,a);}\nint main(void){return 0;}\n,$(DIRECT_FP16_FLAGS))
ifeq ($(HAVE_DIRECT_FP16),1)
DIRECT_FP16_OBJS := $(foreach f,fp16 fp16_convert fp16_emulated fp16_avx512,$(BUILD)/backends/direct/fp16/$(f).o)
$(DIRECT_FP16_OBJS): CFLAGS += -fopenmp
$(BUILD)/backends/direct/fp16/fp16_avx512.o: CFLAGS += $(DIRECT_FP16_FLAGS)
$(BUILD)/backends/direct/fp16/fp16_emulated.o: CFLAGS += -ffp-contract=off
$(DIRECT_FP16_OBJS): $(BUILD)/build-flags
endif
DIRECT ?= 1
ifneq ($(DIRECT),0)
DIRECT_PROBE := $(call probe,$(H)include <omp.h>\nint main(void){return omp_get_max_threads()<0;}\n,-fopenmp)
endif
ifeq ($(DIRECT_PROBE),1)
HAVE_DIRECT := 1
CFLAGS += -DHAVE_DIRECT
# Each build enables exactly the features its table's cpu_runs asks
# base/cpu.h for (kernels.c): no BMI, LZCNT or AVX512CD the check does not
# cover.
DIRECT_AVX512_FLAGS := -march=x86-64 -mtune=generic -mavx -mavx2 -mfma -mf16c -mavx512f \
    -mavx512dq -mavx512bw -mavx512vl
DIRECT_FLAGS_avx512 := $(DIRECT_AVX512_FLAGS) -DLB_DIRECT_MR=8 -DLB_DIRECT_NV=3
# Fitted to cores with two 512-bit FMA ports (Intel's server cores, Zen 5):
# 6x4-vector tiles (24 accumulators, 10 loads per 24 FMAs where 8x3 takes
# 11) over column tiles of nearly equal widths (no 1-vector tile with few
# accumulators), and 4x6 weight-gradient tiles (24 accumulators where 2x5
# has 10) with the output channels outer, so that a block's output
# gradient stays in L1 (5x5 was 15-25% slower on conv2: 40 KiB a block;
# 4x6 took conv2's weight gradient 4% past 4x5 on a Sapphire Rapids-class
# Xeon, notes/intel-kernels.md). Measured on one Zen 5 thread:
# notes/direct-two-port.md.
DIRECT_FLAGS_avx512_2fma := $(DIRECT_AVX512_FLAGS) -DLB_DIRECT_MR=6 -DLB_DIRECT_NV=4 \
    -DLB_DIRECT_WK=4 -DLB_DIRECT_WT=6 -DLB_DIRECT_EVEN=1 -DLB_DIRECT_FMA_PORTS=2
DIRECT_FLAGS_avx2 := -march=x86-64 -mtune=haswell -mavx -mavx2 -mfma -mf16c
# SSE2 (x86-64's baseline) has 16 registers and no FMA: a multiply-add
# takes a register for the product, so 5x2 tiles (10 accumulators, 2
# loads, a broadcast, a product) where 6x2 spilled two accumulators
DIRECT_FLAGS_generic := $(if $(filter avx2,$(DIRECT_ISAS)),-march=x86-64 -mtune=generic -DLB_DIRECT_MR=5)
DIRECT_KERNEL_OBJS := $(DIRECT_ISAS:%=$(BUILD)/backends/direct/fp32/kernels_%.o)
# bf16 on the fp32 tiles (bf16_fma.h) is in every build: fp32 FMAs on
# operands rounded to bf16, chosen where vdpbf16ps is missing or slower
DIRECT_BF16_FMA_OBJS := $(foreach f,bf16_fma_products bf16_fma_round bf16_choice,$(BUILD)/backends/direct/bf16/$(f).o)
$(DIRECT_BF16_FMA_OBJS): CFLAGS += -fopenmp
DIRECT_OBJS := $(CHWN_OBJS_F32) \
               $(foreach f,direct_backend choice,$(BUILD)/backends/direct/$(f).o) \
               $(foreach f,fp32_products dispatch,$(BUILD)/backends/direct/fp32/$(f).o) \
               $(DIRECT_KERNEL_OBJS) $(DIRECT_BF16_FMA_OBJS)
# the bf16 and fp16 sets when the compiler has their products, with the
# entries they share
ifeq ($(HAVE_DIRECT_BF16),1)
DIRECT_OBJS += $(BUILD)/backends/direct/bf16/bf16_products.o $(DIRECT_BF16_OBJS)
$(foreach f,bf16_choice bf16_fma_round,$(BUILD)/backends/direct/bf16/$(f).o): CFLAGS += -DHAVE_DIRECT_BF16
endif
ifeq ($(HAVE_DIRECT_FP16),1)
DIRECT_OBJS += $(BUILD)/backends/direct/fp16/fp16_products.o $(DIRECT_FP16_OBJS)
endif
ifneq ($(filter 1,$(HAVE_DIRECT_BF16) $(HAVE_DIRECT_FP16)),)
DIRECT_OBJS += $(BUILD)/backends/direct/half/half_products.o
endif
$(BUILD)/backends/direct/direct_backend.o $(BUILD)/backends/direct/fp32/fp32_products.o $(BUILD)/backends/direct/bf16/bf16_products.o: CFLAGS += -fopenmp
# (isa.o and candidates.o, part of the program too, are in LIB_SRCS: the module links them
# here, beside the objects every module shares)
$(eval $(call module_rule,direct,$(DIRECT_OBJS) $(MODULE_SHARED_OBJS) $(DIRECT_ISA_OBJS),-fopenmp))
# (static pattern: a plain %-pattern would also offer make a way to remake
# the .d files it includes, through its built-in %: %.o); one FMA per
# multiply-add
$(DIRECT_KERNEL_OBJS): $(BUILD)/backends/direct/fp32/kernels_%.o: backends/direct/fp32/kernels.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp -ffp-contract=fast -Wno-psabi $(DIRECT_FLAGS_$*) \
	    -DLB_DIRECT_ISA=$* -c -o $@ $<
$(DIRECT_KERNEL_OBJS) $(DIRECT_OBJS): $(BUILD)/build-flags
# (each build's flags are here: a change to them remakes the builds)
$(DIRECT_KERNEL_OBJS): backends/direct/module.mk

# The builds of the kernels against a reference, each forced in turn, and
# LENET_BENCH_DIRECT_ISA's rules (tests/test_direct_kernels.c); its names,
# a value that names none and bf16 beside a forced build, end to end
# (tests/test_direct_isa.sh)
TESTS += test_direct_kernels
TEST_OBJS_test_direct_kernels := $(BUILD)/backends/direct/fp32/dispatch.o $(DIRECT_KERNEL_OBJS)
TEST_LIBS_test_direct_kernels := -fopenmp -lm
TEST_SCRIPTS += tests/test_direct_isa.sh

# Every tile shape's inner loop in registers: no stack operand, no move
# between vector and general registers, in the kernel objects as GCC and
# clang build them (scripts/check-spills reads them with objdump, so it
# holds on any CPU; tests/test_spills.sh)
TEST_SCRIPTS += tests/test_spills.sh
.PHONY: print-direct-kernel-objects check-spills
print-direct-kernel-objects:
	@echo $(DIRECT_KERNEL_OBJS)
check-spills: $(DIRECT_KERNEL_OBJS)
	scripts/check-spills $(DIRECT_KERNEL_OBJS)

# bf16 on fp32 FMAs against a reference in double and the vdpbf16ps
# products, on every build of the tiles this CPU runs, and the choice
# between the two (tests/test_direct_bf16_fma.c); tools/tools.mk times
# the three sets' products side by side over the same objects
DIRECT_SETS_OBJS := $(DIRECT_BF16_FMA_OBJS) $(DIRECT_KERNEL_OBJS) \
    $(foreach f,fp32_products dispatch,$(BUILD)/backends/direct/fp32/$(f).o) $(BUILD)/backends/direct/choice.o
ifeq ($(HAVE_DIRECT_BF16),1)
DIRECT_SETS_OBJS += $(DIRECT_BF16_OBJS) \
    $(BUILD)/backends/direct/bf16/bf16_products.o $(BUILD)/backends/direct/half/half_products.o
DIRECT_SETS_FLAGS := -DHAVE_DIRECT_BF16
else # (the rounding's plain definition, for the test)
DIRECT_SETS_OBJS += $(BUILD)/backends/direct/bf16/bf16_plain.o
endif
TESTS += test_direct_bf16_fma
TEST_OBJS_test_direct_bf16_fma := $(DIRECT_SETS_OBJS)
TEST_LIBS_test_direct_bf16_fma := -fopenmp -lm
$(BUILD)/tests/test_direct_bf16_fma: private CFLAGS += -fopenmp $(DIRECT_SETS_FLAGS)

# tests/test_blas*.c over the direct engine (tests/test_direct*.c), once per
# build of the kernels this CPU runs (it forces each in turn)
DIRECT_ENGINE_TESTS := test_direct test_direct_layers test_direct_stages
TESTS += $(DIRECT_ENGINE_TESTS)
$(foreach t,$(DIRECT_ENGINE_TESTS),$(eval TEST_OBJS_$(t) := $(DIRECT_OBJS)) \
    $(eval TEST_LIBS_$(t) := -fopenmp))
$(DIRECT_ENGINE_TESTS:%=$(BUILD)/tests/%): CFLAGS += -fopenmp
else ifeq ($(DIRECT),0)
SKIPPED += direct_backend:_left_out_with_make_DIRECT=0
else
SKIPPED += direct_backend:_OpenMP_(omp.h,_-fopenmp)_not_found
endif
