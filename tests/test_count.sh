#!/usr/bin/env bash
# The instruction-count gate can fail: a build whose naive kernels are
# compiled at -O0 (everything else as `make count` builds it) is counted
# and judged against the normal build by `bench compare`, which must report
# a regression of train-naive with exit status 1; the normal build counted
# twice must agree exactly (exit 0); the slow build as the baseline shows
# an improvement (exit 0); counts from another compiler are not judged
# (exit 0, saying why); a broken counts file is unusable input (exit 2).
# One training step of 8 images per count: about 20 s of CPU in all.
set -u
cd "$(dirname "$0")/.." || exit 1
if ! command -v valgrind >/dev/null; then
    echo "valgrind not installed (apt-get install valgrind): skipped"
    exit 77
fi
unset MAKEFLAGS MFLAGS MAKELEVEL
fast=${BUILD:-build}-count
slow=${BUILD:-build}-count-slow
tmp=$(mktemp -d /tmp/test_count.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_count: FAIL: $*"; exit 1; }
args=(--items train-naive --steps 1 --batch-size 8)

# The normal count build and its count, as `make count` does them.
if ! make -s -j2 count COUNT_BUILD="$fast" ARGS="${args[*]} --out $tmp/base" >"$tmp/make.log" 2>&1; then
    if grep -q "exit status 3\|cannot run valgrind\|no <valgrind/callgrind.h>" "$tmp/make.log"; then
        cat "$tmp/make.log"; echo "count mode cannot run here: skipped"; exit 77
    fi
    tail -30 "$tmp/make.log"; fail "make count failed"
fi
"$fast/bench" count "${args[@]}" --out "$tmp/again" >/dev/null 2>"$tmp/again.log" ||
    { cat "$tmp/again.log"; fail "the second count failed"; }

# The same build with naive's objects rebuilt at -O0 and relinked. The
# build-flags record is put back afterwards, so make keeps every other
# object as built at -O3 and only relinks.
rm -rf "$slow"
cp -a "$fast" "$slow"
rm -f "$slow"/backends/naive/*.o
naive_objs=$(for c in backends/naive/*.c; do echo "$slow/${c%.c}.o"; done)
flags=(CUDA=0 MPI=0) # as `make count` builds
if ! make -s BUILD="$slow" BENCH="$slow/bench" OPT='-O0 -march=x86-64-v3' "${flags[@]}" \
        $naive_objs >"$tmp/slow.log" 2>&1 ||
   ! cp -p "$fast/build-flags" "$slow/build-flags" ||
   ! make -s BUILD="$slow" BENCH="$slow/bench" OPT='-O3 -march=x86-64-v3' "${flags[@]}" \
        "$slow/bench" >>"$tmp/slow.log" 2>&1; then
    tail -30 "$tmp/slow.log"; fail "the -O0 naive build failed"
fi
"$slow/bench" count "${args[@]}" --out "$tmp/slow" >/dev/null 2>"$tmp/slow-count.log" ||
    { cat "$tmp/slow-count.log"; fail "counting the slow build failed"; }

bench=$fast/bench
# Bad requests are refused before valgrind starts: one line, exit 2.
for bad in "--items nothing" "--steps 0" "--workload none" "--batch-size x" "--items load,load"; do
    "$bench" count $bad --out "$tmp/bad" >/dev/null 2>"$tmp/err"; rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] ||
        { cat "$tmp/err"; fail "count $bad exited $rc, expected 2 with one line"; }
done
# a duplicate is named as one, not as "not an item"
grep -q -- "--items lists load twice" "$tmp/err" || fail "count --items load,load: $(cat "$tmp/err")"
# SIGINT and SIGTERM during the count end valgrind and remove the
# temporary directory (both were left behind), exit 128 + the signal.
for sig in INT TERM; do
    "$bench" count "${args[@]}" --out "$tmp/sig-$sig" >/dev/null 2>"$tmp/sig.log" &
    p=$! child="" tmpdir=""
    for _ in $(seq 100); do
        child=$(pgrep -P $p | head -1)
        [ -n "$child" ] && tmpdir=$(tr '\0' '\n' <"/proc/$child/cmdline" 2>/dev/null |
            sed -n 's|^--callgrind-out-file=\(.*\)/callgrind.out$|\1|p')
        [ -n "$tmpdir" ] && break
        sleep 0.1
    done
    [ -n "$tmpdir" ] || { kill -KILL $p; fail "SIG$sig: valgrind did not start"; }
    sleep 0.5
    kill -$sig $p
    wait $p; rc=$?
    want=$((128 + $(kill -l $sig)))
    [ "$rc" -eq "$want" ] || { cat "$tmp/sig.log"; fail "count: SIG$sig gave exit $rc, not $want"; }
    sleep 0.2
    kill -0 "$child" 2>/dev/null && { kill -KILL "$child"; fail "count: SIG$sig left valgrind running"; }
    [ ! -e "$tmpdir" ] || fail "count: SIG$sig left $tmpdir behind"
done
# expect STATUS PATTERN -- compare arguments: the exit status and a line of the report
expect() {
    local want=$1 pattern=$2; shift 3
    "$bench" compare "$@" >"$tmp/out" 2>&1; local rc=$?
    cat "$tmp/out"
    [ "$rc" -eq "$want" ] || fail "compare $* exited $rc, expected $want"
    grep -q -- "$pattern" "$tmp/out" || fail "compare $* did not say '$pattern'"
}
expect 0 "0 regressions" -- "$tmp/base" "$tmp/again"
grep -q "| train-naive | \([0-9]*\) | \1 | +0.000% | same |" "$tmp/out" ||
    fail "two counts of one build differ"
expect 1 "REGRESSION train-naive: .* against commit" -- "$tmp/base" "$tmp/slow"
expect 0 "IMPROVED train-naive" -- "$tmp/slow" "$tmp/base/counts.csv"
sed 's/gcc [0-9.]*/gcc 0.0.0/' "$tmp/slow/counts.csv" >"$tmp/other-compiler-counts.csv"
expect 0 "NOT JUDGED: compiler differs" -- "$tmp/base" "$tmp/other-compiler-counts.csv"
awk -F, -v OFS=, 'NR == 2 { $7 = "lots" } 1' "$tmp/base/counts.csv" >"$tmp/broken-counts.csv"
expect 2 "instructions_per_image 'lots' is not a positive number" -- "$tmp/base" "$tmp/broken-counts.csv"

# The count history: appended once, drawn by plots/history.gp with counts=1
# (the slow count stands in for a later commit).
mkdir "$tmp/later"
awk -F, -v OFS=, 'NR > 1 { $8 = "later" } 1' "$tmp/slow/counts.csv" >"$tmp/later/counts.csv"
"$bench" history --counts-file "$tmp/history.csv" "$tmp/base" >/dev/null &&
    "$bench" history --counts-file "$tmp/history.csv" "$tmp/later" >/dev/null &&
    "$bench" history --counts-file "$tmp/history.csv" "$tmp/base" >"$tmp/out" ||
    fail "bench history of counts failed"
grep -q "0 count rows of base appended to .*, 1 already there" "$tmp/out" || { cat "$tmp/out"; fail "a count row was added twice"; }
[ "$(grep -c '^[^,]*,[^,]*,train-naive,' "$tmp/history.csv")" -eq 2 ] || fail "the count history lacks its rows"
if command -v gnuplot >/dev/null; then
    gnuplot -e "counts=1; file='$tmp/history.csv'; out='$tmp/history.png'" plots/history.gp \
        >"$tmp/gp.log" 2>&1 && [ -s "$tmp/history.png" ] && [ ! -s "$tmp/gp.log" ] ||
        { cat "$tmp/gp.log"; fail "plots/history.gp counts=1 did not draw cleanly"; }
fi
echo "test_count: ok"
