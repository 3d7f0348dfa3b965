#!/usr/bin/env bash
# scripts/gpu-check past the device, without a GPU: a stand-in bench
# (GPU_CHECK_BENCH) runs every cuda, multi-gpu and peer command the check
# gives through the real ./bench's naive backend, on 10 batches, and labels
# its rows and step losses as the device's. So each command line the check
# makes on the GPU machine is parsed here, and the rows, the judge, the
# table and the archive are exercised end to end:
#   - every device row but two is ok, the table in OUT and the archive
#     with the rows' files in it, the table printed last;
#   - bf16's losses made 20% off: bf16 FAILED on its first steps;
#   - fp16's run held past its timeout: fp16 "ran out of time", and the
#     rows after it still ran;
#   - memcheck without compute-sanitizer: "not run"; exit status 1.
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
*" --list "*) echo "cuda       built, runnable: stand-in"; exit 0 ;;
esac
args=() backend="" precision=fp32 out="" steps="" prev=""
for a in "$@"; do
    case "$prev" in
    --backend) backend=$a; a=naive ;;
    --precision) precision=$a; case "$a" in tf32 | bf16 | fp16) a=fp32 ;; esac ;;
    --out) out=$a ;;
    --step-losses) steps=$a ;;
    --epochs) a=1 ;;
    --limit | --test-limit) prev=""; unset 'args[${#args[@]}-1]'; continue ;;
    esac
    args+=("$a")
    prev=$a
done
case "$backend" in
cuda | multi-gpu | pytorch-cuda) ;;
*) exec "$real" "$@" ;;
esac
[ "$precision" = fp16 ] && sleep 30 # past the row's timeout
rc=0
"$real" "${args[@]}" --limit 1280 --test-limit 100 > /dev/null || rc=$?
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

rc=0
OUT=$tmp/out GPU_CHECK_RESULTS=$tmp/results GPU_CHECK_BENCH=$tmp/stand-in GPU_CHECK_TESTS="" \
    GPU_CHECK_COMMIT=stand-in DATA=$data scripts/gpu-check > "$tmp/stdout" 2> "$tmp/stderr" || rc=$?
md=$tmp/out/gpu-check.md
expect_row() { # expect_row ROW STATUS [REASON-PATTERN]
    if grep -Eq "^\| $1 \| $2 \| .*${3:-}" "$md"; then pass
    else fail "row $1: expected $2${3:+ ($3)}: $(grep "^| $1 | " "$md" || echo missing)"; fi
}
if [ "$rc" = 1 ]; then pass; else fail "exit status $rc, expected 1: $(tail -5 "$tmp/stderr")"; fi
if [ -s "$md" ] && [ -s "$tmp/out/gpu-check.tar.gz" ]; then pass; else fail "no table or archive in OUT: $(ls "$tmp/out")"; fi
for r in fp32 tf32 fp64 fp32-graph-off fp32-host-fed multi-gpu model-parallel pytorch-cuda; do
    expect_row "$r" ok
done
expect_row fp32-graph-off ok "equals fp32 graph on over 10 steps"
expect_row multi-gpu ok "first 10 steps vs cuda fp32"
expect_row model-parallel ok "largest worker"
expect_row bf16 FAILED "step [0-9]+ loss .* over the bound 0.06"
expect_row fp16 FAILED "bench run ran out of time"
expect_row "naive fp32 reference" ok
if [ "$sanitizer_here" = 0 ]; then expect_row memcheck "not run" "compute-sanitizer not found"; fi
if [ "$(tail -1 "$tmp/stdout" | cut -c1-2)" = "| " ]; then pass; else fail "the table is not printed last: $(tail -2 "$tmp/stdout")"; fi
listing=$(tar -tzf "$tmp/out/gpu-check.tar.gz" 2>&1)
for f in gpu-check.md gpu-check.log device/fp32/bench.steps.csv device/fp32/bench/summary.csv device/multi-gpu/bench.log; do
    case "$listing" in
    *"results/$f"*) pass ;;
    *) fail "the archive has no results/$f" ;;
    esac
done
finish
