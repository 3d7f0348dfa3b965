#!/usr/bin/env bash
# The test programs again, built with AddressSanitizer and UBSan
# (-fno-sanitize-recover=all: the first finding fails the test) in a build
# directory of their own, $BUILD-asan; then short runs of that ./bench: a
# naive and a blas training run, and the command-line and bad-file tests.
#
# What is left out, and why:
#   - test_naive, test_blas (and its builds at other vector widths) and
#     test_equivalence: minutes under ASan on 2 cores (finite differences
#     over whole networks; hundreds of training steps). The same layer code
#     runs here in the short training runs below, and under valgrind
#     (tests/valgrind.sh).
#   - test_direct_stages: over two minutes under ASan (direct's register
#     tiles at -O1, every stage cut trained); the stage code is the CHWN
#     engine's, which test_blas_stages runs here in 20 s, and the tiles'
#     own programs (test_direct_kernels, test_direct_bf16_products) run
#     here too.
#   - the test programs' runs of ./bench on the whole data set (BENCH is
#     pointed nowhere, so they report themselves skipped): minutes under ASan.
#   - CUDA (NVCC and CUDA_HOME pointed nowhere): GPU code cannot run on the
#     machines without a GPU, and the CUDA driver under ASan needs
#     protect_shadow_gap=0 and reports its own allocations; GPU memory is
#     checked with compute-sanitizer (scripts/gpu-check) instead.
# No leak suppressions outside mpirun: none is needed with OpenBLAS, libgomp
# and Open MPI (not started outside mpirun) as they are, and one naming
# libgomp would also hide a leak of our own allocated inside an OpenMP
# region. Under mpirun, Open MPI keeps ~120 KB of its own until exit, which
# LeakSanitizer reports (and turns the exit status into 1): the MPI run
# below uses tests/lsan-openmpi.supp, which names Open MPI's libraries only,
# with full stacks (fast_unwind_on_malloc=0: Open MPI has no frame
# pointers, and a one-frame stack in an unloaded plugin matches nothing)
# and its plugins kept loaded so their frames have names.
set -u
cd "$(dirname "$0")/.." || exit 1
base=${BUILD:-build}
asan=$base-asan
cc=${CC:-gcc}
if ! printf 'int main(void){return 0;}\n' |
        "$cc" -x c - -o /dev/null -fsanitize=address,undefined 2>/dev/null; then
    echo "sanitizers: $cc cannot link -fsanitize=address,undefined (install libasan/libubsan): skipped"
    exit 77
fi
# A make of our own, not the calling make's variables.
unset MAKEFLAGS MFLAGS MAKELEVEL
vars=(BUILD="$asan" BENCH="$asan/bench" NVCC=/nonexistent CUDA_HOME=/nonexistent
      EXTRA_CFLAGS='-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -Wno-error'
      EXTRA_LDFLAGS='-fsanitize=address,undefined')
# -Wno-error: GCC warns differently at -O1 with the sanitisers (known
# -Wformat-truncation and -Wstringop-overflow false positives); the normal
# build keeps -Werror.
skip_programs="test_naive test_blas test_direct test_equivalence test_direct_stages"
# The slowest under ASan start first (test_model about 200 s, the half
# products about 55 s each), so that the other lane takes the rest.
slow_first="test_model test_direct_fp16_products test_direct_bf16_products test_blas_stages"
# test_peak measures the FMA peak with and without a busy core of its own:
# it runs alone, after the others.
alone="test_peak"
programs=() rest=() alone_programs=()
for p in $(make -s "${vars[@]}" print-test-programs); do
    case " $skip_programs " in *" $(basename "$p") "*) continue ;; esac
    case " $slow_first " in *" $(basename "$p") "*) programs+=("$p"); continue ;; esac
    case " $alone " in *" $(basename "$p") "*) alone_programs+=("$p"); continue ;; esac
    rest+=("$p")
done
programs+=("${rest[@]}")
echo "building $((${#programs[@]} + ${#alone_programs[@]})) test programs and ./bench with -fsanitize=address,undefined in $asan/"
mkdir -p "$asan"
if ! make -s -j2 "${vars[@]}" "$asan/bench" "${programs[@]}" "${alone_programs[@]}" >"$asan/sanitizers-build.log" 2>&1; then
    tail -30 "$asan/sanitizers-build.log"
    echo "sanitizers: the sanitiser build failed (log: $asan/sanitizers-build.log)"
    exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:check_initialization_order=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "not sanitised here: $skip_programs (too slow under ASan; see the header of this script)"
# BENCH points nowhere: the programs' whole-data-set runs of ./bench (minutes
# under ASan) skip; the short runs below cover ./bench. Two at a time: each
# keeps one core busy under ASan, and none of them but test_peak (alone,
# after them) holds a figure to a quiet machine's.
BENCH=/nonexistent BUILD=$asan scripts/run-tests --jobs 2 "${programs[@]}" || exit 1
if [ "${#alone_programs[@]}" -gt 0 ]; then
    BENCH=/nonexistent BUILD=$asan scripts/run-tests "${alone_programs[@]}" || exit 1
fi

# Short runs of the sanitised ./bench.
status=0
tmp=$(mktemp -d /tmp/sanitizers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
(
    export BENCH="$PWD/$asan/bench"
    source tests/craft.sh
    make_dataset "$tmp/data" 320 100
)
backends=naive
"$asan/bench" --list | grep -q '^blas .*built, runnable' && backends=naive,blas
echo "== $asan/bench --backend $backends (2 epochs, 320 images, ASan + UBSan)"
if ! "$asan/bench" --backend "$backends" --epochs 2 --batch-size 64 --data "$tmp/data" \
        --out "$tmp/run" --save-params "$tmp/p" >"$tmp/out" 2>&1 ||
   ! "$asan/bench" --backend naive --epochs 1 --batch-size 64 --data "$tmp/data" \
        --out "$tmp/run2" --init-params "$tmp/p.naive" >>"$tmp/out" 2>&1; then
    tail -40 "$tmp/out"
    echo "sanitizers: a short run of the sanitised ./bench failed"
    status=1
fi
for t in tests/test_cli.sh tests/test_faults.sh; do
    echo "== $t with the sanitised ./bench"
    if ! SANITIZED=1 BENCH=$asan/bench bash "$t" >"$tmp/out" 2>&1; then
        tail -20 "$tmp/out"
        echo "sanitizers: $t failed with the sanitised ./bench"
        status=1
    else
        tail -1 "$tmp/out"
    fi
done
# A short data-parallel run over two MPI ranks, where MPI is built in.
if command -v mpirun >/dev/null && "$asan/bench" --list | grep -q "^data-parallel over MPI: mpirun"; then
    echo "== mpirun -np 2 $asan/bench (naive, mlp, 1 epoch, Open MPI's allocations suppressed)"
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
            OMPI_MCA_mca_base_component_disable_dlclose=1 \
            ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" \
            LSAN_OPTIONS="suppressions=$PWD/tests/lsan-openmpi.supp" \
            timeout 300 mpirun --oversubscribe -np 2 -x ASAN_OPTIONS -x LSAN_OPTIONS \
            -x OMPI_MCA_mca_base_component_disable_dlclose "$asan/bench" --backend naive \
            --workload mlp --epochs 1 --batch-size 64 --data "$tmp/data" --no-peak \
            --out "$tmp/mpi" >"$tmp/out" 2>&1; then
        grep -E 'SUMMARY|ERROR' "$tmp/out" | head -5
        tail -20 "$tmp/out"
        echo "sanitizers: the sanitised ./bench under mpirun failed"
        status=1
    fi
else
    echo "sanitizers: no mpirun or no MPI in this build: the MPI run is left out"
fi
[ "$status" -eq 0 ] && echo "sanitizers: clean"
exit $status
