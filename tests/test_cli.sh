#!/usr/bin/env bash
# Command-line errors: each bad flag or value is refused with exit status 2,
# one message naming the flag and, for a choice, the valid choices; nothing
# is trained and no results directory is made. Uses a small crafted data
# set (tests/craft.sh) so the checks against the data are quick.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
make_dataset "$tmp/data" 300 100
mkdir "$tmp/cwd"

# refuse NAME KEYWORD... -- ARGS...: exit 2, every KEYWORD on stderr.
refuse() {
    local name=$1 keys=() rc
    shift
    while [ "$1" != "--" ]; do keys+=("$1"); shift; done
    shift
    (cd "$tmp/cwd" && "$BENCH" "$@" >"$tmp/out" 2>"$tmp/err"); rc=$?
    if [ "$rc" -ne 2 ]; then
        fail "$name: exit status $rc, expected 2 ($(head -c 300 "$tmp/err"))"
        return
    fi
    for k in "${keys[@]}"; do
        if ! grep -qF -- "$k" "$tmp/err"; then
            fail "$name: stderr lacks '$k': $(cat "$tmp/err")"
            return
        fi
    done
    if [ -s "$tmp/out" ]; then
        fail "$name: printed to stdout: $(head -c 200 "$tmp/out")"
        return
    fi
    pass
}

# refuse1 NAME KEYWORD... -- ARGS...: as refuse, and the message is one line.
refuse1() {
    local before=$failures
    refuse "$@"
    if [ "$failures" -eq "$before" ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
        checks=$((checks - 1))
        fail "$1: $(wc -l <"$tmp/err") lines on stderr, expected 1: $(cat "$tmp/err")"
    fi
}

D=(--data "$tmp/data" --backend naive --epochs 1)

refuse1 "unknown flag" "unknown option '--epoch-count'" "--epochs" "--backend" -- --epoch-count 3
refuse "stray argument" "unexpected argument 'naive'" -- naive
refuse1 "flag without value" "--epochs needs a value" -- --epochs
# The subcommands word their option errors the same way.
refuse1 "compare: unknown flag" "bench compare: unknown option '--slowdown'" "--max-slowdown" \
    "./bench compare --help" -- compare --slowdown 5 a b
refuse1 "count: flag without value" "bench count: --steps needs a value" -- count --steps
refuse1 "history: unknown flag" "bench history: unknown option '--out'" "--counts-file" \
    -- history --out x
refuse1 "history: flag without value" "bench history: --file needs a value" -- history --file
refuse "unknown backend" "unknown backend 'gpu'" "naive" "blas" "cuda" "all" -- --backend gpu
refuse "unknown backend in a list" "unknown backend 'nave'" "naive" -- --backend naive,nave
refuse "empty backend list" "--backend needs at least one name" "naive" -- --backend ,
refuse "backend twice" "--backend lists naive twice" -- --backend naive,naive
refuse1 "empty item at the end of the backend list" "--backend 'naive,' has an empty item" "naive" \
    -- "${D[@]}" --backend naive,
refuse1 "empty item inside the backend list" "--backend 'naive,,blas' has an empty item" \
    -- "${D[@]}" --backend naive,,blas
refuse1 "empty item at the start of the backend list" "has an empty item" -- "${D[@]}" --backend ,naive
# A value-taking flag followed by an option: the value was forgotten.
refuse1 "--save-params followed by an option" "--save-params needs a value" \
    "got the option '--no-shuffle'" "--save-params=--no-shuffle" -- "${D[@]}" --save-params --no-shuffle
[ ! -e "$tmp/cwd/--no-shuffle" ] && pass || fail "a file named --no-shuffle was written"
refuse1 "--init-params followed by an option" "--init-params needs a value" "'--out'" \
    -- "${D[@]}" --init-params --out "$tmp/x"
refuse1 "--out followed by an option" "--out needs a value" -- --out --epochs 3
refuse1 "--epochs followed by an option" "--epochs needs a value" -- --epochs --limit 3
refuse "unknown workload" "unknown workload 'resnet'" "lenet" "mlp" -- --workload resnet
refuse "unknown optimizer" "unknown optimizer 'rmsprop'" "nesterov" "sgd" "adam" -- --optimizer rmsprop
refuse "unknown precision" "unknown precision 'fp8'" "fp32" "tf32" "bf16" "fp16" "fp64" -- --precision fp8
refuse "unknown format" "unknown format 'xml'" "md" "csv" "json" -- --format xml
refuse "zero epochs" "--epochs" "1..100000" "'0'" -- --epochs 0
refuse "negative epochs" "--epochs" "'-3'" -- --epochs -3
refuse "epochs not a number" "--epochs" "'ten'" -- --epochs ten
refuse "epochs with junk" "--epochs" "'5x'" -- --epochs 5x
refuse "epochs overflow" "--epochs" -- --epochs 99999999999999999999
refuse "zero batch size" "--batch-size" "'0'" -- --batch-size 0
# --batch-size and --precision lists: each bad list refused in one line.
refuse1 "empty item in a batch-size list" "--batch-size" "'32,,64'" -- "${D[@]}" --batch-size 32,,64
refuse1 "batch-size list ending in a comma" "--batch-size" "'32,'" -- "${D[@]}" --batch-size 32,
refuse1 "batch-size list of a comma" "--batch-size" "','" -- "${D[@]}" --batch-size ,
refuse1 "batch size listed twice" "--batch-size lists 32 twice" -- "${D[@]}" --batch-size 32,64,32
refuse1 "batch size out of range" "--batch-size" "1..1048576" -- "${D[@]}" --batch-size 16,2000000
refuse1 "batch size not a number" "--batch-size" "'16,x'" -- "${D[@]}" --batch-size 16,x
refuse1 "too many batch sizes" "--batch-size takes at most 8" -- "${D[@]}" --batch-size 1,2,3,4,5,6,7,8,9
refuse1 "largest batch larger than the data" "--batch-size 512" "300 training images" \
    -- "${D[@]}" --batch-size 16,512
refuse1 "empty item in a precision list" "--precision 'fp32,' has an empty item" "fp32" "bf16" \
    -- "${D[@]}" --precision fp32,
refuse1 "unknown precision in a list" "unknown precision 'fp8'" "fp32" -- "${D[@]}" --precision fp32,fp8
refuse1 "precision listed twice" "--precision lists fp32 twice" -- "${D[@]}" --precision fp32,bf16,fp32
refuse "negative limit" "--limit" "'-1'" -- --limit -1
refuse "zero test limit" "--test-limit" "'0'" -- --test-limit 0
refuse "zero learning rate" "--lr" "'0'" -- --lr 0
refuse "NaN learning rate" "--lr" "'nan'" -- --lr nan
refuse "momentum of 1" "--momentum" -- --momentum 1
refuse "negative weight decay" "--weight-decay" -- --weight-decay -0.1
refuse "zero threads" "--threads" -- --threads 0
refuse "negative device" "--device" -- --device -1
refuse "zero repeats" "--repeat" -- --repeat 0
refuse "target accuracy above 1" "--target-accuracy" -- --target-accuracy 1.5
refuse "cuda-graph not on/off" "--cuda-graph expects on or off" -- --cuda-graph yes
refuse "empty --out" "--out needs a path" -- --out ""
# a name the charts cannot be drawn into (gnuplot's strings hold no
# newline): refused before anything is trained, one line, nothing made
refuse1 "--out with a newline" "--out" "control character (0x0a" -- "${D[@]}" \
    --out "$tmp/run"$'\n'"two"
[ ! -e "$tmp/run"$'\n'"two" ] && pass || fail "--out with a newline: the directory was made"
# LB_PEAK_SECONDS that is no number of seconds in [0.05, 10]: refused before
# anything runs, one line (it fell back to 1 s without a word)
export LB_PEAK_SECONDS=abc
refuse1 "LB_PEAK_SECONDS not a number" "LB_PEAK_SECONDS" "[0.05, 10]" "'abc'" -- "${D[@]}"
LB_PEAK_SECONDS=20
refuse1 "bench peaks: LB_PEAK_SECONDS too long" "bench peaks: LB_PEAK_SECONDS" "'20'" -- peaks
unset LB_PEAK_SECONDS
# Checks against the data: after loading it, before any results.
refuse "batch larger than the data" "--batch-size 512" "300 training images" -- "${D[@]}" --batch-size 512
refuse "batch larger than --limit" "--batch-size 128" "100 training images" -- "${D[@]}" --limit 100
refuse "--limit beyond the data" "--limit 301" "300 training images" "$tmp/data" -- "${D[@]}" --limit 301
refuse "--test-limit beyond the data" "--test-limit 101" "100 test images" -- "${D[@]}" --test-limit 101
# --help names the subcommands
"$BENCH" --help >"$tmp/help" 2>&1
for sub in compare history plot count; do
    grep -q "^       ./bench $sub " "$tmp/help" && pass || fail "--help does not mention $sub"
done
# numbers as written: a leading '+' or space is refused in lists and single
# values alike; a decay too small for a double (1e-320) is a number in 0..1
for v in "--batch-size +32" "--batch-size 32,+64" "--replicas +2" "--epochs +1" "--lr +0.1"; do
    refuse "$v" "got '" -- "${D[@]}" ${v% *} "${v#* }"
done
refuse "a leading space" "got ' 32'" -- "${D[@]}" --batch-size " 32"
# One grammar for every number and list (docs/running.md): a number kept in
# a float is checked as that float (--lr 1e-300 trained nothing), a seed as
# a whole number a double holds exactly (1.5 was seed 1, 2^53 + 1 was 2^53),
# no hexadecimal or inf, and a repeat is refused in every list (--replicas
# dropped it quietly).
refuse1 "--lr that is 0 as a float" "--lr" "'1e-300'" "0 as a float" -- "${D[@]}" --lr 1e-300
refuse1 "a seed that is not whole" "--seed" "'1.5'" -- "${D[@]}" --seed 1.5
refuse1 "a seed beyond a double's whole numbers" "--seed" "'9007199254740993'" \
    -- "${D[@]}" --seed 9007199254740993
refuse1 "a hexadecimal number" "--lr" "'0x1p3'" -- "${D[@]}" --lr 0x1p3
refuse1 "inf" "--weight-decay" "'inf'" -- "${D[@]}" --weight-decay inf
refuse1 "replicas listed twice" "--replicas lists 2 twice" -- "${D[@]}" --replicas 2,2
refuse1 "all beside an unknown backend" "unknown backend 'bogus'" -- "${D[@]}" --backend all,bogus
# ./bench count reads its --items list by the same rules, and refuses a
# framework peer's item (its training runs in a process callgrind does not
# trace: the count was of the harness waiting), before valgrind starts
refuse1 "count: an empty item" "--items 'train-naive,,load' has an empty item" \
    -- count --items train-naive,,load
refuse1 "count: a framework peer's item" "train-pytorch-cpu cannot be counted" \
    "callgrind does not trace" -- count --items train-pytorch-cpu
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --workload mlp --limit 128 --weight-decay 1e-320 --no-peak \
        --out "$tmp/tiny-decay" >/dev/null 2>"$tmp/err"); then pass; else
    fail "--weight-decay 1e-320 refused: $(head -2 "$tmp/err")"; fi
# options that would be silently ignored are refused (a line, and the
# pointer to --help)
for opt in "--split filters" "--workers 3" "--prefetch 2" "--micro-batches 2"; do
    refuse "$opt without --parallel" "${opt% *} applies to model parallelism" -- "${D[@]}" $opt
done
refuse "--groups without hybrid" "--groups applies to --parallel hybrid" -- \
    "${D[@]}" --parallel model --groups 3
refuse "--averaging-frequency with one replica" "every configuration has one" -- \
    "${D[@]}" --averaging-frequency 4
(cd "$tmp/cwd" && LENET_BENCH_PEER_TIMEOUT=soon "$BENCH" --backend pytorch-cpu --data "$tmp/data" \
    --epochs 1 --out "$tmp/peer-timeout" >/dev/null 2>"$tmp/err"); rc=$?
[ "$rc" -eq 2 ] && grep -q "LENET_BENCH_PEER_TIMEOUT='soon' is not a number" "$tmp/err" && pass ||
    fail "a garbage LENET_BENCH_PEER_TIMEOUT: exit $rc: $(head -2 "$tmp/err")"

if [ -e "$tmp/cwd/results" ]; then
    fail "a refused command line left a results directory: $(ls "$tmp/cwd/results")"
else
    pass
fi

# The control: the same data and flags, well formed, do run.
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --limit 256 --out "$tmp/good" >/dev/null 2>"$tmp/err"); then
    pass
else
    fail "control run failed: $(cat "$tmp/err")"
fi

# --flag=value works for every value-taking flag, so a value that starts
# with "--" can still be given.
if (cd "$tmp/cwd" && "$BENCH" --data="$tmp/data" --backend=naive --epochs=1 --limit=256 \
        --workload=mlp --out="$tmp/eq" --save-params=--odd-name >/dev/null 2>"$tmp/err") &&
        [ -s "$tmp/cwd/--odd-name" ] && [ -s "$tmp/eq/summary.csv" ]; then
    pass
else
    fail "--flag=value forms: $(cat "$tmp/err")"
fi

# --list: every backend's status starts in one column, wide enough for the
# longest name (pytorch-cuda), and a note under a backend is indented to it.
"$BENCH" --list >"$tmp/list" 2>&1
widths=$(grep -E '^[^ ]+ +(built|not built)' "$tmp/list" | sed -E 's/^([^ ]+ +).*/\1/' |
    awk '{ print length }' | sort -u)
names=$(grep -cE '^[^ ]+ +(built|not built)' "$tmp/list")
notes=$(grep -E '^ +[^ ]' "$tmp/list" | sed -E 's/^( +).*/\1/' | awk '{ print length }' | sort -u)
longest=$(grep -E '^[^ ]+ +(built|not built)' "$tmp/list" | awk '{ if (length($1) > n) n = length($1) } END { print n + 1 }')
if [ "$names" -ge 5 ] && [ "$widths" = "$longest" ] && { [ -z "$notes" ] || [ "$notes" = "$longest" ]; }; then
    pass
else
    fail "--list columns: status at $(echo $widths), notes at $(echo $notes), expected $longest: $(cat "$tmp/list")"
fi

# Exit status 3: a backend that cannot run here, asked for alone, says why.
blocked=$("$BENCH" --list | awk '/not runnable here|not built/ { print $1; exit }')
if [ -n "$blocked" ]; then
    (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --backend "$blocked" --out "$tmp/blocked" \
        >/dev/null 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq 3 ] && grep -q "$blocked" "$tmp/err" && [ ! -e "$tmp/blocked" ]; then pass
    else fail "--backend $blocked (cannot run here): exit status $rc, expected 3: $(cat "$tmp/err")"; fi
else
    skip_check "every backend runs here: exit status 3 not checked"
fi

# fp64 runs on naive, and data parallelism refuses it (its buffers are
# float) with that reason and exit status 3.
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --workload mlp --limit 256 --precision fp64 \
        --out "$tmp/fp64" >/dev/null 2>"$tmp/err") &&
        grep -q '^naive,mlp,fp64,' "$tmp/fp64/summary.csv"; then
    pass
else
    fail "--precision fp64 on naive: $(cat "$tmp/err")"
fi
(cd "$tmp/cwd" && "$BENCH" "${D[@]}" --workload mlp --limit 256 --precision fp64 --replicas 2 \
    --out "$tmp/fp64-dp" >/dev/null 2>"$tmp/err"); rc=$?
if [ "$rc" -eq 3 ] && grep -q "data parallelism runs fp32 engines only" "$tmp/err"; then pass
else fail "--precision fp64 --replicas 2: exit status $rc, expected 3: $(cat "$tmp/err")"; fi

# More threads than usable CPUs: a warning on stderr, and the run goes on.
cores=$(nproc)
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --workload mlp --limit 256 --threads $((cores + 1)) \
        --out "$tmp/threads" >/dev/null 2>"$tmp/err") &&
        grep -q "warning: --threads $((cores + 1)) is more than the $cores CPUs this process may use" "$tmp/err"; then
    pass
else
    fail "--threads beyond the cores: no warning or the run failed: $(head -3 "$tmp/err")"
fi
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --workload mlp --limit 256 --threads "$cores" \
        --out "$tmp/threads-ok" >/dev/null 2>"$tmp/err") && ! grep -q "warning" "$tmp/err"; then
    pass
else
    fail "--threads equal to the cores: a warning or a failure: $(head -3 "$tmp/err")"
fi

# --no-peak: no peak probe, so no % of peak, and the summary says why; the
# control above measured one.
column() { python3 -c 'import csv, sys; print(next(csv.DictReader(open(sys.argv[1])))[sys.argv[2]])' "$@"; }
# What was not measured is empty in CSV and null in JSON, never 0 or -1:
# the peak, % of peak, time to target and target with none asked, and a
# CPU row's device memory.
unmeasured="percent_of_peak peak_gflops time_to_target_seconds target_accuracy peak_memory_bytes"
if (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --limit 256 --no-peak --format json \
        --out "$tmp/nopeak" >"$tmp/nopeak.json" 2>"$tmp/err"); then
    src=$(column "$tmp/nopeak/summary.csv" peak_source)
    cells="" nulls=""
    for c in $unmeasured; do
        cells="$cells$(column "$tmp/nopeak/summary.csv" "$c")"
        grep -q "\"$c\": null" "$tmp/nopeak.json" || nulls="$nulls $c"
    done
    measured=$(column "$tmp/good/summary.csv" peak_gflops)
    # a busy machine may leave it uncertain: no figure, and the source says so
    case $(column "$tmp/good/summary.csv" peak_source) in "peak uncertain: "*) measured=uncertain ;; esac
    if [ "$src" != "not measured (--no-peak)" ] || [ -n "$cells" ] || [ -n "$nulls" ]; then
        fail "--no-peak: peak_source '$src', unmeasured cells '$cells', not null in JSON:$nulls"
    elif [ "$measured" != uncertain ] && [ "$(awk "BEGIN{print (${measured:-0} > 0)}")" != 1 ]; then
        fail "without --no-peak the peak was not measured ('$measured')"
    else
        pass
    fi
else
    fail "--no-peak run failed: $(cat "$tmp/err")"
fi
# Each row is held to the peak of the arithmetic its products ran on:
# bf16 on vdpbf16ps to the bf16 dot product's, bf16 on fp32 FMAs over
# bf16-rounded operands to fp32's, fp32 to fp32's. Which products ran is
# what the program chose (the row's details), never assumed from the CPU;
# each forced choice is checked too (dot only where it runs).
bf16_why=$("$BENCH" --list 2>&1 | grep '^direct ' | grep -o 'precisions here: [^)]*' || true)
if [[ "$bf16_why" == *bf16* ]]; then
    for choice in "" fma dot; do
        name="bf16 row (${choice:-chosen by the program}) and the CPU peak"
        (cd "$tmp/cwd" && LENET_BENCH_DIRECT_BF16=$choice "$BENCH" "${D[@]}" --backend direct \
            --precision fp32,bf16 --limit 256 --out "$tmp/bf16peak$choice" >/dev/null 2>"$tmp/err"); rc=$?
        if [ "$choice" = dot ] && [ "$rc" -eq 3 ]; then
            skip_check "$name: vdpbf16ps does not run here ($(head -1 "$tmp/err"))"
            continue
        elif [ "$rc" -ne 0 ]; then
            fail "$name: direct fp32,bf16 run: exit $rc: $(head -3 "$tmp/err")"
            continue
        fi
        s=$tmp/bf16peak$choice/summary.csv
        got="$(held_to_own_peak "$s" direct bf16) $(held_to_own_peak "$s" direct fp32)"
        arith=$(python3 -c 'import csv, sys
print([r["peak_arithmetic"] for r in csv.DictReader(open(sys.argv[1])) if r["precision"] == "bf16"][0])' "$s")
        case "$choice" in
        fma) want=fp32 ;; dot) want=bf16-dot ;; *) want=$arith ;;
        esac
        if [ "$got" != "ok ok" ]; then
            fail "$name: $got"
        elif [ "$arith" != "$want" ]; then
            fail "$name: LENET_BENCH_DIRECT_BF16=$choice, held to $arith, not $want"
        elif grep -q "beat the probe" "$s"; then
            fail "$name: a row beat the probe: $(grep "beat the probe" "$s")"
        else
            pass
        fi
    done
else
    skip_check "direct bf16 does not run here ($bf16_why)"
fi
# direct fp16 on a CPU without AVX512_FP16: refused before anything runs,
# exit 3, one line with the reason --list gives; where it runs, skipped.
fp16_why=$("$BENCH" --list 2>&1 | grep '^direct ' | grep -o 'not fp16: [^)]*' || true)
if [ -n "$fp16_why" ]; then
    (cd "$tmp/cwd" && "$BENCH" "${D[@]}" --backend direct --precision fp16 >"$tmp/out" \
        2>"$tmp/err"); rc=$?
    if [ "$rc" -ne 3 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ] ||
        ! grep -qF "direct: ${fp16_why#not fp16: }" "$tmp/err" || ! grep -q AVX512_FP16 "$tmp/err"; then
        fail "direct fp16 without AVX512_FP16: exit $rc, expected 3 and one line with the reason: $(cat "$tmp/err" "$tmp/out")"
    else
        pass
    fi
else
    skip_check "direct fp16 runs here (the CPU has AVX512_FP16): its refusal is not checked"
fi
finish
