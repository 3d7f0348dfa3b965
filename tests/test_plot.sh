#!/usr/bin/env bash
# Charts: a short real run draws every chart it has data for as a non-empty
# PNG and SVG, with not one line from gnuplot (a warning fails the test);
# `bench plot DIR` draws them again from the CSV files alone, also for a
# directory whose name has a space and a quote; the scripts run standalone;
# a missing directory or files exit 2; without gnuplot the run says how to
# install it. Exits 77 (skipped) without gnuplot or the data set.
set -u
BENCH=${BENCH:-./bench}
DATA=/usr/share/datasets/fashion-mnist
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "test_plot: gnuplot is not installed (apt-get install gnuplot-nox)"
    exit 77
fi
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -r "$DATA/train-images-idx3-ubyte" ]; then
    echo "test_plot: no data set in $DATA"
    exit 77
fi
tmp=$(mktemp -d /tmp/test_plot.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "test_plot: FAIL: $*"
    exit 1
}
short_run() { # short_run DIR EXTRA_ARGS...: naive on 512 images
    local dir=$1
    shift
    "$BENCH" --backend naive --limit 512 --test-limit 256 --out "$dir" "$@"
}
# every chart of a naive-only run: speedup needs a second backend (the
# roofline: the profile of --profile-layers and the peaks of the run)
charts="epoch_time throughput accuracy loss layers roofline"
check_charts() { # check_charts DIR
    for c in $charts; do
        [ -s "$1/$c.png" ] || fail "$1/$c.png is missing or empty"
        [ -s "$1/$c.svg" ] || fail "$1/$c.svg is missing or empty"
        [ "$(head -c 8 "$1/$c.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
            fail "$1/$c.png is not a PNG file"
        grep -q '<svg' "$1/$c.svg" || fail "$1/$c.svg is not an SVG file"
        grep -q '</svg>' "$1/$c.svg" || fail "$1/$c.svg is cut short"
    done
}

run="$tmp/run one"
short_run "$run" --epochs 3 --repeat 2 --profile-layers >"$tmp/out" 2>"$tmp/err" ||
    fail "bench exited with status $? ($(tail -3 "$tmp/err"))"
if grep -E -i 'bench plot:|warning' "$tmp/err"; then fail "gnuplot complained during the run"; fi
grep -q "^charts: $run/{epoch_time,throughput,accuracy,loss,layers,roofline}.png and .svg" "$tmp/err" ||
    fail "the run did not list its charts: $(grep charts "$tmp/err")"
check_charts "$run"
[ ! -e "$run/speedup.png" ] || fail "a speedup chart for naive alone"

# again from the CSV files alone, into a directory named with a quote
quoted="$tmp/it's a run"
cp -r "$run" "$quoted"
rm -f "$quoted"/*.png "$quoted"/*.svg
"$BENCH" plot "$quoted" >"$tmp/plot.out" 2>"$tmp/plot.err" || fail "bench plot exited with status $?"
if grep -E -i 'bench plot:|warning' "$tmp/plot.err"; then fail "gnuplot complained"; fi
check_charts "$quoted"

# each script on its own, as the README shows
for c in $charts; do
    out=$(gnuplot -e "dir='$run'; out='$tmp/alone-$c.png'" "plots/$c.gp" 2>&1) ||
        fail "gnuplot plots/$c.gp failed: $out"
    [ -z "$out" ] || fail "gnuplot plots/$c.gp printed: $out"
    [ -s "$tmp/alone-$c.png" ] || fail "gnuplot plots/$c.gp wrote nothing"
done

# the throughput bar names the peak a row is held to ("41% of bf16-dot
# peak"), and a summary from before that column says "of peak"
labelled="$tmp/labelled"
cp -r "$run" "$labelled"
python3 - "$labelled/summary.csv" <<'PY' || fail "could not edit summary.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
for r in rows:
    r['percent_of_peak'], r['peak_arithmetic'] = '41', 'bf16-dot'
with open(sys.argv[1], 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=rows[0].keys(), lineterminator='\n')
    w.writeheader(); w.writerows(rows)
PY
"$BENCH" plot "$labelled" >/dev/null 2>&1 || fail "bench plot of the edited summary failed"
grep -q '41% of bf16-dot peak' "$labelled/throughput.svg" ||
    fail "the throughput bar does not name the bf16-dot peak"
python3 - "$labelled/summary.csv" <<'PY' || fail "could not edit summary.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline='')))
keys = [k for k in rows[0] if k != 'peak_arithmetic']
with open(sys.argv[1], 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=keys, extrasaction='ignore', lineterminator='\n')
    w.writeheader(); w.writerows(rows)
PY
"$BENCH" plot "$labelled" >/dev/null 2>"$tmp/labelled.err" ||
    fail "bench plot of a summary without peak_arithmetic failed: $(cat "$tmp/labelled.err")"
grep -q '41% of peak' "$labelled/throughput.svg" ||
    fail "a summary without peak_arithmetic: the bar does not say '% of peak'"

# one epoch: every value is the same, still no warning
short_run "$tmp/one" --epochs 1 >/dev/null 2>"$tmp/one.err" || fail "one-epoch run failed"
if grep -E -i 'bench plot:|warning' "$tmp/one.err"; then fail "gnuplot complained on one epoch"; fi
charts="epoch_time throughput accuracy loss" check_charts "$tmp/one"

# two configurations of one backend (data-parallel replicas): each its own
# bar and line, named naive and naive-x2
short_run "$tmp/replicas" --epochs 2 --replicas 1,2 --profile-layers >"$tmp/replicas.out" \
    2>"$tmp/replicas.err" || fail "--replicas 1,2 run failed: $(tail -3 "$tmp/replicas.err")"
if grep -E -i 'bench plot:|warning' "$tmp/replicas.err"; then fail "gnuplot complained"; fi
charts="epoch_time throughput speedup accuracy loss layers" check_charts "$tmp/replicas"
[ -s "$tmp/replicas/confusion-naive-x2.csv" ] || fail "no confusion-naive-x2.csv"
grep -q '^| naive-x2 |' "$tmp/replicas.out" || fail "naive-x2 not named in the summary table"

# two backends
if "$BENCH" --list | grep -q '^blas  *built, runnable'; then
    "$BENCH" --backend naive,blas --limit 512 --test-limit 256 --epochs 1 --out "$tmp/two" \
        >/dev/null 2>"$tmp/two.err" || fail "naive,blas run failed"
    if grep -E -i 'bench plot:|warning' "$tmp/two.err"; then fail "gnuplot complained"; fi
    charts="epoch_time throughput speedup accuracy loss" check_charts "$tmp/two"
else
    echo "test_plot: blas not runnable here; speedup chart not checked"
fi

# bad input: exit status 2 and a message naming the problem
"$BENCH" plot "$tmp/nowhere" 2>"$tmp/bad.err"
[ $? -eq 2 ] || fail "bench plot of a missing directory did not exit 2"
grep -q "not a directory" "$tmp/bad.err" || fail "no message for a missing directory"
mkdir "$tmp/empty"
"$BENCH" plot "$tmp/empty" 2>"$tmp/bad.err"
[ $? -eq 2 ] || fail "bench plot of a directory without CSV files did not exit 2"
grep -q "epochs.csv not found" "$tmp/bad.err" || fail "no message for missing files"
"$BENCH" plot 2>/dev/null
[ $? -eq 2 ] || fail "bench plot without a directory did not exit 2"

# a bad epochs.csv beside good charts: refused (exit 2, one line) before
# gnuplot runs, and the charts already there are left as they were
cp -r "$tmp/one" "$tmp/badcsv"
echo a,b,c >"$tmp/badcsv/epochs.csv"
before=$(cd "$tmp/badcsv" && cksum *.png *.svg)
"$BENCH" plot "$tmp/badcsv" 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 2 ] || fail "bench plot of a bad epochs.csv exited $rc, expected 2"
[ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "bad epochs.csv: not one line: $(cat "$tmp/bad.err")"
grep -q "epochs.csv has no column" "$tmp/bad.err" || fail "bad epochs.csv: $(cat "$tmp/bad.err")"
[ "$(cd "$tmp/badcsv" && cksum *.png *.svg)" = "$before" ] || fail "bad epochs.csv: charts changed"
ls -A "$tmp/badcsv" | grep -q '\.part-' && fail "bad epochs.csv: partial charts left"

# bad values reach no gnuplot: one line, exit 2, the charts as they were
# (gnuplot drew them or failed on its own, exit 1, before)
refused_plot() { # refused_plot NAME EXPECTED-TEXT: $tmp/bad2 as prepared
    local before rc
    before=$(cd "$tmp/bad2" && cksum *.png *.svg)
    "$BENCH" plot "$tmp/bad2" >/dev/null 2>"$tmp/bad.err"; rc=$?
    [ $rc -eq 2 ] || fail "$1: bench plot exited $rc, expected 2: $(head -2 "$tmp/bad.err")"
    [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "$1: not one line: $(cat "$tmp/bad.err")"
    grep -qF -- "$2" "$tmp/bad.err" || fail "$1: no '$2' in $(cat "$tmp/bad.err")"
    [ "$(cd "$tmp/bad2" && cksum *.png *.svg)" = "$before" ] || fail "$1: charts changed"
    if ls -A "$tmp/bad2" | grep -q '\.part-'; then fail "$1: partial charts left"; fi
}
set_cell() { # set_cell FILE COLUMN VALUE: row 2's cell
    awk -F, -v OFS=, -v name="$2" -v v="$3" \
        'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i } NR == 2 { $c = v } 1' \
        "$1" >"$1.new" && mv "$1.new" "$1"
}
rm -rf "$tmp/bad2"; cp -r "$tmp/one" "$tmp/bad2"
set_cell "$tmp/bad2/summary.csv" images_per_second fast
refused_plot "a word in summary.csv" "column 'images_per_second': 'fast' is not a number"
rm -rf "$tmp/bad2"; cp -r "$tmp/one" "$tmp/bad2"
set_cell "$tmp/bad2/epochs.csv" train_loss inf
refused_plot "inf in an ok row of epochs.csv" "column 'train_loss': 'inf' is not finite"
rm -rf "$tmp/bad2"; cp -r "$tmp/one" "$tmp/bad2"
short_run "$tmp/other" --epochs 1 --no-peak >/dev/null 2>&1
cp "$tmp/other/epochs.csv" "$tmp/bad2/epochs.csv"
refused_plot "another run's epochs.csv" "are not of one run"

# an interrupted run whose only configuration did not finish, after one
# timed epoch: its finished epochs are drawn
cp -r "$tmp/one" "$tmp/interrupted"
rm -f "$tmp/interrupted"/*.png "$tmp/interrupted"/*.svg
sed -i '2s/,ok,/,interrupted,/' "$tmp/interrupted/summary.csv"
grep -q ',interrupted,' "$tmp/interrupted/summary.csv" || fail "could not make the interrupted summary"
"$BENCH" plot "$tmp/interrupted" >/dev/null 2>"$tmp/int.err" ||
    fail "bench plot of an interrupted run exited $?: $(cat "$tmp/int.err")"
if grep -E -i 'bench plot:|warning' "$tmp/int.err"; then fail "gnuplot complained on an interrupted run"; fi
charts="epoch_time throughput accuracy loss" check_charts "$tmp/interrupted"

# every accuracy 0 (a net that predicts one class): a 0 line is a result,
# so the accuracy chart is drawn, not silently left out
cp -r "$tmp/one" "$tmp/zero"
rm -f "$tmp/zero"/*.png "$tmp/zero"/*.svg
set_column() { # set_column FILE COLUMN VALUE: every row's cell
    awk -F, -v OFS=, -v name="$2" -v v="$3" \
        'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i } NR > 1 { $c = v } 1' \
        "$1" >"$1.new" && mv "$1.new" "$1"
}
set_column "$tmp/zero/epochs.csv" test_accuracy 0.000000
set_column "$tmp/zero/summary.csv" final_test_accuracy 0.000000
"$BENCH" plot "$tmp/zero" >/dev/null 2>"$tmp/zero.err" ||
    fail "bench plot of a run with accuracy 0 exited $?: $(cat "$tmp/zero.err")"
if grep -E -i 'bench plot:|warning' "$tmp/zero.err"; then fail "gnuplot complained on accuracy 0"; fi
grep -q "^charts: .*accuracy" "$tmp/zero.err" || fail "accuracy 0: no accuracy chart listed: $(cat "$tmp/zero.err")"
charts="epoch_time throughput accuracy loss" check_charts "$tmp/zero"
# no test accuracy at all: the chart cannot be drawn, and the run says so
set_column "$tmp/zero/summary.csv" final_test_accuracy ""
"$BENCH" plot "$tmp/zero" >/dev/null 2>"$tmp/zero.err" || fail "bench plot without accuracy exited $?"
grep -q "^note: .*accuracy.png not drawn" "$tmp/zero.err" ||
    fail "no accuracy: the chart was left out without a note: $(cat "$tmp/zero.err")"

# no gnuplot on PATH: the run still succeeds and says what to install
PATH=/nonexistent short_run "$tmp/nognuplot" --epochs 1 >/dev/null 2>"$tmp/nognuplot.err" ||
    fail "a run without gnuplot failed"
grep -q 'apt-get install gnuplot-nox' "$tmp/nognuplot.err" || fail "no install hint without gnuplot"
[ ! -e "$tmp/nognuplot/epoch_time.png" ] || fail "a chart without gnuplot?"
PATH=/nonexistent "$BENCH" plot "$tmp/nognuplot" 2>"$tmp/nognuplot.err"
rc=$?
[ $rc -eq 3 ] || fail "bench plot without gnuplot exited $rc, expected 3"
echo "test_plot: ok"
