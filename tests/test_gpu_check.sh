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
#     data and epochs, its step losses and train loss too; the short-batch
#     row equal to naive on the same options at every step), the table in
#     OUT and the archive with the rows' files in it, the table printed
#     last;
#   - bf16's losses made 20% off: bf16 FAILED on its first steps;
#   - fp16's run held past its timeout: fp16 "ran out of time", and the
#     rows after it still ran;
#   - multi-gpu, model parallelism and the peer run before the anchor is
#     waited for, multi-gpu under NCCL_DEBUG=WARN, and the archive is
#     packed again after them (before the tests and memcheck);
#   - no cmocka (a compiler that fails): test_cuda "not run", which fails
#     the check; memcheck without compute-sanitizer: "not run"; exit
#     status 1.
# Second run:
#   - the build goes through (a stand-in) make after an nvcc probe that
#     runs past its timeout: the build is tried, and its row says why the
#     probe was passed over;
#   - --list is killed before it prints a line: the probe row FAILED, and
#     the device rows still run (and pass);
#   - the short-batch row's third step (the batch of 96) 1e-3 off: that
#     row FAILED;
#   - test_cuda (a stand-in) skips its every trial: "not run", not ok;
#   - every tar after the first is killed half-way, its partial archive
#     written: the first archive (of the device rows) survives whole, and
#     no partial one is left in OUT.
# An nvcc that really fails stops the check at the build (exit status 2).
# The preflight (--preflight, before the call) refuses a carried data
# folder with both the plain and the .gz copies (82 MiB), and one without
# the data, and passes the .gz alone; scripts/gpu-carry's folder holds the
# .gz alone and cmocka, and a cmocka program builds and runs against it.
# The cuda engine's cuDNN check gives cuDNN's own message beside the
# status name (tests/cuda_reason.c, no GPU needed).
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
# the data: DATA, else data/ (scripts/fetch-data), else the Debian package
# `make test` installs, so that a fresh clone runs this test too
data=${DATA:-data}
[ -n "${DATA:-}" ] || [ -e "$data/train-images-idx3-ubyte" ] ||
    [ -e "$data/train-images-idx3-ubyte.gz" ] || data=/usr/share/datasets/fashion-mnist
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
args=() backend="" precision=fp32 out="" steps="" prev="" limited=0 short=0
# a run already short (--limit 1280 or less: the short-batch row) keeps its
# limits and epochs; the others are cut to 10 batches
prev=""
for a in "$@"; do [ "$prev" = --limit ] && [ "$a" -le 1280 ] && short=1; prev=$a; done
prev=""
for a in "$@"; do
    case "$prev" in
    --backend) backend=$a; a=naive ;;
    --precision) precision=$a; case "$a" in tf32 | bf16 | fp16) a=fp32 ;; esac ;;
    --out) out=$a ;;
    --step-losses) steps=$a ;;
    --epochs) [ "$short" = 1 ] || a=1 ;;
    --limit | --test-limit) limited=1
        if [ "$short" = 0 ]; then prev=""; unset 'args[${#args[@]}-1]'; continue; fi ;;
    esac
    args+=("$a")
    prev=$a
done
[ -z "$out" ] || echo "NCCL_DEBUG=${NCCL_DEBUG:-unset}" > "$out.env"
case "$backend" in
cuda | multi-gpu | pytorch-cuda) ;;
naive) [ "$limited" = 0 ] || exec "$real" "$@" ;; # the anchor (whole epochs) is cut short too
*) exec "$real" "$@" ;;
esac
[ "$precision" = fp16 ] && [ "$STAND_IN_SLOW_FP16" = 1 ] && sleep 30 # past the row's timeout
rc=0
if [ "$short" = 1 ]; then
    "$real" "${args[@]}" > /dev/null || rc=$?
else
    "$real" "${args[@]}" --limit 1280 --test-limit 100 > /dev/null || rc=$?
fi
[ "$backend" = naive ] && exit "$rc" # the anchor: naive's own rows
scale=1 off_step=0
[ "$precision" = bf16 ] && scale=1.2
[ "$short" = 1 ] && [ "${STAND_IN_SHORT_OFF:-0}" = 1 ] && scale=1.001 off_step=3
python3 - "$out/summary.csv" "$steps" "$backend" "$precision" "$scale" "$off_step" <<'PY'
import csv, sys
summary, steps, backend, precision, scale, off_step = sys.argv[1:7]
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
    for n, line in enumerate(lines[1:], 1):
        cells = line.split(",")
        cells[0] = backend
        if off_step == "0" or n == int(off_step):
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

# a tar that notes, at each call, whether the peer had run and whether the
# memcheck rows were written yet, then packs
mkdir -p "$tmp/noting-tar"
cat > "$tmp/noting-tar/tar" <<EOF
#!/usr/bin/env bash
echo "peer \$([ -e "$tmp/main/results/device/pytorch-cuda/bench.rc" ] && echo 1 || echo 0) memcheck \$(grep -c memcheck "$tmp/main/results/table-after.tsv" 2>/dev/null)" >> "$tmp/tar-notes"
exec "$real_tar" "\$@"
EOF
chmod +x "$tmp/noting-tar/tar"

# the build's stand-ins: an nvcc whose first start is slow (past the
# probe's timeout), one that fails, a make that "builds" the stand-in bench,
# and a test_cuda whose every trial skips (as with no GPU)
mkdir -p "$tmp/build-tools" "$tmp/build/tests"
cat > "$tmp/slow-nvcc" <<'EOF'
#!/usr/bin/env bash
case " $* " in *" --version "*) echo "Cuda compilation tools, release 13.0, V13.0.0"; exit 0 ;; esac
sleep 20
EOF
cat > "$tmp/broken-nvcc" <<'EOF'
#!/usr/bin/env bash
case " $* " in *" --version "*) echo "Cuda compilation tools, release 13.0, V13.0.0"; exit 0 ;; esac
echo "nvcc fatal   : Cannot find compiler 'cc' in PATH" >&2
exit 1
EOF
cat > "$tmp/build-tools/make" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do case "\$a" in BENCH=*) cp "$tmp/stand-in" "\${a#BENCH=}" ;; esac; done
echo "note: CUDA libraries: stand-in"
EOF
cat > "$tmp/build/tests/test_cuda" <<'EOF'
#!/usr/bin/env bash
echo "[==========] Running 2 test(s)."
echo "[ RUN      ] cuda_training_fp32"
echo "[  SKIPPED ] cuda_training_fp32"
echo "[ RUN      ] cuda_graph_replay"
echo "[  SKIPPED ] cuda_graph_replay"
echo "[==========] 2 test(s) run."
echo "[  PASSED  ] 0 test(s)."
echo "[  SKIPPED ] 2 test(s), listed below:"
EOF
chmod +x "$tmp/slow-nvcc" "$tmp/broken-nvcc" "$tmp/build-tools/make" "$tmp/build/tests/test_cuda"

# check NAME [VAR=VALUE...]: the check over the stand-in, into $tmp/NAME;
# md is its table (GPU_CHECK_BENCH= empty: built by the stand-in make)
check() {
    local name=$1 rc=0
    shift
    md=$tmp/$name/out/gpu-check.md
    env GPU_CHECK_BENCH="$tmp/stand-in" GPU_CHECK_TESTS="" "$@" STAND_IN_LIST_ENV="$tmp/$name.list-env" \
        OUT="$tmp/$name/out" GPU_CHECK_RESULTS="$tmp/$name/results" GPU_CHECK_COMMIT=stand-in DATA="$data" \
        bash scripts/gpu-check > "$tmp/$name.stdout" 2> "$tmp/$name.stderr" || rc=$?
    return "$rc"
}
expect_row() { # expect_row ROW STATUS [REASON-PATTERN]
    if grep -Eq "^\| $1 \| $2 \| .*${3:-}" "$md"; then pass
    else fail "${md#"$tmp"/}: row $1: expected $2${3:+ ($3)}: $(grep "^| $1 | " "$md" || echo missing)"; fi
}

# ---- first run: --list hangs after its cuda line
rc=0
check main STAND_IN_LIST=slow STAND_IN_SLOW_FP16=1 GPU_CHECK_T_LIST=3 PATH="$tmp/noting-tar:$PATH" CC=false \
    GPU_CHECK_TESTS=test_cuda || rc=$?
if [ "$rc" = 1 ]; then pass; else fail "exit status $rc, expected 1: $(tail -5 "$tmp/main.stderr")"; fi
if [ -s "$md" ] && [ -s "$tmp/main/out/gpu-check.tar.gz" ]; then pass; else fail "no table or archive in OUT: $(ls "$tmp/main/out")"; fi
if head -1 "$tmp/main.stderr" | grep -q '^gpu-check: budget 510 s'; then pass
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
expect_row fp32 ok "train loss vs naive anchor"
expect_row fp32-short ok "all 9 steps vs naive \(short batches\).*accuracy equals naive's"
expect_row "naive short reference" ok "9 steps"
expect_row test_cuda "not run" "cmocka not found"
# multi-gpu, model parallelism and the peer before the wait for the anchor
expect_row "naive fp32 anchor" ok "after the peer"
order=$(grep -E 'gpu-check: (multi-gpu|model-parallel|pytorch-cuda): exit status|\] naive fp32 anchor:' "$tmp/main.stderr" |
    sed 's/.*gpu-check: \([a-z-]*\):.*/\1/; s/.*naive fp32 anchor.*/anchor/' | paste -sd' ' -)
if [ "$order" = "multi-gpu model-parallel pytorch-cuda anchor" ]; then pass; else fail "order of the rows after the device rows: '$order'"; fi
if [ "$(cat "$tmp/main/results/device/multi-gpu/bench.env" 2>/dev/null)" = NCCL_DEBUG=WARN ]; then pass
else fail "multi-gpu ran without NCCL_DEBUG=WARN: $(cat "$tmp/main/results/device/multi-gpu/bench.env" 2>/dev/null)"; fi
if [ "$(cat "$tmp/main/results/device/fp32/bench.env" 2>/dev/null)" = NCCL_DEBUG=unset ]; then pass
else fail "fp32 ran with NCCL_DEBUG set: $(cat "$tmp/main/results/device/fp32/bench.env" 2>/dev/null)"; fi
# packed after the peer, before memcheck (and the trap's last pack)
if grep -q '^peer 1 memcheck 0$' "$tmp/tar-notes" 2>/dev/null; then pass
else fail "the archive was not packed again after the peer: $(paste -sd';' "$tmp/tar-notes" 2>/dev/null)"; fi
expect_row bf16 FAILED "step [0-9]+ loss .* over the bound 0.06"
expect_row fp16 FAILED "bench run ran out of time"
expect_row "naive fp32 reference" ok
if [ "$sanitizer_here" = 0 ]; then expect_row memcheck "not run" "compute-sanitizer not found"; fi
if [ "$(tail -1 "$tmp/main.stdout" | cut -c1-2)" = "| " ]; then pass; else fail "the table is not printed last: $(tail -2 "$tmp/main.stdout")"; fi
listing=$(tar -tzf "$tmp/main/out/gpu-check.tar.gz" 2>&1)
for f in gpu-check.md gpu-check.log device/fp32/bench.steps.csv device/fp32/bench/summary.csv device/multi-gpu/bench.log \
    device/anchor/bench/summary.csv device/anchor/bench.steps.csv device/fp32-short/bench.steps.csv \
    device/reference/short.steps.csv; do
    case "$listing" in
    *"results/$f"*) pass ;;
    *) fail "the archive has no results/$f" ;;
    esac
done

# ---- second run: built by make after a slow nvcc probe; --list killed
# before a line; the short-batch row off at its step 3; test_cuda skipped;
# every tar after the first killed
rc=0
check killed STAND_IN_LIST=killed STAND_IN_SLOW_FP16=0 STAND_IN_SHORT_OFF=1 \
    PATH="$tmp/killing-tar:$tmp/build-tools:$PATH" GPU_CHECK_BENCH= NVCC="$tmp/slow-nvcc" GPU_CHECK_T_PROBE=2 \
    GPU_CHECK_BUILD="$tmp/build" GPU_CHECK_TESTS=test_cuda || rc=$?
if [ "$rc" = 1 ]; then pass; else fail "killed --list: exit status $rc, expected 1: $(tail -5 "$tmp/killed.stderr")"; fi
expect_row build ok "the nvcc probe ran out of time after 2 s .*built anyway"
expect_row probe FAILED "exit status 137: no cuda line in ./bench --list; the device rows run anyway"
for r in fp32 tf32 fp16 fp64 fp32-graph-off fp32-host-fed multi-gpu; do
    expect_row "$r" ok
done
expect_row fp32-short FAILED "step 3 loss .* naive on the same options .* over the bound 0.0001"
expect_row test_cuda "not run" "GPU trials skipped: cuda_graph_replay,cuda_training_fp32"
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

# ---- an nvcc that really fails stops the check at the build
rc=0
check broken PATH="$tmp/build-tools:$PATH" GPU_CHECK_BENCH= NVCC="$tmp/broken-nvcc" GPU_CHECK_BUILD="$tmp/build" || rc=$?
if [ "$rc" = 2 ]; then pass; else fail "a failing nvcc: exit status $rc, expected 2: $(tail -3 "$tmp/broken.stderr")"; fi
expect_row build FAILED "nvcc cannot compile a one-line kernel \(exit status 1\): nvcc fatal"

# ---- the budget: the build 120 s, the call 540 s, everything that always
# runs inside the budget --timeouts prints
rc=0
got=$(bash scripts/gpu-check --timeouts 2>&1) || rc=$?
case "$rc:$got" in
0:"budget 510 s (the call's timeout_s 540 less 30): before the table "*"(build 120 s;"*) pass ;;
*) fail "--timeouts: exit status $rc: $got" ;;
esac

# ---- the preflight: what travels with the call, before it is made
mkdir -p "$tmp/carry-both/data" "$tmp/carry-gz/data" "$tmp/carry-none"
# the sizes of Fashion-MNIST's files, plain and .gz (sparse: no disk used)
while read -r f plain gz; do
    truncate -s "$plain" "$tmp/carry-both/data/$f"
    truncate -s "$gz" "$tmp/carry-both/data/$f.gz"
    truncate -s "$gz" "$tmp/carry-gz/data/$f.gz"
done <<'SIZES'
train-images-idx3-ubyte 47040016 26421880
train-labels-idx1-ubyte 60008 29515
t10k-images-idx3-ubyte 7840016 4422102
t10k-labels-idx1-ubyte 10008 5148
SIZES
echo hello > "$tmp/carry-none/README"
rc=0
got=$(bash scripts/gpu-check --preflight "$tmp/carry-both" 2>&1) || rc=$?
case "$rc:$got" in
2:*"refused: "*" MiB would travel"*"over 60 MiB"*"both the plain and the .gz copies"*) pass ;;
*) fail "a carried folder with both copies of the data: exit status $rc: $got" ;;
esac
rc=0
got=$(bash scripts/gpu-check --preflight "$tmp/carry-none" 2>&1) || rc=$?
case "$rc:$got" in
2:*"no carried path holds the four data files"*) pass ;;
*) fail "a carried folder without the data: exit status $rc: $got" ;;
esac
rc=0
got=$(bash scripts/gpu-check --preflight "$tmp/carry-gz" 2>&1) || rc=$?
case "$rc:$got" in
0:*"MiB travel"*"the call: run(command=\"GPU_CHECK_COMMIT="*" bash scripts/gpu-check\", carry=[\"$tmp/carry-gz\"], timeout_s=540)"*) pass ;;
*) fail "a carried folder with the .gz alone: exit status $rc: $got" ;;
esac
# scripts/gpu-carry: the .gz alone, and a cmocka that builds and runs a
# test from the carried copy alone
src_gz=${GPU_CARRY_SOURCE:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$src_gz/train-images-idx3-ubyte.gz" ]; then
    skip_check "no $src_gz/*.gz: scripts/gpu-carry not checked"
else
    rc=0
    got=$(GPU_CARRY="$tmp/gpu-carry" bash scripts/gpu-carry "$src_gz" 2>&1) || rc=$?
    plain=$(find "$tmp/gpu-carry" -name '*-ubyte' | wc -l)
    gz=$(find "$tmp/gpu-carry/data" -name '*-ubyte.gz' | wc -l)
    if [ "$rc" = 0 ] && [ "$plain" = 0 ] && [ "$gz" = 4 ]; then pass
    else fail "scripts/gpu-carry: exit status $rc, $gz .gz and $plain plain files: $got"; fi
    if [ -f "$tmp/gpu-carry/cmocka/lib/libcmocka.so" ]; then
        printf '#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <setjmp.h>\n#include <cmocka.h>\nstatic void t(void **s) { (void)s; assert_int_equal(2, 1 + 1); }\nint main(void) { const struct CMUnitTest tests[] = { cmocka_unit_test(t) }; return cmocka_run_group_tests(tests, NULL, NULL); }\n' > "$tmp/cm.c"
        # the loader finds the carried library first, as the check sets it
        if ${CC:-cc} -I"$tmp/gpu-carry/cmocka/include" -o "$tmp/cm" "$tmp/cm.c" -L"$tmp/gpu-carry/cmocka/lib" \
            -lcmocka 2> "$tmp/cm.err" && LD_LIBRARY_PATH="$tmp/gpu-carry/cmocka/lib" "$tmp/cm" > "$tmp/cm.out" 2>&1 &&
            LD_LIBRARY_PATH="$tmp/gpu-carry/cmocka/lib" ldd "$tmp/cm" | grep -q "libcmocka.so.0 => $tmp/gpu-carry/cmocka/lib/"; then pass
        else fail "a cmocka program against the carried copy: $(cat "$tmp/cm.err" "$tmp/cm.out" 2>/dev/null | head -3)"; fi
    else
        skip_check "no cmocka here: scripts/gpu-carry carried none"
    fi
fi

# ---- the reason the cuda engine gives for a failed cuDNN call
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
if ! printf '#include <cudnn.h>\nint main(void){return 0;}\n' |
    ${CC:-cc} -x c - -I"$cuda_inc" -o /dev/null -L"$cuda_lib" -l:libcudnn.so.9 > /dev/null 2>&1; then
    skip_check "no cuDNN 9 here: the cuDNN reason is not checked"
elif ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -I. -I"$cuda_inc" -o "$tmp/cuda_reason" \
    tests/cuda_reason.c -L"$cuda_lib" -l:libcudnn.so.9 -Wl,-rpath,"$cuda_lib" 2> "$tmp/cuda_reason.err"; then
    fail "tests/cuda_reason.c does not compile: $(head -3 "$tmp/cuda_reason.err")"
else
    got=$("$tmp/cuda_reason" 2>&1)
    case "$got" in
    CUDNN_STATUS_BAD_PARAM*": "?*) pass ;;
    *) fail "a refused cuDNN call's reason has no cuDNN message: '$got'" ;;
    esac
fi

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
