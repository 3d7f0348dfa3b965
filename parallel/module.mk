# parallel/: the data-parallel and model-parallel coordinators, their communicators (in-process,
# MPI, NCCL) and the multi-gpu backend. The coordinator and the in-process
# communicator need only pthreads. MPI is linked into the program when mpicc
# works (MPI=0 leaves it out); it starts only under mpirun. NCCL is the
# module $(BUILD)/modules/nccl.so, built when nccl.h and libnccl are found
# beside a CUDA build (backends/cuda/find-libs.mk).
LIB_SRCS += parallel/comm_inproc.c parallel/data_parallel.c parallel/data_parallel_replicas.c parallel/gpu_link.c parallel/model_parallel.c parallel/model_cuts.c parallel/model_schedule.c parallel/wrap.c \
            parallel/workers.c parallel/world_mpi.c
LDLIBS += -pthread
TESTS += test_parallel test_model
# The input pipeline: reading and preprocessing threads ahead of compute.
LIB_SRCS += parallel/prefetch.c
TESTS += test_prefetch
TEST_SCRIPTS += tests/test_mpi.sh

# MPI: only world_mpi.c includes mpi.h, compiled with mpicc's own flags.
MPI ?= 1
MPICC ?= mpicc
ifneq ($(MPI),0)
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
HAVE_MPI := $(call probe,$(H)include <mpi.h>\nint main(void){return MPI_Init(0,0);}\n,$(MPI_CFLAGS) $(MPI_LIBS))
endif
ifeq ($(HAVE_MPI),1)
$(BUILD)/parallel/world_mpi.o: CFLAGS += -DHAVE_MPI $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)
else ifeq ($(MPI),0)
SKIPPED += MPI:_left_out_with_make_MPI=0
else
SKIPPED += MPI:_mpicc_not_found_or_cannot_link,_install_libopenmpi-dev_and_openmpi-bin
endif

ifeq ($(if $(CUDA_NVCC),$(HAVE_CUDA_LIBS)),1)
ifeq ($(HAVE_NCCL),1)
CFLAGS += -DHAVE_NCCL
$(BUILD)/parallel/comm_nccl.o: CFLAGS += $(NCCL_INC_FLAGS)
$(eval $(call module_rule,nccl,$(BUILD)/parallel/comm_nccl.o,$(NCCL_LINK_FLAGS)))
else
SKIPPED += NCCL_communicator:_$(subst $(FIND_LIBS_SPACE),_,$(strip $(NCCL_WHY))),_multi-gpu_reduces_through_host_memory
endif
else
SKIPPED += NCCL_communicator:_needs_the_cuda_backend
endif
