#!/usr/bin/env bash
# Model parallelism from the command line: `--parallel model,hybrid` with
# `--split`, `--micro-batches` and `--prefetch` adds one row per
# configuration beside the backend's own, each training the same model
# (the same final loss and accuracy as the single engine, to the printed
# digits), with the parallel columns and the memory of one worker filled
# in: a 2-worker split within layers holds half of the parameters. Bad
# values of the flags are one-line errors with exit status 2. Uses a small
# crafted data set (tests/craft.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
make_dataset "$tmp/data" 256 64

run="$tmp/mp"
if "$BENCH" --backend naive --epochs 1 --batch-size 32 --parallel model,hybrid \
    --split layers,filters --workers 2 --groups 2 --micro-batches 1,4 --prefetch 0,2 \
    --data "$tmp/data" --no-peak --out "$run" >"$tmp/mp.out" 2>"$tmp/mp.err"; then
    pass
else
    fail "--parallel model,hybrid exited with status $? ($(tail -2 "$tmp/mp.err"))"
fi
s="$run/summary.csv"
# 1 single + 2 splits x 2 micro-batch counts x 2 prefetch depths x (model, hybrid)
[ "$(csv_cell "$s" status | grep -c '^ok$')" = 17 ] && pass ||
    fail "expected 17 finished rows: $(csv_cell "$s" backend | tr '\n' ' ')"
got=$(paste -d' ' <(csv_cell "$s" parallel) <(csv_cell "$s" workers) | sort | uniq -c | tr -s ' ')
want=$' 8 hybrid 2\n 8 model 2\n 1 single 1'
[ "$got" = "$want" ] && pass || fail "parallel and workers columns: '$got', expected '$want'"
[ "$(csv_cell "$s" final_train_loss | cut -c1-6 | sort -u | wc -l)" = 1 ] && pass ||
    fail "final losses differ: $(csv_cell "$s" final_train_loss | tr '\n' ' ')"
[ "$(csv_cell "$s" final_test_accuracy | sort -u | wc -l)" = 1 ] && pass ||
    fail "test accuracies differ: $(csv_cell "$s" final_test_accuracy | tr '\n' ' ')"
single=$(paste -d' ' <(csv_cell "$s" backend) <(csv_cell "$s" worker_params_bytes) | awk '$1 == "naive" { print $2 }')
half=$(paste -d' ' <(csv_cell "$s" backend) <(csv_cell "$s" worker_params_bytes) |
    awk '$1 == "naive-filters-2w" { print $2 }')
[ -n "$single" ] && [ -n "$half" ] && [ $((single / 2)) = "$half" ] && pass ||
    fail "a filter split's worker holds '$half' bytes of parameters, the single engine '$single'"
csv_cell "$s" memory_source | grep -q '^largest worker' && pass ||
    fail "no model row says its memory is the largest worker's"
if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$run/parallel.png" ] && grep -q '</svg>' "$run/parallel.svg" && pass ||
        fail "no parallel chart: $(ls "$run")"
else
    skip_check "parallel chart: gnuplot is not installed"
fi

# A worker of one pool layer (7 workers by layers: one layer each) holds
# no parameters: 0 bytes, a measurement, not an empty cell; a split that
# could not be made (11 workers below) leaves the worker's memory empty.
"$BENCH" --backend naive --data "$tmp/data" --epochs 1 --batch-size 32 --parallel model \
    --workers 7 --no-peak --out "$tmp/seven" >/dev/null 2>"$tmp/seven.err"
s7="$tmp/seven/summary.csv"
got=$(paste -d' ' <(csv_cell "$s7" backend) <(csv_cell "$s7" worker_params_bytes) \
    <(csv_cell "$s7" worker_grads_bytes) <(csv_cell "$s7" worker_activation_bytes) |
    awk '$1 == "naive-layers-7w" { print $2, $3, ($4 > 0) }')
[ "$got" = "0 0 1" ] && pass ||
    fail "7 workers by layers (the largest holds a pool): params, grads, activations > 0 are '$got', expected '0 0 1' ($(tail -2 "$tmp/seven.err"))"

# bad values: one line, status 2
bad() { # bad EXPECTED-TEXT FLAGS...
    local want="$1"
    shift
    "$BENCH" --backend naive --data "$tmp/data" --epochs 1 --out "$tmp/bad" "$@" \
        >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    [ $rc = 2 ] && grep -q -- "$want" "$tmp/bad.err" && pass ||
        fail "$* gave status $rc and '$(head -2 "$tmp/bad.err")', expected 2 and '$want'"
}
bad "unknown parallel mode 'pipeline'" --parallel pipeline
bad "lists filters twice" --split filters,filters
bad "in 1..64" --parallel model --micro-batches 0
bad "multiple of --groups" --parallel hybrid --workers 3 --groups 2
bad "in 1..16" --workers 17
# one hybrid group is --parallel model: two rows with one name and key
bad "hybrid with --groups 1 is one model-parallel group" --parallel model,hybrid --groups 1 \
    --workers 2
bad "in 0..64" --prefetch -1
# a split the network cannot take is a skipped row with the reason
"$BENCH" --backend naive --data "$tmp/data" --epochs 1 --batch-size 32 --parallel model \
    --split filters --workers 11 --no-peak --out "$tmp/eleven" >/dev/null 2>"$tmp/eleven.err"
csv_cell "$tmp/eleven/summary.csv" message | grep -q "fewer channels or units than there are workers" &&
    pass || fail "11 workers within layers: $(csv_cell "$tmp/eleven/summary.csv" message | tr '\n' ' ')"
held=$(paste -d' ' <(csv_cell "$tmp/eleven/summary.csv" backend) \
    <(csv_cell "$tmp/eleven/summary.csv" worker_params_bytes) | awk '$1 == "naive-filters-11w"')
[ "$held" = "naive-filters-11w " ] && pass ||
    fail "the split that could not be made states what a worker holds: '$held', expected empty"
finish
