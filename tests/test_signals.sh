#!/usr/bin/env bash
# SIGINT and SIGTERM during training: the run finishes the current row
# marked `interrupted`, flushes, and exits 130; every epoch completed
# before the signal is on disk with status ok, and both CSV files parse.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

tmp=$(mktemp -d /tmp/test_signals.XXXXXX)
pid=""
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# 2048 images: an epoch of the naive backend takes about a second.
make_dataset "$tmp/data" 2048 128

# interrupt SIGNAL: start a long run, wait for its first epoch row, signal.
interrupt() {
    local sig=$1 out="$tmp/run-$1" rc waited=0
    "$BENCH" --backend naive --epochs 50 --data "$tmp/data" --out "$out" \
        >"$tmp/stdout" 2>"$tmp/err" &
    pid=$!
    # the header and one epoch row
    while [ "$({ wc -l <"$out/epochs.csv"; } 2>/dev/null || echo 0)" -lt 2 ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            fail "$sig: the run ended before its first epoch row: $(tail -3 "$tmp/err")"
            pid=""
            return
        fi
        sleep 0.1
        waited=$((waited + 1))
        if [ "$waited" -gt 1200 ]; then
            fail "$sig: no epoch row after 120 s"
            return
        fi
    done
    sleep 0.3 # into the next epoch
    kill -"$sig" "$pid"
    wait "$pid"; rc=$?
    pid=""
    [ "$rc" -eq 130 ] && pass || fail "$sig: exit status $rc, expected 130"
    local statuses
    statuses=$(csv_column "$out/epochs.csv" status | tr '\n' ' ')
    case "$statuses" in
    "ok "*"interrupted ") pass ;;
    *) fail "$sig: epoch statuses '$statuses', expected ok rows then one interrupted" ;;
    esac
    # every row but the last is a completed epoch, numbered 1, 2, ...
    local epochs expect n
    epochs=$(csv_column "$out/epochs.csv" epoch | tr '\n' ' ')
    n=$(csv_column "$out/epochs.csv" epoch | wc -l)
    expect=$(seq 1 "$n" | tr '\n' ' ')
    [ "$epochs" = "$expect" ] && pass || fail "$sig: epochs '$epochs', expected '$expect'"
    grep -q "interrupted" "$out/summary.csv" && pass ||
        fail "$sig: summary.csv has no interrupted row"
    for f in epochs.csv summary.csv; do
        csv_fields_ok "$out/$f" && pass || fail "$sig: $f does not parse"
        [ "$(tail -c 1 "$out/$f" | od -An -c | tr -d ' ')" = '\n' ] && pass ||
            fail "$sig: $f does not end with a whole row"
    done
    grep -q "stopped by signal" "$tmp/err" && pass || fail "$sig: no word of the signal on stderr"
}

interrupt INT
interrupt TERM
finish
