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

peer_scratch
D+=(--no-peak)
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
[ "$took" -le 90 ] && grep -q "^pytorch-cpu  *built, not runnable here: .*--probe gave no answer within" "$tmp/list" &&
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

# 4. The interpreter, in the documented order. A stand-in environment
# whose python execs the system's and reports its own version.
mkdir -p "$tmp/env/bin" "$tmp/broken/bin"
printf '#!/bin/sh\nPEER_STANDIN_VERSION=9.9-env exec %s "$@"\n' "$py" >"$tmp/env/bin/python"
printf '#!/bin/sh\necho "ImportError: no torch here" >&2\nexit 1\n' >"$tmp/broken/bin/python"
printf '#!/bin/sh\nPEER_STANDIN_VERSION=8.8-user exec %s "$@"\n' "$py" >"$tmp/user-python"
chmod +x "$tmp/env/bin/python" "$tmp/broken/bin/python" "$tmp/user-python"
S=(env LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" PEER_STANDIN=serve)
# list_says ENV-SETTINGS... -- PATTERN: --list's pytorch-cpu lines hold PATTERN
list_says() {
    local settings=() pattern
    while [ "$1" != -- ]; do settings+=("$1"); shift; done
    pattern=$2
    "${S[@]}" "${settings[@]}" "$BENCH" --list >"$tmp/list" 2>&1
    grep -A1 '^pytorch-cpu ' "$tmp/list" | grep -q -- "$pattern"
}
list_says LENET_BENCH_PEER_ENV="$tmp/env" -- "PyTorch 9.9-env from the project's environment (make peer) ($tmp/env/bin/python)" &&
    pass || fail "the project's environment is not the peer's: $(grep -A1 '^pytorch-cpu ' "$tmp/list")"
list_says LENET_BENCH_PEER_ENV="$tmp/env" LENET_BENCH_PYTHON="$tmp/user-python" -- "PyTorch 8.8-user from LENET_BENCH_PYTHON ($tmp/user-python)" &&
    pass || fail "LENET_BENCH_PYTHON does not come first: $(grep -A1 '^pytorch-cpu ' "$tmp/list")"
list_says LENET_BENCH_PEER_ENV="$tmp/no-env" -- "from the system's python3" &&
    pass || fail "without an environment, not the system's python3: $(grep -A1 '^pytorch-cpu ' "$tmp/list")"
list_says LENET_BENCH_PEER_ENV="$tmp/broken" -- "built, not runnable here: the peer's environment $tmp/broken cannot run the peer .*no torch here" &&
    pass || fail "a broken environment: $(grep -A1 '^pytorch-cpu ' "$tmp/list")"
# the run records it: the row's details and system.json
"${S[@]}" LENET_BENCH_PEER_ENV="$tmp/env" "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/env-run" >/dev/null 2>"$tmp/err"
csv_cell "$tmp/env-run/summary.csv" details | grep -q "PyTorch 9.9-env from the project's environment" && pass ||
    fail "the row's details do not name the environment: $(csv_cell "$tmp/env-run/summary.csv" details)"
grep -q '"libraries": "PyTorch 9.9-env (the project.s environment (make peer), '"$tmp"'/env/bin/python)' "$tmp/env-run/system.json" && pass ||
    fail "system.json does not name the peer's version and interpreter: $(grep libraries "$tmp/env-run/system.json")"
# a broken environment: a skipped row with the reason beside another
# backend (exit 0), not runnable alone (3), never a crash
"${S[@]}" LENET_BENCH_PEER_ENV="$tmp/broken" "$BENCH" --backend naive,pytorch-cpu "${D[@]}" \
    --out "$tmp/broken-run" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep '^pytorch-cpu,' "$tmp/broken-run/summary.csv" | grep -c 'skipped')" -ge 1 ] &&
    grep '^pytorch-cpu,' "$tmp/broken-run/summary.csv" | grep -q "cannot run the peer" && pass ||
    fail "a broken environment beside naive: exit $rc, $(grep '^pytorch-cpu' "$tmp/broken-run/summary.csv")"
"${S[@]}" LENET_BENCH_PEER_ENV="$tmp/broken" "$BENCH" --backend pytorch-cpu "${D[@]}" \
    --out "$tmp/broken-alone" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "cannot run the peer" "$tmp/err" && pass ||
    fail "a broken environment alone: exit $rc, $(tail -1 "$tmp/err")"

# 5. The peer's OpenMP waiting is its runtime's own, not the suite's
# passive default (the stand-in says what it was started with), unless the
# user set a policy; the details and system.json say which.
standin_env() { csv_cell "$1/summary.csv" details | sed -n 's/.*a stand-in started with \(OPENBLAS_CORETYPE=[^;]*\).*/\1/p'; }
(
    unset OMP_WAIT_POLICY GOMP_SPINCOUNT
    "${S[@]}" "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/wait-default" >/dev/null 2>"$tmp/err"
)
case "$(standin_env "$tmp/wait-default")" in
*"OMP_WAIT_POLICY=(unset) GOMP_SPINCOUNT=(unset)"*) pass ;;
*) fail "the peer started with the suite's waiting: $(standin_env "$tmp/wait-default")" ;;
esac
grep -q '"peer_environment": "[^"]*the framework.s own default' "$tmp/wait-default/system.json" && pass ||
    fail "system.json does not record the peer's waiting: $(grep peer_environment "$tmp/wait-default/system.json")"
OMP_WAIT_POLICY=active "${S[@]}" "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/wait-user" >/dev/null 2>"$tmp/err"
case "$(standin_env "$tmp/wait-user")" in
*"OMP_WAIT_POLICY=active "*) pass ;;
*) fail "the user's OMP_WAIT_POLICY=active did not reach the peer: $(standin_env "$tmp/wait-user")" ;;
esac
grep -q '"peer_environment": "[^"]*OMP_WAIT_POLICY=active (set by the user)' "$tmp/wait-user/system.json" && pass ||
    fail "system.json does not say the user set the peer's waiting: $(grep peer_environment "$tmp/wait-user/system.json")"

# 6. LENET_BENCH_PEER_TIMEOUT outside its one range (1 to 86400 seconds) is
# a usage error (2) wherever a peer would run: alone, beside another
# backend, in --backend all; never a skipped row.
for v in 0.5 86401 0 +5; do
    for list in pytorch-cpu naive,pytorch-cpu all; do
        LENET_BENCH_PEER_TIMEOUT=$v LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" PEER_STANDIN=serve \
            "$BENCH" --backend "$list" "${D[@]}" --out "$tmp/timeout-$v-$list" >/dev/null 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 2 ] && grep -q "LENET_BENCH_PEER_TIMEOUT='$v' is not a number of seconds from 1 to 86400" "$tmp/err" &&
            pass || fail "LENET_BENCH_PEER_TIMEOUT=$v --backend $list: exit $rc, $(head -1 "$tmp/err")"
    done
done
# ... and the ends of the range are taken (1 s may be too short for the
# stand-in's start on a loaded machine: a failed row then, never a usage
# error)
for v in 1 86400; do
    LENET_BENCH_PEER_TIMEOUT=$v LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" PEER_STANDIN=serve \
        "$BENCH" --backend pytorch-cpu "${D[@]}" --out "$tmp/timeout-$v" >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" -ne 2 ] && ! grep -q "LENET_BENCH_PEER_TIMEOUT=.* is not a number" "$tmp/err" && pass ||
        fail "LENET_BENCH_PEER_TIMEOUT=$v refused: exit $rc, $(tail -1 "$tmp/err")"
done

finish
