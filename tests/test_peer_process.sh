#!/usr/bin/env bash
# The peer's process and interpreter, through ./bench, without torch (the
# stand-in tests/peer-standin.py and shell wrappers):
# - an interpreter wrapper that starts a child without exec: the whole
#   process group stops with ./bench after SIGTERM and after SIGKILL, and
#   a probe that never answers costs the probe's short timeout, not the
#   training calls' 120 s;
# - behind such a wrapper, pytorch-cpu's memory is the framework's
#   process's peak (which it reports itself), not the wrapper's;
# - the interpreter is picked in the documented order: LENET_BENCH_PYTHON,
#   then the project's environment (LENET_BENCH_PEER_ENV, default
#   .venv-peer beside the program), then the system's python3; --list, the
#   row's details and system.json name it; a broken environment is a
#   skipped row with the reason;
# - the peer's process does not start with the suite's OpenMP waiting
#   default (its runtime's own, or what the user set).
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
make_dataset "$tmp/data" 512 128
cp tests/peer-standin.py "$tmp/standin.py"
D=(--data "$tmp/data" --epochs 1 --limit 256 --test-limit 100 --batch-size 64 --no-peak)
py=$(command -v python3)
# a unique sleep, so that what is left behind can be told
nap=$((1000000 + $$))
# a wrapper that never execs: python (or a sleep) runs as its child
printf '#!/bin/sh\n%s "$@"\n' "$py" >"$tmp/wrapper"
printf '#!/bin/sh\nsleep %s\n' "$nap" >"$tmp/sleeper"
chmod +x "$tmp/wrapper" "$tmp/sleeper"
# an empty project environment for the order checks (the real one, where
# `make peer` made it, would answer first)
export LENET_BENCH_PEER_ENV="$tmp/no-env"

# gone PATTERN: 0 once no process's command line holds PATTERN (5 s)
gone() {
    for _ in $(seq 50); do
        pgrep -f -- "$1" >/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# 1. SIGTERM and SIGKILL of ./bench while the wrapper's sleep runs.
for sig in TERM KILL; do
    LENET_BENCH_PYTHON="$tmp/sleeper" LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
        "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/run-$sig" >/dev/null 2>"$tmp/err-$sig" &
    pid=$!
    for _ in $(seq 100); do pgrep -f -- "sleep $nap" >/dev/null && break; sleep 0.1; done
    pgrep -f -- "sleep $nap" >/dev/null && pass || fail "$sig: the wrapper's sleep never started"
    kill "-$sig" "$pid"
    wait "$pid" 2>/dev/null
    if gone "sleep $nap"; then
        pass
    else
        fail "SIG$sig of ./bench left the peer's process group behind: $(pgrep -af -- "sleep $nap")"
        pkill -KILL -f -- "sleep $nap"
    fi
done

# 2. A probe that never answers is given up within the probe's timeout.
start=$(date +%s)
LENET_BENCH_PYTHON="$tmp/sleeper" LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" \
    timeout 100 "$BENCH" --list >"$tmp/list" 2>&1
took=$(($(date +%s) - start))
[ "$took" -le 45 ] && grep -q "^pytorch-cpu  *built, not runnable here: .*--probe gave no answer within" "$tmp/list" &&
    pass || fail "a hung probe took $took s: $(grep pytorch-cpu "$tmp/list")"
gone "sleep $nap" && pass || fail "the hung probe's sleep left behind"

# 3. Memory behind a wrapper that does not exec: the stand-in holds
# 400,000 bytes per image of its batch (about 200 MB at 512).
PEER_STANDIN=serve PEER_STANDIN_BYTES_PER_IMAGE=400000 LENET_BENCH_PYTHON="$tmp/wrapper" \
    LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" "$BENCH" --backend pytorch-cpu "${D[@]}" \
    --limit 512 --batch-size 512 --out "$tmp/mem" >/dev/null 2>"$tmp/err"
mem=$(csv_cell "$tmp/mem/summary.csv" memory_bytes)
awk -v m="$mem" 'BEGIN { exit !(m > 200e6) }' && pass ||
    fail "pytorch-cpu behind a wrapper: memory_bytes '$mem', expected the framework's (> 200 MB)"

finish
