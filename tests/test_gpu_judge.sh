#!/usr/bin/env bash
# scripts/gpu-judge, the GPU check's row judge, on made-up runs laid out as
# scripts/gpu-check writes them: a correct set passes every row; then, one
# at a time, a bf16 loss off by more than its bound, a graph-off run that
# differs from graph on by one step, a "graph capture failed" detail on a
# graph row, an fp64 run off naive fp64, a multi-gpu run not over NCCL, a
# timed-out run and a missing naive reference each fail their row, and
# only theirs; fp32's accuracy 3 points off the naive anchor's, an anchor
# that ran out of time and an anchor of other epochs fail fp32 alone; the
# same detail on the eager row passes; "no GPU" marks every row so. The
# short-batch row: one step 1e-3 off naive on the same options, an accuracy
# one test image off naive's, or a step missing fails it alone. fp32's
# final train loss 2% off the anchor's, or its first steps off the
# anchor's, fail fp32 alone; an anchor still running leaves fp32 "not
# judged". fp32 with no summary and no steps: fp32 FAILED, the rows that
# can only be compared with fp32 (graph off, host-fed) "not judged", the
# others judged against the anchor and naive (ok, or FAILED when off the
# anchor). A multi-gpu failure gives NCCL's first warning.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
command -v python3 >/dev/null || { echo "test_gpu_judge.sh: no python3: skipped"; exit 77; }
judge=${GPU_JUDGE:-scripts/gpu-judge} # another judge to try these cases on
scratch

names="fp32 tf32 bf16 fp16 fp64 fp32-graph-off fp32-host-fed fp32-short multi-gpu"
# steps FILE BACKEND N SCALE: N losses of a made-up descent times SCALE
steps() {
    awk -v b="$2" -v n="$3" -v k="$4" 'BEGIN {
        print "backend,replicas,ranks,repeat,epoch,step,images,loss"
        for (i = 1; i <= n; i++) printf "%s,1,1,1,1,%d,128,%.9g\n", b, i, (2.3 / (1 + 0.05 * i)) * k
    }' > "$1"
}
# summary DIR BACKEND ACCURACY DETAILS [EPOCHS [TRAIN_LOSS [IMAGES]]]: 3
# epochs of 60000 unless told
summary() {
    mkdir -p "$1"
    {
        echo "backend,status,epochs,images_per_epoch,final_train_loss,final_test_accuracy,images_per_second,epoch_seconds_median,peak_memory_bytes,details,message"
        echo "$2,ok,${5:-3},${7:-60000},${6:-0.342200},$3,250000,0.24,52428800,\"$4\","
    } > "$1/summary.csv"
}
graph_details="fp32 FMA (no TF32); CUDA graph; data on device; conv1 fwd algo1"
# a correct set in $1
make_set() {
    local d=$1 n kind prec backend details
    mkdir -p "$d/reference"
    steps "$d/reference/fp32.steps.csv" naive 10 1
    steps "$d/reference/fp64.steps.csv" naive 10 1.00000005
    echo 0 > "$d/reference/fp32.rc"
    echo 0 > "$d/reference/fp64.rc"
    # naive on the short-batch set: 9 steps, accuracy 0.405 over 200 images
    steps "$d/reference/short.steps.csv" naive 9 1
    summary "$d/reference/short" naive 0.405 "fp32, 1 thread" 3 0.9 352
    echo 0 > "$d/reference/short.rc"
    summary "$d/anchor/bench" naive 0.8931 "fp32, 1 thread"
    steps "$d/anchor/bench.steps.csv" naive 1407 1
    echo 0 > "$d/anchor/bench.rc"
    printf 'name\tkind\tprecision\tbackend\n' > "$d/rows.tsv"
    for n in $names; do
        kind=graph prec=${n%%-*} backend=cuda details=$graph_details
        case "$n" in
        fp32-graph-off) kind=eager details="fp32 FMA (no TF32); no CUDA graph; data on device" ;;
        fp32-host-fed) kind=host ;;
        fp32-short) kind=short ;;
        multi-gpu) kind=multi prec=fp32 backend=multi-gpu
            details="1 replicas of cuda (synchronous gradient all-reduce; NCCL over 1 GPUs, peer access on 0 pairs), each: $graph_details" ;;
        esac
        printf '%s\t%s\t%s\t%s\n' "$n" "$kind" "$prec" "$backend" >> "$d/rows.tsv"
        mkdir -p "$d/$n"
        echo 0 > "$d/$n/bench.rc"
        if [ "$kind" = short ]; then
            summary "$d/$n/bench" "$backend" 0.405 "$details" 3 0.9 352
            steps "$d/$n/bench.steps.csv" "$backend" 9 1
            continue
        fi
        summary "$d/$n/bench" "$backend" 0.8912 "$details"
        case "$prec" in
        bf16) scale=1.03 ;;  # 3% off: within bf16's 6e-2
        fp16) scale=1.01 ;;
        tf32) scale=1.005 ;;
        *) scale=1 ;;
        esac
        steps "$d/$n/bench.steps.csv" "$backend" 1407 "$scale"
    done
}
# status_of DIR ROW: the judge's status of ROW
judged() { python3 "$judge" "$1" > "$1/judged.tsv" 2> "$1/judge.err"; }
status_of() { awk -F'\t' -v r="$2" '$1 == r { print $2 }' "$1/judged.tsv"; }
# only_failing DIR ROW...: the judge exits 1, those rows FAILED, the others ok
only_failing() {
    local d=$1 n want got
    shift
    if judged "$d"; then
        fail "${d##*/}: the judge passed"
        return
    fi
    for n in $names; do
        want=ok
        case " $* " in *" $n "*) want=FAILED ;; esac
        got=$(status_of "$d" "$n")
        if [ "$got" != "$want" ]; then
            fail "${d##*/}: row $n is '$got', expected $want: $(cat "$d/judged.tsv")"
            return
        fi
    done
    if grep -q . "$d/judge.err"; then
        fail "${d##*/}: the judge wrote to stderr: $(cat "$d/judge.err")"
        return
    fi
    pass
}
# has DIR PATTERN: the judge's output matches the extended regex PATTERN
has() {
    if grep -Eq "$2" "$1/judged.tsv"; then pass; else fail "${1##*/}: no line matches '$2': $(cat "$1/judged.tsv")"; fi
}

# a correct set passes
make_set "$tmp/good"
if judged "$tmp/good"; then pass; else fail "a correct set did not pass: $(cat "$tmp/good/judged.tsv" "$tmp/good/judge.err")"; fi
for n in $names; do
    if [ "$(status_of "$tmp/good" "$n")" = ok ]; then pass; else fail "correct set: row $n: $(grep "^$n	" "$tmp/good/judged.tsv")"; fi
done


# a wrong bf16 loss: step 4 10% off (bound 6e-2)
make_set "$tmp/bf16"
sed -i '5s/,[^,]*$/,2.2/' "$tmp/bf16/bf16/bench.steps.csv"
only_failing "$tmp/bf16" bf16
has "$tmp/bf16" "^bf16	FAILED	.*step 4 loss 2.2, naive fp32"

# graph off differing from graph on at one step of 1407 (last digit)
make_set "$tmp/eager"
sed -i '700s/[0-9]$/0/; 700s/0$/1/' "$tmp/eager/fp32-graph-off/bench.steps.csv"
if cmp -s "$tmp/eager/fp32-graph-off/bench.steps.csv" "$tmp/eager/fp32/bench.steps.csv"; then
    fail "the graph-off fixture did not change"
fi
only_failing "$tmp/eager" fp32-graph-off
has "$tmp/eager" "^fp32-graph-off	FAILED	.*differs from fp32 graph on at step 699"

# host-fed with one step fewer
make_set "$tmp/host"
sed -i '$d' "$tmp/host/fp32-host-fed/bench.steps.csv"
only_failing "$tmp/host" fp32-host-fed

# graph not captured: fails a graph row, not the eager row
make_set "$tmp/capture"
summary "$tmp/capture/tf32/bench" cuda 0.8912 "tf32 tensor cores; graph capture failed, eager steps (operation not permitted when stream is capturing); data on device"
summary "$tmp/capture/fp32-graph-off/bench" cuda 0.8912 "fp32 FMA (no TF32); graph capture failed, eager steps (x); data on device"
only_failing "$tmp/capture" tf32
has "$tmp/capture" "^tf32	FAILED	.*graph not captured"

# fp64 off naive fp64 by 1e-5 at step 2 (bound 1e-6)
make_set "$tmp/fp64"
awk -F, 'NR == 3 { $8 = $8 * (1 + 1e-5) } { print }' OFS=, "$tmp/fp64/fp64/bench.steps.csv" > "$tmp/x" &&
    mv "$tmp/x" "$tmp/fp64/fp64/bench.steps.csv"
only_failing "$tmp/fp64" fp64

# multi-gpu reduced in-process, not over NCCL
make_set "$tmp/nccl"
summary "$tmp/nccl/multi-gpu/bench" multi-gpu 0.8912 "1 replicas of cuda (synchronous gradient all-reduce; in-process all-reduce over 1 threads), each: -"
only_failing "$tmp/nccl" multi-gpu

# fp16 accuracy 3 points below fp32's (distance 0.02)
make_set "$tmp/acc"
summary "$tmp/acc/fp16/bench" cuda 0.8612 "$graph_details"
only_failing "$tmp/acc" fp16

# a timed-out run fails its row even with its files in place
make_set "$tmp/timeout"
echo 124 > "$tmp/timeout/fp16/bench.rc"
only_failing "$tmp/timeout" fp16
has "$tmp/timeout" "^fp16	FAILED	.*bench run ran out of time"

# no naive fp32 reference: every row compared with it fails
make_set "$tmp/noref"
echo 124 > "$tmp/noref/reference/fp32.rc"
only_failing "$tmp/noref" fp32 tf32 bf16 fp16 fp32-graph-off fp32-host-fed

# fp32 three points below naive over the same data and epochs (0.02): the
# other rows, compared with fp32, pass
make_set "$tmp/anchor"
summary "$tmp/anchor/anchor/bench" naive 0.9212 "fp32, 1 thread"
only_failing "$tmp/anchor" fp32
has "$tmp/anchor" "^fp32	FAILED	.*accuracy 0.8912, naive's 0.9212 over the same data and epochs"
has "$tmp/good" "^fp32	ok	.*accuracy vs naive anchor 0.8931: 0.0019 apart"

# the anchor ran out of time: fp32 is not anchored, so it fails
make_set "$tmp/anchor-late"
echo 124 > "$tmp/anchor-late/anchor/bench.rc"
only_failing "$tmp/anchor-late" fp32
has "$tmp/anchor-late" "^fp32	FAILED	.*naive anchor: ran out of time"

# an anchor of one epoch against fp32's three is not the same run
make_set "$tmp/anchor-short"
summary "$tmp/anchor-short/anchor/bench" naive 0.8931 "fp32, 1 thread" 1
only_failing "$tmp/anchor-short" fp32
has "$tmp/anchor-short" "^fp32	FAILED	.*naive anchor: epochs 1, fp32's 3"

# the short-batch row: step 6 (the second epoch's 96) 1e-3 off naive on
# the same options (bound 1e-4)
make_set "$tmp/short-step"
awk -F, 'NR == 7 { $8 = sprintf("%.9g", $8 * (1 + 1e-3)) } { print }' OFS=, \
    "$tmp/short-step/fp32-short/bench.steps.csv" > "$tmp/x" && mv "$tmp/x" "$tmp/short-step/fp32-short/bench.steps.csv"
only_failing "$tmp/short-step" fp32-short
has "$tmp/short-step" "^fp32-short	FAILED	.*step 6 loss .* naive on the same options"
has "$tmp/good" "^fp32-short	ok	.*all 9 steps vs naive .*accuracy equals naive's 0.4050"

# the short-batch row one test image off naive's accuracy (0.405 + 1/200)
make_set "$tmp/short-acc"
summary "$tmp/short-acc/fp32-short/bench" cuda 0.410 "$graph_details" 3 0.9 352
only_failing "$tmp/short-acc" fp32-short
has "$tmp/short-acc" "^fp32-short	FAILED	.*accuracy 0.4100 over the short test set, naive's 0.4050"

# the short-batch row with its last step missing
make_set "$tmp/short-count"
sed -i '$d' "$tmp/short-count/fp32-short/bench.steps.csv"
only_failing "$tmp/short-count" fp32-short

# fp32's final train loss 2% above the anchor's (bound 1e-2)
make_set "$tmp/train-loss"
summary "$tmp/train-loss/fp32/bench" cuda 0.8912 "$graph_details" 3 0.349044
only_failing "$tmp/train-loss" fp32
has "$tmp/train-loss" "^fp32	FAILED	.*final train loss 0.349044, naive's 0.342200"
has "$tmp/good" "^fp32	ok	.*train loss vs naive anchor 0.342200"

# fp32's first steps off the anchor's (its steps file from another run)
make_set "$tmp/anchor-steps"
steps "$tmp/anchor-steps/anchor/bench.steps.csv" naive 1407 1.001
only_failing "$tmp/anchor-steps" fp32
has "$tmp/anchor-steps" "^fp32	FAILED	.*the naive anchor's"

# the anchor still running (the table written before the peer): fp32 is
# not judged against it, the others are judged
make_set "$tmp/anchor-running"
rm "$tmp/anchor-running/anchor/bench.rc"
rm -r "$tmp/anchor-running/anchor/bench"
: > "$tmp/anchor-running/anchor/running"
if judged "$tmp/anchor-running"; then fail "anchor running: the judge passed"; else pass; fi
for n in $names; do
    want=ok
    [ "$n" = fp32 ] && want="not judged"
    got=$(status_of "$tmp/anchor-running" "$n")
    if [ "$got" = "$want" ]; then pass; else fail "anchor running: row $n is '$got', expected '$want': $(grep "^$n	" "$tmp/anchor-running/judged.tsv")"; fi
done

# the anchor stopped by the check's end before it finished: fp32 is not
# anchored, so it fails (not "still running")
make_set "$tmp/anchor-stopped"
echo stopped > "$tmp/anchor-stopped/anchor/bench.rc"
only_failing "$tmp/anchor-stopped" fp32
has "$tmp/anchor-stopped" "^fp32	FAILED	.*naive anchor: stopped unfinished when the check ended"

# fp32 missing (its run crashed before a summary or a step): fp32 alone
# FAILED; graph off and host-fed, compared only with fp32, "not judged";
# the others judged against naive and the anchor, and a row far off the
# anchor still fails
make_set "$tmp/nofp32"
rm -r "$tmp/nofp32/fp32/bench" "$tmp/nofp32/fp32/bench.steps.csv"
echo 139 > "$tmp/nofp32/fp32/bench.rc"
summary "$tmp/nofp32/fp16/bench" cuda 0.8612 "$graph_details"
if judged "$tmp/nofp32"; then fail "fp32 missing: the judge passed"; else pass; fi
for want in fp32=FAILED tf32=ok bf16=ok fp16=FAILED fp64=ok "fp32-graph-off=not judged" \
    "fp32-host-fed=not judged" fp32-short=ok multi-gpu=ok; do
    n=${want%%=*} want=${want#*=}
    got=$(status_of "$tmp/nofp32" "$n")
    if [ "$got" = "$want" ]; then pass; else fail "fp32 missing: row $n is '$got', expected '$want': $(grep "^$n	" "$tmp/nofp32/judged.tsv")"; fi
done
has "$tmp/nofp32" "^fp16	FAILED	.*accuracy 0.8612, the naive anchor's \(fp32 has none\) 0.8931"
has "$tmp/nofp32" "^tf32	ok	.*accuracy vs the naive anchor's \(fp32 has none\) 0.8931"
has "$tmp/nofp32" "^multi-gpu	ok	.*vs naive fp32 \(cuda fp32 wrote no steps\)"
if grep -q "no accuracy to compare with fp32's\|for want of\|no fp32 (graph on) steps" "$tmp/nofp32/judged.tsv"; then
    fail "fp32 missing: a row failed for want of fp32: $(cat "$tmp/nofp32/judged.tsv")"
else pass; fi

# multi-gpu failing at NCCL's set-up: its reason gives NCCL's own warning
make_set "$tmp/nccl-init"
rm -r "$tmp/nccl-init/multi-gpu/bench"
echo 1 > "$tmp/nccl-init/multi-gpu/bench.rc"
printf 'lenet: ...\nh200:123:123 [0] NCCL INFO Bootstrap\nh200:123:123 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<4242> failed : Software caused connection abort\nbench: multi-gpu: ncclCommInitAll: unhandled system error\n' \
    > "$tmp/nccl-init/multi-gpu/bench.log"
only_failing "$tmp/nccl-init" multi-gpu
has "$tmp/nccl-init" "^multi-gpu	FAILED	.*NCCL: .*NCCL WARN socketStartConnect"

# no GPU: every row says so, and the judge does not pass
make_set "$tmp/nogpu"
echo "CUDA driver version is insufficient for CUDA runtime version" > "$tmp/nogpu/no-gpu"
if judged "$tmp/nogpu"; then fail "no GPU: the judge passed"; else pass; fi
if [ "$(awk -F'\t' '$2 == "no GPU"' "$tmp/nogpu/judged.tsv" | wc -l)" = 9 ]; then pass
else fail "no GPU: not every row says so: $(cat "$tmp/nogpu/judged.tsv")"; fi
finish
