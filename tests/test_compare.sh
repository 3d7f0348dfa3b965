#!/usr/bin/env bash
# bench compare and bench history on a real short run of the naive backend
# and on copies of its CSV files edited by column name: identical runs pass,
# an injected 30% slowdown, a 2-point accuracy drop and a failed row fail
# naming row and metric, noise within 5% passes, broken input exits 2 naming
# the file. Then the history: header once, no row twice, gnuplot draws it.
set -u
cd "$(dirname "$0")/.." || exit 1
BENCH=${BENCH:-./bench}
case "$BENCH" in /*) ;; *) BENCH="$PWD/${BENCH#./}" ;; esac
[ -x "$BENCH" ] || { echo "$0: $BENCH not built (make first)" >&2; exit 1; }
DATA=${LENET_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$DATA/train-images-idx3-ubyte" ] && [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "test_compare.sh: SKIPPED: no Fashion-MNIST in $DATA (scripts/install-deps installs it)"
    exit 77
fi
export LC_ALL=C

tmp=$(mktemp -d /tmp/test_compare_sh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
checks=0 failures=0
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }
pass() { checks=$((checks + 1)); }

# edit IN OUT [mul=COL:F,...] [add=COL:X,...] [set=COL:TEXT,...] [drop=COL]
# [rename=FROM:TO]: a copy of the CSV IN with columns changed by name
# (absent columns are left alone); quoted fields are kept whole. Each
# argument is one operation and may hold spaces.
edit() {
    local in=$1 out=$2 IFS=$'\037'
    shift 2
    awk -v spec="$*" '
    function split_csv(line, f,   n, i, c, field, q) {
        n = 0; field = ""; q = 0
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (q) {
                if (c == "\"") {
                    if (substr(line, i + 1, 1) == "\"") { field = field c; i++ } else q = 0
                } else field = field c
            } else if (c == "\"") q = 1
            else if (c == ",") { f[++n] = field; field = "" }
            else field = field c
        }
        f[++n] = field
        return n
    }
    function quote(s) {
        if (s ~ /[,"]/) { gsub(/"/, "\"\"", s); return "\"" s "\"" }
        return s
    }
    BEGIN {
        n_ops = split(spec, words, "\037")
        for (w = 1; w <= n_ops; w++) {
            eq = index(words[w], "="); kind = substr(words[w], 1, eq - 1)
            m = split(substr(words[w], eq + 1), items, ",")
            for (k = 1; k <= m; k++) {
                colon = index(items[k], ":")
                name = colon ? substr(items[k], 1, colon - 1) : items[k]
                op[name] = kind; arg[name] = colon ? substr(items[k], colon + 1) : ""
            }
        }
    }
    {
        n = split_csv($0, f)
        if (NR == 1) for (i = 1; i <= n; i++) col[i] = f[i]
        line = ""
        for (i = 1; i <= n; i++) {
            v = f[i]; name = col[i]
            if (NR == 1 && op[name] == "rename") v = arg[name]
            if (NR > 1 && op[name] == "mul") v = sprintf("%.6f", v * arg[name])
            if (NR > 1 && op[name] == "add") v = sprintf("%.6f", v + arg[name])
            if (NR > 1 && op[name] == "set") v = arg[name]
            if (op[name] == "drop") continue
            line = line (line == "" ? "" : ",") quote(v)
        }
        print line
    }' "$in" >"$out"
}

# copy_run FROM TO: a run directory to edit.
copy_run() { mkdir -p "$2" && cp "$1"/summary.csv "$1"/epochs.csv "$1"/system.json "$2"/; }

# expect NAME STATUS PATTERN... -- ARGS: `bench compare ARGS` exits STATUS and
# every PATTERN (an extended regex) matches one line of its output.
expect() {
    local name=$1 want=$2 pats=() rc p
    shift 2
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$BENCH" compare "$@" >"$tmp/out" 2>&1; rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit status $rc, expected $want"; sed 's/^/    /' "$tmp/out"; return
    fi
    for p in "${pats[@]}"; do
        if ! grep -qE -- "$p" "$tmp/out"; then
            fail "$name: no line matches '$p'"; sed 's/^/    /' "$tmp/out"; return
        fi
    done
    pass
}

# The real run: 3 epochs (the first is warm-up) twice: 4 timed epochs.
run=$tmp/run
if ! "$BENCH" --backend naive --epochs 3 --limit 640 --test-limit 300 --repeat 2 --data "$DATA" \
    --out "$run" >"$tmp/run.log" 2>&1; then
    echo "FAIL: the short run failed:"; cat "$tmp/run.log"; exit 1
fi
row='naive lenet fp32 batch=128 threads=1 devices=0'

expect "identical" 0 "0 regressions" "train loss \| [0-9.]+ \| [0-9.]+ \| 1.000000 \| identical" \
    -- "$run" "$run"
expect "identical, relative" 0 "reference \(not judged\)" -- --relative-to naive "$run" "$run/summary.csv"

# 30% slower: every time x 1.3, every images/s / 1.3.
slow="mul=epoch_seconds:1.3,epoch_seconds_median:1.3,epoch_seconds_mean:1.3,epoch_seconds_min:1.3,epoch_seconds_max:1.3,images_per_second:0.769230769,gflops_per_second:0.769230769"
copy_run "$run" "$tmp/slow"
edit "$run/summary.csv" "$tmp/slow/summary.csv" "$slow"
edit "$run/epochs.csv" "$tmp/slow/epochs.csv" "$slow"
# With epochs.csv the U test decides along with the limit: the 4 against 4
# timed epochs separate fully (p = 0.030) when their spread is below 30%.
spread_ok=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["epoch"] > 1 { s = $c["epoch_seconds"]; if (!lo || s < lo) lo = s; if (s > hi) hi = s }
    END { print (hi < 1.3 * lo) ? 1 : 0 }' "$run/epochs.csv")
if [ "$spread_ok" = 1 ]; then
    expect "30% slower, U test" 1 "^REGRESSION +$row: images/s 30.0% slower.*U test p=0.030" -- "$run" "$tmp/slow"
else
    echo "note: this machine's epochs spread over 30%; the U test rightly finds no difference"
    expect "30% slower, noisy machine" 0 "30.0% slower \(U test p=" -- "$run" "$tmp/slow"
fi
# The summary alone: the limit decides, and says so.
mkdir "$tmp/slow-summary" && cp "$tmp/slow/summary.csv" "$tmp/slow-summary/"
expect "30% slower, summary only" 1 "^REGRESSION +$row: images/s 30.0% slower.*threshold alone: no per-epoch samples in NEW" \
    "no epochs.csv beside it" -- "$run" "$tmp/slow-summary/summary.csv"

# Within 5% noise: each timed epoch moved up or down by up to 5%, the
# figures 3% slower. Passes.
copy_run "$run" "$tmp/noisy"
edit "$run/summary.csv" "$tmp/noisy/summary.csv" "mul=epoch_seconds_median:1.03,images_per_second:0.970873786"
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; print; next }
    { f = 1 + 0.05 * ((NR % 5) - 2) / 2; $c["epoch_seconds"] = sprintf("%.6f", $c["epoch_seconds"] * f)
      $c["images_per_second"] = sprintf("%.1f", $c["images_per_second"] / f); print }' \
    "$run/epochs.csv" >"$tmp/noisy/epochs.csv"
expect "noise within 5%" 0 "3.0% slower" "0 regressions" -- "$run" "$tmp/noisy"

# 2 points of accuracy lost.
copy_run "$run" "$tmp/acc"
edit "$run/summary.csv" "$tmp/acc/summary.csv" "add=final_test_accuracy:-0.02"
expect "accuracy drop" 1 "^REGRESSION +$row: test accuracy .*2.00 points lower" -- "$run" "$tmp/acc"
expect "accuracy drop within a wider limit" 0 -- --max-accuracy-drop 2.5 "$run" "$tmp/acc"

# Changed numerics: the same seed and options, another final loss.
copy_run "$run" "$tmp/numerics"
edit "$run/summary.csv" "$tmp/numerics/summary.csv" "mul=final_train_loss:1.001"
expect "changed numerics" 1 "^NUMERICS +$row: final train loss" -- "$run" "$tmp/numerics"
expect "changed numerics, reported" 0 "CHANGED NUMERICS \(reported, not gated\)" \
    -- --numerics report "$run" "$tmp/numerics"

# A row ok in BASE that failed in NEW.
copy_run "$run" "$tmp/failed"
edit "$run/summary.csv" "$tmp/failed/summary.csv" "set=status:failed,message:train: out of memory"
expect "failed row" 1 "^REGRESSION +$row: ok in BASE, failed in NEW: train: out of memory" -- "$run" "$tmp/failed"

# Unusable input: exit 2, naming the file (and line).
expect "missing NEW" 2 "NEW: cannot open $tmp/nowhere" -- "$run" "$tmp/nowhere"
mkdir "$tmp/empty-dir"
expect "no summary.csv" 2 "cannot open $tmp/empty-dir/summary.csv" -- "$run" "$tmp/empty-dir"
copy_run "$run" "$tmp/other"
edit "$run/summary.csv" "$tmp/other/summary.csv" "set=backend:other"
expect "no common rows" 2 "no common rows" -- "$run" "$tmp/other"
copy_run "$run" "$tmp/badline"
echo "naive,lenet,fp32,1" >>"$tmp/badline/epochs.csv"
bad_line=$(wc -l <"$tmp/badline/epochs.csv")
expect "bad line" 2 "$tmp/badline/epochs.csv:$bad_line: 4 fields where the header has" -- "$run" "$tmp/badline"
copy_run "$run" "$tmp/nocolumn"
edit "$run/summary.csv" "$tmp/nocolumn/summary.csv" "drop=final_test_accuracy"
expect "missing column" 2 "$tmp/nocolumn/summary.csv: no column 'final_test_accuracy'" -- "$run" "$tmp/nocolumn"
expect "help" 0 "max-slowdown PCT" "Mann-Whitney" "Exit status" -- --help

# History: header once, a row per ok configuration, never twice.
hist=$tmp/history.csv
if "$BENCH" history --file "$hist" "$run" >"$tmp/out" 2>&1 && grep -q "1 row of run appended" "$tmp/out" &&
    [ "$(wc -l <"$hist")" -eq 2 ] && head -1 "$hist" | grep -q "^commit,date,backend,"; then
    pass
else
    fail "history append: $(cat "$tmp/out"; cat "$hist" 2>/dev/null)"
fi
if "$BENCH" history --file "$hist" "$run/summary.csv" >"$tmp/out" 2>&1 && grep -q "1 already there" "$tmp/out" &&
    [ "$(wc -l <"$hist")" -eq 2 ]; then
    pass
else
    fail "history append twice: $(cat "$tmp/out")"
fi
"$BENCH" history --file "$hist" "$tmp/acc" >/dev/null 2>&1 # a copy: same date and host
if [ "$(wc -l <"$hist")" -eq 2 ]; then pass; else fail "history: the edited copy has the same date and host, so it must not be added"; fi
echo "not,a,history" >"$tmp/bad-history.csv"
if "$BENCH" history --file "$tmp/bad-history.csv" "$run" >"$tmp/out" 2>&1; then
    fail "history with a foreign header accepted"
elif grep -q "bad-history.csv:1: not the history header" "$tmp/out"; then
    pass
else
    fail "history with a foreign header: $(cat "$tmp/out")"
fi
# a status that is none of the known ones: refused before anything is appended
mkdir -p "$tmp/odd"
edit "$run/summary.csv" "$tmp/odd/summary.csv" "set=status:fine"
if "$BENCH" history --file "$tmp/odd-history.csv" "$tmp/odd" >"$tmp/out" 2>&1; then
    fail "history accepted the status 'fine'"
elif grep -q "summary.csv:2: column 'status': 'fine' is not a status" "$tmp/out" &&
    [ ! -e "$tmp/odd-history.csv" ]; then
    pass
else
    fail "history with the status 'fine': $(cat "$tmp/out")"
fi
# values compare refuses, history refuses too, with the same message: one
# check for both (history appended 'fast' and 1e999); the numbers as the
# command line reads them (a lowercase nan, 0x1p3, an accuracy of 5 and a
# negative time passed, and nan bypassed the gate)
for bad in "images_per_second:fast:is not a number" "images_per_second:1e999:is out of range" \
    "final_test_accuracy:inf:is not finite" "epochs: 3:is not a number" "images_per_second:+5:is not a number" \
    "images_per_second:nan:is not finite" "images_per_second:0x1p3:is not a number" \
    "final_test_accuracy:5:is not in 0..1" "epoch_seconds_median:-1:is negative" \
    "epochs:3.5:is not a whole number"; do
    col=${bad%%:*} rest=${bad#*:} value=${rest%%:*} why=${rest#*:}
    rm -rf "$tmp/odd" "$tmp/odd-history.csv"
    mkdir -p "$tmp/odd"
    edit "$run/summary.csv" "$tmp/odd/summary.csv" "set=$col:$value"
    msg="summary.csv:2: column '$col': '$value' $why"
    "$BENCH" history --file "$tmp/odd-history.csv" "$tmp/odd" >"$tmp/out" 2>&1; hrc=$?
    hout=$(cat "$tmp/out")
    "$BENCH" compare "$run" "$tmp/odd" >"$tmp/out" 2>&1; crc=$?
    if [ "$hrc" -eq 2 ] && [ "$crc" -eq 2 ] && [ ! -e "$tmp/odd-history.csv" ] &&
        grep -qF -- "$msg" "$tmp/out" && printf '%s\n' "$hout" | grep -qF -- "$msg"; then
        pass
    else
        fail "$col '$value': history exit $hrc ($hout), compare exit $crc ($(cat "$tmp/out"))"
    fi
done
# a figure too large for its fixed form is printed in six digits (1e308
# images/s, and a loss of 1e308 in the finding, were 300-digit numbers)
rm -rf "$tmp/huge" && mkdir -p "$tmp/huge"
edit "$run/summary.csv" "$tmp/huge/summary.csv" "set=images_per_second:1e308,final_train_loss:1e308"
"$BENCH" compare "$run" "$tmp/huge" >"$tmp/out" 2>&1; rc=$?
if [ "$rc" -le 1 ] && grep -q "1e+308" "$tmp/out" && ! grep -qE '[0-9]{20}' "$tmp/out"; then
    pass
else
    fail "compare of 1e308 images/s: exit $rc: $(grep -E '[0-9]{20}|1e' "$tmp/out" | head -3)"
fi
if command -v gnuplot >/dev/null; then
    edit "$hist" "$tmp/h2.csv" "set=commit:abc123,images_per_second:1234"
    tail -n +2 "$tmp/h2.csv" >>"$hist"
    if gnuplot -e "file='$hist'; out='$tmp/history.png'" plots/history.gp >"$tmp/out" 2>&1 &&
        [ -s "$tmp/history.png" ]; then
        pass
    else
        fail "plots/history.gp: $(cat "$tmp/out")"
    fi
else
    echo "SKIP: gnuplot not installed: plots/history.gp not drawn"
fi

# Many rows: 40,000 configurations (the run's row with batch sizes 1 ..
# 40000) compare in a few seconds; the duplicate-key check and the pairing
# were quadratic (32 s). bench plot refuses them in one line, before
# gnuplot (which timed out at 5,000 rows).
mkdir "$tmp/many"
cp "$run/system.json" "$tmp/many/"
for f in summary epochs; do
    awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "batch_size") c = i; print; next }
        NR == 2 { for (k = 1; k <= 40000; k++) { $c = k; print } }' "$run/$f.csv" >"$tmp/many/$f.csv"
done
start=$(date +%s)
timeout 20 "$BENCH" compare "$tmp/many" "$tmp/many" >"$tmp/out" 2>&1; rc=$?
took=$(($(date +%s) - start))
if [ "$rc" -eq 0 ] && [ "$took" -le 12 ] && grep -q "40000 configurations compared" "$tmp/out"; then
    pass
else
    fail "compare of 40,000 rows: exit $rc after ${took}s: $(tail -1 "$tmp/out")"
fi
"$BENCH" plot "$tmp/many" >"$tmp/out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "holds 40000 configurations" "$tmp/out" &&
    pass || fail "plot of 40,000 rows: exit $rc: $(head -2 "$tmp/out")"

echo "test_compare.sh: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
