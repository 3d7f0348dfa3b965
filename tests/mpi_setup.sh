# Sourced by the MPI tests (test_mpi.sh, test_mpi_config.sh): the bench and
# the data they use, skip (exit 77) and fail under the test's name, and the
# skips they share: no mpirun, no bench or one built without MPI, no
# Fashion-MNIST files. Not a test itself.
BENCH=${BENCH:-./bench}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
mpi_test=$(basename "$0" .sh)
skip() { echo "$mpi_test: SKIP: $*"; exit 77; }
fail() { echo "$mpi_test: FAIL: $*"; exit 1; }

command -v mpirun >/dev/null 2>&1 || skip "mpirun not found (apt-get install openmpi-bin)"
[ -x "$BENCH" ] || skip "no bench at $BENCH"
"$BENCH" --list | grep -q "^data-parallel over MPI: mpirun" ||
    skip "$("$BENCH" --list | grep '^data-parallel over MPI' || echo 'bench built without MPI')"
[ -r "$DATA/train-images-idx3-ubyte" ] || [ -r "$DATA/train-images-idx3-ubyte.gz" ] ||
    skip "Fashion-MNIST not found in $DATA"

# Open MPI refuses root without these; a rank waiting in a collective
# yields its core (this machine may have fewer cores than ranks).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1
