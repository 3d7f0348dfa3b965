# The cuda backend: built when nvcc, cuDNN and cuBLAS are found (a GPU is
# not needed to build, only to run). nvcc from PATH, else $(CUDA_HOME)/bin.
CUDA_NVCC := $(shell command -v $(NVCC) 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart
HAVE_CUDA_LIBS := $(call probe,$(H)include <cudnn.h>\n$(H)include <cublas_v2.h>\n$(H)include <cuda_runtime_api.h>\nint main(void){cublasHandle_t h;int v;cudaRuntimeGetVersion(&v);return (int)cudnnGetVersion()+(int)cublasCreate(&h);}\n,-I$(CUDA_HOME)/include $(CUDA_LIBS))

# SASS for the H100/H200 (sm_90) plus PTX that newer GPUs compile at load.
CUDA_GENCODE ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -std=c++17 -O3 -g -I. -I$(CUDA_HOME)/include $(CUDA_GENCODE) \
             -Xcompiler -Wall,-Wextra,-Werror --Werror all-warnings -MMD -MP $(EXTRA_NVCCFLAGS)

ifeq ($(if $(CUDA_NVCC),$(HAVE_CUDA_LIBS)),1)
CFLAGS += -DHAVE_CUDA -I$(CUDA_HOME)/include
LIB_SRCS += backends/cuda/engine.c
CU_SRCS += backends/cuda/kernels.cu
LDLIBS += $(CUDA_LIBS) -lstdc++
TESTS += test_cuda

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CUDA_NVCC) $(NVCCFLAGS) -c -o $@ $<
else ifeq ($(CUDA_NVCC),)
SKIPPED += cuda_backend:_nvcc_not_found_on_PATH_nor_in_$(CUDA_HOME)/bin
else
SKIPPED += cuda_backend:_cuDNN_or_cuBLAS_headers_or_libraries_not_found_under_$(CUDA_HOME)
endif
