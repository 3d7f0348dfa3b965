# The blas backend: OpenBLAS (through CBLAS) plus OpenMP, built as the module
# $(BUILD)/modules/blas.so, so that OpenBLAS is mapped (and starts its
# threads) only when the blas backend is probed or run. BLAS=0 leaves it out.
#
# Prefers Debian's OpenMP build of OpenBLAS, linked by path with an rpath:
# then OpenBLAS and our own parallel loops share one OpenMP thread pool.
# The default libopenblas.so (the update-alternatives choice) is usually the
# pthreads build, with a pool of its own; it is the fallback.
#
# kernel_choice.c is part of the program, built or not: it decides the
# environment OpenBLAS and libgomp start in, before the module is loaded.
LIB_SRCS += backends/blas/kernel_choice.c backends/blas/registration.c
BLAS ?= 1
ifneq ($(BLAS),0)
BLAS_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_OPENMP_DIR := /usr/lib/$(BLAS_MULTIARCH)/openblas-openmp
BLAS_PROBE_CODE := $(H)include <cblas.h>\n$(H)include <omp.h>\nint main(void){openblas_set_num_threads(1);return openblas_get_parallel()+omp_get_max_threads()<0;}\n
BLAS_PROBE_FLAGS := -fopenmp -Werror=implicit-function-declaration

# Headers: the multiarch cblas.h when it is OpenBLAS's, else OpenBLAS's own.
BLAS_INC :=
ifneq ($(call probe,$(BLAS_PROBE_CODE),$(BLAS_PROBE_FLAGS) -lopenblas),1)
ifeq ($(call probe,$(BLAS_PROBE_CODE),$(BLAS_PROBE_FLAGS) -I/usr/include/$(BLAS_MULTIARCH)/openblas-pthread -lopenblas),1)
BLAS_INC := -I/usr/include/$(BLAS_MULTIARCH)/openblas-pthread
endif
endif

BLAS_LIBS :=
# (that directory has no libopenblas.so for -lopenblas, hence -l:FILE)
BLAS_OPENMP_LINK := -L$(BLAS_OPENMP_DIR) -l:libopenblas.so.0 -Wl,-rpath,$(BLAS_OPENMP_DIR)
ifeq ($(call probe,$(BLAS_PROBE_CODE),$(BLAS_PROBE_FLAGS) $(BLAS_INC) $(BLAS_OPENMP_LINK)),1)
BLAS_LIBS := $(BLAS_OPENMP_LINK)
else ifeq ($(call probe,$(BLAS_PROBE_CODE),$(BLAS_PROBE_FLAGS) $(BLAS_INC) -lopenblas),1)
BLAS_LIBS := -lopenblas
endif
endif

.PHONY: bench-cpu
ifneq ($(BLAS_LIBS),)
HAVE_BLAS := 1
CFLAGS += -DHAVE_BLAS
# The CHWN engine (backends/chwn/module.mk) for float and double, with
# the GEMM product sets (gemm_products.c, built for float: sgemm and
# sbgemm, and double: dgemm) and the bf16 GEMM.
BLAS_OBJS := $(CHWN_OBJS_F32) $(CHWN_OBJS_F64) \
             $(foreach f,gemm_products gemm_products_f64 blas_backend bf16 sgemm_peak blas_probe,$(BUILD)/backends/blas/$(f).o)
$(eval $(call module_rule,blas,$(BLAS_OBJS) $(MODULE_SHARED_OBJS),$(BLAS_LIBS) -fopenmp))
# the engine (test_blas), its layers and its stages, each a program
BLAS_ENGINE_TESTS := test_blas test_blas_layers test_blas_stages
TESTS += $(BLAS_ENGINE_TESTS)
$(foreach t,$(BLAS_ENGINE_TESTS),$(eval TEST_OBJS_$(t) := $(BLAS_OBJS)) \
    $(eval TEST_LIBS_$(t) := $(BLAS_LIBS) -fopenmp))
# the kernel choice in child processes that load the module; no OpenBLAS
# in the test program itself
TESTS += test_kernel_choice
TEST_SCRIPTS += tests/test_kernel_choice.sh
$(BUILD)/backends/blas/%.o: CFLAGS += -fopenmp $(BLAS_INC)
$(BLAS_ENGINE_TESTS:%=$(BUILD)/tests/%): CFLAGS += $(BLAS_INC)
# The share of the multiply-adds that reaches OpenBLAS, counted by a
# library preloaded in front of it (tests/gemm_count.c)
TESTS += test_blas_gemm_share
$(BUILD)/tests/gemm_count.so: tests/gemm_count.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -o $@ $< -ldl
$(BUILD)/tests/test_blas_gemm_share: $(BUILD)/tests/gemm_count.so
$(BUILD)/tests/test_blas_gemm_share: CFLAGS += -DLB_GEMM_COUNT_SO='"$(abspath $(BUILD))/tests/gemm_count.so"'

# The measured sgemm ceiling that the CPU benchmark divides by.
$(BUILD)/sgemm-peak: backends/blas/sgemm_peak_tool.c $(BLAS_OBJS) $(MODULE_SHARED_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fopenmp $(BLAS_INC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) -fopenmp -lm

# every CPU row (naive, blas, direct, the PyTorch peer, ...) on the full
# training set (several minutes); ARGS go to scripts/bench-cpu (see its
# --help).
bench-cpu: $(BENCH) modules $(BUILD)/sgemm-peak
	BENCH=./$(BENCH) SGEMM_PEAK=$(BUILD)/sgemm-peak scripts/bench-cpu $(ARGS)
else
ifeq ($(BLAS),0)
SKIPPED += blas_backend:_left_out_with_make_BLAS=0
else
SKIPPED += blas_backend:_cblas.h,_libopenblas_or_OpenMP_not_found,_apt-get_install_libopenblas-dev_libopenblas0-openmp
endif
# the other CPU rows still run; blas is reported as skipped
bench-cpu: $(BENCH) modules
	BENCH=./$(BENCH) scripts/bench-cpu $(ARGS)
endif
