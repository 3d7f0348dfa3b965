# Finding the CUDA toolkit and its libraries, shared by backends/cuda/module.mk
# (the cuda module) and parallel/module.mk (the nccl module). Included by the
# top Makefile before any module.mk, so the module files do not depend on
# the order they are read in. Sets:
#   CUDA_NVCC        nvcc's path, empty when not found
#   CUDA_INC_FLAGS   -I flags for cuda_runtime_api.h, cudnn.h, cublas_v2.h
#   CUDA_LINK_FLAGS  cudart, cuBLAS and cuDNN, with an rpath
#   HAVE_CUDA_LIBS   1 when a one-line program using all three links
#   NCCL_INC_FLAGS, NCCL_LINK_FLAGS, HAVE_NCCL  the same for NCCL
# CUDA=0 on the make command line leaves all of it out.
CUDA ?= 1
ifneq ($(CUDA),0)
CUDA_NVCC := $(shell command -v $(NVCC) 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
CUDA_INC_FLAGS := -I$(CUDA_HOME)/include
CUDA_LINK_FLAGS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart
HAVE_CUDA_LIBS := $(call probe,$(H)include <cudnn.h>\n$(H)include <cublas_v2.h>\n$(H)include <cuda_runtime_api.h>\nint main(void){cublasHandle_t h;int v;cudaRuntimeGetVersion(&v);return (int)cudnnGetVersion()+(int)cublasCreate(&h);}\n,$(CUDA_INC_FLAGS) $(CUDA_LINK_FLAGS))
NCCL_INC_FLAGS := $(CUDA_INC_FLAGS)
NCCL_LINK_FLAGS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcudart
HAVE_NCCL := $(if $(HAVE_CUDA_LIBS),$(call probe,$(H)include <nccl.h>\nint main(void){int v;return ncclGetVersion(&v);}\n,$(NCCL_INC_FLAGS) $(NCCL_LINK_FLAGS)))
endif
