#!/usr/bin/env bash
# scripts/gpu-check past the device, without a GPU: a stand-in bench
# (GPU_CHECK_BENCH) runs every cuda, multi-gpu and peer command the check
# gives through the real ./bench's naive backend, on 10 batches, and labels
# its rows and step losses as the device's. So each command line the check
# makes on the GPU machine is parsed here, and the rows, the judge, the
# table and the archive are exercised end to end. First run:
#   - the budget is printed first; --list is asked without the peers' probe;
#   - --list prints its cuda line, then hangs past its timeout: the probe
#     row keeps the line and says so, and the device rows run;
#   - every device row but two is ok (fp32 anchored to naive over the same
#     data and epochs), the table in OUT and the archive with the rows'
#     files in it, the table printed last;
#   - bf16's losses made 20% off: bf16 FAILED on its first steps;
#   - fp16's run held past its timeout: fp16 "ran out of time", and the
#     rows after it still ran;
#   - memcheck without compute-sanitizer: "not run"; exit status 1.
# Second run:
#   - --list is killed before it prints a line: the probe row FAILED, and
#     the device rows still run (and pass);
#   - every tar after the first is killed half-way, its partial archive
#     written: the first archive (of the device rows) survives whole, and
#     no partial one is left in OUT.
# The real ./bench --list, asked as the check asks it, writes its cuda line
# by itself as it prints it.
# And the batch sizes a cuda engine plans for before its graph capture
# (backends/cuda/plan_sizes.c through tests/cuda_plan_sizes.c): B and the
# sets' short last batches, each once.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
bench=${BENCH:-./bench}
[ -x "$bench" ] || { echo "test_gpu_check.sh: no $bench: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "test_gpu_check.sh: no python3: skipped"; exit 77; }
data=${DATA:-data}
[ -e "$data/train-images-idx3-ubyte" ] || [ -e "$data/train-images-idx3-ubyte.gz" ] ||
    { echo "test_gpu_check.sh: no data in $data (scripts/fetch-data): skipped"; exit 77; }
if command -v compute-sanitizer >/dev/null || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" ]; then
    sanitizer_here=1
else
    sanitizer_here=0
fi
scratch

real=$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")
cat > "$tmp/stand-in" <<EOF
#!/usr/bin/env bash
# what the device would do, done by naive on 10 batches
set -eu
real='$real'
EOF
cat >> "$tmp/stand-in" <<'EOF'
case " $* " in
*" --list "*)
    # the environment the check asks in: no peers' probe
    echo "LENET_BENCH_PYTORCH_SCRIPT=${LENET_BENCH_PYTORCH_SCRIPT:-unset}" > "$STAND_IN_LIST_ENV"
    [ "$STAND_IN_LIST" = killed ] && kill -9 $$
    echo "naive      built, runnable: stand-in"
    echo "cuda       built, runnable: stand-in"
    [ "$STAND_IN_LIST" = slow ] && sleep 30 # past the check's T_LIST
    exit 0 ;;
esac
args=() backend="" precision=fp32 out="" steps="" prev="" limited=0
for a in "$@"; do
    case "$prev" in
    --backend) backend=$a; a=naive ;;
    --precision) precision=$a; case "$a" in tf32 | bf16 | fp16) a=fp32 ;; esac ;;
    --out) out=$a ;;
    --step-losses) steps=$a ;;
    --epochs) a=1 ;;
    --limit | --test-limit) limited=1; prev=""; unset 'args[${#args[@]}-1]'; continue ;;
    esac
    args+=("$a")
    prev=$a
done
case "$backend" in
cuda | multi-gpu | pytorch-cuda) ;;
naive) [ "$limited" = 0 ] || exec "$real" "$@" ;; # the anchor (whole epochs) is cut short too
*) exec "$real" "$@" ;;
esac
[ "$precision" = fp16 ] && [ "$STAND_IN_SLOW_FP16" = 1 ] && sleep 30 # past the row's timeout
rc=0
"$real" "${args[@]}" --limit 1280 --test-limit 100 > /dev/null || rc=$?
[ "$backend" = naive ] && exit "$rc" # the anchor: naive's own rows
scale=1
[ "$precision" = bf16 ] && scale=1.2
python3 - "$out/summary.csv" "$steps" "$backend" "$precision" "$scale" <<'PY'
import csv, sys
summary, steps, backend, precision, scale = sys.argv[1:6]
graph = "fp32 FMA (no TF32); CUDA graph; data on device" if precision != "fp64" else "fp64 throughout; CUDA graph; data on device"
details = ("1 replicas of cuda (synchronous gradient all-reduce; NCCL over 1 GPUs, peer access on 0 pairs), each: " + graph
           if backend == "multi-gpu" else graph)
rows = list(csv.DictReader(open(summary, newline="")))
with open(summary, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    for r in rows:
        r["backend"], r["details"] = backend, details
        w.writerow(r)
if not steps:
    sys.exit(0)
lines = open(steps).read().splitlines()
loss = lines[0].split(",").index("loss")
with open(steps, "w") as f:
    f.write(lines[0] + "\n")
    for line in lines[1:]:
        cells = line.split(",")
        cells[0] = backend
        cells[loss] = "%.9g" % (float(cells[loss]) * float(scale))
        f.write(",".join(cells) + "\n")
PY
exit "$rc"
EOF
chmod +x "$tmp/stand-in"

# a tar killed half-way, its partial archive written: every tar after the
# first one of a run
real_tar=$(command -v tar)
mkdir -p "$tmp/killing-tar"
cat > "$tmp/killing-tar/tar" <<EOF
#!/usr/bin/env bash
n=\$((\$(cat "$tmp/tar-calls" 2>/dev/null || echo 0) + 1))
echo "\$n" > "$tmp/tar-calls"
[ "\$n" = 1 ] && exec "$real_tar" "\$@"
prev=""
for a in "\$@"; do [ "\$prev" = -czf ] && head -c 2000 "$real" > "\$a"; prev=\$a; done
kill -9 \$\$
EOF
chmod +x "$tmp/killing-tar/tar"

# check NAME [VAR=VALUE...]: the check over the stand-in, into $tmp/NAME;
# md is its table
check() {
    local name=$1 rc=0
    shift
    md=$tmp/$name/out/gpu-check.md
    env "$@" STAND_IN_LIST_ENV="$tmp/$name.list-env" OUT="$tmp/$name/out" GPU_CHECK_RESULTS="$tmp/$name/results" \
        GPU_CHECK_BENCH="$tmp/stand-in" GPU_CHECK_TESTS="" GPU_CHECK_COMMIT=stand-in DATA="$data" \
        scripts/gpu-check > "$tmp/$name.stdout" 2> "$tmp/$name.stderr" || rc=$?
    return "$rc"
}
expect_row() { # expect_row ROW STATUS [REASON-PATTERN]
    if grep -Eq "^\| $1 \| $2 \| .*${3:-}" "$md"; then pass
    else fail "${md#"$tmp"/}: row $1: expected $2${3:+ ($3)}: $(grep "^| $1 | " "$md" || echo missing)"; fi
}

# ---- first run: --list hangs after its cuda line
rc=0
check main STAND_IN_LIST=slow STAND_IN_SLOW_FP16=1 GPU_CHECK_T_LIST=3 || rc=$?
if [ "$rc" = 1 ]; then pass; else fail "exit status $rc, expected 1: $(tail -5 "$tmp/main.stderr")"; fi
if [ -s "$md" ] && [ -s "$tmp/main/out/gpu-check.tar.gz" ]; then pass; else fail "no table or archive in OUT: $(ls "$tmp/main/out")"; fi
if head -1 "$tmp/main.stderr" | grep -q '^gpu-check: budget 450 s'; then pass
else fail "the budget is not printed first: $(head -1 "$tmp/main.stderr")"; fi
asked=$(cat "$tmp/main.list-env" 2>/dev/null || echo "--list not asked")
case "$asked" in
LENET_BENCH_PYTORCH_SCRIPT=/*) if [ -e "${asked#*=}" ]; then fail "--list was given a peer script that exists: $asked"; else pass; fi ;;
*) fail "--list was asked with the peers' probe: $asked" ;;
esac
expect_row probe ok "ran out of time after 3 s, past its cuda line"
for r in fp32 tf32 fp64 fp32-graph-off fp32-host-fed multi-gpu model-parallel pytorch-cuda; do
    expect_row "$r" ok
done
expect_row fp32 ok "accuracy vs naive anchor"
expect_row "naive fp32 anchor" ok
expect_row torch info
expect_row fp32-graph-off ok "equals fp32 graph on over 10 steps"
expect_row multi-gpu ok "first 10 steps vs cuda fp32"
expect_row model-parallel ok "largest worker"
expect_row bf16 FAILED "step [0-9]+ loss .* over the bound 0.06"
expect_row fp16 FAILED "bench run ran out of time"
expect_row "naive fp32 reference" ok
if [ "$sanitizer_here" = 0 ]; then expect_row memcheck "not run" "compute-sanitizer not found"; fi
if [ "$(tail -1 "$tmp/main.stdout" | cut -c1-2)" = "| " ]; then pass; else fail "the table is not printed last: $(tail -2 "$tmp/main.stdout")"; fi
listing=$(tar -tzf "$tmp/main/out/gpu-check.tar.gz" 2>&1)
for f in gpu-check.md gpu-check.log device/fp32/bench.steps.csv device/fp32/bench/summary.csv device/multi-gpu/bench.log \
    device/anchor/bench/summary.csv; do
    case "$listing" in
    *"results/$f"*) pass ;;
    *) fail "the archive has no results/$f" ;;
    esac
done

# ---- second run: --list killed before a line; every tar after the first killed
rc=0
check killed STAND_IN_LIST=killed STAND_IN_SLOW_FP16=0 PATH="$tmp/killing-tar:$PATH" || rc=$?
if [ "$rc" = 1 ]; then pass; else fail "killed --list: exit status $rc, expected 1: $(tail -5 "$tmp/killed.stderr")"; fi
expect_row probe FAILED "exit status 137: no cuda line in ./bench --list; the device rows run anyway"
for r in fp32 tf32 fp16 fp64 fp32-graph-off fp32-host-fed multi-gpu; do
    expect_row "$r" ok
done
calls=$(cat "$tmp/tar-calls" 2>/dev/null || echo 0)
if [ "$calls" -ge 2 ]; then pass; else fail "tar was called $calls times, expected the first archive and more"; fi
if listing=$(tar -tzf "$tmp/killed/out/gpu-check.tar.gz" 2>&1); then pass; else fail "the archive that survived does not unpack: $listing"; fi
case "$listing" in
*results/device/fp32/bench.steps.csv*) pass ;;
*) fail "the surviving archive is not the device rows' one: $(echo "$listing" | head -3)" ;;
esac
case "$listing" in
*results/device/multi-gpu/*) fail "the archive holds what came after the first one" ;;
*) pass ;;
esac
if find "$tmp/killed/out" -name '*.new' | grep -q .; then fail "a partial archive was left in OUT: $(ls "$tmp/killed/out")"; else pass; fi
if grep -q 'tar did not finish.*the archive of an earlier step stands' "$tmp/killed.stderr"; then pass
else fail "the check did not say the archive was kept: $(grep -i tar "$tmp/killed.stderr" | head -3)"; fi

# ---- the real ./bench --list, asked as the check asks it (no peers'
# probe, stdbuf -oL), writes its cuda line to the file by itself, as it is
# printed, so that a --list killed later keeps it (fully buffered, all of
# --list is one write at exit)
if ! command -v stdbuf > /dev/null; then
    skip_check "no stdbuf: the line-buffered --list is not checked"
elif ! command -v strace > /dev/null || ! strace -o /dev/null true 2> /dev/null; then
    skip_check "no strace (or no ptrace here): the line-buffered --list is not checked"
else
    LENET_BENCH_PYTORCH_SCRIPT=$tmp/absent strace -f -s 1000 -e trace=write -o "$tmp/list.strace" \
        stdbuf -oL "$bench" --list > /dev/null 2>&1
    cuda_write=$(grep 'write(1, "cuda ' "$tmp/list.strace" | head -1)
    # one line: the only \n is the last character written
    case "$cuda_write" in
    *'\n"'*) lines=$(printf '%s' "${cuda_write%%\",*}" | grep -o '\\n' | wc -l)
        if [ "$lines" = 1 ]; then pass; else fail "the cuda line shares its write with $((lines - 1)) more: $cuda_write"; fi ;;
    *) fail "--list did not write its cuda line by itself: $(grep -c 'write(1,' "$tmp/list.strace") writes, $(grep -m1 'write(1,' "$tmp/list.strace" | cut -c1-120)" ;;
    esac
fi

# ---- the batch sizes a cuda engine plans for
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I. -o "$tmp/cuda_plan_sizes" tests/cuda_plan_sizes.c \
    backends/cuda/plan_sizes.c 2> "$tmp/plan_sizes.err"; then
    # batch, training images, test images: the sizes, in order
    while read -r b train test want; do
        got=$("$tmp/cuda_plan_sizes" "$b" "$train" "$test" 2>&1)
        if [ "$got" = "${want//,/ }" ]; then pass
        else fail "plan sizes for batch $b over $train and $test images: '$got', expected '${want//,/ }'"; fi
    done <<'SIZES'
128 60000 10000 128,96,16
128 1280 100 128,100
128 6400 1000 128,104
128 1000 1000 128,104
128 60032 10112 128
100 50 0 100,50
1 60000 10000 1
SIZES
    if "$tmp/cuda_plan_sizes" 0 60000 10000 > /dev/null 2>&1; then fail "batch 0 was taken"; else pass; fi
else
    skip_check "cannot compile tests/cuda_plan_sizes.c: $(head -2 "$tmp/plan_sizes.err")"
fi
finish
