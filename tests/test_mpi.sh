#!/usr/bin/env bash
# Data parallelism across MPI ranks, end to end through ./bench:
#  1. `mpirun -np 2 ./bench` (blas when built, else naive) trains like one
#     process: every step's loss within 1e-5 relative, and the saved
#     parameters close;
#  2. `--parallel model` over 2 ranks (one worker each) trains bitwise what
#     the same split trains in one process;
#  3. a rank killed mid-run ends the whole job with an error, within a time
#     limit, instead of leaving the other rank waiting in a collective, and
#     the summary keeps the configuration as failed with the epochs it
#     finished;
#  4. SIGINT to rank 0 stops every rank alike: exit 130, the row kept; to
#     mpirun: the rows kept, mpirun's own status.
# Skips (77) when mpirun is missing, the bench was built without MPI, or the
# Fashion-MNIST files are not installed.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
mpi_test_setup

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

# rank_pid JOB RANK: the process of rank RANK under JOB (timeout -> mpirun
# -> the ranks: the rank is the child whose environment says so).
rank_pid() {
    local parent pid
    for parent in $(pgrep -P "$1"); do
        for pid in $(pgrep -P "$parent"); do
            tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
                echo "$pid"
        done
    done
}
# start_in_epoch_2 NAME: a long run in $dir/NAME, returned once its first
# epoch's row is written (the job is $job).
start_in_epoch_2() {
    timeout 120 $MPIRUN "$BENCH" --backend "$backend" --data "$DATA" --limit 4096 --epochs 50 \
        --test-limit 200 --batch-size 64 --threads 1 --no-peak --out "$dir/$1" \
        >"$dir/$1.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do
        [ -f "$dir/$1/epochs.csv" ] && [ "$(wc -l <"$dir/$1/epochs.csv")" -ge 2 ] && return
        sleep 0.1
    done
    kill "$job" 2>/dev/null
    fail "$1: no epoch row within a minute: $(tail -3 "$dir/$1.log")"
}
# summary_of NAME: status, final_train_loss and message of the run's row.
summary_of() {
    python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])): print(r["status"], r["final_train_loss"] != "", r["message"])' \
        "$dir/$1/summary.csv"
}

# A rank that dies: kill rank 1 in epoch 2; mpirun must end the job with a
# non-zero status, not hang, and rank 0 still writes its summary: the
# configuration failed, with epoch 1 finished.
start_in_epoch_2 killed
victim=$(rank_pid $job 1)
[ -n "$victim" ] || { kill $job 2>/dev/null; wait $job; fail "could not find rank 1's process"; }
kill -9 "$victim"
wait $job
rc=$?
[ "$rc" -eq 124 ] && fail "the job hung after rank 1 was killed (ended by timeout)"
[ "$rc" -ne 0 ] || fail "the job exited 0 after rank 1 was killed"
case "$(summary_of killed)" in
"failed True signal "*" in epoch 2 (1 of 50 epochs finished) while this rank waited"*) ;;
*) fail "rank 1 killed in epoch 2: summary.csv holds '$(summary_of killed)', expected a failed row with epoch 1 finished" ;;
esac
echo "test_mpi: rank 1 killed, job ended with status $rc, the failed row kept"

# SIGINT to rank 0 stops every rank after the same step: the job exits
# 130, rank 0's status, as a plain interrupted run does, with the
# interrupted row in summary.csv.
start_in_epoch_2 interrupted
kill -INT "$(rank_pid $job 0)"
wait $job
rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT to rank 0: the job exited $rc, expected 130: $(tail -3 "$dir/interrupted.log")"
case "$(summary_of interrupted)" in
"interrupted True stopped by signal 2 during epoch "*) ;;
*) fail "SIGINT to rank 0: summary.csv holds '$(summary_of interrupted)'" ;;
esac
echo "test_mpi: SIGINT to rank 0, job ended with status 130, the interrupted row kept"

# SIGINT to mpirun: it sends the ranks SIGTERM, and they stop alike and
# keep their rows; mpirun's own status is then 1 whatever the ranks return
# (Open MPI 4 sets it when it is signalled: docs/running.md).
start_in_epoch_2 mpirun-int
kill -INT "$(pgrep -P $job)"
wait $job
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "SIGINT to mpirun: the job exited $rc"
case "$(summary_of mpirun-int)" in
"interrupted True stopped by signal 15 during epoch "*) ;;
*) fail "SIGINT to mpirun: summary.csv holds '$(summary_of mpirun-int)'" ;;
esac
echo "test_mpi: SIGINT to mpirun, job ended with status $rc, the interrupted row kept"

# A disk that fills while rank 0 alone writes the rows: every rank stops
# at that epoch (exit 1) instead of the others waiting for rank 0 in the
# next epoch's collectives. A 16 KiB tmpfs with one page taken, as in
# test_faults.sh; epochs.csv overflows its page within 60 epochs.
mkdir "$dir/small"
if mount -t tmpfs -o size=16k tmpfs "$dir/small" 2>/dev/null; then
    trap 'umount "$dir/small" 2>/dev/null; rm -rf "$dir"' EXIT
    head -c 4096 /dev/zero >"$dir/small/filler"
    timeout 120 $MPIRUN "$BENCH" "${args[@]}" --epochs 60 --limit 256 --out "$dir/small/run" \
        >"$dir/full.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && fail "rank 0's disk full: the job hung (ended by timeout)"
    [ "$rc" -eq 1 ] || fail "rank 0's disk full: the job exited $rc, expected 1: $(tail -3 "$dir/full.log")"
    grep -q "No space left" "$dir/full.log" ||
        fail "rank 0's disk full: no message says so: $(tail -3 "$dir/full.log")"
    umount "$dir/small"
    echo "test_mpi: rank 0's disk full, every rank stopped with status 1"
else
    echo "test_mpi: SKIP (this case): cannot mount a small tmpfs (not root?)"
fi
echo "test_mpi: PASS"
