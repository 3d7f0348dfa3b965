#!/usr/bin/env bash
# LENET_BENCH_DIRECT_ISA, _BF16 and _FP16 end to end
# (backends/direct/fp32/isa.h, candidates.h): a value that names no build
# (or candidate) is bad usage (exit 2) for a run and for --list alike; bf16 runs
# wherever the fp32 kernels do, on fp32 FMAs over a forced avx2 or generic
# build; LENET_BENCH_DIRECT_BF16=dot beside such a build is refused with
# that reason, in --list as in a run; --list says of bf16 what a bf16 run
# then does; a bf16 row's details name the products it ran and why; and
# fp16 obeys LENET_BENCH_DIRECT_ISA too; --list names the fp32 tiles a run
# then uses, and why.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
if ! "$BENCH" --list 2>/dev/null | grep -q '^direct *built, runnable'; then
    skip_check "direct is not runnable here: LENET_BENCH_DIRECT_ISA not checked"
    finish
    exit
fi
make_dataset "$tmp/data" 300 100
D=(--data "$tmp/data" --epochs 1 --limit 256 --test-limit 100 --no-peak --no-peers --backend direct)

# A value naming no build (or candidate): usage, exit 2, with one line
# naming the names there are (LENET_BENCH_DIRECT_FP16=garbage or EMULATED
# once ran fp16 as if unset).
for case in "LENET_BENCH_DIRECT_ISA:garbage:avx512_2fma, avx512, avx2, generic" \
    "LENET_BENCH_DIRECT_BF16:garbage:fma, dot" \
    "LENET_BENCH_DIRECT_FP16:garbage:avx512_fp16, emulated" \
    "LENET_BENCH_DIRECT_FP16:EMULATED:avx512_fp16, emulated"; do
    IFS=: read -r name value names <<<"$case"
    [ "$name" = LENET_BENCH_DIRECT_ISA ] && [ "$(uname -m)" != x86_64 ] && names=generic
    for args in "--list" "${D[*]} --out $tmp/garbage" "${D[*]} --precision bf16 --out $tmp/garbage-bf16" \
        "${D[*]} --precision fp16 --out $tmp/garbage-fp16"; do
        # shellcheck disable=SC2086 # the words of one command line
        env "$name=$value" "$BENCH" $args >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$rc" != 2 ]; then
            fail "$name=$value ./bench $args: exit $rc, expected 2 (bad usage)"
        elif [ "$(grep -c "$name" "$tmp/err")" != 1 ] ||
            ! grep -qF "$name=$value: not one of $names" "$tmp/err"; then
            fail "$name=$value ./bench $args: not one line naming $names: $(cat "$tmp/err")"
        else
            pass
        fi
    done
done

# The row's details of run $1: its bf16 products must be described by $2
details_say() {
    if grep -qF -- "$2" "$1/summary.csv"; then
        pass
    else
        fail "$3: the bf16 row's details do not say '$2': $(grep -o 'bf16 ([^;]*' "$1/summary.csv" | head -1)"
    fi
}

# direct_runnable ISA: --list's line for direct under
# LENET_BENCH_DIRECT_ISA=ISA, in $line; 0 where that build runs, else 1
# with the check skipped (this CPU lacks what the build needs)
direct_runnable() {
    LENET_BENCH_DIRECT_ISA=$1 "$BENCH" --list >"$tmp/list" 2>&1
    line=$(grep '^direct ' "$tmp/list")
    if [[ "$line" != *"built, runnable"* ]]; then
        skip_check "direct not runnable with LENET_BENCH_DIRECT_ISA='$1' here: $line"
        return 1
    fi
}

# A build whose compiler had no -mavx512bf16 has only the FMAs: it says so
# where the others name the reason
no_dot_built=0
if LENET_BENCH_DIRECT_BF16=dot "$BENCH" --list 2>&1 | grep -q 'left out of this build (the compiler has no -mavx512bf16)'; then
    no_dot_built=1
fi

# --list's word on bf16 with each pair of values, and what a bf16 run then
# does: the two agree; bf16 runs beside every build, on fp32 FMAs beside
# avx2 and generic, and dot is refused there with the reason.
for isa in "" avx512 avx512_2fma avx2 generic; do
    for way in "" dot fma; do
        what="LENET_BENCH_DIRECT_ISA='$isa' LENET_BENCH_DIRECT_BF16='$way'"
        direct_runnable "$isa" || continue
        LENET_BENCH_DIRECT_ISA=$isa LENET_BENCH_DIRECT_BF16=$way "$BENCH" --list >"$tmp/list" 2>&1
        line=$(grep '^direct ' "$tmp/list")
        out="$tmp/run-$isa-$way"
        LENET_BENCH_DIRECT_ISA=$isa LENET_BENCH_DIRECT_BF16=$way "$BENCH" "${D[@]}" --precision bf16 \
            --out "$out" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        off_avx512=0
        case $isa in avx2 | generic) off_avx512=1 ;; esac
        if [[ "$line" == *"(precisions here: fp32, bf16"* ]]; then
            if [ "$rc" != 0 ]; then
                fail "$what: --list offers bf16 but the run exits $rc: $(cat "$tmp/err")"
                continue
            fi
            pass
            if [ "$way" = dot ]; then
                details_say "$out" "bf16 products (vdpbf16ps): forced by LENET_BENCH_DIRECT_BF16=dot" "$what"
            elif [ "$way" = fma ]; then
                details_say "$out" "fp32 FMAs on bf16-rounded operands: forced by LENET_BENCH_DIRECT_BF16=fma" "$what"
            elif [ "$off_avx512" = 1 ] && [ "$no_dot_built" = 0 ]; then
                details_say "$out" "fp32 FMAs on bf16-rounded operands: LENET_BENCH_DIRECT_ISA=$isa keeps it off AVX-512" "$what"
            elif grep -q 'bf16 products (vdpbf16ps): measured' "$out/summary.csv"; then
                details_say "$out" "x the FMA rate here" "$what"
            else # no vdpbf16ps here, or measured slower
                details_say "$out" "fp32 FMAs on bf16-rounded operands: " "$what"
            fi
            if [ "$off_avx512" = 1 ]; then
                details_say "$out" "ISA $isa (direct register tiles" "$what"
            fi
        else
            if [ "$way" != dot ]; then
                fail "$what: --list refuses bf16, which runs wherever fp32 does: $line"
                continue
            fi
            if [ "$off_avx512" = 1 ] && [ "$no_dot_built" = 0 ] &&
                [[ "$line" != *"not bf16: LENET_BENCH_DIRECT_BF16=dot: LENET_BENCH_DIRECT_ISA=$isa keeps the direct backend off AVX-512"* ]]; then
                fail "$what: --list does not give the reason for refusing bf16: $line"
            fi
            reason=${line#*not bf16: }
            reason=${reason%%; not *} # another precision's refusal may follow
            reason=${reason%)}
            if [ "$rc" = 0 ]; then
                fail "$what: --list refuses bf16 but it trained"
            elif ! grep -qF "$reason" "$tmp/err"; then
                fail "$what: the run's refusal is not --list's ($reason): $(cat "$tmp/err")"
            else
                pass
            fi
        fi
    done
done

# fp16 obeys LENET_BENCH_DIRECT_ISA as bf16 does: beside a build without
# AVX-512 its vfmadd231ph products do not run (they once did, described as
# avx512_fp16, and --list offered fp16); it is refused with the reason, or
# runs emulated where LENET_BENCH_DIRECT_FP16=emulated asks. Where the CPU
# has AVX512_FP16 and no build is forced, the vector products run.
fp16_built=1
if LENET_BENCH_DIRECT_FP16=emulated "$BENCH" --list 2>&1 | grep -q 'left out of this build (the compiler has no -mavx512fp16)'; then
    fp16_built=0
fi
fp16_row() { # fp16_row OUT WHAT: the fp16 row's details of run OUT
    grep -o 'fp16 ([^;]*' "$1/summary.csv" | head -1
}
for isa in "" avx512 avx2 generic; do
    what="LENET_BENCH_DIRECT_ISA='$isa'"
    direct_runnable "$isa" || continue
    out="$tmp/fp16-$isa"
    LENET_BENCH_DIRECT_ISA=$isa "$BENCH" "${D[@]}" --precision fp16 --out "$out" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case $isa in
    avx2 | generic)
        if [[ "$line" == *"(precisions here: "*"fp16"*")"* ]] && [[ "$line" != *"not fp16: "* ]]; then
            fail "$what: --list offers fp16 beside a build without AVX-512: $line"
        elif [ "$fp16_built" = 1 ] && [[ "$line" != *"not fp16: LENET_BENCH_DIRECT_ISA=$isa keeps the direct backend off AVX-512, and its vfmadd231ph products are AVX-512 code"* ]]; then
            fail "$what: --list does not give the reason for refusing fp16: $line"
        else
            pass
        fi
        if [ "$rc" = 0 ]; then
            fail "$what: an fp16 run trained beside a build without AVX-512: $(fp16_row "$out")"
        elif [ "$fp16_built" = 1 ] && ! grep -qF "keeps the direct backend off AVX-512" "$tmp/err"; then
            fail "$what: the fp16 run's refusal does not say why: $(cat "$tmp/err")"
        else
            pass
        fi
        # asked for, the emulation runs there, and says so
        out="$tmp/fp16-emulated-$isa"
        LENET_BENCH_DIRECT_ISA=$isa LENET_BENCH_DIRECT_FP16=emulated "$BENCH" "${D[@]}" --precision fp16 \
            --out "$out" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$fp16_built" = 0 ]; then
            if [ "$rc" = 0 ]; then fail "$what: emulated fp16 ran in a build without it"; else pass; fi
        elif [ "$rc" != 0 ]; then
            fail "$what LENET_BENCH_DIRECT_FP16=emulated: exit $rc: $(cat "$tmp/err")"
        elif ! grep -qF "vfmadd231ph emulated in portable C): forced by LENET_BENCH_DIRECT_FP16=emulated, candidate emulated" "$out/summary.csv" ||
            ! grep -qF "ISA none (emulated)" "$out/summary.csv" || grep -qF "ISA avx512_fp16" "$out/summary.csv"; then
            fail "$what LENET_BENCH_DIRECT_FP16=emulated: the details do not say emulated: $(fp16_row "$out")"
        else
            pass
        fi
        ;;
    *)
        if [[ "$line" == *"not fp16: "* ]]; then
            if [ "$rc" = 0 ]; then fail "$what: --list refuses fp16 but it trained"; else pass; fi
        elif [ "$rc" != 0 ]; then
            fail "$what: --list offers fp16 but the run exits $rc: $(cat "$tmp/err")"
        elif ! grep -qF "fp16 (fp16 products (vfmadd231ph): " "$out/summary.csv" ||
            ! grep -qF "candidate avx512_fp16" "$out/summary.csv" ||
            ! grep -qF "ISA avx512_fp16 (AVX-512 with AVX512_FP16)" "$out/summary.csv"; then
            fail "$what: the fp16 row's details do not name its candidate: $(fp16_row "$out")"
        else
            pass
        fi
        ;;
    esac
done

# The fp32 tiles --list names are the ones a run then uses (its details
# say "ISA <build> (..."), forced or not; unforced, the
# reason is given; and where the CPU reports the features only Intel's
# two-port server cores have (AMX-TILE or AVX512_FP16 beside AVX-512, in
# /proc/cpuinfo), whatever model it reports, the choice is avx512_2fma.
for isa in "" avx512 avx512_2fma avx2 generic; do
    LENET_BENCH_DIRECT_ISA=$isa "$BENCH" --list >"$tmp/list" 2>&1
    tiles=$(sed -n 's/^ *fp32 tiles \([a-z0-9_]*\) (\([^)]*\)).*/\1 \2/p' "$tmp/list" | head -1)
    if [ -z "$tiles" ]; then
        if [ -n "$isa" ] && grep -q "LENET_BENCH_DIRECT_ISA=$isa: this CPU cannot run it" "$tmp/list"; then
            skip_check "this CPU cannot run $isa: its listing not compared"
            continue
        fi
        fail "LENET_BENCH_DIRECT_ISA='$isa': --list names no fp32 tiles: $(grep -A1 '^direct' "$tmp/list")"
        continue
    fi
    chosen=${tiles%% *} why=${tiles#* }
    if [ -n "$isa" ] && [ "$chosen $why" != "$isa forced by LENET_BENCH_DIRECT_ISA" ]; then
        fail "LENET_BENCH_DIRECT_ISA=$isa: --list says '$tiles'"
        continue
    fi
    out="$tmp/tiles-$isa"
    if ! LENET_BENCH_DIRECT_ISA=$isa "$BENCH" "${D[@]}" --out "$out" >/dev/null 2>"$tmp/err"; then
        fail "LENET_BENCH_DIRECT_ISA='$isa': the run failed: $(cat "$tmp/err")"
    elif ! grep -qF "ISA $chosen (" "$out/summary.csv"; then
        fail "LENET_BENCH_DIRECT_ISA='$isa': --list says $chosen, the run's details: $(grep -o 'ISA [a-z0-9_]* (' "$out/summary.csv" | head -1)"
    else
        pass
    fi
    if [ -z "$isa" ]; then
        flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
        if grep -q GenuineIntel /proc/cpuinfo 2>/dev/null && [[ " $flags " == *" avx512f "* ]] &&
            [[ " $flags " == *" avx512bw "* ]] && [[ " $flags " == *" avx512vl "* ]] &&
            { [[ " $flags " == *" amx_tile "* ]] || [[ " $flags " == *" avx512_fp16 "* ]]; }; then
            if [ "$chosen" = avx512_2fma ]; then pass; else
                fail "an Intel CPU with AMX-TILE or AVX512_FP16 got $chosen ($why), not avx512_2fma"
            fi
        fi
        echo "unforced: fp32 tiles $chosen ($why)"
    fi
done
finish
