# The cuda backend: the module $(BUILD)/modules/cuda.so, built when nvcc,
# cuDNN and cuBLAS are found (backends/cuda/find-libs.mk); a GPU is needed
# only to run it. It also lends the data-parallel code its device memory
# helpers (backends/cuda/devmem.h).

# SASS for the H100/H200 (sm_90) plus PTX that newer GPUs compile at load.
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -std=c++17 -O3 -g -I. $(CUDA_INC_FLAGS) $(CUDA_GENCODE) -Xcompiler -fPIC \
             -Xcompiler -Wall,-Wextra,-Werror --Werror all-warnings -MMD -MP $(EXTRA_NVCCFLAGS)

ifeq ($(if $(CUDA_NVCC),$(HAVE_CUDA_LIBS)),1)
CFLAGS += -DHAVE_CUDA
CUDA_OBJS := $(BUILD)/backends/cuda/engine.o $(BUILD)/backends/cuda/devmem.o \
             $(BUILD)/backends/cuda/kernels.o
$(CUDA_OBJS): CFLAGS += $(CUDA_INC_FLAGS)
$(eval $(call module_rule,cuda,$(CUDA_OBJS) $(MODULE_SHARED_OBJS),$(CUDA_LINK_FLAGS) -lstdc++))
TESTS += test_cuda
TEST_OBJS_test_cuda := $(CUDA_OBJS)
TEST_LIBS_test_cuda := $(CUDA_LINK_FLAGS) -lstdc++
$(BUILD)/tests/test_cuda: CFLAGS += $(CUDA_INC_FLAGS)

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCCFLAGS) -c -o $@ $<
else ifeq ($(CUDA),0)
SKIPPED += cuda_backend:_left_out_with_make_CUDA=0
else ifeq ($(CUDA_NVCC),)
SKIPPED += cuda_backend:_nvcc_not_found_on_PATH_nor_in_$(CUDA_HOME)/bin
else
SKIPPED += cuda_backend:_cuDNN_or_cuBLAS_headers_or_libraries_not_found_under_$(CUDA_HOME)
endif
