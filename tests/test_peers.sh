#!/usr/bin/env bash
# The framework peers end to end through ./bench. A peer process that exits
# non-zero, one that answers outside the protocol and one that never
# answers (tests/peer-standin.py, chosen with LENET_BENCH_PYTORCH_SCRIPT;
# no torch needed) each give a failed pytorch-cpu row with the reason, the
# next backend still runs, and no peer process is left behind. A missing
# script makes the peer not runnable, with the reason; --no-peers leaves
# the peers out of --backend all. Where a python3 with torch is found: a
# real pytorch-cpu row next to naive's, and SIGINT during a peer's epoch
# ends the run with 130, its finished rows kept and its child gone.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

peer_scratch

# left_behind PATTERN: processes whose command line holds PATTERN
left_behind() { pgrep -f -- "$1" | tr '\n' ' '; }

# value_of FILE BACKEND COLUMN [BATCH]: COLUMN of BACKEND's rows in FILE
# (of batch size BATCH only, when given; quoted fields may hold commas)
value_of() {
    awk -v b="$2" -v name="$3" -v batch="${4:-}" '
    function split_csv(s, out,   n, q, i, c, f) {
        n = 0; q = 0; f = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\"") q = !q
            else if (c == "," && !q) { out[++n] = f; f = "" }
            else f = f c
        }
        out[++n] = f
        return n
    }
    { n = split_csv($0, v) }
    NR == 1 { for (i = 1; i <= n; i++) { if (v[i] == name) c = i; if (v[i] == "batch_size") k = i }; next }
    v[1] == b && (batch == "" || v[k] == batch) { print v[c] }' "$1"
}
# row_of DIR BACKEND COLUMN: the same from DIR/summary.csv
row_of() { value_of "$1/summary.csv" "$2" "$3"; }

# The backend that runs after the peer: blas where it can run here.
next_backend=""
if "$BENCH" --list | grep -q '^blas  *built, runnable'; then
    next_backend=blas
fi

# fault MODE KEYWORD: the stand-in fails in MODE; the peer's row is
# failed with KEYWORD in its message and the next backend's row is ok.
fault() {
    local mode=$1 key=$2 out="$tmp/run-$1" rc status msg
    local list=pytorch-cpu${next_backend:+,$next_backend}
    PEER_STANDIN=$mode LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" LENET_BENCH_PEER_TIMEOUT=3 \
        timeout 120 "$BENCH" --backend "$list" "${D[@]}" --out "$out" >/dev/null 2>"$tmp/err-$mode"
    rc=$?
    [ "$rc" -eq 1 ] && pass || fail "$mode: exit status $rc, expected 1: $(tail -3 "$tmp/err-$mode")"
    status=$(row_of "$out" pytorch-cpu status)
    msg=$(grep '^pytorch-cpu,' "$out/summary.csv")
    [ "$status" = failed ] && pass || fail "$mode: pytorch-cpu row status '$status', expected failed"
    case "$msg" in
    *"$key"*) pass ;;
    *) fail "$mode: the row's message lacks '$key': $msg" ;;
    esac
    grep -q "pytorch-cpu failed: .*$key" "$tmp/err-$mode" && pass ||
        fail "$mode: stderr does not say why: $(cat "$tmp/err-$mode")"
    # the failure is the last line, after the charts' lines
    tail -1 "$tmp/err-$mode" | grep -q "^bench: pytorch-cpu failed: .*$key" && pass ||
        fail "$mode: the last line is not the failure: $(tail -1 "$tmp/err-$mode")"
    if [ -n "$next_backend" ]; then
        status=$(row_of "$out" "$next_backend" status)
        [ "$status" = ok ] && pass || fail "$mode: $next_backend after the peer: status '$status'"
    else
        skip_check "$mode: no backend but naive runs here to follow the peer"
    fi
    local left
    left=$(left_behind "$tmp/standin.py")
    [ -z "$left" ] && pass || fail "$mode: peer processes left behind: $left"
    csv_fields_ok "$out/summary.csv" && pass || fail "$mode: summary.csv does not parse"
}

fault exit "exited with status 3: RuntimeError: the stand-in fails on purpose"
fault garbage "answered 'hello, this is not the protocol'"
fault hang "gave no answer to params within 3 s"

# SIGTERM while the peer hangs: the call in flight gets a short grace (10 s,
# or the base timeout when shorter: 4 s here), then the run ends with 130,
# the row says why and the peer is gone.
PEER_STANDIN=hang LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" LENET_BENCH_PEER_TIMEOUT=4 \
    "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/run-term" >/dev/null 2>"$tmp/err" &
pid=$!
# the run has started (its handlers are set) once it names its data
for _ in $(seq 100); do grep -q '^lenet:' "$tmp/err" && break; sleep 0.1; done
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ "$rc" -eq 130 ] && pass || fail "SIGTERM during a hung peer: exit status $rc, expected 130"
grep -q "after the run was interrupted" "$tmp/err" && pass ||
    fail "SIGTERM during a hung peer: $(cat "$tmp/err")"
left=$(left_behind "$tmp/standin.py")
[ -z "$left" ] && pass || fail "SIGTERM: peer processes left behind: $left"

# A fair peer: alone or after blas, the peer's process starts with the
# same OpenBLAS kernels and OpenMP waiting (the stand-in says what it saw),
# and the row's details and system.json say what they were.
standin_env() { sed -n 's/.*a stand-in started with \(OPENBLAS_CORETYPE=[^;"]*\).*/\1/p' "$1"; }
for list in pytorch-cpu ${next_backend:+$next_backend,pytorch-cpu}; do
    PEER_STANDIN=serve LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
        "$BENCH" --backend "$list" "${D[@]}" --no-peak --out "$tmp/fair-$list" >/dev/null 2>"$tmp/err"
    [ "$(row_of "$tmp/fair-$list" pytorch-cpu status)" = ok ] && pass ||
        fail "the serving stand-in after '$list': $(tail -3 "$tmp/err")"
done
alone=$(row_of "$tmp/fair-pytorch-cpu" pytorch-cpu details | standin_env /dev/stdin)
# (the OpenMP waiting is the framework's own, not the suite's passive:
# tests/test_peer_process.sh)
case "$alone" in
*"OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-(unset)} "*) pass ;;
*) fail "the peer alone started with '$alone', not its runtime's own OpenMP waiting" ;;
esac
if [ -n "$next_backend" ]; then
    after=$(row_of "$tmp/fair-$next_backend,pytorch-cpu" pytorch-cpu details | standin_env /dev/stdin)
    [ -n "$alone" ] && [ "$alone" = "$after" ] && pass ||
        fail "the peer's environment depends on the rows before it: alone '$alone', after $next_backend '$after'"
    core=$(sed -n 's/^  "blas_kernels": "\(.*\)",$/\1/p' "$tmp/fair-$next_backend,pytorch-cpu/system.json")
    case "$alone" in
    "OPENBLAS_CORETYPE=$core "*) pass ;;
    *) fail "the peer's OPENBLAS_CORETYPE is not blas's kernels ($core): $alone" ;;
    esac
else
    skip_check "blas cannot run here: the peer's environment after blas is not compared"
fi
grep -q '"peer_environment": "OPENBLAS_CORETYPE[^"]*OpenMP waiting' "$tmp/fair-pytorch-cpu/system.json" &&
    row_of "$tmp/fair-pytorch-cpu" pytorch-cpu details | grep -q "; OPENBLAS_CORETYPE.*OpenMP waiting" &&
    pass || fail "system.json or the details do not record the peer's environment: $(grep peer_env "$tmp/fair-pytorch-cpu/system.json")"

# The peer's memory is its configuration's: a reused process's peak is
# reset for each (the repeats take turns: batch 16 after 512 holds 32
# times less).
PEER_STANDIN=serve PEER_STANDIN_BYTES_PER_IMAGE=400000 LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    "$BENCH" --backend pytorch-cpu "${D[@]}" --limit 512 --batch-size 16,512 --repeat 2 --no-peak --out "$tmp/mem" \
    >/dev/null 2>"$tmp/err"
big=$(value_of "$tmp/mem/summary.csv" pytorch-cpu memory_bytes 512)
small=$(value_of "$tmp/mem/summary.csv" pytorch-cpu memory_bytes 16)
awk -v b="$big" -v s="$small" 'BEGIN { exit !(b > 200e6 && s > 0 && s < 100e6) }' && pass ||
    fail "the peer's memory per configuration: batch 512 '$big', then batch 16 '$small' bytes"

# A peer whose losses are negative (no cross-entropy is) fails its row.
PEER_STANDIN=serve PEER_STANDIN_LOSS=-1.5 LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    "$BENCH" --backend pytorch-cpu "${D[@]}" --no-peak --out "$tmp/negative" >/dev/null 2>"$tmp/err"
[ "$(row_of "$tmp/negative" pytorch-cpu status)" = failed ] &&
    grep -q "a loss of -1.5 at step 1" "$tmp/negative/summary.csv" && pass ||
    fail "negative losses: $(grep '^pytorch-cpu' "$tmp/negative/summary.csv")"

# A timeout no interpreter can meet is refused as such, not blamed on python.
LENET_BENCH_PEER_TIMEOUT=1e-9 "$BENCH" --list >"$tmp/list" 2>&1
grep -q "^pytorch-cpu  *built, not runnable here: LENET_BENCH_PEER_TIMEOUT=1e-9 is not a number of seconds" "$tmp/list" &&
    pass || fail "LENET_BENCH_PEER_TIMEOUT=1e-9: $(grep pytorch-cpu "$tmp/list")"

# An interpreter wrapper that does not exec: the peer it starts is stopped
# with it when the peer hangs.
printf '#!/bin/sh\n%s "$@"\n' "$(command -v python3)" >"$tmp/wrapper"
chmod +x "$tmp/wrapper"
PEER_STANDIN=hang LENET_BENCH_PYTHON="$tmp/wrapper" LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    LENET_BENCH_PEER_TIMEOUT=2 timeout 120 "$BENCH" --backend pytorch-cpu "${D[@]}" --no-peak \
    --out "$tmp/wrapped" >/dev/null 2>"$tmp/err"
[ "$(row_of "$tmp/wrapped" pytorch-cpu status)" = failed ] && pass ||
    fail "a hanging peer behind a wrapper: $(tail -2 "$tmp/err")"
left=$(left_behind "$tmp/standin.py")
[ -z "$left" ] && pass || fail "a wrapper's peer left behind: $left"
for p in $left; do kill -KILL "$p" 2>/dev/null; done

# A missing script: not runnable, with the reason, in --list and alone.
LENET_BENCH_PYTORCH_SCRIPT="$tmp/none.py" "$BENCH" --list >"$tmp/list" 2>&1
grep -q "^pytorch-cpu  *built, not runnable here: .*none.py not found" "$tmp/list" && pass ||
    fail "--list with a missing script: $(grep pytorch "$tmp/list")"
LENET_BENCH_PYTORCH_SCRIPT="$tmp/none.py" "$BENCH" --backend pytorch-cpu "${D[@]}" \
    --out "$tmp/run-missing" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "none.py not found" "$tmp/err" && pass ||
    fail "a missing script, asked for alone: status $rc, $(cat "$tmp/err")"

# --no-peers: --backend all without the peers (the stand-in would fail).
PEER_STANDIN=exit LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    "$BENCH" --backend all --no-peers "${D[@]}" --out "$tmp/run-nopeers" >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q pytorch "$tmp/run-nopeers/summary.csv"; then
    pass
else
    fail "--backend all --no-peers: status $rc, backends $(csv_column "$tmp/run-nopeers/summary.csv" backend | tr '\n' ' ')"
fi
# ... and with them, the stand-in's failure is a row of --backend all
PEER_STANDIN=exit LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    "$BENCH" --backend all "${D[@]}" --out "$tmp/run-all" >/dev/null 2>"$tmp/err"
[ "$(row_of "$tmp/run-all" pytorch-cpu status)" = failed ] && pass ||
    fail "--backend all: no failed pytorch-cpu row: $(cat "$tmp/run-all/summary.csv")"
# the failed row carries nothing of the backends that ran before it (and
# no accuracy it never measured)
[ -z "$(row_of "$tmp/run-all" pytorch-cpu details)" ] &&
    [ -z "$(row_of "$tmp/run-all" pytorch-cpu final_test_accuracy)" ] && pass ||
    fail "--backend all: the failed pytorch-cpu row holds another's figures: $(grep '^pytorch-cpu' "$tmp/run-all/summary.csv")"

# With torch: a real row, then an interrupted one.
if ! "$BENCH" --list | grep -q '^pytorch-cpu  *built, runnable'; then
    skip_check "pytorch-cpu cannot run here: $("$BENCH" --list | grep '^pytorch-cpu')"
    finish
    exit
fi
"$BENCH" --backend naive,pytorch-cpu "${D[@]}" --threads 1 --out "$tmp/real" >/dev/null \
    2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && pass || fail "naive,pytorch-cpu: exit status $rc: $(tail -3 "$tmp/err")"
[ "$(row_of "$tmp/real" pytorch-cpu status)" = ok ] && pass ||
    fail "pytorch-cpu row: $(grep pytorch "$tmp/real/summary.csv")"
grep '^pytorch-cpu,' "$tmp/real/summary.csv" | grep -q "PyTorch .*fp32, TF32 off" && pass ||
    fail "pytorch-cpu's details do not say its torch and math: $(grep pytorch "$tmp/real/summary.csv")"
grep -q '"[^"]*PyTorch [0-9]' "$tmp/real/system.json" && pass ||
    fail "system.json does not record the PyTorch version"
# pytorch-cpu's memory is its process's (hundreds of MB with torch), not the
# wrapper's heap (a few KiB); no CPU row has a device peak
mem=$(row_of "$tmp/real" pytorch-cpu memory_bytes)
awk -v m="$mem" 'BEGIN { exit !(m > 50e6) }' &&
    row_of "$tmp/real" pytorch-cpu memory_source | grep -q VmHWM && pass ||
    fail "pytorch-cpu memory_bytes '$mem' ($(row_of "$tmp/real" pytorch-cpu memory_source))"
[ -z "$(row_of "$tmp/real" pytorch-cpu peak_memory_bytes)$(row_of "$tmp/real" naive peak_memory_bytes)" ] &&
    pass || fail "CPU rows state a peak device memory: $(cat "$tmp/real/summary.csv")"
# the charts tell the peer from the suite
if command -v gnuplot >/dev/null; then
    grep -q "pytorch-cpu (peer)" "$tmp/real/throughput.svg" && grep -q "hatched: framework peer" \
        "$tmp/real/throughput.svg" && pass || fail "throughput.svg does not mark the peer"
else
    skip_check "gnuplot is not installed: no charts to check"
fi
# one epoch from the same start and order: the same mean loss to 4 digits
a=$(value_of "$tmp/real/epochs.csv" naive train_loss)
b=$(value_of "$tmp/real/epochs.csv" pytorch-cpu train_loss)
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-4 * a) }' &&
    pass || fail "epoch 1 train loss: naive $a, pytorch-cpu $b"

out="$tmp/interrupted"
"$BENCH" --backend pytorch-cpu --data "$tmp/data" --epochs 50 --batch-size 64 --threads 1 \
    --out "$out" >/dev/null 2>"$tmp/err" &
pid=$!
waited=0
while [ "$({ wc -l <"$out/epochs.csv"; } 2>/dev/null || echo 0)" -lt 2 ] && [ "$waited" -lt 1800 ] &&
    kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    waited=$((waited + 1))
done
child=$(pgrep -P "$pid" | tr '\n' ' ')
kill -INT "$pid"
wait "$pid"
rc=$?
pid=""
[ "$rc" -eq 130 ] && pass || fail "SIGINT: exit status $rc, expected 130: $(tail -3 "$tmp/err")"
statuses=$(csv_column "$out/epochs.csv" status | tr '\n' ' ')
case "$statuses" in
"ok "*"interrupted ") pass ;;
*) fail "SIGINT: epoch statuses '$statuses', expected ok rows then one interrupted" ;;
esac
[ -n "$child" ] && pass || fail "SIGINT: no peer process was running during the epoch"
for c in $child; do
    if kill -0 "$c" 2>/dev/null; then
        fail "SIGINT: the peer process $c is still there"
        kill -KILL "$c"
    else
        pass
    fi
done
finish
