#!/usr/bin/env bash
# Precision and batch size as axes: `--precision LIST` and `--batch-size
# LIST` train every value as its own configuration in one run, each a row
# of summary.csv (and its epochs in epochs.csv) told apart by the key, its
# own confusion file and a memory figure; a precision the backend cannot
# compute in is a skipped row with the reason while the rest run; the
# precision and batch-size charts are drawn (not for a run of one value
# each). Uses a small crafted data set (tests/craft.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
make_dataset "$tmp/data" 256 64
have_gnuplot=0
command -v gnuplot >/dev/null 2>&1 && have_gnuplot=1

# col FILE NAME: the column's values, one a line (fields may be quoted).
col() {
    python3 -c 'import csv, sys
for row in csv.DictReader(open(sys.argv[1])): print(row.get(sys.argv[2], "NO-COLUMN"))' "$1" "$2"
}
# rows FILE: data lines as backend precision batch_size status.
rows() {
    paste -d' ' <(col "$1" backend) <(col "$1" precision) <(col "$1" batch_size) <(col "$1" status)
}
chart_ok() { # chart_ok DIR NAME: a whole PNG and SVG
    [ -s "$1/$2.png" ] && [ "$(head -c 8 "$1/$2.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
        grep -q '</svg>' "$1/$2.svg"
}
# train RUN ARGS...: naive mlp on the crafted data, results in RUN, its
# stdout and stderr in RUN.out and RUN.err; the exit status of ./bench.
train() {
    local run=$1
    shift
    "$BENCH" --backend naive --workload mlp --data "$tmp/data" --no-peak --out "$run" "$@" \
        >"$run.out" 2>"$run.err"
}
# rows_are RUN WANT: RUN's summary.csv rows, as `rows` lists them, are WANT.
rows_are() {
    local got
    got=$(rows "$1/summary.csv")
    [ "$got" = "$2" ] && pass || fail "summary rows of $(basename "$1"): '$got', expected '$2'"
}

# --- two precisions on naive: fp32 runs, tf32 is skipped with its reason
run="$tmp/prec"
train "$run" --epochs 1 --batch-size 32 --precision fp32,tf32 && pass ||
    fail "--precision fp32,tf32 exited with status $? ($(tail -2 "$run.err"))"
rows_are "$run" $'naive fp32 32 ok\nnaive tf32 32 skipped'
msg=$(paste -d' ' <(col "$run/summary.csv" precision) <(col "$run/summary.csv" message) | grep '^tf32')
case "$msg" in *"does not support --precision tf32"*) pass ;;
    *) fail "the skipped tf32 row does not say why: $msg" ;; esac
grep -q "naive-tf32 *skipped: does not support --precision tf32" "$run.err" && pass ||
    fail "the run did not say tf32 was skipped: $(cat "$run.err")"
[ "$(col "$run/epochs.csv" precision | sort -u)" = fp32 ] && [ "$(wc -l <"$run/epochs.csv")" -eq 2 ] &&
    pass || fail "epochs.csv of fp32,tf32: $(cat "$run/epochs.csv")"
[ -s "$run/confusion-naive-fp32.csv" ] && pass || fail "no confusion-naive-fp32.csv: $(ls "$run")"
if [ $have_gnuplot = 1 ]; then
    chart_ok "$run" precision && pass || fail "no precision chart: $(ls "$run")"
    [ ! -e "$run/batch_size.png" ] && pass || fail "a batch-size chart for one batch size"
    grep -q 'bench plot:' "$run.err" && fail "gnuplot complained: $(grep 'bench plot' "$run.err")"
else
    skip_check "charts: gnuplot is not installed"
fi

# --- a list of replicas beside a precision naive cannot compute in: each
# skipped row is keyed by the replicas asked for (both were written with
# replicas 1: one key twice, which compare refused), so compare reads it
run="$tmp/replicas"
train "$run" --epochs 1 --batch-size 32 --precision fp32,tf32 --replicas 1,2 && pass ||
    fail "--precision fp32,tf32 --replicas 1,2 exited with status $? ($(tail -2 "$run.err"))"
got=$(paste -d' ' <(col "$run/summary.csv" precision) <(col "$run/summary.csv" replicas) \
    <(col "$run/summary.csv" status) | sort | tr '\n' ';')
[ "$got" = "fp32 1 ok;fp32 2 ok;tf32 1 skipped;tf32 2 skipped;" ] && pass ||
    fail "precision, replicas and status of the rows: $got"
"$BENCH" compare "$run" "$run" >"$run.compare" 2>&1 && pass ||
    fail "compare of a run with itself: $(tail -3 "$run.compare")"

# --- two batch sizes on naive mlp, given out of order: one row each, ascending
run="$tmp/batch"
train "$run" --epochs 2 --batch-size 32,16 && pass ||
    fail "--batch-size 32,16 exited with status $? ($(tail -2 "$run.err"))"
rows_are "$run" $'naive fp32 16 ok\nnaive fp32 32 ok'
got=$(paste -d' ' <(col "$run/epochs.csv" batch_size) <(col "$run/epochs.csv" epoch) | tr '\n' ';')
[ "$got" = "16 1;16 2;32 1;32 2;" ] && pass || fail "epochs.csv batch sizes and epochs: $got"
# each configuration trained its own batch size: 256 images in 16 or 8 steps
# give different losses from the same start
losses=$(col "$run/summary.csv" final_train_loss | sort -u | wc -l)
[ "$losses" -eq 2 ] && pass || fail "both batch sizes ended with the same loss"
# and the b32 row is what a run of batch 32 alone gives (naive is
# deterministic): nothing of the b16 configuration leaks into it
train "$tmp/alone" --epochs 2 --batch-size 32 || fail "--batch-size 32 alone failed"
for c in final_train_loss final_test_accuracy; do
    a=$(col "$run/summary.csv" $c | tail -1)
    b=$(col "$tmp/alone/summary.csv" $c)
    [ -n "$a" ] && [ "$a" = "$b" ] && pass || fail "$c of naive-b32 is $a in the list, $b alone"
done
a=$(col "$run/epochs.csv" train_loss | tail -2 | tr '\n' ' ')
b=$(col "$tmp/alone/epochs.csv" train_loss | tr '\n' ' ')
[ "$a" = "$b" ] && pass || fail "epoch train losses of naive-b32: $a in the list, $b alone"
for b in 16 32; do
    [ -s "$run/confusion-naive-b$b.csv" ] && pass || fail "no confusion-naive-b$b.csv: $(ls "$run")"
done
# memory: a CPU engine's heap, positive and said where it comes from
mem_ok=$(paste -d' ' <(col "$run/summary.csv" memory_bytes) <(col "$run/summary.csv" memory_source) |
    awk '$1 > 0 && /host heap/ { n++ } END { print n + 0 }')
[ "$mem_ok" -eq 2 ] && pass || fail "memory columns: $(col "$run/summary.csv" memory_bytes | tr '\n' ' ')"
grep -q '| memory (MiB) |' "$run.out" && pass || fail "no memory column in the table"
grep -q '| naive-b16 |' "$run.out" && pass || fail "the table does not name naive-b16"
# the learning rate is the same for both (not scaled with the batch)
grep -q "batch 16,32" "$run.err" && pass || fail "the run did not list its batch sizes"
if [ $have_gnuplot = 1 ]; then
    chart_ok "$run" batch_size && pass || fail "no batch-size chart: $(ls "$run")"
    [ ! -e "$run/precision.png" ] && pass || fail "a precision chart for one precision"
    grep -q 'bench plot:' "$run.err" && fail "gnuplot complained: $(grep 'bench plot' "$run.err")"
    # again from the CSV files alone
    rm -f "$run"/*.png "$run"/*.svg
    "$BENCH" plot "$run" 2>"$tmp/plot.err" && chart_ok "$run" batch_size && pass ||
        fail "bench plot did not redraw the batch-size chart: $(cat "$tmp/plot.err")"
fi

# --- two precisions that both run on naive (fp64 beside fp32), when this
# build's engines know fp64
run="$tmp/fp64"
train "$run" --epochs 1 --batch-size 32 --precision fp64,fp32; rc=$?
if [ $rc -eq 2 ] && grep -q "unknown precision 'fp64'" "$run.err"; then
    skip_check "fp64: the engines of this build do not offer it"
else
    [ $rc -eq 0 ] && pass || fail "--precision fp64,fp32: status $rc ($(tail -2 "$run.err"))"
    rows_are "$run" $'naive fp64 32 ok\nnaive fp32 32 ok'
    for p in fp64 fp32; do
        [ -s "$run/confusion-naive-$p.csv" ] && pass || fail "no confusion-naive-$p.csv: $(ls "$run")"
    done
    if [ $have_gnuplot = 1 ]; then
        chart_ok "$run" precision && pass || fail "no precision chart for fp64,fp32: $(ls "$run")"
    fi
fi

# --- one precision and one batch size: no axis charts, labels as before
run="$tmp/one"
train "$run" --epochs 1 --batch-size 32 && pass || fail "a plain run failed: $(tail -2 "$run.err")"
[ -s "$run/confusion-naive.csv" ] && pass || fail "a plain run's confusion file is not confusion-naive.csv"
[ ! -e "$run/precision.png" ] && [ ! -e "$run/batch_size.png" ] && pass ||
    fail "axis charts for a run of one precision and one batch size"
grep -q 'bench plot:' "$run.err" && fail "gnuplot complained: $(grep 'bench plot' "$run.err")"

# --- a long details survives whole: direct bf16's row (its arithmetic, ISA
# and tiles, then the OpenMP settings) and its 2-replica row (the wrapper's
# words before all of that: over 256 characters) end with the settings,
# whole.
run="$tmp/long-details"
if ! "$BENCH" --list 2>/dev/null | grep -q '^direct .*runnable.*precisions here: [^)]*bf16'; then
    skip_check "direct bf16 does not run here: the long-details case is not run"
elif env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$BENCH" --backend direct --precision bf16 \
        --replicas 1,2 --workload mlp --data "$tmp/data" --no-peak --epochs 1 --out "$run" \
        >"$run.out" 2>"$run.err"; then
    got=$(col "$run/summary.csv" details)
    if [ "$(printf '%s\n' "$got" | grep -c 'GOMP_SPINCOUNT=30000 (default)$')" -eq 2 ] &&
            [ "$(printf '%s\n' "$got" | tail -1 | wc -c)" -gt 257 ]; then
        pass
    else
        fail "the details of direct bf16 are cut short: $got"
    fi
else
    fail "direct bf16 did not run: $(tail -2 "$run.err")"
fi

echo "test_axes: $checks checks, $failures failed, $skipped skipped"
[ "$failures" -eq 0 ]
