# The cuda backend: built when nvcc, cuDNN and cuBLAS are found (a GPU is
# not needed to build, only to run). Where they come from: find-libs.mk.
include backends/cuda/find-libs.mk

# SASS for the H100/H200 (sm_90) plus PTX that newer GPUs compile at load.
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCC_WARN := $(if $(filter -Werror,$(WARN)),-Xcompiler -Wall$(FIND_LIBS_COMMA)-Wextra$(FIND_LIBS_COMMA)-Werror --Werror all-warnings,-Xcompiler -Wall$(FIND_LIBS_COMMA)-Wextra)
NVCCFLAGS := -std=c++17 -O3 -g -I. $(CUDA_INC_FLAGS) $(CUDA_GENCODE) $(NVCC_WARN) -MMD -MP $(EXTRA_NVCCFLAGS)

ifeq ($(if $(CUDA_NVCC),$(HAVE_CUDA_LIBS)),1)
CFLAGS += -DHAVE_CUDA $(CUDA_INC_FLAGS)
LIB_SRCS += backends/cuda/engine.c
CU_SRCS += backends/cuda/kernels.cu
LDLIBS += $(CUDA_LINK_FLAGS) -lstdc++
TESTS += test_cuda

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCCFLAGS) -c -o $@ $<
else
SKIPPED += cuda_backend:_$(subst $(FIND_LIBS_SPACE),_,$(strip $(CUDA_LIBS_WHY)))
endif
