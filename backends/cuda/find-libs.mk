# Where the CUDA toolkit and its libraries come from, for backends/cuda/
# module.mk (the cuda module) and parallel/module.mk (the nccl module).
# Included by the top Makefile before any module.mk, so the module files do
# not depend on the order they are read in; only defines variables and adds
# to `make info`.
#
# Inputs (make or environment variables):
#   CUDA        0 leaves all of it out (make CUDA=0)
#   NVCC        nvcc to use (default nvcc): from PATH, else $(CUDA_HOME)/bin
#   CUDA_HOME   the CUDA toolkit (default /usr/local/cuda)
#   CUDNN_HOME  when set, the only place cuDNN is looked for (include/, lib64/ or lib/)
#   NCCL_HOME   when set, the only place NCCL is looked for
#   PYTHON      the Python whose NVIDIA wheels are searched (default python3 on PATH)
#
# Each piece (cudart, cuBLAS, cuDNN, NCCL) is taken from the first place
# that has both its header (in include/) and a versioned library (in lib64/
# or lib/): $(CUDNN_HOME) or $(NCCL_HOME) when set, else $(CUDA_HOME), else
# every nvidia/<package>/ folder of the Python's NVIDIA wheels (nvidia/cu13
# for the CUDA 13 wheels, nvidia/cudnn, nvidia/cublas, ... for older ones).
# Header and library always come from the same place. Libraries are linked
# by their versioned name (-l:libcudnn.so.9) because the wheels have no
# unversioned libcudnn.so, with an rpath to their folder.
#
# Outputs:
#   CUDA_NVCC        path of nvcc; empty when not found
#   CUDA_INC_FLAGS   -I flags for cuda_runtime_api.h, cublas_v2.h, cudnn.h
#   CUDA_LINK_FLAGS  -L, -l: and rpath flags for cudart, cuBLAS and cuDNN
#   HAVE_CUDA_LIBS   1 when nvcc, cudart, cuBLAS and cuDNN are found and a
#                    one-line program using all three links; else empty
#   CUDA_LIBS_WHY    when HAVE_CUDA_LIBS is empty: why (one line)
#   NCCL_INC_FLAGS   -I flags for nccl.h and the CUDA headers it needs
#   NCCL_LINK_FLAGS  -L, -l: and rpath flags for NCCL and cudart
#   HAVE_NCCL        1 when NCCL is found and links beside cudart; else empty
#   NCCL_WHY         when HAVE_NCCL is empty: why (one line)
#   CUDA_LIBS_FROM   one line: where each piece was found, or that it was not
#                    (printed by `make info`)
# The reasons hold no shell metacharacters: the Makefile's info target
# prints the SKIPPED notes through the shell.
FIND_LIBS_COMMA := ,
FIND_LIBS_EMPTY :=
FIND_LIBS_SPACE := $(FIND_LIBS_EMPTY) $(FIND_LIBS_EMPTY)
CUDA ?= 1
ifneq ($(CUDA),0)

CUDA_HOME ?= /usr/local/cuda
NVCC ?= nvcc
PYTHON ?= python3
CUDA_NVCC := $(shell command -v $(NVCC) 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })

# The folders under site-packages/nvidia/ of the Python on PATH.
NV_SITE_DIRS := $(shell $(PYTHON) -c 'import os, sys; print(" ".join(sorted({os.path.realpath(p) for p in sys.path if os.path.isdir(os.path.join(p, "nvidia"))})))' 2>/dev/null)
NV_WHEEL_DIRS := $(patsubst %/,%,$(sort $(dir $(wildcard $(addsuffix /nvidia/*/include,$(NV_SITE_DIRS))))))

# find_piece ROOTS,HEADER,LIBSTEM: "root libdir soname" of the first root
# with include/HEADER and LIBDIR/LIBSTEM.so.N (LIBDIR lib64 or lib).
find_in = $(firstword $(foreach l,lib64 lib,$(if $(wildcard $(1)/$(l)/$(3).so.[0-9]*),$(1)/$(l))))
find_piece = $(firstword $(foreach r,$(1),$(if $(wildcard $(r)/include/$(2)),$(if $(call find_in,$(r),,$(3)),$(r)|$(call find_in,$(r),,$(3))|$(notdir $(firstword $(sort $(wildcard $(call find_in,$(r),,$(3))/$(3).so.[0-9]*))))))))
piece_root = $(word 1,$(subst |, ,$(1)))
piece_lib = $(word 2,$(subst |, ,$(1)))
piece_so = $(word 3,$(subst |, ,$(1)))
piece_inc = -I$(call piece_root,$(1))/include
piece_link = -L$(call piece_lib,$(1)) -l:$(call piece_so,$(1)) -Wl,-rpath,$(call piece_lib,$(1))
# "cuDNN: DIR/SONAME (where)" or "cuDNN: not found in PLACES"
where_label = $(if $(filter $(CUDA_HOME),$(1)),CUDA_HOME,$(if $(filter $(CUDNN_HOME) $(NCCL_HOME),$(1)),$(2),$(PYTHON) wheel))
piece_text = $(3): $(if $(1),$(call piece_lib,$(1))/$(call piece_so,$(1)) ($(call where_label,$(call piece_root,$(1)),$(4))),not found in $(5))

CUDA_PLACES := $(CUDA_HOME) $(NV_WHEEL_DIRS)
CUDA_PLACES_TEXT := $(CUDA_HOME) nor the NVIDIA wheels of $(PYTHON)
CUDNN_PLACES := $(if $(CUDNN_HOME),$(CUDNN_HOME),$(CUDA_PLACES))
CUDNN_PLACES_TEXT := $(if $(CUDNN_HOME),CUDNN_HOME=$(CUDNN_HOME),$(CUDA_PLACES_TEXT))
NCCL_PLACES := $(if $(NCCL_HOME),$(NCCL_HOME),$(CUDA_PLACES))
NCCL_PLACES_TEXT := $(if $(NCCL_HOME),NCCL_HOME=$(NCCL_HOME),$(CUDA_PLACES_TEXT))

CUDART_AT := $(call find_piece,$(CUDA_PLACES),cuda_runtime_api.h,libcudart)
CUBLAS_AT := $(call find_piece,$(CUDA_PLACES),cublas_v2.h,libcublas)
CUDNN_AT := $(call find_piece,$(CUDNN_PLACES),cudnn.h,libcudnn)
NCCL_AT := $(call find_piece,$(NCCL_PLACES),nccl.h,libnccl)

CUDA_LIBS_FROM := $(call piece_text,$(CUDART_AT),,cudart,,$(CUDA_PLACES_TEXT)); \
                  $(call piece_text,$(CUBLAS_AT),,cuBLAS,,$(CUDA_PLACES_TEXT)); \
                  $(call piece_text,$(CUDNN_AT),,cuDNN,CUDNN_HOME,$(CUDNN_PLACES_TEXT)); \
                  $(call piece_text,$(NCCL_AT),,NCCL,NCCL_HOME,$(NCCL_PLACES_TEXT))

# nvcc's own include folder first, so that a wheel's copy of a toolkit
# header (the cu13 wheel ships cuda_runtime*.h) never shadows the one nvcc
# was made with; then each piece's folder once.
CUDA_NVCC_INC := $(if $(CUDA_NVCC),-I$(abspath $(dir $(CUDA_NVCC))/../include))
CUDA_INC_FLAGS := $(CUDA_NVCC_INC) $(filter-out $(CUDA_NVCC_INC),$(sort $(foreach p,$(CUDART_AT) $(CUBLAS_AT) $(CUDNN_AT),$(call piece_inc,$(p)))))
CUDA_LINK_FLAGS := $(foreach p,$(CUDNN_AT) $(CUBLAS_AT) $(CUDART_AT),$(call piece_link,$(p)))
CUDART_LINK_FLAGS := $(if $(CUDART_AT),$(call piece_link,$(CUDART_AT)))

ifeq ($(CUDA_NVCC),)
CUDA_LIBS_WHY := nvcc not found on PATH nor in $(CUDA_HOME)/bin
else ifeq ($(and $(CUDART_AT),$(CUBLAS_AT),$(CUDNN_AT)),)
CUDA_LIBS_WHY := $(strip $(if $(CUDART_AT),,cudart) $(if $(CUBLAS_AT),,cuBLAS) $(if $(CUDNN_AT),,cuDNN)) \
                 not found, header and versioned library, in $(if $(CUDNN_AT),$(CUDA_PLACES_TEXT),$(CUDNN_PLACES_TEXT))
else
HAVE_CUDA_LIBS := $(call probe,$(H)include <cudnn.h>\n$(H)include <cublas_v2.h>\n$(H)include <cuda_runtime_api.h>\nint main(void){cublasHandle_t h;int v;cudaRuntimeGetVersion(&v);return (int)cudnnGetVersion()+(int)cublasCreate(&h);}\n,$(CUDA_INC_FLAGS) $(CUDA_LINK_FLAGS))
CUDA_LIBS_WHY := $(if $(HAVE_CUDA_LIBS),,a program using cudart, cuBLAS and cuDNN from there does not link)
endif

NCCL_INC_FLAGS := $(if $(NCCL_AT),$(call piece_inc,$(NCCL_AT)) $(CUDA_INC_FLAGS))
NCCL_LINK_FLAGS := $(if $(NCCL_AT),$(call piece_link,$(NCCL_AT)) $(CUDART_LINK_FLAGS))
ifeq ($(NCCL_AT),)
NCCL_WHY := nccl.h and a versioned libnccl not found in $(NCCL_PLACES_TEXT)
else ifeq ($(CUDART_AT),)
NCCL_WHY := NCCL needs cudart, which was not found
else
HAVE_NCCL := $(call probe,$(H)include <nccl.h>\nint main(void){int v;return ncclGetVersion(&v);}\n,$(NCCL_INC_FLAGS) $(NCCL_LINK_FLAGS))
NCCL_WHY := $(if $(HAVE_NCCL),,a program calling ncclGetVersion does not link with $(NCCL_LINK_FLAGS))
endif

.PHONY: cuda-libs-info
info: cuda-libs-info
cuda-libs-info:
	@echo 'note: CUDA libraries: $(subst ','"'"',$(strip $(CUDA_LIBS_FROM)))'
else
CUDA_LIBS_WHY := left out with make CUDA=0
NCCL_WHY := left out with make CUDA=0
endif
