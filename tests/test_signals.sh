#!/usr/bin/env bash
# SIGINT and SIGTERM during training: the run finishes the current row
# marked `interrupted`, flushes, and exits 130; every epoch completed
# before the signal is on disk with status ok, and both CSV files parse.
# SIGTERM during start-up (loading, the backends' probes) exits 130 too;
# `./bench plot` ends gnuplot on SIGINT and SIGHUP; a signal the run does
# not catch (SIGHUP, SIGKILL) keeps every finished configuration's row.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
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
    # its one configuration did not finish, yet its finished epochs are drawn
    if command -v gnuplot >/dev/null; then
        "$BENCH" plot "$out" >/dev/null 2>"$tmp/plot.err" && [ -s "$out/loss.png" ] && pass ||
            fail "$sig: bench plot of the interrupted run: $(cat "$tmp/plot.err")"
    else
        skip_check "gnuplot not installed: the interrupted run is not plotted"
    fi
}

interrupt INT
interrupt TERM

# SIGTERM during start-up (loading a large data set) exits 130 like one
# during training, before any results directory is made. The handler must
# be in place before loading starts: the signal is sent as soon as
# /proc says it is caught.
big="$tmp/big"
mkdir "$big"
cp "$tmp/data"/t10k-* "$big/"
members=300 # 300 x 1024 blank images, 240 MB to decompress
{ be32 2051; be32 $((members * 1024)); be32 28; be32 28; } | gzip -1 >"$big/train-images-idx3-ubyte.gz"
head -c $((784 * 1024)) /dev/zero | gzip -1 >"$tmp/member.gz"
for ((i = 0; i < members; i++)); do cat "$tmp/member.gz"; done >>"$big/train-images-idx3-ubyte.gz"
labels_file "$big/train-labels-idx1-ubyte" $((members * 1024))
"$BENCH" --backend naive --workload mlp --epochs 1 --data "$big" --out "$tmp/startup" \
    >/dev/null 2>"$tmp/err" &
pid=$!
caught=""
for ((i = 0; i < 3000; i++)); do
    mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || break
    [ -z "$mask" ] && break
    if (((0x$mask >> 14) & 1)); then caught=1; break; fi # bit 15: SIGTERM
    sleep 0.01
done
made=""
[ -e "$tmp/startup" ] && made=1
kill -TERM "$pid" 2>/dev/null
wait "$pid"; rc=$?
pid=""
if [ -z "$caught" ]; then
    fail "start-up: SIGTERM never caught (exit status $rc)"
elif [ -n "$made" ]; then
    fail "start-up: SIGTERM is caught only once the results directory exists"
elif [ "$rc" -ne 130 ]; then
    fail "start-up: SIGTERM gave exit status $rc, expected 130"
elif [ -e "$tmp/startup" ]; then
    fail "start-up: a results directory was made after SIGTERM"
else
    pass
fi
# SIGTERM while the backends are probed (here the peer's interpreter, a
# stand-in that never answers) exits 130 with a word of it, before any
# results directory is made: the handler is in place before planning.
cat >"$tmp/silent-python" <<'SH'
#!/bin/sh
exec sleep 60
SH
chmod +x "$tmp/silent-python"
LENET_BENCH_PYTHON="$tmp/silent-python" LENET_BENCH_PEER_TIMEOUT=20 \
    "$BENCH" --backend naive,pytorch-cpu --epochs 1 --data "$tmp/data" --no-peak \
    --out "$tmp/probing" >/dev/null 2>"$tmp/err" &
pid=$!
probing=""
for ((i = 0; i < 1000; i++)); do
    pgrep -P "$pid" sleep >/dev/null && { probing=1; break; }
    sleep 0.01
done
kill -TERM "$pid" 2>/dev/null
started=$SECONDS
wait "$pid"; rc=$?
pid=""
if [ -z "$probing" ]; then
    fail "probing: the peer's stand-in interpreter never started (exit status $rc)"
elif [ "$rc" -ne 130 ]; then
    fail "probing: SIGTERM gave exit status $rc, expected 130: $(cat "$tmp/err")"
elif ! grep -q "^bench: stopped by signal 15 during start-up" "$tmp/err"; then
    fail "probing: no word of the signal: $(cat "$tmp/err")"
elif [ -e "$tmp/probing" ]; then
    fail "probing: a results directory was made after SIGTERM"
elif [ $((SECONDS - started)) -gt 15 ]; then
    fail "probing: $((SECONDS - started)) s from SIGTERM to the end"
else
    pass
fi

# SIGINT or SIGHUP to `./bench plot` ends gnuplot and leaves no .part-
# file behind: 128 + the signal, and the charts drawn before it are whole.
if command -v gnuplot >/dev/null; then
    "$BENCH" --backend naive --epochs 2 --limit 512 --data "$tmp/data" --no-peak \
        --out "$tmp/plotted" >/dev/null 2>&1
    for sig in INT HUP; do
        caught=""
        for _ in $(seq 5); do
            "$BENCH" plot "$tmp/plotted" >/dev/null 2>"$tmp/plot.err" &
            pid=$!
            gp=""
            for _ in $(seq 200); do
                gp=$(pgrep -P $pid gnuplot | head -1)
                [ -n "$gp" ] && break
                sleep 0.01
            done
            [ -n "$gp" ] || { wait $pid; continue; } # drawn before we looked: again
            kill -$sig $pid
            wait $pid 2>/dev/null; rc=$?
            pid=""
            caught=1
            break
        done
        want=$((128 + $(kill -l $sig)))
        if [ -z "$caught" ]; then
            skip_check "plot: never caught gnuplot running for SIG$sig"
        elif [ "$rc" -ne "$want" ]; then
            fail "plot: SIG$sig gave exit status $rc, expected $want: $(cat "$tmp/plot.err")"
        elif sleep 0.2; kill -0 "$gp" 2>/dev/null; then
            kill -KILL "$gp"
            fail "plot: SIG$sig left gnuplot running"
        elif ls -a "$tmp/plotted" | grep -q '\.part-'; then
            fail "plot: SIG$sig left $(ls -a "$tmp/plotted" | grep '\.part-')"
            rm -f "$tmp/plotted"/*.part-*
        else
            pass
        fi
    done
else
    skip_check "gnuplot is not installed"
fi

# A signal the run does not catch (SIGHUP, a crash, the OOM killer's
# SIGKILL) while the second configuration trains: summary.csv, rewritten
# as each configuration ends, keeps the first one's row, whole, and no
# temporary file of it is left. It was written only at the end.
for sig in HUP KILL; do
    # started under nohup, this shell and ./bench inherit SIGHUP ignored
    if [ "$sig" = HUP ] && [ -n "$(trap -p HUP)" ]; then
        skip_check "SIGHUP is ignored in this environment (nohup?): the uncaught-signal case runs with SIGKILL only"
        continue
    fi
    out="$tmp/killed-$sig"
    "$BENCH" --backend naive --batch-size 64,128 --epochs 20 --limit 512 --data "$tmp/data" \
        --no-peak --out "$out" >/dev/null 2>"$tmp/err" &
    pid=$!
    waited=0
    # the second configuration's first epoch row
    until [ "$(csv_column "$out/epochs.csv" batch_size 2>/dev/null | grep -c '^128$')" -ge 1 ]; do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        waited=$((waited + 1))
        [ "$waited" -gt 1200 ] && break
    done
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null; rc=$? # (no word from bash of how it ended)
    pid=""
    want=$((128 + $(kill -l $sig)))
    if [ "$waited" -gt 1200 ]; then
        fail "SIG$sig: no epoch row of the second configuration within 120 s"
    elif [ "$rc" -ne "$want" ]; then
        fail "SIG$sig during the second configuration: exit status $rc, expected $want: $(tail -3 "$tmp/err")"
    elif [ "$(csv_cell "$out/summary.csv" status | tr '\n' ' ')" != "ok " ] ||
            [ "$(csv_column "$out/summary.csv" batch_size)" != 64 ]; then
        fail "SIG$sig during the second configuration: summary.csv lacks the first one's row: $(cat "$out/summary.csv")"
    elif ! csv_fields_ok "$out/summary.csv"; then
        fail "SIG$sig during the second configuration: summary.csv does not parse"
    elif ls -a "$out" | grep -q '\.part-'; then
        fail "SIG$sig during the second configuration: left $(ls -a "$out" | grep '\.part-')"
    else
        pass
    fi
done

# A reader that left (`./bench ... 2>&1 | head -1`): standard output and
# error are a pipe whose reading end is closed before the run starts. The
# run is not ended by SIGPIPE: its skipped row (naive has no bf16) and its
# trained row reach summary.csv, and the lost output is exit status 1.
out="$tmp/pipe"
rc=$(python3 - "$BENCH" --backend naive --precision fp32,bf16 --epochs 1 --limit 256 \
    --data "$tmp/data" --no-peak --out "$out" <<'PY'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
print(subprocess.run(sys.argv[1:], stdout=w, stderr=w).returncode)
PY
)
statuses=$(paste -d' ' <(csv_cell "$out/summary.csv" precision 2>/dev/null) \
    <(csv_cell "$out/summary.csv" status 2>/dev/null) | sort | tr '\n' ',')
if [ "$rc" = 1 ] && [ "$statuses" = "bf16 skipped,fp32 ok," ] && csv_fields_ok "$out/summary.csv"; then
    pass
else
    fail "output to a closed pipe: exit status $rc (expected 1), summary.csv rows '$statuses'"
fi

# SIGINT while the end-of-run peaks are probed (rounds of 3 s here): the
# probe ends at its next trial, the run exits 130 within a second or two
# with its row kept, and says it stopped (it took a whole report and
# seconds of probing, without a word of the stop).
out="$tmp/peak-stop"
LB_PEAK_SECONDS=3 "$BENCH" --backend naive --workload mlp --epochs 1 --limit 256 \
    --data "$tmp/data" --out "$out" >"$tmp/stdout" 2>"$tmp/err" &
pid=$!
waited=0
until [ "$(csv_cell "$out/summary.csv" status 2>/dev/null)" = ok ]; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
    waited=$((waited + 1))
    [ "$waited" -gt 2400 ] && break
done
sleep 0.3 # into the probe
start=$(date +%s%N)
kill -INT "$pid" 2>/dev/null
wait "$pid"; rc=$?
pid=""
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -eq 130 ] && [ "$ms" -lt 2500 ] && grep -q "stopped by signal 2" "$tmp/err" &&
        [ "$(csv_cell "$out/summary.csv" status)" = ok ] && csv_fields_ok "$out/summary.csv"; then
    pass
else
    fail "SIGINT during the peak probe: exit status $rc (expected 130) after $ms ms, row '$(csv_cell "$out/summary.csv" status)': $(tail -2 "$tmp/err")"
fi
finish
