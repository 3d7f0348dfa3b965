#!/usr/bin/env bash
# Data parallelism across MPI ranks, end to end through ./bench:
#  1. `mpirun -np 2 ./bench` (blas when built, else naive) trains like one
#     process: every step's loss within 1e-5 relative, and the saved
#     parameters close;
#  2. `--parallel model` over 2 ranks (one worker each) trains bitwise what
#     the same split trains in one process;
#  3. a rank killed mid-run ends the whole job with an error, within a time
#     limit, instead of leaving the other rank waiting in a collective.
# Skips (77) when mpirun is missing, the bench was built without MPI, or the
# Fashion-MNIST files are not installed.
set -u
source tests/mpi_setup.sh

# this machine may have fewer cores than ranks, hence --oversubscribe
MPIRUN="mpirun -np 2 --oversubscribe"
backend=naive
"$BENCH" --list | grep -q "^blas  *built, runnable" && backend=blas

dir=$(mktemp -d /tmp/test_mpi.XXXXXX)
trap 'rm -rf "$dir"' EXIT
args=(--backend "$backend" --data "$DATA" --limit 520 --test-limit 100 --epochs 2
      --batch-size 64 --threads 1)

"$BENCH" "${args[@]}" --out "$dir/one" --step-losses "$dir/one.csv" \
    --save-params "$dir/one.params" >"$dir/one.log" 2>&1 ||
    { cat "$dir/one.log"; fail "the single-process run failed"; }
timeout 300 $MPIRUN "$BENCH" "${args[@]}" --out "$dir/two" --step-losses "$dir/two.csv" \
    --save-params "$dir/two.params" >"$dir/two.log" 2>&1 ||
    { cat "$dir/two.log"; fail "mpirun -np 2 failed (exit $?)"; }

# rank 0 alone wrote the results, with ranks = 2
[ "$(ls -d "$dir"/two* | wc -l)" -eq 4 ] || fail "unexpected files: $(ls "$dir")"
grep -q "^$backend,lenet,fp32,[0-9]*,0,2,2," "$dir/two/summary.csv" ||
    fail "summary.csv lacks a row with replicas 2, ranks 2: $(cat "$dir/two/summary.csv")"

# every step: backend,replicas,ranks,repeat,epoch,step,images,loss and the
# key columns workload,precision,threads,devices,batch_size,optimizer (14)
n1=$(tail -n +2 "$dir/one.csv" | wc -l)
n2=$(tail -n +2 "$dir/two.csv" | wc -l)
[ "$n1" -eq 18 ] && [ "$n2" -eq 18 ] || fail "expected 18 steps in each run, got $n1 and $n2"
paste -d, <(tail -n +2 "$dir/one.csv") <(tail -n +2 "$dir/two.csv") | awk -F, '
    { a = $8; b = $22; d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a
      if ($5 != $19 || $6 != $20 || $7 != $21) { print "step mismatch: " $0; bad = 1 }
      if (!(d <= 1e-5 * m)) { printf "epoch %d step %d: %s vs %s\n", $5, $6, a, b; bad = 1 }
      if (d / m > worst) worst = d / m }
    END { printf "test_mpi: %d steps, largest relative loss difference %.3g\n", NR, worst
          exit bad }' || fail "per-step losses differ by more than 1e-5 relative"

# the parameters, value by value (harness/paramfile.h: a header, then per
# tensor its name and shape and its float32 values)
u32() { od -An -j "$2" -N 4 -tu4 "$1" | tr -d ' '; }
param_values() {
    local f=$1 off=16 t n d len
    for ((t = 0; t < $(u32 "$f" 12); t++)); do
        len=$(u32 "$f" $off)
        off=$((off + 4 + len))
        d=$(u32 "$f" $off)
        off=$((off + 4))
        n=1
        for ((i = 0; i < d; i++)); do n=$((n * $(u32 "$f" $off))); off=$((off + 4)); done
        od -An -v -f -w4 -j $off -N $((4 * n)) "$f"
        off=$((off + 4 * n))
    done
}
param_values "$dir/one.params" >"$dir/one.txt"
param_values "$dir/two.params" >"$dir/two.txt"
[ "$(wc -l <"$dir/one.txt")" -gt 400000 ] || fail "could not read $dir/one.params"
paste "$dir/one.txt" "$dir/two.txt" | awk '
    NF != 2 { bad = 1 }
    { d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; if (m < 1e-2) m = 1e-2
      if (d / m > worst) worst = d / m }
    END { printf "test_mpi: %d parameters, largest relative difference %.3g\n", NR, worst
          exit bad || worst > 1e-3 }' || fail "saved parameters differ"

# Model parallelism across ranks (one worker per rank, activations as
# messages) trains bitwise what the same split trains in one process: the
# saved parameters are the same bytes, both splits, with micro-batches.
margs=(--backend naive --data "$DATA" --limit 256 --test-limit 100 --epochs 1 --batch-size 64
       --parallel model --split layers,filters --micro-batches 1,4)
"$BENCH" "${margs[@]}" --out "$dir/mp-one" --save-params "$dir/mp-one.p" >"$dir/mp-one.log" 2>&1 ||
    { cat "$dir/mp-one.log"; fail "the single-process model-parallel run failed"; }
timeout 300 $MPIRUN "$BENCH" "${margs[@]}" --out "$dir/mp-two" --save-params "$dir/mp-two.p" \
    >"$dir/mp-two.log" 2>&1 || { cat "$dir/mp-two.log"; fail "mpirun -np 2 --parallel model failed"; }
for c in layers-2w layers-2w-4mb filters-2w filters-2w-4mb; do
    [ -s "$dir/mp-one.p.naive-$c" ] || fail "no parameters saved for naive-$c: $(ls "$dir")"
    cmp -s "$dir/mp-one.p.naive-$c" "$dir/mp-two.p.naive-$c-2ranks" ||
        fail "naive-$c over 2 ranks saved other parameters than in one process"
done
echo "test_mpi: model-parallel over 2 ranks saved the same parameters as in one process"
rm -f "$dir"/mp-*.p.*

# A rank that dies: kill rank 1 once training is under way; mpirun must end
# the job with a non-zero status, not hang.
timeout 120 $MPIRUN "$BENCH" --backend "$backend" --data "$DATA" --limit 20000 --epochs 50 \
    --batch-size 64 --threads 1 --out "$dir/killed" --step-losses "$dir/killed.csv" \
    >"$dir/killed.log" 2>&1 &
job=$!
for _ in $(seq 150); do
    [ -f "$dir/killed.csv" ] && [ "$(wc -l <"$dir/killed.csv")" -gt 3 ] && break
    sleep 0.2
done
# timeout -> mpirun -> the ranks: rank 1 is the child whose environment says so
victim=""
for parent in $(pgrep -P $job); do
    for pid in $(pgrep -P "$parent"); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" &&
            victim=$pid
    done
done
[ -n "$victim" ] || { kill $job 2>/dev/null; wait $job; fail "could not find rank 1's process"; }
kill -9 "$victim"
wait $job
rc=$?
[ "$rc" -eq 124 ] && fail "the job hung after rank 1 was killed (ended by timeout)"
[ "$rc" -ne 0 ] || fail "the job exited 0 after rank 1 was killed"
echo "test_mpi: rank 1 killed, job ended with status $rc"
echo "test_mpi: PASS"
