#!/usr/bin/env bash
# valgrind memcheck on a short naive run of ./bench (the full data set is
# loaded and decompressed, one epoch on 256 images, 128 evaluated): no
# invalid access, no use of uninitialised memory, no definite or indirect
# leak. Built in $BUILD-valgrind without -march=native (valgrind cannot
# decode AVX-512), without CUDA (the CUDA libraries' load-time code is not
# this project's, and it cannot run here) and without OpenBLAS (BLAS_LIBS
# empty: the run's OpenBLAS peak probe alone takes minutes under valgrind).
set -u
cd "$(dirname "$0")/.." || exit 1
if ! command -v valgrind >/dev/null; then
    echo "valgrind not installed (apt-get install valgrind): skipped"
    exit 77
fi
vg=${BUILD:-build}-valgrind
unset MAKEFLAGS MFLAGS MAKELEVEL
mkdir -p "$vg"
if ! make -s -j2 BUILD="$vg" BENCH="$vg/bench" OPT=-O2 NVCC=/nonexistent CUDA_HOME=/nonexistent BLAS_LIBS= \
        "$vg/bench" >"$vg/valgrind-build.log" 2>&1; then
    tail -30 "$vg/valgrind-build.log"
    echo "valgrind: the build failed (log: $vg/valgrind-build.log)"
    exit 1
fi
tmp=$(mktemp -d /tmp/valgrind.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
data=()
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
    # no data set installed: a crafted one, so the check still runs
    (export BENCH="$PWD/$vg/bench"; source tests/craft.sh; make_dataset "$tmp/data" 256 128)
    data=(--data "$tmp/data")
fi
cmd=("$vg/bench" --backend naive --epochs 1 --limit 256 --test-limit 128 "${data[@]}" --out "$tmp/run")
echo "valgrind --leak-check=full ${cmd[*]}"
valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --log-file="$tmp/valgrind.log" "${cmd[@]}" \
    >"$tmp/out" 2>&1
rc=$?
grep -E "in use at exit|All heap blocks|definitely lost|indirectly lost|ERROR SUMMARY" "$tmp/valgrind.log" | sed 's/^==[0-9]*== //'
if [ "$rc" -ne 0 ]; then
    grep -v "^==[0-9]*== *$" "$tmp/valgrind.log" | head -80
    tail -5 "$tmp/out"
    echo "valgrind: exit status $rc"
    exit 1
fi
echo "valgrind: clean"
