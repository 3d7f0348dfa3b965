# parallel/: the data-parallel coordinator, its communicators (in-process,
# MPI, NCCL) and the multi-gpu backend. The coordinator and the in-process
# communicator need only pthreads; MPI is built when mpicc works, NCCL when
# nccl.h and libnccl are found beside a CUDA build.
LIB_SRCS += $(wildcard parallel/*.c)
LDLIBS += -pthread
TESTS += test_parallel
TEST_SCRIPTS += tests/test_mpi.sh

# MPI: only world_mpi.c includes mpi.h, compiled with mpicc's own flags;
# everything links libmpi, but MPI starts only under mpirun (parallel/world.h).
MPICC ?= mpicc
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
HAVE_MPI := $(call probe,$(H)include <mpi.h>\nint main(void){return MPI_Init(0,0);}\n,$(MPI_CFLAGS) $(MPI_LIBS))
ifeq ($(HAVE_MPI),1)
$(BUILD)/parallel/world_mpi.o: CFLAGS += -DHAVE_MPI $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)
else
SKIPPED += MPI:_mpicc_not_found_or_cannot_link,_install_libopenmpi-dev_and_openmpi-bin
endif

# CUDA-side helpers follow the cuda backend's build (-DHAVE_CUDA in CFLAGS);
# where cudart and NCCL come from: backends/cuda/find-libs.mk.
include backends/cuda/find-libs.mk
ifneq ($(filter -DHAVE_CUDA,$(CFLAGS)),)
PAR_CUDA_FLAGS := $(CUDA_INC_FLAGS) $(NCCL_INC_FLAGS)
$(BUILD)/parallel/devmem.o $(BUILD)/parallel/comm_nccl.o: CFLAGS += $(PAR_CUDA_FLAGS)
ifeq ($(findstring libcudart,$(LDLIBS)),)
LDLIBS += $(CUDART_LINK_FLAGS)
endif
ifeq ($(HAVE_NCCL),1)
$(BUILD)/parallel/comm_nccl.o: CFLAGS += -DHAVE_NCCL
LDLIBS += $(NCCL_LINK_FLAGS)
else
SKIPPED += NCCL_communicator:_$(subst $(FIND_LIBS_SPACE),_,$(strip $(NCCL_WHY))),_multi-gpu_reduces_through_host_memory
endif
else
SKIPPED += NCCL_communicator:_needs_the_cuda_backend
endif
