# The cuda backend: the module $(BUILD)/modules/cuda.so, built when nvcc,
# cuDNN and cuBLAS are found (backends/cuda/find-libs.mk); a GPU is needed
# only to run it. It also lends the data-parallel code its device memory
# helpers (backends/cuda/devmem.h).

# SASS for the H100/H200 (sm_90) plus PTX that newer GPUs compile at load.
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# warnings are errors unless make WERROR=0
NVCC_WARN := -Xcompiler -Wall,-Wextra$(if $(filter -Werror,$(WARN)),$(FIND_LIBS_COMMA)-Werror --Werror all-warnings)
NVCCFLAGS := -std=c++17 -O3 -g -I. $(CUDA_INC_FLAGS) $(CUDA_GENCODE) -Xcompiler -fPIC \
             $(NVCC_WARN) -MMD -MP $(EXTRA_NVCCFLAGS)

# what the registry knows of the backend, built or not
LIB_SRCS += backends/cuda/registration.c

ifeq ($(if $(CUDA_NVCC),$(HAVE_CUDA_LIBS)),1)
CFLAGS += -DHAVE_CUDA
CUDA_OBJS := $(foreach f,cuda_backend cuda_resources plans plan_sizes step stages describe devmem,$(BUILD)/backends/cuda/$(f).o) \
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
else
SKIPPED += cuda_backend:_$(subst $(FIND_LIBS_SPACE),_,$(strip $(CUDA_LIBS_WHY)))
endif
