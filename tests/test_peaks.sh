#!/usr/bin/env bash
# The CPU's peaks per arithmetic end to end: ./bench peaks prints the table
# (an arithmetic the CPU lacks is absent, with why), every run's
# system.json holds it with the memory bandwidth, and each row says whose
# peak it is held to (a bf16 row on vdpbf16ps: the bf16 dot product's; on
# fp32 FMAs: fp32's).
# Threads beyond the CPUs this process may use (taskset) are warned about.
# The figures are not judged here (a shared machine); their shape is.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
export LB_PEAK_SECONDS=0.05
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { [[ " $flags " == *" $1 "* ]]; }

"$BENCH" peaks >"$tmp/peaks" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "^fp32 FMA " "$tmp/peaks" && grep -q "^fp64 FMA " "$tmp/peaks" &&
    grep -q "^memory bandwidth (triad) " "$tmp/peaks" && pass ||
    fail "./bench peaks: status $rc: $(cat "$tmp/peaks")"
# present_unless_lacking FLAG NAME WHY: the table's line NAME has a figure
# when /proc/cpuinfo has FLAG, else says the CPU lacks it
present_unless_lacking() {
    local line
    line=$(grep "^$2 " "$tmp/peaks")
    if has "$1"; then
        [[ "$line" =~ ^"$2"\ +[0-9] ]] && pass || fail "a CPU with $1 without its $2 peak: $line"
    else
        [[ "$line" == *"absent: this CPU lacks $3"* ]] && pass ||
            fail "a CPU without $1 with a $2 peak: $(cat "$tmp/peaks")"
    fi
}
present_unless_lacking avx512_bf16 "bf16 dot product (vdpbf16ps)" ""
present_unless_lacking avx512_fp16 "fp16 FMA (vfmadd231ph)" AVX512_FP16
"$BENCH" peaks --bogus >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -ge 1 ] && pass || fail "peaks --bogus: status $rc"

make_dataset "$tmp/data" 300 100
D=(--data "$tmp/data" --epochs 1 --limit 256 --test-limit 100)

# threads beyond the CPUs taskset leaves
if command -v taskset >/dev/null; then
    taskset -c 0 "$BENCH" "${D[@]}" --backend naive --workload mlp --threads 2 --no-peak \
        --out "$tmp/taskset" >/dev/null 2>"$tmp/err"
    grep -q "warning: --threads 2 is more than the 1 CPUs this process may use" "$tmp/err" &&
        pass || fail "taskset -c 0 --threads 2: no warning: $(head -3 "$tmp/err")"
else
    skip_check "no taskset here"
fi

# A run: the table and the bandwidth in system.json, each row's arithmetic.
list=naive
prec=fp32
if has avx512_bf16 && "$BENCH" --list | grep -q '^direct .*precisions here: fp32, bf16'; then
    list=naive,direct
    prec=fp32,bf16
fi
"$BENCH" "${D[@]}" --workload mlp --backend "$list" --precision "$prec" --out "$tmp/run" \
    >/dev/null 2>"$tmp/err" || fail "the run: $(tail -3 "$tmp/err")"
grep -q '"cpu_peaks": \[{"arithmetic": "fp64"' "$tmp/run/system.json" &&
    grep -q '"arithmetic": "fp32"' "$tmp/run/system.json" &&
    grep -q '"memory_bandwidth": \[{"probe": "triad", "threads": 1, "gbytes_per_second": ' "$tmp/run/system.json" &&
    pass || fail "system.json: $(grep -E 'cpu_peaks|memory_bandwidth' "$tmp/run/system.json")"
if has avx512_fp16; then
    grep -q '"arithmetic": "fp16"' "$tmp/run/system.json" && pass || fail "no fp16 peak"
else
    ! grep -q '"arithmetic": "fp16"' "$tmp/run/system.json" && pass ||
        fail "an fp16 peak on a CPU without AVX512_FP16"
fi
# column VALUE of the row of BACKEND at PRECISION
cell() {
    python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["backend"] == sys.argv[2] and r["precision"] == sys.argv[3]:
        print(r[sys.argv[4]])' "$tmp/run/summary.csv" "$@"
}
[ "$(cell naive fp32 peak_arithmetic)" = fp32 ] && pass ||
    fail "naive fp32 held to '$(cell naive fp32 peak_arithmetic)'"
# the bf16 row: held to the peak of the products the program chose for it
# (a busy neighbour may leave the figure uncertain, never the arithmetic)
if [ "$list" = naive,direct ]; then
    got=$(held_to_own_peak "$tmp/run/summary.csv" direct bf16)
    [ "$got" = ok ] && pass || fail "$got"
else
    skip_check "direct bf16 cannot run here"
fi

# --profile-layers: the roofline, a point per layer per pass per CPU row,
# under a roof of the row's arithmetic and the memory bandwidth.
"$BENCH" "${D[@]}" --backend naive --profile-layers --out "$tmp/roof" >/dev/null 2>"$tmp/err" ||
    fail "--profile-layers: $(tail -3 "$tmp/err")"
points=$(grep -c '^naive,[a-z0-9]*,\(forward\|backward\),' "$tmp/roof/roofline.dat" 2>/dev/null)
layers=$(grep -c '^[a-z]*[0-9],' "$tmp/roof/profile-naive.csv" 2>/dev/null)
[ -n "$layers" ] && [ "$points" = $((2 * layers)) ] && pass ||
    fail "roofline.dat: $points points for $layers layers: $(head -3 "$tmp/roof/roofline.dat" 2>&1)"
grep -q '^naive,fp32' "$tmp/roof/roofline-ceilings.dat" && pass ||
    fail "no fp32 roof for naive: $(cat "$tmp/roof/roofline-ceilings.dat" 2>&1)"
if command -v gnuplot >/dev/null; then
    [ -s "$tmp/roof/roofline.png" ] && grep -q "naive roof: fp32" "$tmp/roof/roofline.svg" &&
        pass || fail "roofline.png/svg not drawn: $(tail -3 "$tmp/err")"
else
    skip_check "gnuplot is not installed: no roofline drawn"
fi
# --no-peak has no roof to draw against: no roofline
"$BENCH" "${D[@]}" --backend naive --profile-layers --no-peak --out "$tmp/noroof" >/dev/null 2>&1
[ ! -e "$tmp/noroof/roofline.png" ] && pass || fail "a roofline without measured roofs"

# scripts/bench-cpu judges an uncertain probe against the median of the
# probes of the same thread count that settled in its other runs
# (scripts/peak-median), and only when none did says "not judged".
fake_run() { # DIR ALL_THREADS_GFLOPS (null: uncertain)
    mkdir -p "$1"
    printf '  "cpu_peaks": [{"arithmetic": "fp64", "one_thread_gflops": 80.0, "threads": 2, "all_threads_gflops": 999.0}, {"arithmetic": "fp32", "one_thread_gflops": null, "threads": 2, "all_threads_gflops": %s}],\n' \
        "$2" >"$1/system.json"
}
fake_run "$tmp/bc/direct-2" null
fake_run "$tmp/bc/blas-2" 344.5
fake_run "$tmp/bc/onednn-2" 345.7
fake_run "$tmp/bc/naive" 345.1
[ "$(scripts/peak-median "$tmp/bc" 2)" = "345.1 3" ] && pass ||
    fail "peak-median of three settled probes: '$(scripts/peak-median "$tmp/bc" 2)'"
scripts/peak-median "$tmp/bc" 1 >/dev/null
[ $? -eq 1 ] && pass || fail "peak-median found a one-thread probe where none settled"
scripts/peak-median "$tmp/bc" x >/dev/null 2>&1
[ $? -eq 2 ] && pass || fail "peak-median with a bad thread count"

# bench-cpu's own flags: bad values are one line and exit 2, before any
# directory is made
for args in "--out" "--out --no-readme" "--limit 1" "--turns" "--turns two"; do
    # shellcheck disable=SC2086
    BENCH=$BENCH scripts/bench-cpu $args --no-pytorch >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^bench-cpu: ' "$tmp/err" && pass ||
        fail "bench-cpu $args: status $rc: $(cat "$tmp/err")"
done
BENCH=$BENCH scripts/bench-cpu --limit 1 --out "$tmp/bc-limit" >/dev/null 2>&1
[ ! -e "$tmp/bc-limit" ] && pass || fail "bench-cpu --limit 1 left $tmp/bc-limit behind"
finish
