#!/usr/bin/env bash
# Backends as modules: ./bench maps no OpenBLAS or CUDA library for --help, a
# naive run or a subcommand; a module that cannot load costs only its own
# backend, with the loader's reason; and the program starts and runs naive
# under an address-space limit too small for the vendor libraries (it used
# to spin in OpenBLAS's start-up, or abort in cuDNN's symbol loading).
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
make_dataset "$tmp/data" 300 100
D=(--data "$tmp/data" --workload mlp --epochs 1 --limit 256 --test-limit 100)
heavy='libopenblas|libcudart|libcudnn|libcublas|libnccl|modules/(blas|cuda|nccl)\.so'

# mapped NAME ARGS...: the heavy libraries the loader opened for this command.
mapped() {
    local name=$1
    shift
    LD_DEBUG=libs "$BENCH" "$@" >/dev/null 2>"$tmp/ld.$name"
    grep -oE "calling init: [^ ]*($heavy)[^ ]*" "$tmp/ld.$name" | sort -u
}

for case in help list-naive run-naive plot; do
    case $case in
    help) out=$(mapped help --help) ;;
    list-naive) out=$(mapped list-naive --backend naive --help) ;;
    run-naive) out=$(mapped run-naive "${D[@]}" --backend naive --out "$tmp/naive") ;;
    plot) out=$(mapped plot plot "$tmp/naive") ;;
    esac
    if [ -n "$out" ]; then fail "$case mapped a heavy library: $out"; else pass; fi
done
# The control: LD_DEBUG does report these libraries when a backend needs them.
if [ -f build/modules/blas.so ] && [ -z "$(mapped blas "${D[@]}" --backend blas --out "$tmp/blas")" ]; then
    fail "a blas run mapped no OpenBLAS according to LD_DEBUG: the check above proves nothing"
else
    pass
fi
if [ -f "$tmp/naive/system.json" ] && grep -q 'OpenBLAS\|cuDNN\|NCCL' "$tmp/naive/system.json"; then
    fail "a naive run's system.json names a library it did not load: $(grep libraries "$tmp/naive/system.json")"
else
    pass
fi

# A module that fails to load: only its backend is lost, with the reason.
mkdir "$tmp/mods"
echo "not a shared object" >"$tmp/mods/blas.so"
LENET_BENCH_MODULES="$tmp/mods" "$BENCH" --list >"$tmp/list" 2>&1
if grep -q '^blas .*not runnable here: cannot load .*blas.so' "$tmp/list" &&
        grep -q '^naive .*built, runnable' "$tmp/list"; then
    pass
else
    fail "--list with a broken blas module: $(cat "$tmp/list")"
fi
LENET_BENCH_MODULES="$tmp/mods" "$BENCH" "${D[@]}" --backend naive,blas --out "$tmp/broken" \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 0 ] && grep -q 'blas .*skipped: .*blas.so' "$tmp/err" &&
        grep -q '^naive,.*,ok,' "$tmp/broken/summary.csv" 2>/dev/null; then
    pass
else
    fail "a run with a broken blas module: exit $rc, $(head -c 400 "$tmp/err")"
fi
# A module directory with no modules at all.
LENET_BENCH_MODULES="$tmp/none" "$BENCH" --list >"$tmp/list" 2>&1
if grep -q '^blas .*not runnable here: module .* not found' "$tmp/list"; then
    pass
else
    fail "--list with no modules: $(cat "$tmp/list")"
fi

# Under an address-space limit the program starts and a naive run works
# (not in the sanitiser build: ASan reserves terabytes of address space).
if "$BENCH" --help 2>/dev/null | grep -q AddressSanitizer || ldd "$BENCH" | grep -q libasan; then
    skip_check "address-space limits: the program is built with AddressSanitizer"
else
    for kb in 600000 1000000 1240000; do
        (ulimit -v $kb; timeout 60 "$BENCH" --help >/dev/null 2>"$tmp/err"); rc=$?
        if [ "$rc" -eq 0 ]; then pass; else fail "ulimit -v $kb: --help exited $rc: $(head -c 300 "$tmp/err")"; fi
        (ulimit -v $kb; timeout 120 "$BENCH" "${D[@]}" --backend naive --out "$tmp/limit$kb" \
            >/dev/null 2>"$tmp/err"); rc=$?
        if [ "$rc" -eq 0 ]; then pass; else fail "ulimit -v $kb: naive run exited $rc: $(head -c 300 "$tmp/err")"; fi
    done
fi
finish
